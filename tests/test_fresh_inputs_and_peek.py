"""Issue 33: timed rounds on wholly new inputs (freshen.Refill) and outputs read by the judge
itself from a runner's memory (peek.py)."""

import ctypes
import mmap
import os
import struct

import pytest
import torch

from pragma.tools.judging import freshen, peek, stress

# The native refill is built with g++ and the peek tests fork a child: processes.
pytestmark = pytest.mark.integration


def _draw(make):
    def draw(seed: int) -> list:
        torch.manual_seed(seed)
        return make()

    return draw


def test_every_element_of_a_plain_input_is_new_every_round():
    make = lambda: [torch.randn(300, 257)]  # noqa: E731
    x = make()[0]
    refill = freshen.Refill.build([x], _draw(make), torch.Generator().manual_seed(1))
    assert refill.modes == ["resample"]
    before = x.clone()
    refill.next([x])
    # Fresh draws from a 65536-value pool: an element keeps its value only by a 1-in-65536 chance.
    assert (x == before).float().mean() < 1e-3
    # Not a permutation of the old values either: the new multiset is another one.
    assert not torch.equal(x.reshape(-1).sort().values, before.reshape(-1).sort().values)
    # The problem's distribution: N(0, 1) here.
    assert abs(float(x.mean())) < 0.02 and abs(float(x.std()) - 1) < 0.02
    assert len(refill.ms) == 1


def test_value_sets_and_structures_are_kept():
    n = 64
    make = lambda: [  # noqa: E731
        torch.randint(0, 7, (200, 50)),  # labels with repeats: resampled, value set kept
        torch.tril(torch.randn(n, n)),  # a triangle: redrawn whole by get_inputs
        torch.randperm(500),  # all-distinct indices: redrawn (resampling would repeat some)
        (torch.rand(100, 100) > 0.5).float(),  # a 0/1 mask: discrete, resampled
        torch.ones(10),  # constant: nothing can change
        3,
    ]
    inputs = make()
    refill = freshen.Refill.build(inputs, _draw(make), torch.Generator().manual_seed(2))
    assert refill.modes == ["resample", "redraw", "redraw", "resample", "fixed", "fixed"]
    old = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    refill.next(inputs)
    labels, tri, perm, mask, ones, _ = inputs
    assert set(labels.unique().tolist()) <= set(range(7)) and not torch.equal(labels, old[0])
    assert stress.structure_of(tri) == "lower triangular" and not torch.equal(tri, old[1])
    assert sorted(perm.tolist()) == list(range(500)) and not torch.equal(perm, old[2])
    assert set(mask.unique().tolist()) <= {0.0, 1.0} and not torch.equal(mask, old[3])
    assert torch.equal(ones, old[4])
    assert "redrawn" in refill.describe() and "fresh draw" in refill.describe()


def test_the_native_generator_builds_here():
    why = freshen.prepare()
    if why:
        pytest.skip(f"no native refill on this machine: {why}")
    x = torch.empty(1 << 20)
    pool = torch.arange(1 << 16, dtype=torch.float32)
    assert freshen._native.pragma_refill(x.data_ptr(), x.numel(), pool.data_ptr(), 16, 4, 7, 2) == 0
    counts = torch.bincount(x.long(), minlength=1 << 16)
    # Every pool value drawn about 16 times: uniform indices, no value stuck or missing en masse.
    assert int((counts == 0).sum()) < 100 and int(counts.max()) < 60


def _child_with_a_protected_page():
    """A forked child holding two pages of float32 (values 0..2047), the second PROT_NONE; returns
    (pid, address, pipe to release it)."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        os.close(w2)
        buf = mmap.mmap(-1, 8192)
        buf[:] = struct.pack("2048f", *range(2048))
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect(ctypes.c_void_p(addr + 4096), ctypes.c_size_t(4096), 0)
        os.write(w, struct.pack("Q", addr))
        os.read(r2, 1)
        os._exit(0)
    os.close(w)
    os.close(r2)
    addr = struct.unpack("Q", os.read(r, 8))[0]
    os.close(r)
    return pid, addr, w2


def test_the_judge_reads_what_the_child_holds_and_cannot_read_a_protected_page():
    pid, addr, release = _child_with_a_protected_page()
    try:
        first = peek.Where(ptr=addr, shape=[1024], stride=[1], dtype=torch.float32)
        try:
            got = peek.full(pid, first)
        except peek.Unreadable as exc:
            pytest.skip(f"no ptrace access to a child here: {exc}")
        assert torch.equal(got, torch.arange(1024, dtype=torch.float32))
        unit = torch.tensor([0.0, 0.5, 0.999], dtype=torch.float64)
        assert peek.spot(pid, first, unit).tolist() == [0.0, 512.0, 1022.0]
        # Strided: every other element of the first page, as a 2-D view.
        strided = peek.Where(ptr=addr, shape=[4, 3], stride=[6, 2], dtype=torch.float32)
        assert peek.full(pid, strided).tolist() == [[0, 2, 4], [6, 8, 10], [12, 14, 16], [18, 20, 22]]
        # Prepared between rounds for a layout seen before: the same elements, by the same read.
        report = [{"ptr": addr, "shape": [1024], "stride": [1], "dtype": "float32"}]
        prep = peek.prepare_spot(peek.parse(report, 1 << 20), unit)
        assert peek.matches(prep, report) and not peek.matches(prep, [{**report[0], "stride": [2]}])
        peek.read_prepared(pid, prep, report)
        assert peek.prepared_values(prep)[0].tolist() == [0.0, 512.0, 1022.0]
        both = peek.Where(ptr=addr, shape=[2048], stride=[1], dtype=torch.float32)
        with pytest.raises(peek.Unreadable):
            peek.full(pid, both)  # the second page is protected: no handler of the child runs
        with pytest.raises(peek.Unreadable):
            peek.spot(pid, both, torch.tensor([0.1, 0.75], dtype=torch.float64))
        wide = [{"ptr": addr, "shape": [2048], "stride": [1], "dtype": "float32"}]
        prep = peek.prepare_spot(peek.parse(wide, 1 << 20), torch.tensor([0.1, 0.75], dtype=torch.float64))
        with pytest.raises(peek.Unreadable):  # read whole (8 KiB): the protected page fails the read
            peek.read_prepared(pid, prep, wide)
    finally:
        os.write(release, b"x")
        os.close(release)
        os.waitpid(pid, 0)


def test_malformed_address_reports_are_refused():
    for bad in (None, [], [{"ptr": -1, "shape": [2], "stride": [1], "dtype": "float32"}], [None], ["x"]):
        with pytest.raises(peek.Unreadable):
            peek.parse(bad, 1 << 30)
    with pytest.raises(peek.Unreadable):
        peek.parse([{"ptr": 4096, "shape": [1 << 20], "stride": [1], "dtype": "float32"}], 1 << 10)
    (w,) = peek.parse([{"ptr": 4096, "shape": [2, 3], "stride": [3, 1], "dtype": "float32"}], 1 << 10)
    assert w.numel == 6 and w.item == 4
