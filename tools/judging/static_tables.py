"""The static layer's tables: which rule a finding names first, the torch calls that only allocate
or describe, the imports, calls and C++ patterns each rule looks for. The scanner that applies them
is ``anticheat.py``; the rules themselves, each with its rationale, are ``rules.py``.

Why a module of its own: the tables are data a reviewer reads rule by rule, the scanner is code.
"""

from __future__ import annotations

import ast
import re

from pragma.tools.judging.rules import (
    NO_DYNAMIC_CODE,
    NO_FAST_MATH,
    NO_FILESYSTEM_WRITES,
    NO_INTROSPECTION,
    NO_LIBRARY_COMPUTE,
    NO_MONKEYPATCHING,
    NO_NETWORK,
    NO_PRECISION_DOWNGRADE,
    NO_REFERENCE_MODEL,
    NO_TENSOR_SUBCLASS,
    NO_THREADS_OR_PROCESSES,
    RULES,
    THREAD_BUDGET,
)

# Most specific first: the first failing rule names the rejection, and a pasted reference Model
# or a try/except fallback also calls torch, which is the less telling finding.
_SPECIFIC_FIRST = (
    "no_reference_model",
    "no_try_fallback",
    "no_tensor_subclass",
    "no_monkeypatching",
    "no_introspection",
    "no_dynamic_code",
    "no_network",
    "no_filesystem_writes",
    "no_threads_or_processes",
    "no_side_streams",
    "no_state_across_calls",
    "no_fast_math",
    "fp_environment",
    "no_precision_downgrade",
    "thread_budget",
    "no_library_compute",
)
STATIC_RULES = tuple(
    sorted(
        (name for name, r in RULES.items() if "static" in r.layers),
        key=lambda n: _SPECIFIC_FIRST.index(n) if n in _SPECIFIC_FIRST else len(_SPECIFIC_FIRST),
    )
)

# torch functions that allocate, describe or build; everything else under torch.* is compute.
TORCH_ALLOWED_CALLS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "tensor",
        "as_tensor",
        "from_numpy",
        "frombuffer",
        "Size",
        "device",
        "dtype",
        "finfo",
        "iinfo",
        "no_grad",
        "inference_mode",
        "is_tensor",
        "get_num_threads",
        "numel",
        "manual_seed",
        "utils.cpp_extension.load_inline",
        "utils.cpp_extension.load",
        "nn.Module",
        "nn.Parameter",
        "nn.ParameterList",
        "nn.ModuleList",
        "nn.ModuleDict",
        "nn.init.calculate_gain",
    }
)
# nn layers may be constructed (to hold weights that match the reference's initialisation);
# calling them in forward is caught at runtime. Everything in torch.nn.init initialises weights.
_NN_LAYER = re.compile(r"^nn\.[A-Z]\w*$|^nn\.init\.\w+$")

# Tensor methods that compute. Views, shape bookkeeping, clone/copy_ and fill_/zero_ are glue.
TENSOR_COMPUTE_METHODS = frozenset(
    """
abs abs_ absolute acos acosh add add_ addbmm addcdiv addcmul addmm addmv addr all allclose amax
amin aminmax angle any argmax argmin argsort asin asinh atan atan2 atanh baddbmm bernoulli bmm
ceil cholesky clamp clamp_ clamp_max clamp_min clip clip_ conv1d conv2d conv3d cos cosh count_nonzero
cross cummax cummin cumprod cumsum deg2rad diag diagonal diff digamma dist div div_ divide dot
eig einsum eq equal erf erfc erfinv exp exp_ exp2 expm1 floor floor_divide fmax fmin fmod frac
gather gcd ge gelu ger greater gt hardtanh heaviside histc hypot index_add index_add_ index_copy
index_fill index_put index_put_ index_select inner inverse isclose isfinite isinf isnan kron
kthvalue lcm ldexp le lerp less lgamma log log10 log1p log2 log_softmax logaddexp logcumsumexp
logdet logical_and logical_not logical_or logical_xor logit logsumexp lt lu masked_fill
masked_fill_ masked_scatter masked_select matmul matrix_exp matrix_power max maximum mean median
min minimum mm mode msort mul mul_ multinomial multiply mv nan_to_num nanmean nanmedian nanquantile
nansum ne neg neg_ negative nextafter nonzero norm not_equal outer pinverse polygamma pow pow_ prod
qr quantile rad2deg reciprocal relu relu_ remainder renorm repeat repeat_interleave roll rot90
round rsqrt scatter scatter_ scatter_add scatter_add_ scatter_reduce sgn sigmoid sigmoid_ sign
signbit sin sinc sinh slogdet softmax sort sqrt sqrt_ square std sub sub_ subtract sum svd t_ tan
tanh tanh_ tensordot tile topk trace trapz triangular_solve tril triu true_divide trunc unique
unique_consecutive var vdot where xlogy
""".split()
)

# Calls whose result is the candidate's compiled library; method calls on it are the kernel.
LOADERS = frozenset(
    {
        "pragma_cext.load_cpp",
        "pragma_cext.build_cpp",
        "torch.utils.cpp_extension.load_inline",
        "torch.utils.cpp_extension.load",
        "ctypes.CDLL",
        "ctypes.cdll.LoadLibrary",
    }
)
KERNEL_BUILDERS = frozenset(
    {"pragma_cext.load_cpp", "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
)

_IMPORT_RULES = {
    NO_THREADS_OR_PROCESSES: {
        "threading",
        "_thread",
        "multiprocessing",
        "concurrent",
        "subprocess",
        "asyncio",
        "pty",
        "signal",
        "sched",
    },
    NO_NETWORK: {
        "socket",
        "ssl",
        "urllib",
        "http",
        "requests",
        "httpx",
        "aiohttp",
        "ftplib",
        "smtplib",
        "telnetlib",
        "xmlrpc",
        "websocket",
        "websockets",
    },
    NO_LIBRARY_COMPUTE: {
        "numpy",
        "scipy",
        "numba",
        "jax",
        "jaxlib",
        "tensorflow",
        "cupy",
        "sklearn",
        "pandas",
        "torchvision",
        "torchaudio",
        "xformers",
        "mkl",
        "onnxruntime",
    },
    NO_INTROSPECTION: {"gc", "inspect", "builtins", "__builtin__", "traceback", "dis", "tracemalloc"},
    NO_DYNAMIC_CODE: {"importlib", "runpy", "code", "codeop", "pickle", "marshal", "dill"},
    NO_MONKEYPATCHING: {"unittest", "mock"},
    NO_FILESYSTEM_WRITES: {"shutil", "tempfile"},
    NO_REFERENCE_MODEL: {"pragma_problem"},
    NO_TENSOR_SUBCLASS: {"torch.overrides", "torch.utils._python_dispatch", "torch._C", "torch._subclasses"},
}
_PROCESS_CALLS = re.compile(
    r"^os\.(fork|forkpty|system|popen|spawn\w*|exec\w*|posix_spawn\w*|kill|killpg|"
    r"setsid|daemon|register_at_fork)$"
)
_FILE_CALLS = re.compile(
    r"^os\.(remove|unlink|rename|renames|replace|makedirs|mkdir|rmdir|removedirs|"
    r"symlink|link|chmod|chown|truncate|mkfifo|mknod|utime|write|pwrite)$"
)
_PATH_WRITE_METHODS = frozenset(
    {"write_text", "write_bytes", "unlink", "mkdir", "rmdir", "touch", "symlink_to", "hardlink_to", "chmod"}
)
_INTROSPECTION_ATTRS = frozenset(
    {
        "_getframe",
        "settrace",
        "setprofile",
        "__builtins__",
        "__globals__",
        "__subclasses__",
        "f_back",
        "f_locals",
        "f_globals",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "__code__",
        "pythonapi",
        "_current_frames",
    }
)
_HALF_DTYPES = frozenset({"torch.float16", "torch.half", "torch.bfloat16"})
_TRITON_HALF = re.compile(r"^triton\.language\.(float16|bfloat16|float8\w*)$")
_STREAM_CALLS = frozenset(
    {
        "torch.cuda.Stream",
        "torch.cuda.stream",
        "torch.cuda.set_stream",
        "torch.cuda.ExternalStream",
        "torch.cuda.StreamContext",
        "torch.Stream",
        "torch.cuda.streams.Stream",
    }
)


def _tf32_dot(node: ast.Call) -> str | None:
    """Why this tl.dot computes an fp32 product in TF32 (Triton's default on NVIDIA), or None."""
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    precision = kw.get("input_precision")
    if isinstance(precision, ast.Constant) and precision.value in ("ieee", "tf32x3"):
        return None
    allow = kw.get("allow_tf32")
    if precision is None and isinstance(allow, ast.Constant) and allow.value is False:
        return None
    if precision is None and allow is None:
        return "tl.dot without input_precision='ieee' computes fp32 inputs in TF32 (10-bit mantissa) on NVIDIA GPUs"
    return f"tl.dot with {ast.unparse(precision if precision is not None else allow)} computes in TF32"


_MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "update", "setdefault", "add", "__setitem__", "appendleft"}
)

# C++ (comments stripped). Namespaced/member calls (std::remove, obj.open) are not the libc ones.
_CPP_RULES = {
    NO_THREADS_OR_PROCESSES: re.compile(
        r"\bstd::(thread|jthread|async)\b|\bpthread_create\b|"
        r"(?<![\w:.>])(v?fork|clone|system|popen|execl|execlp|execle|execv|execvp|execvpe|posix_spawnp?|daemon)\s*\("
    ),
    NO_FILESYSTEM_WRITES: re.compile(
        r"(?<![\w:.>])(fopen|freopen|open|openat|creat|unlink|remove|rename|mkdir|rmdir|truncate|"
        r"symlink|link)\s*\(|std::(ofstream|fstream|filesystem)\b"
    ),
    NO_NETWORK: re.compile(r"(?<![\w:.>])(socket|connect|getaddrinfo)\s*\("),
    NO_FAST_MATH: re.compile(r"fast-math|Ofast|unsafe-math|finite-math-only|associative-math|reciprocal-math"),
    THREAD_BUDGET: re.compile(r"\bomp_set_num_threads\b|\b(setenv|putenv)\s*\("),
    NO_PRECISION_DOWNGRADE: re.compile(
        r"\b(_Float16|__fp16|__bf16|float16_t|bfloat16_t|__half|__nv_bfloat16)\b|"
        r"\b(at|c10)::(Half|BFloat16)\b|cvtps_ph|cvtneps|cvtne2ps|dpbf16"
    ),
}
_BAD_FLAG = re.compile(
    r"^-(ffast-math|Ofast|funsafe-math-optimizations|ffinite-math-only|"
    r"fassociative-math|freciprocal-math|fno-signed-zeros|fno-trapping-math)$"
)
_CPP_HINT = re.compile(r"#include|extern\s+\"C\"|\bint64_t\b|\bvoid\s+\w+\s*\(")
_CPP_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_HALF_PROBLEM = re.compile(r"float16|bfloat16|\.half\(|torch\.half|bf16")


def strip_cpp_comments(source: str) -> str:
    return _CPP_COMMENTS.sub(" ", source)
