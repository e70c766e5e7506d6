"""The judge's entry: ``python -m pragma.tools.judging.judge REQUEST.json``, as the sandbox (and the
pre-started zygote, through ``main``) launches it. The judge itself lives in ``tools/judging/``:
``session.py`` (the order of a verification and ``main``) and one module per concern.

The names tests and tools reach through ``pragma.tools.judging.judge`` are re-exported here.
"""

from __future__ import annotations

import os
import sys

from pragma.tools.judging.neighbours import _CLK_TCK, child_ticks, cpu_clock_ns, cpu_ticks, sched_of  # noqa: F401
from pragma.tools.judging.session import Judge, main  # noqa: F401
from pragma.tools.judging.timing import settled  # noqa: F401
from pragma.tools.judging.verdicts import Decided, Verdicts  # noqa: F401

if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (torch's finalizers); nothing left to clean up
