"""Prompts are data: templates in ``nodes/templates/*.md`` with artifacts inside XML-ish tags,
filled by ``str.format`` (system prompts with C++ examples are used as they are).

A template may include a shared partial (``_NAME.md``) with ``<<NAME>>``; partials hold the text
several prompts share (the problem block, the Conductor's reply format, the repair block), so a
change reaches every prompt that uses it. Every template is loaded here, once, at import; the
token budget that trims what goes into them is ``nodes/budget.py``. ``tests/test_prompts.py``
renders each one against a snapshot.

Every human prompt carries ``<attempt>N</attempt>`` (the candidate number it concerns) so logs,
replays and scripted test models can tell calls apart.
"""

import re
from pathlib import Path

TEMPLATES = Path(__file__).parent / "templates"
_INCLUDE = re.compile(r"<<([a-z_]+)>>")


def load(name: str) -> str:
    """The template ``name`` with its partials expanded (a missing partial is an error at import)."""
    text = (TEMPLATES / f"{name}.md").read_text()
    return _INCLUDE.sub(lambda m: (TEMPLATES / f"_{m.group(1)}.md").read_text(), text)


# backend=cpu: a Python module with ModelNew, the work in C++ built by pragma_cext.
CODER_SYSTEM = load("coder_system")
# backend=gpu: the same contract, with the work in Triton kernels on a CUDA device.
CODER_SYSTEM_TRITON = load("coder_system_triton")
# candidate_format=kernel: the Coder writes one C++ function, PRAGMA writes the Python around it
# (tools/glue.py). Compact on purpose: the embedded model has a 4-8k token context.
CODER_SYSTEM_KERNEL = load("coder_system_kernel")
# The same for an operator whose <formulas> gives the whole loop (knowledge/formulas.loop_bodied:
# rows or channels): no example kernel, because the embedded model copies the system prompt's
# example whatever the prompt says: shown a ReLU example it wrote ReLU for batch_norm_train three
# times, shown a row-sum normalization it wrote that for batch_norm_train, each with the right
# loop in <formulas>.
CODER_SYSTEM_KERNEL_GIVEN = load("coder_system_kernel_given")
CODER_FIRST_KERNEL = load("coder_first_kernel")
CODER_REFINE_KERNEL = load("coder_refine_kernel")
# The refine prompt's invitation to declare tunables (nodes/tune.py), where the kernel is the model's
# own design: not where <formulas> gave the whole body, which has no tile (shown it, the embedded
# model put TILE into element-wise loops: `collapse(TILE)`, `x_dim0 / TILE`, 3 compile errors, emb1128b).
TUNABLES_NOTE = load("tunables_note")
CODER_REPAIR_KERNEL = load("coder_repair_kernel")
# Appended to CODER_FEEDBACK (single-agent mode) in kernel format.
KERNEL_SIGNATURE_SECTION = load("kernel_signature_section")
# What the problem's operators compute (knowledge/formulas.py), for kernel-format candidates.
FORMULAS_SECTION = load("formulas_section")
# The memory of verified kernels (knowledge/kernels.py): examples, not the answer.
VERIFIED_KERNELS_SECTION = load("verified_kernels_section")
# Fixed, model-independent repair hints (nodes/hints.py): shown to the Conductor with the logs,
# and leading the guidance the Coder gets.
RULE_HINTS_SECTION = load("rule_hints_section")
# The last verified candidate when it is not the best: guidance often says "keep attempt N's ...".
LAST_ATTEMPT_SECTION = load("last_attempt_section")
# repair_advice=rules+model: the fixed hints come first, the Conductor's advice after them.
REPAIR_GUIDANCE = load("repair_guidance")
CODER_FIRST = load("coder_first")
CODER_REFINE = load("coder_refine")
CODER_REPAIR = load("coder_repair")
# agent_mode=single-agent: the Coder alone, with the verifier's report of its previous candidate.
CODER_FEEDBACK = load("coder_feedback")
REPAIR_SYSTEM = load("repair_system")
REPAIR_HUMAN = load("repair_human")
CONDUCTOR_SYSTEM = load("conductor_system")
# N-PRAGMA (agent_mode=no-profile): the same Conductor without profiles, only correctness and time.
CONDUCTOR_SYSTEM_NO_PROFILE = load("conductor_system_no_profile")
CONDUCTOR_HUMAN_NO_PROFILE = load("conductor_human_no_profile")
CONDUCTOR_HUMAN = load("conductor_human")


UNUSABLE_REPLY_CHARS = 3000

NO_MODULE = (
    "(no candidate: your reply contained no ```python code block defining class ModelNew. "
    "Reply with exactly one complete module in one ```python block.)"
)
NO_KERNEL = (
    '(no candidate: your reply contained no ```cpp code block defining the extern "C" function '
    "of the signature. Reply with exactly one complete C++ source file in one ```cpp block.)"
)


def failed_code(candidate: dict) -> str:
    """What a repair prompt shows as the failed candidate. When the reply held no usable code the
    placeholder the verifier rejected would only be echoed back by a small model: show the reply.
    In kernel format the model wrote only the C++, so that is what it is shown (not PRAGMA's glue)."""
    if "unusable_reply" not in candidate:
        return candidate.get("kernel") or candidate["code"]
    lead = NO_KERNEL if candidate.get("format") == "kernel" else NO_MODULE
    return lead + "\nYour reply began:\n" + candidate["unusable_reply"][:UNUSABLE_REPLY_CHARS]
