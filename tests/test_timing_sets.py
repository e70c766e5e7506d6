"""The two sets of timed runners (judging.base.SECOND_SET): the role names point at one set or the
other, and every per-runner record travels with its runner (unit: no process is started)."""

from pragma.tools.judging.base import SECOND_SET
from pragma.tools.judging.runners import RunnerLifecycle


class _Handle:
    def __init__(self, name: str) -> None:
        self.name = name


def _judge(with_best: bool) -> RunnerLifecycle:
    j = RunnerLifecycle.__new__(RunnerLifecycle)
    roles = ["reference", "candidate"] + (["best"] if with_best else [])
    names = roles + [SECOND_SET[r] for r in roles]
    j.active_set = 0
    j.runners = {n: _Handle(n) for n in names}
    j.bindings = {n: f"binding of {n}" for n in names}
    j.idle_ticks = {n: len(n) for n in names if "reference" not in n}
    j.stop_ticks = {n: 10 * len(n) for n in names if "reference" not in n}
    j.call_cpu = {"candidate": (1, 2)}  # only the first set has timed calls yet
    j.spot_layouts = {"reference": ["layout a"], "reference_b": ["layout b"]}
    return j


def test_the_sets_trade_names_and_every_record_goes_with_its_runner():
    j = _judge(with_best=True)
    j._use_set(1)
    assert j.active_set == 1
    for role, other in SECOND_SET.items():
        assert j.runners[role].name == other and j.runners[other].name == role
        assert j.bindings[role] == f"binding of {other}"
    assert j.idle_ticks["candidate"] == len("candidate_b") and j.stop_ticks["best_b"] == 10 * len("best")
    # A record only one runner has moves with it, and leaves no entry behind under the active name.
    assert "candidate" not in j.call_cpu and j.call_cpu["candidate_b"] == (1, 2)
    assert j.spot_layouts == {"reference": ["layout b"], "reference_b": ["layout a"]}
    j._use_set(1)  # already active: nothing moves
    assert j.runners["candidate"].name == "candidate_b"
    j._use_set(0)
    assert all(h.name == n for n, h in j.runners.items())
    assert j.call_cpu == {"candidate": (1, 2)}


def test_a_role_without_a_second_runner_stays_where_it_is():
    j = _judge(with_best=False)
    j.runners["best"] = _Handle("best")  # a best with no second runner (e.g. it failed to load)
    j._use_set(1)
    assert j.runners["best"].name == "best" and "best_b" not in j.runners
    assert j.runners["candidate"].name == "candidate_b"
