"""A full PRAGMA run with the scripted model: compile error -> wrong -> correct -> faster."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import scripted
from conftest import FLOW_RELU
from rich.console import Console

import pragma.nodes.llm as llm
from pragma.graph import runner, runs
from pragma.graph.builder import compile_app
from pragma.graph.context import resolve_context
from pragma.tools.problem import read_problem

pytestmark = pytest.mark.integration  # starts sandboxes/processes (tests/conftest.py)


def route_of(thread_id: str) -> list[str]:
    with runs.checkpointer() as saver:
        history = list(compile_app(saver).get_state_history({"configurable": {"thread_id": thread_id}}))
    return [snap.next[0] for snap in reversed(history) if snap.next]


@pytest.fixture
def scripted_llm(monkeypatch):
    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(scripted.relu_script()))


def test_full_run_takes_repair_then_profile_route_and_keeps_fastest(scripted_llm, tmp_path):
    ctx = resolve_context(coder_model="scripted:coder", max_iterations=4)
    buf = io.StringIO()
    code = runner.start_run(read_problem(FLOW_RELU), ctx, tmp_path / "out", Console(file=buf, width=200))
    assert code == 0, buf.getvalue()
    [run] = runs.list_runs()
    assert route_of(run["thread_id"]) == [
        "__start__",
        "setup",
        "coder",
        "verifier",
        "repair",
        "coder",
        "verifier",
        "repair",
        "coder",
        "verifier",
        "profiler",
        "conductor",
        "coder",
        "verifier",
        "profiler",
    ]
    with runs.checkpointer() as saver:
        state = compile_app(saver).get_state({"configurable": {"thread_id": run["thread_id"]}}).values
    statuses = [a["status"] for a in state["attempts"]]
    assert statuses == ["compile_error", "mismatch", "ok", "ok"]
    ok = [a for a in state["attempts"] if a["status"] == "ok"]
    fastest = max(ok, key=lambda a: a["speedup"])
    assert state["best"]["iteration"] == fastest["iteration"] == 4
    assert state["best"]["profile"]["status"] == "ok"
    assert state["usage"]["llm_calls"] == 4 + 3  # 4 coder calls, 2 repairs, 1 conductor
    assert run["status"] == "finished" and run["best_speedup"] == pytest.approx(state["best"]["speedup"])
    # The exported kernel is standalone and passes the real CLI verifier.
    best_py = tmp_path / "out" / "best.py"
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| 4 | refine | ok |" in report and "compile_error" in report
    proc = subprocess.run(
        [sys.executable, "-m", "pragma.graph.cli", "verify", str(FLOW_RELU), str(best_py), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "ok"


def test_best_py_runs_without_pragma_installed(scripted_llm, tmp_path):
    """best.py must import and run in a Python that cannot import pragma at all."""
    from pragma.tools.export import standalone_source

    code = standalone_source((Path(scripted.CANDIDATES) / "relu_fast.py").read_text())
    (tmp_path / "best.py").write_text(code)
    probe = (
        "import sys; sys.modules['pragma'] = None\n"  # any import of pragma now fails
        "import importlib.util, torch\n"
        f"spec = importlib.util.spec_from_file_location('best', {str(tmp_path / 'best.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "x = torch.randn(257, 33); assert torch.equal(m.ModelNew()(x), torch.relu(x)); print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_unwrap_removes_only_our_exact_export_header():
    from pragma.tools.export import standalone_source, unwrap

    code = (Path(scripted.CANDIDATES) / "relu_fast.py").read_text()
    assert unwrap(standalone_source(code)) == code
    tampered = standalone_source(code).replace("pragma_cext.py", "other.py", 1)
    assert unwrap(tampered) == tampered  # anything but the byte-exact header stays and is checked
