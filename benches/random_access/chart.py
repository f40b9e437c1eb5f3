#!/usr/bin/env python3
"""Tables and chart of the random-access benchmark (run.sh's loading.jsonl and
quality.jsonl): samples per CPU-second against storage bytes per camera-second, every
encoding of Reel and LeRobot on one chart, and the ratios to LeRobot's best configuration.

  chart.py --loading loading.jsonl --quality quality.jsonl [--floor floor.jsonl] --png docs/random-access.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def storage_key(encoding: str, quality: dict) -> dict | None:
    """The quality row of an encoding (LeRobot's rows are named by codec, GOP and CRF)."""
    if encoding in quality:
        return quality[encoding]
    for name, row in quality.items():
        if name.startswith("LeRobot") and encoding.startswith(name.replace("libsvtav1", "av1")):
            return row
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--loading", type=Path, required=True)
    parser.add_argument("--quality", type=Path, required=True)
    parser.add_argument("--png", type=Path, required=True)
    parser.add_argument("--floor", type=Path, help="run.sh's floor.jsonl: the floor table")
    args = parser.parse_args()
    rows = load(args.loading)
    quality = {q["dataset"]: q for q in load(args.quality)}
    lerobot = [r for r in rows if r["peer"].startswith("LeRobot")]
    best = max(lerobot, key=lambda r: r["samples_per_cpu_s"])

    print(f"LeRobot's best: {best['encoding']}, {best['configuration']}: {best['samples_per_cpu_s']:.1f} samples per CPU-second\n")
    print("| loader | encoding | configuration | samples/s | samples per CPU-s | vs LeRobot's best | frames decoded per sample | GOP cache hits % | first batch s | peak RSS MiB | KB per camera-s | PSNR dB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        q = storage_key(r["encoding"], quality)
        decoded = f"{r['frames_decoded_per_sample']:.1f}" + (" (g)" if r.get("frames_decoded_derived") else "")
        hits = f"{r['gop_cache_hits_pct']:.1f}" if "gop_cache_hits_pct" in r else "—"
        storage = f"{q['bytes_per_camera_second'] / 1e3:.1f} | {q['psnr_db']:.2f}" if q else " | "
        print(
            f"| {r['peer']} | {r['encoding']} | {r['configuration']} | {r['samples_per_s']:.1f} "
            f"| {r['samples_per_cpu_s']:.1f} | {r['samples_per_cpu_s'] / best['samples_per_cpu_s']:.2f} "
            f"| {decoded} | {hits} | {r['first_batch_s']:.3f} | {r['peak_rss_mib']:.0f} | {storage} |"
        )
    if args.floor:
        print("\n| encoding | order | Reel CPU ms per sample | Reel frames decoded per sample | bare decode µs per frame | with RGB | floor ms per sample | Reel / floor | Reel / floor with RGB |")
        print("|---|---|---|---|---|---|---|---|---|")
        for f in load(args.floor):
            print(
                f"| {f['encoding']} | {f['configuration']} | {f['reel_cpu_ms_per_sample']:.3f} "
                f"| {f['reel_frames_decoded_per_sample']:.1f} | {f['bare_decode_us_per_frame']:.1f} "
                f"| {f['bare_decode_rgb_us_per_frame']:.1f} | {f['floor_ms_per_sample']:.3f} "
                f"| {f['reel_over_floor']:.2f} | {f['reel_over_floor_rgb']:.2f} |"
            )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for r in rows:
        q = storage_key(r["encoding"], quality)
        if q is None:
            continue
        reel = r["peer"] == "Reel"
        shuffle = r["configuration"].split(",")[0]
        marker = ("o" if shuffle == "global" else "^") if reel else "s"
        colour = "tab:blue" if reel else "tab:orange"
        ax.scatter(q["bytes_per_camera_second"] / 1e3, r["samples_per_cpu_s"], marker=marker, color=colour, s=40)
        label = f"{r['encoding']}" + (f" ({shuffle})" if reel else f" ({r['configuration']})")
        ax.annotate(label, (q["bytes_per_camera_second"] / 1e3, r["samples_per_cpu_s"]), fontsize=6,
                    xytext=(4, 2), textcoords="offset points")
    ax.axhline(best["samples_per_cpu_s"] * 3, color="grey", lw=0.6, ls="--")
    ax.axhline(best["samples_per_cpu_s"] * 8, color="grey", lw=0.6, ls=":")
    ax.text(ax.get_xlim()[0], best["samples_per_cpu_s"] * 3, " 3× LeRobot's best", fontsize=6, va="bottom")
    ax.text(ax.get_xlim()[0], best["samples_per_cpu_s"] * 8, " 8× LeRobot's best", fontsize=6, va="bottom")
    ax.set_yscale("log")
    ax.set_xlabel("video storage, KB per camera-second (320×240, 30 fps)")
    ax.set_ylabel("samples per CPU-second (6 frames, 1 s of state, 50 actions)")
    ax.set_title("Random access: Reel (blue: ● global shuffle, ▲ locality) and LeRobot 0.6.1 (orange)", fontsize=9)
    fig.tight_layout()
    args.png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.png, dpi=130)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
