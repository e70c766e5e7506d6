"""Prompt templates (nodes/templates/*.md) rendered against snapshots.

Each prompt is rendered with fixed sample values: a field prints as ``<name>`` and a numeric field
formats 1.234567 with its spec. A changed prompt fails here until its snapshot is rewritten on
purpose: ``PRAGMA_UPDATE_SNAPSHOTS=1 pytest tests/test_prompts.py`` (then read the diff). The
snapshots were first written from the prompts as they were before the move to template files, so
the move itself changed no prompt byte.
"""

import os
import re
from pathlib import Path

import pytest

from pragma.nodes import prompts

SNAPSHOTS = Path(__file__).parent / "data" / "prompt_snapshots"


class _Field:
    def __init__(self, name: str):
        self.name = name

    def __format__(self, spec: str) -> str:
        return format(1.234567, spec) if spec else f"<{self.name}>"


class _Sample(dict):
    def __missing__(self, key: str) -> _Field:
        return _Field(key)


def _templates() -> dict[str, str]:
    return {
        n: getattr(prompts, n)
        for n in dir(prompts)
        if n.isupper() and isinstance(getattr(prompts, n), str) and n not in ("NO_MODULE", "NO_KERNEL")
    }


def _render(text: str) -> str:
    try:
        return text.format_map(_Sample())
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return text  # a system prompt with C++ braces, used as it is


@pytest.mark.parametrize("name", sorted(_templates()))
def test_rendered_prompt_matches_its_snapshot(name):
    rendered = _render(_templates()[name])
    snap = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("PRAGMA_UPDATE_SNAPSHOTS"):
        snap.write_text(rendered)
    assert snap.exists(), f"no snapshot for {name}: run with PRAGMA_UPDATE_SNAPSHOTS=1"
    assert rendered == snap.read_text()


def test_every_template_file_is_a_prompt_and_every_partial_is_shared():
    files = {p.stem for p in prompts.TEMPLATES.glob("*.md")}
    partials = {f[1:] for f in files if f.startswith("_")}
    assert {f for f in files if not f.startswith("_")} == {n.lower() for n in _templates()}
    raw = "".join(p.read_text() for p in prompts.TEMPLATES.glob("*.md"))
    for partial in partials:  # a partial one prompt uses is not shared text: inline it
        assert raw.count(f"<<{partial}>>") >= 2, partial


def test_every_human_prompt_names_its_attempt():
    for name, text in _templates().items():
        if re.search(r"_(FIRST|REFINE|REPAIR|FEEDBACK|HUMAN)(_KERNEL|_NO_PROFILE)?$", name):
            assert text.startswith("<attempt>{attempt}</attempt>\n"), name


def test_a_missing_partial_fails_at_load(tmp_path, monkeypatch):
    (tmp_path / "broken.md").write_text("<<nowhere>>")
    monkeypatch.setattr(prompts, "TEMPLATES", tmp_path)
    with pytest.raises(FileNotFoundError):
        prompts.load("broken")


def test_kernel_prompts_invite_tunables_only_when_refining():
    """The embedded model, told in its system rules that a tile size may list values to try, did
    not paste batch_norm_train's <formulas> body as its first kernel: it added `constexpr int TILE`,
    wrote `#pragma omp parallel for simd schedule(TILE)` (a compile error) and a reduction clause on
    a loop without one, in both modes (177 s per call). A first kernel is the pasted body; tunables
    belong to the attempts that make a verified kernel faster."""
    for name in ("CODER_SYSTEM_KERNEL", "CODER_SYSTEM_KERNEL_GIVEN", "CODER_FIRST_KERNEL", "CODER_REPAIR_KERNEL"):
        assert "tune:" not in getattr(prompts, name), name
    assert "{tunables}" in prompts.CODER_REFINE_KERNEL and "// tune: 32 64 128" in prompts.TUNABLES_NOTE
