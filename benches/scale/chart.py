#!/usr/bin/env python3
"""Scale chart and table: each stage's time and memory against the corpus size, log-log,
from the JSON lines the scale harness prints (one object per measurement, with "stage",
"rows" and its figures), and each figure's cost per row and extrapolation to the seed's
43 million episodes from the growth between the two largest sizes measured.

  chart.py results.jsonl... --png docs/scale.png
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

CORPUS = 43_000_000

# (figure, what it is): the times a rank waits for, then its own memory.
TIMES = [
    ("start_s", "loader start"),
    ("first_batch_s", "first batch"),
    ("rollover_s", "next epoch's first batch"),
    ("resume_s", "mid-epoch resume"),
    ("elastic_resume_s", "resume of 8 ranks on 6"),
    ("seconds", "seconds"),
]


def series(rows: list[dict]) -> dict[tuple[str, str], list[tuple[int, dict]]]:
    """Measurements by (stage, order), smallest size first."""
    out: dict[tuple[str, str], list[tuple[int, dict]]] = defaultdict(list)
    for row in rows:
        out[(row["stage"], row.get("order") or "")].append((row["rows"], row))
    for points in out.values():
        points.sort(key=lambda p: p[0])
    return out


def extrapolate(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(growth exponent between the two largest sizes, value at CORPUS rows)."""
    (n0, y0), (n1, y1) = points[-2], points[-1]
    if y0 <= 0 or y1 <= 0 or n1 == n0:
        return float("nan"), y1
    k = math.log(y1 / y0) / math.log(n1 / n0)
    return k, y1 * (CORPUS / n1) ** k


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--png", type=Path)
    args = parser.parse_args()
    rows = [json.loads(line) for path in args.results for line in path.read_text().splitlines() if line.strip()]
    by_series = series(rows)

    print("| stage | order | figure | at the largest size | growth exponent | per row | at 4.3e7 rows |")
    print("|---|---|---|---|---|---|---|")
    for (stage, order), points in sorted(by_series.items()):
        for key, label in TIMES + [("anon_rss_mib", "anonymous RSS MiB"), ("peak_rss_mib", "peak RSS MiB")]:
            values = [(n, p[key]) for n, p in points if key in p]
            if len(values) < 2:
                continue
            k, at_corpus = extrapolate(values)
            n, y = values[-1]
            print(f"| {stage} | {order} | {label} | {y:.3g} at {n:.0e} | {k:.2f} | {y / n:.2e} | {at_corpus:.3g} |")

    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        # More lines than the default ten colours.
        plt.rcParams["axes.prop_cycle"] = plt.cycler(color=plt.get_cmap("tab20").colors)
        fig, (times, memory) = plt.subplots(1, 2, figsize=(14, 5.5))
        drawn = set()
        for (stage, order), points in sorted(by_series.items()):
            sizes = [n for n, _ in points]
            for key, label in TIMES:
                if all(key in p for _, p in points):
                    times.plot(sizes, [p[key] for _, p in points], marker="o", label=f"{stage} {order}: {label}")
            if all("anon_rss_mib" in p for _, p in points):
                memory.plot(sizes, [p["anon_rss_mib"] for _, p in points], marker="o", label=f"{stage} {order}: anonymous RSS")
            elif all("peak_rss_mib" in p for _, p in points):
                peaks = [p["peak_rss_mib"] for _, p in points]
                # Figures of one process share its peak: draw it once per stage.
                if (stage, tuple(peaks)) not in drawn:
                    drawn.add((stage, tuple(peaks)))
                    memory.plot(sizes, peaks, marker="s", linestyle="--", label=f"{stage}: peak RSS")
        for ax, ylabel in [(times, "seconds"), (memory, "MiB per rank")]:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("corpus size (manifest rows; blocks; landing objects)")
            ax.set_ylabel(ylabel)
            ax.axvline(CORPUS, color="grey", linestyle=":", linewidth=1)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        times.axhline(1.0, color="red", linestyle="--", linewidth=1)
        memory.axhline(64.0, color="red", linestyle="--", linewidth=1)
        times.set_title("time (loader bound: 1 s; dotted: 4.3e7 episodes)", fontsize=10)
        memory.set_title("memory (loader: per rank beyond the mapped manifest, bound 64 MiB)", fontsize=10)
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
