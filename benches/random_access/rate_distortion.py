#!/usr/bin/env python3
"""Rate–distortion of run.sh --sweep: every encoding family's video bytes per camera-second
against its PSNR to the landing frames, and each family's bytes at the PSNR of LeRobot's
datasets (the curve between two measured points read off linearly in PSNR and
log-bytes, as Bjøntegaard rates are). A table on stdout and a chart.

  rate_distortion.py --quality quality.jsonl --png docs/real-footage-rd.png
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

SWEPT = re.compile(r"^(?P<family>ra-.+)-crf(?P<crf>\d+)$")
LEROBOT = re.compile(r"^LeRobot (?P<codec>\S+) g(?P<gop>\d+) crf(?P<crf>\d+)$")


def families(rows: list[dict]) -> dict[str, list[tuple[float, float, str]]]:
    """Family → (PSNR dB, bytes per camera-second, point label), by PSNR."""
    out: dict[str, list[tuple[float, float, str]]] = {}
    for r in rows:
        name = r["dataset"]
        if m := SWEPT.match(name):
            family, label = f"Reel {m['family']}", f"crf{m['crf']}"
        elif m := LEROBOT.match(name):
            family, label = f"LeRobot {m['codec']} g{m['gop']}", f"crf{m['crf']}"
        else:
            continue
        out.setdefault(family, []).append((r["psnr_db"], r["bytes_per_camera_second"], label))
    for points in out.values():
        points.sort()
    return out


def bytes_at(points: list[tuple[float, float, str]], psnr: float) -> float | None:
    """Bytes per camera-second at `psnr`, between the two measured points around it (None
    outside the measured range: no extrapolation)."""
    for (p0, b0, _), (p1, b1, _) in zip(points, points[1:]):
        if p0 <= psnr <= p1 and p1 > p0:
            f = (psnr - p0) / (p1 - p0)
            return math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0)))
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quality", type=Path, required=True)
    parser.add_argument("--png", type=Path, required=True)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.quality.read_text().splitlines() if line.strip()]
    curves = families(rows)
    named = {r["dataset"]: r for r in rows}

    print("| family | point | KB per camera-s | PSNR dB |")
    print("|---|---|---|---|")
    for family, points in sorted(curves.items()):
        for psnr, b, label in points:
            print(f"| {family} | {label} | {b / 1e3:.1f} | {psnr:.2f} |")
    for name in ("canonical", "random-access", "lossless"):
        if name in named:
            r = named[name]
            print(f"| Reel {name} | — | {r['bytes_per_camera_second'] / 1e3:.1f} | {r['psnr_db']:.2f} |")

    # Each family's bytes at the PSNR of each of LeRobot's GOP-2 datasets at its CRF 30
    # default, and of Reel's random-access encoding, as a multiple of that dataset's bytes.
    references = [
        (n, r) for n, r in named.items() if (m := LEROBOT.match(n)) and m["gop"] == "2" and m["crf"] == "30"
    ]
    if "random-access" in named:
        references.append(("Reel random-access", named["random-access"]))
    # Families of one point (a single dataset) have no curve to read off.
    columns = [f for f in sorted(curves) if len(curves[f]) > 1]
    print()
    print("| at the PSNR of | dB | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for name, ref in references:
        cells = []
        for family in columns:
            b = bytes_at(curves[family], ref["psnr_db"])
            cells.append("—" if b is None else f"{b / 1e3:.1f} KB ({b / ref['bytes_per_camera_second']:.2f}×)")
        print(f"| {name} | {ref['psnr_db']:.2f} | " + " | ".join(cells) + " |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for family, points in sorted(curves.items()):
        style = "--" if family.startswith("LeRobot") else "-"
        ax.plot([b / 1e3 for _, b, _ in points], [p for p, _, _ in points], style, marker="o", label=family)
    for name in ("canonical", "random-access"):
        if name in named:
            r = named[name]
            ax.plot(r["bytes_per_camera_second"] / 1e3, r["psnr_db"], "k*", markersize=12)
            ax.annotate(f"Reel {name}", (r["bytes_per_camera_second"] / 1e3, r["psnr_db"]),
                        textcoords="offset points", xytext=(6, -12))
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks([20, 30, 50, 70, 100, 150, 200])
    ax.set_xlabel("video KB per camera-second (log)")
    ax.set_ylabel("PSNR against the landing frames, dB")
    ax.set_title("Rate–distortion on real camera footage (320×240, 30 Hz)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
