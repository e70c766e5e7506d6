"""The stress variants (tools/judging/stress.py) as pure functions: which structure each input is seen
to have, that every variant keeps it, which references are unusable, the scaled tolerance, and
when one fixed output would pass every comparison. The verifier's use of them is covered through
the installed CLI by tests/test_verifier_redteam.py (range_* cheats, honest structured kernels)."""

import pytest
import torch

from pragma.tools.judging import stress


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def variants_of(*masters):
    variants, skipped = stress.stress_variants(list(masters), gen())
    return {v["name"]: v["inputs"] for v in variants}, {s["name"]: s["reason"] for s in skipped}


def spd(n: int) -> torch.Tensor:
    a = torch.randn(n, n)
    return a @ a.T + n * torch.eye(n)


@pytest.mark.parametrize(
    "value, structure",
    [
        (torch.randint(0, 10, (8, 8)), "integer"),
        (torch.randint(0, 2, (64,)).float() * 2 - 1, "discrete values"),
        (torch.randint(0, 5, (64,)).float(), "discrete values"),
        (torch.softmax(torch.randn(4, 16), dim=-1), "probability rows"),
        (torch.diag(torch.rand(8) + 0.5), "diagonal"),
        (torch.tril(torch.rand(8, 8) + 0.1), "lower triangular"),
        (torch.triu(torch.rand(8, 8) + 0.1), "upper triangular"),
        (spd(16), "positive definite"),
        ((lambda a: (a + a.T) / 2)(torch.rand(16, 16)), "symmetric"),  # positive diagonal, not definite
        (torch.randn(3, 16, 16), ""),
        (torch.rand(1000, 37), ""),
        (3, "not a tensor"),
    ],
)
def test_structure_of_each_kind(value, structure):
    assert stress.structure_of(value) == structure


def test_plain_inputs_get_every_variant_and_the_masters_stay_untouched():
    x = torch.rand(64, 33)
    keep = x.clone()
    got, skipped = variants_of(x)
    assert set(got) == {"negated", "scaled x1e-03", "scaled x1e+03", "mixed signs", "wide range"} and not skipped
    assert torch.equal(x, keep)
    assert torch.equal(got["negated"][0], -x)
    assert torch.allclose(got["scaled x1e+03"][0], x * 1e3)
    mixed = got["mixed signs"][0]
    assert torch.equal(mixed.abs(), x.abs()) and 0.3 < float((mixed < 0).float().mean()) < 0.7


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 4), (64, 33)])
def test_the_sign_mask_covers_every_element_of_any_shape(shape):
    """Eight mask bits come from each random byte: shapes whose size is no multiple of 8 included."""
    draw = stress._flip(torch.Size(shape), torch.Generator().manual_seed(7))
    assert draw.shape == shape and draw.dtype == torch.bool
    assert torch.equal(draw, stress._flip(torch.Size(shape), torch.Generator().manual_seed(7)))  # seeded
    if draw.numel() >= 64:
        assert 0.3 < float(draw.float().mean()) < 0.7
    many = torch.stack([stress._flip(torch.Size(shape), torch.Generator().manual_seed(s)) for s in range(64)])
    assert many.any(0).all() and (~many).any(0).all()  # every element is flipped by some seeds, not by others


def test_every_variant_keeps_the_structure_the_problem_states():
    sym = (lambda a: (a + a.T) / 2)(torch.rand(32, 32))
    masters = [
        torch.tril(torch.rand(32, 32) + 0.1),
        torch.triu(torch.rand(32, 32) + 0.1),
        torch.diag(torch.rand(32) + 0.1),
        sym,
        spd(32),
    ]
    got, _ = variants_of(*masters)
    assert got["mixed signs"][0].lt(0).any()  # something did change sign
    for name, inputs in got.items():
        assert stress._lower(inputs[0]) and stress._upper(inputs[1]) and stress._diagonal(inputs[2]), name
        assert torch.equal(inputs[3], inputs[3].T), name
        assert int(torch.linalg.cholesky_ex(inputs[4].double()).info) == 0, f"{name} lost definiteness"
    assert torch.equal(got["negated"][4], masters[4])  # -A is not positive definite: left as it was


def test_labels_indices_and_probabilities_never_change_and_a_variant_with_nothing_to_change_is_skipped():
    labels = torch.randint(0, 10, (64,))
    targets = torch.randint(0, 2, (64,)).float() * 2 - 1
    probs = torch.softmax(torch.randn(64, 10), dim=-1)
    got, skipped = variants_of(labels, targets, probs, 7)
    # Probability rows are never negated or scaled; other draws of the same structure replace them.
    assert set(got) == {"sharper rows", "flatter rows", "one-hot rows"}
    for inputs in got.values():
        assert inputs[0] is labels and inputs[1] is targets and inputs[3] == 7
        assert torch.allclose(inputs[2].sum(-1), torch.ones(64)) and bool((inputs[2] >= 0).all())
        assert not torch.equal(inputs[2], probs)
    assert set(skipped) == {"negated", "scaled x1e-03", "scaled x1e+03", "mixed signs", "wide range"}
    assert "integer" in skipped["negated"] and "probability rows" in skipped["negated"]
    preds = torch.rand(64, 10)
    got, _ = variants_of(preds, labels)
    for inputs in got.values():
        assert inputs[1] is labels and not torch.equal(inputs[0], preds)


def test_a_reference_outside_its_domain_is_unusable():
    assert stress.unusable_reference(torch.log(torch.rand(100) + 0.1)) == ""
    why = stress.unusable_reference(torch.log(-torch.rand(100) - 0.1))
    assert "100 NaN/Inf" in why
    assert "output 1" in stress.unusable_reference((torch.ones(3), torch.tensor([1.0, float("inf")])))
    assert stress.unusable_reference(torch.arange(5)) == ""  # integer outputs are always finite


def test_the_variant_tolerance_scales_with_the_output():
    base = torch.rand(100) * 2.0
    peak = stress.output_peak(base)
    assert stress.variant_atol(1e-4, peak, base * 1e6) == pytest.approx(1e-4 * 1e6, rel=1e-6)
    assert stress.variant_atol(1e-4, peak, base * 1e-6) == pytest.approx(1e-4 * stress.MIN_ATOL_FACTOR)
    assert stress.variant_atol(1e-4, 0.0, base) == 1e-4  # nothing to scale against


def test_a_matmul_summed_in_another_order_passes_a_scaled_variant_at_the_scaled_tolerance():
    """Why the tolerance scales: rounding grows with the values, and an honest kernel must pass."""
    a, b = torch.randn(64, 512), torch.randn(512, 64)
    ref = a @ b
    honest = (a.double() @ b.double()).float()  # another summation order
    for s in (1e-3, 1e3):
        ref_s, honest_s = (a * s) @ (b * s), ((a * s).double() @ (b * s).double()).float()
        atol = stress.variant_atol(1e-4, stress.output_peak(ref), ref_s)
        assert torch.allclose(honest_s, ref_s, atol=atol, rtol=1e-4)
    assert torch.allclose(honest, ref, atol=1e-4, rtol=1e-4)


def test_a_scalar_loss_is_decidable_only_across_the_scaled_variants():
    p, t = torch.rand(1 << 16), torch.rand(1 << 16)
    trials = [(torch.mean((p - t) ** 2), 1e-2, 1e-2) for _ in range(3)]  # tolerance wide enough to hide draws
    assert "one fixed output" in stress.degenerate_across(trials)
    scaled = torch.mean((p * 1e3 - t * 1e3) ** 2)
    assert stress.degenerate_across([*trials, (scaled, 1e-2, 1e-2)]) == ""


def test_degenerate_across_finds_a_single_moving_element_in_a_large_output():
    a = torch.zeros(1000, 1000)
    b = a.clone()
    b[123, 456] = 1.0  # one element outside the 4096-element sample
    assert stress.degenerate_across([(a, 1e-4, 1e-4), (a.clone(), 1e-4, 1e-4)]) != ""
    assert stress.degenerate_across([(a, 1e-4, 1e-4), (b, 1e-4, 1e-4)]) == ""


def test_degenerate_across_integer_and_shape_changing_outputs():
    idx = torch.arange(10)
    assert stress.degenerate_across([(idx, 0.0, 0.0), (idx.clone(), 0.0, 0.0)]) != ""
    assert stress.degenerate_across([(idx, 0.0, 0.0), (idx.flip(0), 0.0, 0.0)]) == ""
    assert stress.degenerate_across([(torch.ones(3), 1e-4, 1e-4), (torch.ones(4), 1e-4, 1e-4)]) == ""
    # Every output must be fixable for a fixed output to pass: one moving output decides.
    moving = [((torch.ones(3), torch.full((2,), float(v))), 1e-4, 1e-4) for v in (1, 2)]
    assert stress.degenerate_across(moving) == ""


def test_judgeable_skips_failed_and_non_finite_references_and_scales_the_rest():
    x = torch.rand(64) + 0.5
    variants, _ = stress.stress_variants([x], gen())

    def reference(inputs):  # log: negated and mixed-sign inputs leave its domain
        if inputs[0].abs().max() > 100:
            return None, "RuntimeError: too large for this reference"
        return torch.log(inputs[0]), ""

    skipped: list = []
    got = list(stress.judgeable(variants, reference, stress.output_peak(torch.log(x)), 1e-4, skipped))
    assert [name for name, *_ in got] == ["scaled x1e-03"]
    [(_, inputs, out, atol)] = got
    assert torch.equal(out, torch.log(inputs[0])) and atol != 1e-4  # scaled with the output's peak
    reasons = {s["name"]: s["reason"] for s in skipped}
    assert reasons["scaled x1e+03"] == "the reference failed on them: RuntimeError: too large for this reference"
    assert "NaN/Inf" in reasons["negated"] and "NaN/Inf" in reasons["mixed signs"]


def test_the_wide_range_variant_reaches_both_signs_over_four_decades():
    """A kernel wrong only outside the classic variants' regions (gelu(-2): negated rand inputs stay in
    (-1, 0], scaled ones stay positive) meets the wide range."""
    x = torch.rand(256, 256)
    wide = variants_of(x)[0]["wide range"][0]
    mags = wide.abs()[x > 0.1]  # scaled from clearly non-zero values
    assert float((wide < -1.5).float().mean()) > 0.1  # plenty of values below -1.5 ...
    assert float(mags.min()) < 1e-2 * 0.2 and float(mags.max()) > 50  # ... and both ends of the spread
    assert float((wide < 0).float().mean()) == pytest.approx(0.5, abs=0.05)


def test_probability_row_draws_are_sharper_flatter_and_one_hot():
    probs = torch.softmax(torch.randn(32, 50), dim=-1)
    got = variants_of(probs)[0]
    sharp, flat, hot = got["sharper rows"][0], got["flatter rows"][0], got["one-hot rows"][0]
    assert float(sharp.max(-1).values.mean()) > float(probs.max(-1).values.mean())
    assert float((flat - 1 / 50).abs().max()) < 1e-3
    assert torch.equal(hot.sum(-1), torch.ones(32)) and int((hot == 1).sum()) == 32


def test_variants_of_another_draw_share_nothing_with_the_inputs_a_candidate_saw():
    """The judge builds the variants from a fresh draw (a secret seed), so no variant is a transform of
    an input the candidate was called on: a fingerprint of the last input never matches."""
    torch.manual_seed(1)
    seen = torch.rand(64, 64)
    torch.manual_seed(2)
    fresh = torch.rand(64, 64)
    for inputs in variants_of(fresh)[0].values():
        ratio = (inputs[0].abs() / seen.abs()).reshape(-1)[:64]
        assert float(ratio.max() / ratio.min()) > 10  # not a scaled (or sign-flipped) copy of what it saw
