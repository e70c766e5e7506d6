"""The judge's side of the runner wire against replies an honest runner never sends: each is a
verdict (never a judge crash). The replies are scripted here, as a candidate that forged the
runner's messages could send them; no runner process is involved."""

from types import SimpleNamespace

import pytest

from pragma.tools.judging.base import Binding
from pragma.tools.judging.runners import RunnerLifecycle
from pragma.tools.judging.verdicts import Decided


class ScriptedLifecycle(RunnerLifecycle):
    def __init__(self, replies):
        self.replies = list(replies)
        self.req = {"memory_limit_bytes": 1 << 30}
        self.bindings = {"candidate": Binding(SimpleNamespace())}
        self.extra = {}

    def ask(self, role, msg, fds=None):
        return self.replies.pop(0)


def test_outputs_claimed_before_any_output_region_are_a_protocol_verdict():
    forged = {"ok": True, "outputs": [{"offset": 0, "shape": [4], "stride": [1], "dtype": "float32"}]}
    judge = ScriptedLifecycle([forged])
    with pytest.raises(Decided) as caught:
        judge.fetch("candidate")
    assert caught.value.result["status"] == "runtime_error"
    assert "broke the protocol" in caught.value.result["message"]
