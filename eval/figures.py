"""The report's figures as PNG bytes (matplotlib, Agg backend: no display needed).

- Figure 3: per-category distribution of the speedups of solved problems, one box per mode.
- Figure 4: per-iteration best-so-far curves: fraction solved, and geomean speedup over all
  problems (unsolved counted as 1.0x), one line per mode.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # before pyplot: render to files on machines without a display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

COLORS = {"pragma": "#4c3fbf", "no-profile": "#e07b39", "single-agent": "#3a9d5d", "torch.compile": "#888888"}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def category_distribution(
    speedups: dict[str, dict[str, list[float]]], categories: list[str], unsolved: dict[str, dict[str, int]]
) -> bytes:
    """``speedups[mode][category]``: solved problems' speedups; ``unsolved`` the counts left out."""
    modes = list(speedups)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(categories) + 2), 4.2))
    width = 0.8 / max(1, len(modes))
    rng = np.random.default_rng(0)  # fixed jitter: the same data draws the same picture
    for m, mode in enumerate(modes):
        color = COLORS.get(mode, f"C{m}")
        for c, cat in enumerate(categories):
            values = speedups[mode].get(cat, [])
            x = c + (m - (len(modes) - 1) / 2) * width
            if values:
                ax.boxplot(
                    [values],
                    positions=[x],
                    widths=width * 0.8,
                    showfliers=False,
                    patch_artist=True,
                    boxprops={"facecolor": color, "alpha": 0.35},
                    medianprops={"color": color},
                )
                ax.scatter(x + rng.uniform(-width / 4, width / 4, len(values)), values, s=12, color=color, zorder=3)
            if unsolved.get(mode, {}).get(cat):
                ax.annotate(
                    f"{unsolved[mode][cat]}✗",
                    (x, 0.0),
                    xycoords=("data", "axes fraction"),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color=color,
                )
        ax.plot([], [], color=color, marker="o", linestyle="", label=mode)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log", base=2)
    ax.set_xticks(range(len(categories)), categories, rotation=15)
    ax.set_xlim(-0.6, len(categories) - 0.4)
    ax.set_ylabel("speedup over PyTorch (solved problems, log scale)")
    ax.set_title("Figure 3: speedup distribution per category (✗: unsolved problems)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def iteration_curves(curves: dict[str, dict[str, list[float]]], baseline_geomean: float | None = None) -> bytes:
    """``curves[mode]`` holds ``solved_fraction`` and ``geomean_speedup_all`` per iteration."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for m, (mode, c) in enumerate(curves.items()):
        color = COLORS.get(mode, f"C{m}")
        x = np.arange(1, len(c["solved_fraction"]) + 1)
        left.plot(x, np.asarray(c["solved_fraction"]) * 100, marker="o", markersize=3, color=color, label=mode)
        right.plot(x, c["geomean_speedup_all"], marker="o", markersize=3, color=color, label=mode)
    if baseline_geomean:
        right.axhline(baseline_geomean, color=COLORS["torch.compile"], linestyle=":", label="torch.compile")
    right.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    left.set(
        xlabel="iteration", ylabel="problems solved so far (%)", ylim=(0, 105), title="Figure 4a: success by iteration"
    )
    right.set(
        xlabel="iteration",
        ylabel="geomean best-so-far speedup (unsolved = 1.0x)",
        title="Figure 4b: best-so-far speedup",
    )
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
    return _png(fig)


def problem_speedups(speedups: dict[str, dict[str, list[float | None]]], problems: list[str]) -> bytes:
    """Speedup per problem per mode (the ablation's figure). ``speedups[mode][problem]`` holds one
    value per run (None: unsolved in that run, drawn at 1.0x with a cross): a bar at the geometric
    mean over runs (unsolved = 1.0x, as in the tables), a dot per run, so a rerun's spread shows."""
    from matplotlib.patches import Patch

    modes = list(speedups)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(problems) * max(1, len(modes)) / 2 + 2), 4.4))
    width = 0.8 / max(1, len(modes))
    handles, drawn = [], [1.0]
    for m, mode in enumerate(modes):
        color = COLORS.get(mode, f"C{m}")
        for p, problem in enumerate(problems):
            runs = speedups[mode].get(problem, [])
            if not runs:
                continue
            x = p + (m - (len(modes) - 1) / 2) * width
            values = [v if v else 1.0 for v in runs]
            drawn += values
            mean = float(np.exp(np.mean(np.log(values))))
            # bars grow from 1.0x (PyTorch), up when faster, down when slower
            ax.bar(x, mean - 1.0, bottom=1.0, width=width * 0.9, color=color, alpha=0.45)
            for v in runs:
                if v:
                    ax.scatter(x, v, s=14, color=color, zorder=3)
                else:
                    ax.scatter(x, 1.0, s=22, color=color, marker="x", zorder=3)
        handles.append(Patch(color=color, alpha=0.6, label=mode))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log", base=2)
    ax.set_ylim(min(drawn) / 1.25, max(drawn) * 1.25)  # 1.0x always in view: the PyTorch line
    ax.set_xticks(range(len(problems)), problems, rotation=30, ha="right")
    ax.set_xlim(-0.6, len(problems) - 0.4)
    ax.set_ylabel("speedup over PyTorch (log scale)")
    ax.set_title("Speedup per problem and mode\n(bar: geomean over runs; dot: one run; x: unsolved, 1.0x)")
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)
