#!/usr/bin/env python3
"""reel.Loader in Python beside reel-load on the same manifest, spec and settings, taking
turns within each round so both see the same machine load.

    python benches/python/loader_vs_cli.py --manifest M --spec S --store DIR \\
        [--bin target/release] [--batches 150] [--rounds 3] [--workers 1,2] \\
        [--shuffle global,locality] [--dataset]

Samples per CPU-second count every thread of the process (user + system), from building
the loader (Python's imports excluded: a trainer has them already) to the last batch. With
``--dataset`` a third row times ``reel.torch.ReelDataset`` under
``DataLoader(batch_size=None, num_workers=0)``. One JSON line per run on stdout, then a
Markdown table of medians.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def python_run(args, shuffle: str, workers: int, seed: int, dataset: bool) -> dict:
    """Runs in a fresh interpreter so CPU time and peak RSS are this run's alone."""
    # A trainer has reel and torch imported already: the clock starts at building the
    # loader, as reel-load's does at its start (which includes opening the loader).
    code = f"""
import json, resource, time, sys
import reel
if {dataset}:
    import torch
    from torch.utils.data import DataLoader
    from reel.torch import ReelDataset
t0 = time.perf_counter()
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF); return u.ru_utime + u.ru_stime
c0 = cpu()
kw = dict(batch_size={args.batch_size}, workers={workers}, shuffle={shuffle!r}, seed={seed})
if {dataset}:
    source = DataLoader(ReelDataset({args.manifest!r}, {args.spec!r}, {args.store!r}, rank=0, world=1, **kw),
                        batch_size=None, num_workers=0)
else:
    source = reel.Loader({args.manifest!r}, {args.spec!r}, {args.store!r}, **kw)
batches = samples = 0
first = None
started = time.perf_counter()
while batches < {args.batches}:
    for batch in source:
        if first is None:
            first = time.perf_counter() - t0
        samples += len(batch["anchor_ns"])
        batches += 1
        if batches >= {args.batches}:
            break
seconds = time.perf_counter() - started
cpu_s = cpu() - c0
print(json.dumps(dict(batches=batches, samples=samples, seconds=seconds, cpu_seconds=cpu_s,
    samples_per_s=samples / seconds, samples_per_cpu_s=samples / cpu_s,
    time_to_first_batch_s=first, peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli_run(args, shuffle: str, workers: int, seed: int) -> dict:
    out = subprocess.run(
        [f"{args.bin}/reel-load", "--manifest", args.manifest, "--spec", args.spec, "--store", args.store,
         "--batch-size", str(args.batch_size), "--jobs", str(workers), "--batches", str(args.batches),
         "--shuffle", shuffle, "--seed", str(seed), "--json", "--quiet"],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", required=True)
    p.add_argument("--spec", required=True)
    p.add_argument("--store", required=True)
    p.add_argument("--bin", default="target/release")
    p.add_argument("--batches", type=int, default=150)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--shuffle", default="global,locality")
    p.add_argument("--dataset", action="store_true")
    args = p.parse_args()
    rows: dict[tuple, list[dict]] = {}
    for round_ in range(args.rounds):
        for shuffle in args.shuffle.split(","):
            for workers in (int(w) for w in args.workers.split(",")):
                runs = [("reel-load", lambda: cli_run(args, shuffle, workers, round_)),
                        ("reel.Loader", lambda: python_run(args, shuffle, workers, round_, False))]
                if args.dataset:
                    runs.append(("ReelDataset", lambda: python_run(args, shuffle, workers, round_, True)))
                for name, fn in runs:
                    print(f"round {round_}: {name} {shuffle} {workers} workers", file=sys.stderr)
                    r = fn()
                    r.update(loader=name, shuffle_name=shuffle, workers=workers, round=round_)
                    print(json.dumps(r))
                    rows.setdefault((shuffle, workers, name), []).append(r)
    print("\n| order | workers | loader | samples per CPU-second (median) | vs reel-load | samples/s | first batch s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for (shuffle, workers, name), runs in rows.items():
        med = statistics.median(r["samples_per_cpu_s"] for r in runs)
        base = statistics.median(r["samples_per_cpu_s"] for r in rows[(shuffle, workers, "reel-load")])
        print(f"| {shuffle} | {workers} | {name} | {med:.1f} | {med / base:.3f} | "
              f"{statistics.median(r['samples_per_s'] for r in runs):.1f} | "
              f"{statistics.median(r['time_to_first_batch_s'] for r in runs):.3f} | "
              f"{max(r['peak_rss_mib'] for r in runs):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
