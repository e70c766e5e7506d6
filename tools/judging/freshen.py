"""Judging: make every timed call's inputs new without changing what kind of inputs they are.

Between timed calls (outside the timed region, the same change for reference, candidate and best)
a few random elements of each floating-point input swap values among themselves (a cyclic shift
of ``positions`` values). That keeps the input's multiset of values (its distribution), its zero
pattern (only non-zero positions are chosen: triangular, diagonal, masked inputs stay so) and its
symmetry (a symmetric matrix changes mirrored pairs, chosen in the upper triangle so no change
undoes another). Integer and bool tensors (indices, masks, sizes) are left as they are. When no
input can change (all-integer or constant inputs) the caller draws a fresh set from the problem's
``get_inputs()`` instead.

Cost: O(positions) writes per tensor per call, so a memo of any size never hits, while caches and
the allocator stay as warm as in a real repeated call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false as _dense

POSITIONS = 8  # elements changed per tensor per call


@dataclass
class Plan:
    index: int  # which input
    symmetric: bool  # mirror every change across the last two dims


def plan(inputs: list[Any]) -> list[Plan]:
    """Which inputs can change in place (floating point, contiguous, more than one distinct value)."""
    plans = []
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() < 2:
            continue
        if not x.is_contiguous():
            continue
        flat = x.reshape(-1)
        if bool((flat == flat[0]).all()):
            continue  # a constant tensor: permuting changes nothing
        symmetric = x.dim() >= 2 and x.shape[-1] == x.shape[-2] and torch.equal(x, x.transpose(-1, -2))
        plans.append(Plan(index=i, symmetric=symmetric))
    return plans


def _positions(x: torch.Tensor, symmetric: bool, gen: torch.Generator) -> torch.Tensor:
    """Flat positions of non-zero elements (strict upper triangle for symmetric inputs: the
    diagonal holds values once, the rest twice, so the two sets never mix)."""
    n = x.numel()
    tries = torch.randint(0, n, (POSITIONS * 8,), generator=gen)
    flat = x.reshape(-1)
    keep = flat[tries] != 0
    if symmetric:
        cols = x.shape[-1]
        keep &= (tries % cols) > (tries // cols) % cols  # strictly upper: each value stays in two places
    chosen = torch.unique(tries[keep])
    return chosen[torch.randperm(chosen.numel(), generator=gen)[:POSITIONS]]


def _mirror(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    cols = x.shape[-1]
    plane = cols * cols
    base, rem = pos // plane * plane, pos % plane
    return base + (rem % cols) * cols + rem // cols


def step(plans: list[Plan], masters: list[Any], gen: torch.Generator) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """Change ``masters`` in place; returns (input index, flat positions, new values) to apply to
    every copy of the inputs (each runner's shared region) so all stay identical."""
    changes = []
    for p in plans:
        x = masters[p.index]
        pos = _positions(x, p.symmetric, gen)
        if pos.numel() < 2:
            continue
        flat = x.view(-1)
        values = flat[pos].roll(1)
        if p.symmetric:
            pos = torch.cat([pos, _mirror(x, pos)])
            values = torch.cat([values, values])
        flat[pos] = values
        changes.append((p.index, pos, values))
    return changes


def apply(changes: list[tuple[int, torch.Tensor, torch.Tensor]], copy: list[Any]) -> None:
    for index, pos, values in changes:
        copy[index].view(-1)[pos] = values


# --- wholly new inputs before every timed round (issue 33) -------------------------------------
#
# The in-place edits above (``step``) stay for the correctness trials' stateless probe. Between
# timed rounds they were not enough: a kernel that keeps its last inputs and output can find the
# few changed rows and columns and recompute only those (a matmul read 1.5-1.8x where its honest
# twin read ~0.5x). ``Refill`` gives every element a new value before every timed round instead.
#
# Where an input's values are exchangeable (a plain or discrete-valued tensor, stress.structure_of
# "" or "discrete values", or an integer tensor with repeated values), each element is a fresh
# draw from a pool of 2**POOL_BITS values taken from one secret get_inputs() draw: the marginal
# distribution is the problem's (to the pool's resolution), integer and discrete tensors keep
# their value set, and no element is a function of any earlier input (the pool index comes from a
# fresh random stream every round). Structured inputs (triangles, symmetry, probability rows,
# definite matrices, permutations) are redrawn whole by the problem's own get_inputs() under a
# fresh secret seed, which keeps every structure exactly and costs what get_inputs costs.
#
# Resampling is native code because Python cannot write 8M fresh values fast enough: torch's
# normal_ takes 30-60 ms for the ReLU example's 8M floats on the 2-core EPYC, more than the two
# timed calls of a round; the loop below writes them in a few ms. It is compiled by this module
# (never through the candidates' build cache, which every runner can write) into a private
# temporary directory, before any runner exists (the zygote, or the judge before it forks), and
# loaded at once; where no compiler works, a torch gather does the same draws, slower.

POOL_BITS = 16  # 65536-value pool per input (256 KiB of float32: L2-resident while the loop gathers)
REFILL_THREADS = 2  # runners are stopped or idle between rounds: both cores are the judge's then

_REFILL_CPP = r"""
// pthreads, not <thread>/<vector>: the same parts, seeds and values, and g++ builds it in ~0.15 s
// instead of ~0.45 s (each pre-started judge compiles it once, privately).
#include <pthread.h>
#include <stdint.h>

static inline uint64_t splitmix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// xoshiro256**: 64 fresh bits per step, several pool indices out of each.
struct Xoshiro {
    uint64_t s[4];
    explicit Xoshiro(uint64_t seed) { for (auto& w : s) w = seed = splitmix(seed); }
    static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    inline uint64_t next() {
        const uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
        return r;
    }
};

template <typename T>
static void fill_range(T* out, int64_t lo, int64_t hi, const T* pool, int bits, uint64_t seed) {
    Xoshiro g(seed);
    const uint64_t mask = (uint64_t(1) << bits) - 1;
    const int per = 64 / bits;
    int64_t i = lo;
    while (i < hi) {
        uint64_t r = g.next();
        for (int k = 0; k < per && i < hi; ++k, ++i) {
            out[i] = pool[r & mask];
            r >>= bits;
        }
    }
}

template <typename T>
struct Part { T* out; int64_t lo, hi; const T* pool; int bits; uint64_t seed; };

template <typename T>
static void* run_part(void* arg) {
    Part<T>* p = static_cast<Part<T>*>(arg);
    fill_range<T>(p->out, p->lo, p->hi, p->pool, p->bits, p->seed);
    return nullptr;
}

template <typename T>
static void fill(void* out, int64_t n, const void* pool, int bits, uint64_t seed, int threads) {
    Part<T>* parts = new Part<T>[threads];
    pthread_t* ids = new pthread_t[threads];
    bool* joined = new bool[threads]();
    const int64_t part = (n + threads - 1) / threads;
    int used = 0;
    for (int t = 0; t < threads; ++t) {
        const int64_t lo = t * part, hi = lo + part < n ? lo + part : n;
        if (lo >= hi) break;
        parts[t] = {static_cast<T*>(out), lo, hi, static_cast<const T*>(pool), bits,
                    splitmix(seed ^ splitmix(uint64_t(t) + 1))};
        used = t + 1;
        // Every part on a thread of its own, as std::thread had it: filling part 0 on the calling
        // thread (the judge's) took twice as long per round in the judge (7.0 vs 3.6 ms for ReLU's
        // 8M floats). A part whose thread cannot start is filled here.
        joined[t] = pthread_create(&ids[t], nullptr, run_part<T>, &parts[t]) == 0;
        if (!joined[t]) run_part<T>(&parts[t]);
    }
    for (int t = 0; t < used; ++t)
        if (joined[t]) pthread_join(ids[t], nullptr);
    delete[] joined;
    delete[] ids;
    delete[] parts;
}

// out[i] = pool[random index] for i < n; elements of item_bytes bytes; pool of 2**bits elements.
extern "C" int pragma_refill(void* out, int64_t n, const void* pool, int bits, int item_bytes, uint64_t seed,
                             int threads) {
    if (bits < 1 || bits > 32 || threads < 1) return -1;
    switch (item_bytes) {
        case 1: fill<uint8_t>(out, n, pool, bits, seed, threads); return 0;
        case 2: fill<uint16_t>(out, n, pool, bits, seed, threads); return 0;
        case 4: fill<uint32_t>(out, n, pool, bits, seed, threads); return 0;
        case 8: fill<uint64_t>(out, n, pool, bits, seed, threads); return 0;
    }
    return -2;
}
"""

_native: Any = None  # the loaded library, or why not (a str)


def prepare() -> str:
    """Compile and load the resampling loop once per process; '' or why not (then torch does it).

    Call it before any runner exists: the build directory is private and removed once loaded, but
    only a process no candidate code runs beside can be sure nothing swapped the library in it."""
    global _native
    if _native is not None:
        return "" if not isinstance(_native, str) else _native
    import ctypes
    import shutil
    import subprocess
    import tempfile

    tmp = tempfile.mkdtemp(prefix="pragma-refill-")
    try:
        src, lib = os.path.join(tmp, "refill.cpp"), os.path.join(tmp, "refill.so")
        with open(src, "w") as f:
            f.write(_REFILL_CPP)
        cmd = [os.environ.get("CXX", "g++"), "-O3", "-march=native", "-fPIC", "-shared", "-std=c++17", "-pthread"]
        proc = subprocess.run([*cmd, src, "-o", lib], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            _native = f"compile failed: {proc.stderr.strip()[-200:]}"
            return _native
        handle = ctypes.CDLL(lib)
        handle.pragma_refill.argtypes = (
            [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
            + [ctypes.c_int] * 2
            + [
                ctypes.c_uint64,
                ctypes.c_int,
            ]
        )
        handle.pragma_refill.restype = ctypes.c_int
        _native = handle
        return ""
    except (OSError, subprocess.SubprocessError) as exc:
        _native = f"no compiler: {exc}"[:200]
        return _native
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _exchangeable(x: torch.Tensor) -> bool:
    """Whether every element may take any value of the input's own distribution independently."""
    from pragma.tools.judging import stress

    structure = stress.structure_of(x)
    if structure in ("", "discrete values"):
        return True
    if structure == "integer" and x.dtype != torch.bool:
        # Repeated values (labels, counts): resampling keeps the value set. All-distinct values
        # (a permutation, unique indices) are a structure resampling would break.
        # Decided on a sample (a sort of 8M elements costs ~0.5 s): repeats in it, or fewer possible
        # values than elements, settle it; otherwise the values are taken as distinct.
        flat = x.reshape(-1)
        sample = flat[:65536]
        if torch.unique(sample).numel() < sample.numel():
            return True
        lo, hi = (int(v) for v in torch.aminmax(flat))
        return hi - lo + 1 < flat.numel()
    return structure == "integer"  # bool masks: {False, True} stays the value set


@dataclass
class Refill:
    """How every timed round's inputs are made new (see the comment above ``POOL_BITS``)."""

    modes: list[str]  # per input: "resample", "redraw" or "fixed"
    pools: dict[int, torch.Tensor]  # input index -> 2**bits values of one secret draw
    draw: Any  # seed -> a fresh get_inputs() list (for the "redraw" inputs)
    gen: torch.Generator  # per-round seeds (secret: seeded by the judge from the OS)
    ms: list[float]  # wall time of each round's refill (reported; outside every timed call)

    @classmethod
    def build(cls, masters: list[Any], draw: Any, gen: torch.Generator) -> Refill:
        modes: list[str] = []
        for x in masters:
            if not isinstance(x, torch.Tensor) or x.numel() < 2 or x.is_complex():
                modes.append("fixed")
            elif bool((x.reshape(-1) == x.reshape(-1)[0]).all()):
                modes.append("fixed")  # constant (ones, a scalar filled): the problem lets nothing change
            else:
                modes.append("resample" if _exchangeable(x) else "redraw")
        pools: dict[int, torch.Tensor] = {}
        if "resample" in modes:
            source = draw(int(torch.randint(0, 2**62, (1,), generator=gen)))
            for i, mode in enumerate(modes):
                if mode == "resample":
                    flat = source[i].reshape(-1)
                    bits = max(1, min(POOL_BITS, flat.numel().bit_length() - 1))
                    pick = torch.randint(0, flat.numel(), (1 << bits,), generator=gen)
                    pools[i] = flat[pick.to(flat.device)].cpu().contiguous()  # host memory: the loop reads it
        return cls(modes=modes, pools=pools, draw=draw, gen=gen, ms=[])

    def describe(self) -> str:
        counts = {m: self.modes.count(m) for m in ("resample", "redraw") if m in self.modes}
        if not counts:
            return ""
        how = {
            "resample": "every element a fresh draw from the problem's own values",
            "redraw": "redrawn by get_inputs() under a fresh seed",
        }
        engine = "native" if prepare() == "" else f"torch ({prepare()})"
        return "; ".join(f"{n} input(s) {how[m]}" for m, n in counts.items()) + f" [{engine}]"

    def next(self, target: list[Any]) -> None:
        """New values into ``target`` (views of an input region, or the judge's masters)."""
        import time

        t0 = time.perf_counter()
        if "redraw" in self.modes:
            new = self.draw(int(torch.randint(0, 2**62, (1,), generator=self.gen)))
            for i, mode in enumerate(self.modes):
                if mode == "redraw":
                    target[i].copy_(new[i])
        for i, pool in self.pools.items():
            _resample(target[i], pool, int(torch.randint(0, 2**63 - 1, (1,), generator=self.gen)), self.gen)
        self.ms.append((time.perf_counter() - t0) * 1e3)


def _resample(x: torch.Tensor, pool: torch.Tensor, seed: int, gen: torch.Generator) -> None:
    bits = pool.numel().bit_length() - 1
    # A dense view with non-negative strides covers numel elements from data_ptr on, in some order:
    # i.i.d. draws need no order.
    dense = x.is_contiguous() or (_dense(x) and all(s >= 0 for s in x.stride()))
    if dense and x.device.type == "cpu" and pool.dtype == x.dtype and prepare() == "":
        if (
            _native.pragma_refill(
                x.data_ptr(), x.numel(), pool.data_ptr(), bits, x.element_size(), seed, REFILL_THREADS
            )
            == 0
        ):
            return
    idx = torch.randint(0, pool.numel(), x.shape, generator=gen)
    x.copy_(pool[idx])  # on the host, then to wherever x lives
