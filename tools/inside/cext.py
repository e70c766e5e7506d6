"""Fast C++ path for candidates: compile a C-ABI shared object with g++ and load it with ctypes.

Why: ``torch.utils.cpp_extension.load_inline`` spends ~70 s per new kernel on a 2-core machine
(it compiles torch's headers every time); a plain ``extern "C"`` shared object compiles in ~1.6 s.
Candidates import this module as ``pragma_cext`` (the sandbox puts it on ``sys.path``); when a
kernel is exported as ``best.py`` this file's text is inlined in place of the import, so the
result runs without PRAGMA installed. Therefore: standard library only, no other pragma imports.

Builds are cached by the SHA-256 of (source, flags, compiler identity) in ``PRAGMA_BUILD_DIR``
(default ``~/.cache/pragma/cext``); a build is written to a temporary name and renamed, so a
killed compile never leaves a half-written library behind.
"""

import ctypes
import hashlib
import os
import subprocess
import tempfile

# -mprefer-vector-width=512: where -march=native has AVX-512, use all of it. g++ tunes some CPUs to
# 256 bits: on an Intel Sapphire Rapids (g++ 13.3, -march=native = sapphirerapids, preferred 256)
# the element-wise fast forms (knowledge/fast_forms.py, 8M floats, 1 thread, load 0.2) ran 10-35%
# faster at 512 bits (softplus 17.7 -> 13.4 ms, logsigmoid 20.1 -> 13.4, tanh 14.0 -> 11.1, gelu
# 12.4 -> 10.6, erf 10.3 -> 8.4) and memory-bound ones the same (relu 5.0 / 4.8 ms). On the AMD
# EPYC Zen 4 here (g++ 12: -march=native = znver3 + AVX-512) g++ already uses 512 bits, and on
# AVX2 machines the widest is 256 whatever the flag says. Re-measure with
# `python -m pragma.eval.bench_fast_elementwise --compare-width 256`.
DEFAULT_FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fPIC", "-shared", "-fopenmp", "-std=c++17")
COMPILER = os.environ.get("CXX", "g++")

# Every build in this process, so the profiler can find the source and the binary it measures.
BUILDS = []


def _build_dir():
    root = os.environ.get("PRAGMA_BUILD_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "pragma", "cext")
    os.makedirs(root, exist_ok=True)
    return root


def _compiler_identity():
    try:
        return subprocess.run([COMPILER, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[
            0
        ]
    except (OSError, IndexError, subprocess.SubprocessError):
        return COMPILER


class CompileError(RuntimeError):
    """g++ rejected the source; the message carries the compiler's diagnostics."""


# A source may restart its line numbers where the code someone wrote begins, after lines PRAGMA put
# before it (tools/glue.with_fast_forms). g++ then reports that code's own line numbers but quotes
# the physical line of that number (a prelude comment instead of `y[0] = f(TILE);`), and the model
# and the repair hints read the wrong line. So that part is also written to a file of its own, which
# the directive names: g++ quotes from it.
_RESTART = "\n#line 1\n"


def _with_quoted_lines(source, src_path):
    head, restart, tail = source.partition(_RESTART)
    if not restart:
        return source
    tail_path = src_path[: -len(".cpp")] + ".kernel.cpp"
    with open(tail_path, "w") as f:
        f.write(tail)
    return '%s\n#line 1 "%s"\n%s' % (head, tail_path, tail)


def build_cpp(source, extra_flags=(), name="kernel"):
    """Compile ``source`` to a shared object (cached) and return the path of the ``.so``."""
    flags = tuple(DEFAULT_FLAGS) + tuple(extra_flags)
    key = hashlib.sha256("\0".join((source, " ".join(flags), _compiler_identity())).encode()).hexdigest()[:24]
    root = _build_dir()
    so_path = os.path.join(root, "%s_%s.so" % (name, key))
    src_path = os.path.join(root, "%s_%s.cpp" % (name, key))
    if not os.path.exists(so_path):
        with open(src_path, "w") as f:
            f.write(_with_quoted_lines(source, src_path))
        fd, tmp_so = tempfile.mkstemp(suffix=".so", dir=root)
        os.close(fd)
        proc = subprocess.run([COMPILER, *flags, src_path, "-o", tmp_so], capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(tmp_so)
            raise CompileError(proc.stderr[-8000:] or "compiler failed with no output")
        os.replace(tmp_so, so_path)
    BUILDS.append({"source_path": src_path, "so_path": so_path, "kind": "cext"})
    return so_path


def load_cpp(source, extra_flags=(), name="kernel"):
    """Compile (or reuse) ``source`` and return it loaded as a ``ctypes.CDLL``.

    Declare each function's ``argtypes``/``restype`` on the returned library before calling it.
    """
    return ctypes.CDLL(build_cpp(source, extra_flags, name))


def ptr(tensor):
    """Raw data pointer of a (contiguous) tensor, for passing to a C function."""
    return ctypes.c_void_p(tensor.data_ptr())
