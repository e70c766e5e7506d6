"""Scripted chat model for suites (the only fake in the eval tests): replies keyed by problem.

Replies are looked up by (problem, role, attempt): the problem from ``<problem name="...">``,
which every PRAGMA prompt carries, the attempt from ``<attempt>N</attempt>``; "*" matches any
attempt, and ``default`` serves problems the script does not name. The coder replies hold real
kernels (``kernels/NAME.py``) that really compile and run.

Script JSON: ``{"problems": {NAME: {ROLE: {"1": text, "*": text}}}, "default": {ROLE: {...}}}``.

Hooks (environment, so forked and exec'd job processes see them):
- PRAGMA_EVAL_SCRIPT: the script file ``install()`` loads;
- PRAGMA_TEST_LLM_LOG: JSONL file; every call appends {problem, role, node, attempt, pid, saw_profile,
  saw_feedback};
- PRAGMA_TEST_HANG_AT=problem:role:N: that call writes PRAGMA_TEST_HANG_MARKER (its pid) and sleeps.

Command line (the real CLI with this model installed):
    python tests/data/eval/scripted_suite.py SCRIPT.json eval run SUITE ...
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
ATTEMPT = re.compile(r"<attempt>(\d+)</attempt>")
PROBLEM = re.compile(r'<problem name="([^"]+)">')
NO_CODE = "I could not write a kernel for this problem."
GUIDANCE = json.dumps(
    {
        "diagnosis": "scripted: memory traffic dominates",
        "bottleneck": "memory-bound",
        "steps": ["fuse the passes over the data", "vectorize the inner loop"],
        "extra_metrics": [],
        "stop": False,
    }
)


class SuiteScriptedChatModel(BaseChatModel):
    role: str
    script: dict[str, Any]

    @property
    def _llm_type(self) -> str:
        return "scripted-suite"

    def reply_for(self, problem: str, attempt: int) -> str:
        for table in (self.script.get("problems", {}).get(problem, {}), self.script.get("default", {})):
            replies = table.get(self.role, {})
            for key in (str(attempt), "*"):
                if key in replies:
                    return replies[key]
        raise KeyError(f"the script has no {self.role} reply for {problem} attempt {attempt}")

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        attempts, problems = ATTEMPT.findall(prompt), PROBLEM.findall(prompt)
        attempt, problem = (int(attempts[-1]) if attempts else 0), (problems[-1] if problems else "")
        from pragma.nodes.recording import current_call

        node = current_call.get()[0] or self.role  # repair and conductor share the conductor role
        if log := os.environ.get("PRAGMA_TEST_LLM_LOG"):
            with open(log, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "problem": problem,
                            "role": self.role,
                            "node": node,
                            "attempt": attempt,
                            "pid": os.getpid(),
                            # what the prompt showed: a profile (PRAGMA's Conductor), verifier
                            # feedback (the single agent's Coder)
                            "saw_profile": "<current_profile>" in prompt,
                            "saw_feedback": "<verifier status=" in prompt,
                        }
                    )
                    + "\n"
                )
        if os.environ.get("PRAGMA_TEST_HANG_AT") == f"{problem}:{self.role}:{attempt}":
            Path(os.environ["PRAGMA_TEST_HANG_MARKER"]).write_text(str(os.getpid()))
            time.sleep(3600)
        text = self.reply_for(problem, attempt)
        usage = {
            "input_tokens": len(prompt) // 4,
            "output_tokens": len(text) // 4,
            "total_tokens": (len(prompt) + len(text)) // 4,
        }
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=usage))])


def loader_for(script: dict[str, Any]):
    def load_chat_model(spec: str, *, role: str = "", timeout_s: float = 600.0) -> BaseChatModel:
        return SuiteScriptedChatModel(role=role or "coder", script=script)

    return load_chat_model


def install() -> None:
    """PRAGMA_EVAL_SETUP_HOOK target: serve PRAGMA_EVAL_SCRIPT in this process."""
    import pragma.nodes.llm as llm

    llm.load_chat_model = loader_for(json.loads(Path(os.environ["PRAGMA_EVAL_SCRIPT"]).read_text()))


def kernel_reply(problem: str) -> str:
    return f"Here is the kernel.\n\n```python\n{(KERNELS / f'{problem}.py').read_text()}```\n"


def broken_reply(problem: str) -> str:
    """A real kernel with one C++ error injected (a missing semicolon after the first return type)."""
    code = (KERNELS / f"{problem}.py").read_text().replace('extern "C" void', 'extern "C" void oops', 1)
    return f"First try.\n\n```python\n{code}```\n"


def build_script(problems: list[str], *, broken_first: tuple[str, ...] = ()) -> dict[str, Any]:
    """Coder: the problem's kernel at every attempt (attempt 1 broken for ``broken_first``);
    problems without a kernel file get a reply with no code (a failed candidate)."""
    script: dict[str, Any] = {
        "problems": {},
        "default": {
            "coder": {"*": NO_CODE},
            "conductor": {"*": f"```json\n{GUIDANCE}\n```"},
            "repair": {"*": "The C++ source does not compile: remove the stray identifier after 'void'."},
        },
    }
    for name in problems:
        if (KERNELS / f"{name}.py").exists():
            replies = {"*": kernel_reply(name)}
            if name in broken_first:
                replies["1"] = broken_reply(name)
            script["problems"][name] = {"coder": replies}
    return script


def main() -> None:
    os.environ["PRAGMA_EVAL_SCRIPT"] = str(Path(sys.argv[1]).resolve())
    # Exec'd job processes (Ray) run this hook; forked ones inherit the installed model anyway.
    os.environ["PRAGMA_EVAL_SETUP_HOOK"] = "scripted_suite:install"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))
    install()
    from pragma.graph.cli import main as cli_main

    sys.argv = ["pragma", *sys.argv[2:]]
    cli_main()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
