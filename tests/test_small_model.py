"""What makes the embedded model usable, tested over a real HTTP server (tests/fake_openai.py):
an endpoint given without a model name, the GBNF grammar in the local model's requests, and the
prompt budget that keeps a prompt inside its context."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import FLOW_RELU
from fake_openai import FakeOpenAI
from langchain_core.messages import HumanMessage, SystemMessage

from pragma.graph.context import resolve_context
from pragma.nodes import budget, chat, coder, llm, local_model

CPP_REPLY = """```cpp
#include <cstdint>
extern "C" void pragma_kernel(const float* x, int64_t x_dim0, int64_t x_dim1,
                              float* out0, int64_t out0_dim0, int64_t out0_dim1) {
    for (int64_t i = 0; i < x_dim0 * x_dim1; ++i) out0[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
```"""

RELU_PROBED = {
    "name": "relu",
    "path": str(FLOW_RELU),
    "source": (FLOW_RELU).read_text(),
    "inputs": [{"kind": "tensor", "shape": [1000, 8191], "dtype": "float32"}],
    "init_inputs": [],
    "outputs": {"container": "", "items": [{"kind": "tensor", "shape": [1000, 8191], "dtype": "float32"}]},
    "state_names": [],
}


def _ask(ctx, text="<attempt>1</attempt> hi"):
    return chat.invoke("coder", ctx, [SystemMessage("You are the Coder of PRAGMA."), HumanMessage(text)], 1, "coder")


def test_endpoint_without_a_model_name_uses_its_only_model(monkeypatch):
    with FakeOpenAI({"coder:1": [{"content": "ok"}]}, models=("qwen-coder-7b",)) as fake:
        monkeypatch.setenv("PRAGMA_LLM_BASE_URL", fake.base_url)
        text, update, _ = _ask(resolve_context())
        assert text == "ok" and fake.bodies[-1]["model"] == "qwen-coder-7b"
        assert llm.default_spec("coder") == "openai:qwen-coder-7b"
        assert not llm.is_local("", "coder")  # an endpoint is configured: not the embedded model


def test_endpoint_with_several_models_names_the_choices_in_one_line(monkeypatch):
    with FakeOpenAI({}, models=("alpha", "beta", "gamma")) as fake:
        monkeypatch.setenv("PRAGMA_LLM_BASE_URL", fake.base_url)
        with pytest.raises(llm.LLMError) as err:
            llm.load_chat_model("", role="coder")
    message = str(err.value)
    assert "\n" not in message and "3 models (alpha, beta, gamma)" in message
    assert "PRAGMA_CODER_MODEL=openai:NAME" in message and fake.bodies == []


def test_doctor_says_which_model_it_will_use(monkeypatch):
    from pragma.graph.doctor import check_llm

    with FakeOpenAI({}, models=("only-one",)) as fake:
        monkeypatch.setenv("PRAGMA_LLM_BASE_URL", fake.base_url)
        ok = check_llm(resolve_context())
    assert ok.verdict == "ok" and "openai:only-one" in ok.detail
    with FakeOpenAI({}, models=("a", "b")) as fake:
        monkeypatch.setenv("PRAGMA_LLM_BASE_URL", fake.base_url)
        bad = check_llm(resolve_context())
    assert bad.verdict == "fail" and "2 models (a, b)" in bad.detail


def _local_over(monkeypatch, fake):
    """The 'local' spec served by the fake server instead of llama.cpp (no model is started)."""
    monkeypatch.setattr(
        local_model,
        "chat_model",
        lambda timeout_s=600.0: llm.openai_chat_model(
            "local", timeout_s=timeout_s, base_url=fake.base_url, api_key="local"
        ),
    )


def _coder(ctx, problem):
    return coder.coder({"problem": problem, "iteration": 0, "hardware": "2 cores"}, SimpleNamespace(context=ctx))


def test_local_model_requests_carry_the_grammar_and_get_a_kernel(monkeypatch):
    with FakeOpenAI({"coder:1": [{"content": CPP_REPLY}]}) as fake:
        _local_over(monkeypatch, fake)
        update = _coder(resolve_context(coder_model="local"), RELU_PROBED)
    body = fake.bodies[-1]
    assert body["grammar"] == coder.GRAMMAR_KERNEL and body["grammar"].startswith('root ::= "```cpp')
    assert update["candidate"]["format"] == "kernel" and "pragma_kernel" in update["candidate"]["kernel"]


def test_other_models_get_no_grammar_unless_asked(monkeypatch):
    with FakeOpenAI({"coder:1": [{"content": CPP_REPLY}]}) as fake:
        monkeypatch.setenv("PRAGMA_LLM_BASE_URL", fake.base_url)
        _coder(resolve_context(coder_model="openai:fake-model", candidate_format="kernel"), RELU_PROBED)
        _coder(
            resolve_context(coder_model="openai:fake-model", candidate_format="kernel", constrained_decoding="grammar"),
            RELU_PROBED,
        )
    assert "grammar" not in fake.bodies[0] and fake.bodies[1]["grammar"] == coder.GRAMMAR_KERNEL


def test_local_prompt_stays_under_its_budget_keeping_the_signature(monkeypatch):
    # A problem with a long docstring and many inputs: without trimming it overflows a 4k context.
    padded = {**RELU_PROBED, "source": '"""' + "Background on ReLU. " * 600 + '"""\n' + RELU_PROBED["source"]}
    monkeypatch.setattr(local_model, "CONTEXT_TOKENS", 4096)
    with FakeOpenAI({"coder:1": [{"content": CPP_REPLY}]}) as fake:
        _local_over(monkeypatch, fake)
        _coder(resolve_context(coder_model="local"), padded)
    sent = "".join(m["content"] for m in fake.bodies[-1]["messages"])
    limit = 4096 - budget.REPLY_RESERVE_TOKENS
    assert len("".join(m["content"] for m in fake.bodies[-1]["messages"])) > 0
    assert budget.approx_tokens(sent) <= limit < budget.approx_tokens(padded["source"])
    assert 'extern "C" void pragma_kernel(' in sent and "characters omitted" in sent
    assert "def forward(self, x):" in sent  # the end of the problem (the operator) survives the cut


def test_budget_drops_least_important_sections_first():
    human = (
        "<attempt>1</attempt>\n<problem>P</problem>\n<hardware>" + "h" * 3000 + "</hardware>\n"
        "<repair_instructions>fix line 3</repair_instructions>"
    )
    out = budget.fit("system", human, 200)
    assert "h" * 100 not in out and budget.OMITTED in out and "fix line 3" in out and "<problem>P</problem>" in out
    assert budget.fit("system", human, 0) == human  # no budget: unchanged
    assert budget.budget_for(0, is_local=False) == 0 and budget.budget_for(2500, is_local=False) == 2500


def test_a_replay_of_a_local_run_builds_the_local_prompts():
    from pragma.nodes import recording

    recording.log_path("t-local").write_text('{"role": "coder", "model": "local"}\n')
    recording.log_path("t-big").write_text('{"role": "coder", "model": "openai:big"}\n')
    assert llm.is_local("replay:t-local", "coder") and not llm.is_local("replay:t-big", "coder")
    assert not llm.is_local("replay:missing", "coder")
