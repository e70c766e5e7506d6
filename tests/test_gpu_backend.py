"""Backend selection (cpu | gpu), its unavailable paths, and the graph on backend=gpu without CUDA.

No GPU is needed: on a machine without CUDA, backend=gpu is either a one-line error or, with
TRITON_INTERPRET=1, Triton's interpreter on the CPU (correctness only).
"""

import io
import json
import subprocess
import sys

import pytest
import scripted
import torch
from conftest import pragma_env
from rich.console import Console
from test_triton_verify import CANDIDATES, PROBLEMS

import pragma.nodes.llm as llm
from pragma.graph import runner, runs
from pragma.graph.context import data_dir, resolve_context
from pragma.nodes import prompts
from pragma.tools import backends
from pragma.tools.problem import read_problem
from pragma.tools.profilers import gpu

HAS_CUDA = torch.cuda.is_available()
no_cuda_only = pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA: the no-GPU paths cannot be observed")
CLI = [sys.executable, "-c", "from pragma.graph.cli import main; main()"]


def test_backend_for_picks_prompts_and_implementation():
    cpu, gpu_backend = backends.backend_for(resolve_context()), backends.backend_for(resolve_context(backend="gpu"))
    assert cpu.name == "cpu" and cpu.coder_system == prompts.CODER_SYSTEM
    assert gpu_backend.name == "gpu" and gpu_backend.coder_system == prompts.CODER_SYSTEM_TRITON
    for must in ("@triton.jit", "mask", "tl.float32", 'input_precision="ieee"', "triton.autotune", "stream"):
        assert must in prompts.CODER_SYSTEM_TRITON, must
    assert backends.require(resolve_context()) is cpu
    assert backends.sandbox_request(resolve_context()) == {"device": "cpu"}
    assert backends.sandbox_env(resolve_context()) == {}


def test_profiles_render_with_their_own_backend():
    assert (
        backends.render_profile({"status": "unavailable", "reason": "x", "backend": "gpu"}) == "profile unavailable: x"
    )
    assert backends.render_profile({"status": "unavailable", "reason": "y"}) == "profile unavailable: y"


@no_cuda_only
def test_gpu_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    ctx = resolve_context(backend="gpu")
    with pytest.raises(backends.BackendUnavailable) as err:
        backends.require(ctx)
    message = str(err.value)
    assert "backend=gpu needs a CUDA device" in message and "TRITON_INTERPRET=1" in message
    assert "\n" not in message
    profile = gpu.profile_candidate(str(PROBLEMS / "add_relu.py"), "", ctx)
    assert profile["status"] == "unavailable" and "CUDA" in profile["reason"]


@no_cuda_only
def test_gpu_without_cuda_uses_the_interpreter_when_asked(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ctx = resolve_context(backend="gpu")
    assert backends.require(ctx).name == "gpu" and backends.device_for(ctx) == "cpu"
    assert backends.is_interpreted(ctx)
    request = backends.sandbox_request(ctx)
    assert request["device"] == "cpu" and "interpreter" in request["device_note"]
    assert backends.memory_limit_bytes(ctx) == ctx.memory_limit_bytes  # the CPU keeps its address-space limit
    env = backends.sandbox_env(ctx)
    assert env["TRITON_CACHE_DIR"].startswith(str(data_dir()))
    assert "interpreter" in backends.backend_for(ctx).hardware_summary(ctx)
    profile = gpu.profile_candidate(str(PROBLEMS / "add_relu.py"), "", ctx)
    assert profile["status"] == "unavailable" and "correctness only" in profile["reason"]


@pytest.mark.integration
@no_cuda_only
@pytest.mark.parametrize(
    "command",
    [
        ["verify", str(PROBLEMS / "add_relu.py"), str(CANDIDATES / "add_relu_triton.py"), "--json"],
        ["profile", str(PROBLEMS / "add_relu.py"), str(CANDIDATES / "add_relu_triton.py")],
        ["optimize", str(PROBLEMS / "add_relu.py")],
    ],
)
def test_cli_backend_gpu_without_cuda_is_one_line_exit_2(isolated_data_dir, command):
    env = pragma_env(isolated_data_dir)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [*CLI, *command, "--set", "backend=gpu"], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "backend=gpu needs a CUDA device" in proc.stderr


def test_gpu_plausibility_uses_the_device_bandwidth():
    spec = {"status": "ok", "peak_gbs": 3352.0}
    traffic = 48 * 2**20
    fine = backends.gpu_plausibility(traffic, runtime_min_ms=0.02, spec=spec)
    assert fine["verdict"] == "pass" and not fine["is_suspicious"]
    # 48 MiB in 1 us would be 50 TB/s: impossible even with the L2-write slack.
    absurd = backends.gpu_plausibility(traffic, runtime_min_ms=0.001, spec=spec)
    assert absurd["is_suspicious"] and absurd["verdict"] == "warn" and "faster than memory" in absurd["detail"]
    assert backends.gpu_plausibility(traffic, 0.01, {"status": "unavailable", "reason": "no GPU"})["verdict"] == "skip"


@pytest.mark.integration
@no_cuda_only
def test_graph_runs_backend_gpu_on_the_interpreter(monkeypatch, tmp_path):
    """setup -> coder (Triton prompt) -> verifier (interpreter) -> profiler (unavailable: no GPU)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    script = {"coder": {"1": scripted.code_reply("../gpu/candidates/add_relu_triton.py", "A fused Triton kernel.")}}
    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(script))
    ctx = resolve_context(
        coder_model="scripted:coder", backend="gpu", max_iterations=1, timed_calls=3, warmup_calls=1, warmup_s=0.0
    )
    buf = io.StringIO()
    code = runner.start_run(read_problem(PROBLEMS / "add_relu.py"), ctx, tmp_path / "out", Console(file=buf, width=200))
    assert code == 0, buf.getvalue()
    [run] = runs.list_runs()
    log = data_dir() / "llm_logs" / f"{run['thread_id']}.jsonl"
    system = json.dumps([json.loads(line) for line in log.read_text().splitlines()])
    assert "Triton" in system and "@triton.jit" in system  # the Coder got the GPU instructions
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| 1 | initial | ok |" in report
    assert "profile unavailable" in report and "correctness only" in report
