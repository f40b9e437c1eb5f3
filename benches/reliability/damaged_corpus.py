#!/usr/bin/env python3
"""A bounded damaged-input corpus through Reel's readers, with the outcome of every run.

Generates one small episode (landing MCAP and its canonical file), then damaged copies of
each — truncations, flipped bytes, zeroed ranges, a repeated chunk, a footer pointing at
garbage — and runs every reader on every copy with a timeout:

  canonical: reel inspect (layout), reel inspect cat, reel inspect doctor, reel load
  landing:   reel inspect cat, reel pack

Each run is classified: panic, hang (timeout), refused naming the file, refused without
naming it, served the same result as the pristine file, served with the damage reported
(a skipped episode, a warning), or a silent wrong result (success, a different result and
nothing reported). Only the last three are successes; a silent wrong result is a bug.

    REEL_BIN_DIR=target/release python3 benches/reliability/damaged_corpus.py [--seed N] [--json]
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

TIMEOUT_S = 60
SPEC = 'anchor_hz = 10.0\n[[camera]]\nname = "high"\ntopic = "/camera/high/image_raw/compressed"\noffsets_s = [0.0]\n'


def reel(args, timeout=TIMEOUT_S):
    binary = Path(os.environ.get("REEL_BIN_DIR", "target/release")) / "reel"
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, timeout=timeout)


def must(args):
    out = reel(args, timeout=600)
    if out.returncode != 0:
        sys.exit(f"reel {' '.join(map(str, args))}: {out.stderr.decode(errors='replace')}")
    return out


def records(data):
    """(offset, opcode, length) of the records after the leading magic."""
    at, out = 8, []
    while at + 9 <= len(data):
        op = data[at]
        (length,) = struct.unpack_from("<Q", data, at + 1)
        out.append((at, op, 9 + length))
        if op == 0x0F or length > len(data):  # footer, or garbage
            break
        at += 9 + length
    return out


def damaged_copies(data, rng):
    """(kind, bytes) of each damaged copy: a fixed mix, offsets drawn from `rng`."""
    n = len(data)
    for i in range(1, 9):
        yield "truncated", data[: n * i // 9]
    for _ in range(40):
        at = rng.randrange(n)
        flipped = bytearray(data)
        flipped[at] ^= 1 << rng.randrange(8)
        yield "flipped byte", bytes(flipped)
    for _ in range(12):
        at = rng.randrange(n)
        zeroed = bytearray(data)
        zeroed[at : at + 512] = bytes(len(zeroed[at : at + 512]))
        yield "zeroed 512 B", bytes(zeroed)
    chunk = next(((at, size) for at, op, size in records(data) if op == 0x06), None)
    if chunk:
        at, size = chunk
        yield "repeated chunk", data[: at + size] + data[at : at + size] + data[at + size :]
    garbage = bytearray(data)
    struct.pack_into("<Q", garbage, n - 8 - 29 + 9, rng.randrange(n))
    yield "footer to garbage", bytes(garbage)


def digest(out):
    return hashlib.sha256(out.stdout).hexdigest()


def classify(out, name, pristine, reported):
    stderr = out.stderr.decode(errors="replace")
    if "panicked" in stderr or out.returncode == 101:
        return "panic"
    if out.returncode != 0:
        said = stderr + out.stdout.decode(errors="replace")  # doctor reports on stdout
        return "refused, naming the file" if name in said else "refused, file not named"
    if digest(out) == pristine:
        return "same result as the pristine file"
    return "served, damage reported" if reported(out) else "SILENT WRONG RESULT"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="reel-damaged-"))
    try:
        must(["synth", "-o", work / "landing", "--episodes", "1", "--seconds", "3",
              "--cameras", "1", "--width", "96", "--height", "64", "--seed", args.seed, "-q"])
        must(["plan", work / "landing", "-o", work / "plan.json", "--batches", "1"])
        must(["ingest", "--plan", work / "plan.json", "--batch", "0", "--store", work / "store", "-q"])
        must(["curate", "--warehouse", work / "store", "--sql", "SELECT * FROM episodes",
              "-o", work / "manifest.arrow", "--anchor-hz", "10", "--before", "0", "--after", "0"])
        (work / "spec.toml").write_text(SPEC)
        landing = next((work / "landing").glob("*.mcap"))
        canonical = next((work / "store" / "canonical").glob("*.mcap"))
        load_args = ["load", "--manifest", work / "manifest.arrow", "--spec", work / "spec.toml",
                     "--store", work / "store", "--batches", "20", "--batch-size", "2",
                     "--workers", "1", "--max-skipped", "1", "--dump", "-q"]

        def load_reported(out):
            report = reel([a for a in load_args if a != "--dump"] + ["--json"])
            try:
                return json.loads(report.stdout.splitlines()[-1])["skipped"] > 0
            except (ValueError, IndexError, KeyError):
                return False

        def warned(out):
            return b"warning" in out.stderr or b"scanned the whole file" in out.stderr

        readers = {
            "canonical": [
                ("reel inspect", lambda f: ["inspect", "--json", f], warned),
                ("reel inspect cat", lambda f: ["inspect", "cat", f], warned),
                ("reel inspect doctor", lambda f: ["inspect", "doctor", "--json", f], warned),
                ("reel load", lambda f: load_args, load_reported),
            ],
            "landing": [
                ("reel inspect cat", lambda f: ["inspect", "cat", f], warned),
                ("reel pack", lambda f: ["pack", f, "-o", work / "packed.mcap"], lambda out: True),
            ],
        }
        counts = defaultdict(Counter)
        silent, unnamed = [], []
        for kind, original in (("canonical", canonical), ("landing", landing)):
            data = original.read_bytes()
            pristine = {}
            for reader, command, _ in readers[kind]:
                out = reel(command(original))
                # pack's output holds a fresh timestamp: only its success is compared.
                pristine[reader] = digest(out) if reader != "reel pack" else None
            for damage, bytes_ in damaged_copies(data, rng):
                original.write_bytes(bytes_)
                for reader, command, reported in readers[kind]:
                    try:
                        out = reel(command(original))
                        if reader == "reel pack" and out.returncode == 0:
                            outcome = "served, damage reported"  # QC of the packed file
                        else:
                            outcome = classify(out, original.name, pristine[reader], reported)
                    except subprocess.TimeoutExpired:
                        outcome = "hang"
                    counts[f"{kind}: {reader}"][outcome] += 1
                    if outcome == "SILENT WRONG RESULT":
                        silent.append((kind, reader, damage))
                    if outcome == "refused, file not named":
                        unnamed.append((kind, reader, damage, out.stderr.decode(errors="replace")[:300]))
            original.write_bytes(data)
        result = {
            "seed": args.seed,
            "runs": {k: dict(v) for k, v in counts.items()},
            "silent_wrong": silent,
            "unnamed": unnamed,
        }
        if args.json:
            print(json.dumps(result))
        else:
            outcomes = sorted({o for c in counts.values() for o in c})
            print("| reader | tried | " + " | ".join(outcomes) + " |")
            print("|---|---:|" + "---:|" * len(outcomes))
            for reader, c in counts.items():
                print(f"| {reader} | {sum(c.values())} | " + " | ".join(str(c[o]) for o in outcomes) + " |")
            for kind, reader, damage in silent:
                print(f"silent wrong result: {kind} / {reader} / {damage}")
            for kind, reader, damage, stderr in unnamed:
                print(f"refused without naming the file: {kind} / {reader} / {damage}: {stderr}")
        return 1 if silent or any(c["panic"] or c["hang"] for c in counts.values()) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
