#!/usr/bin/env bash
# Reel's loader (reel-load) and LeRobot 0.6.1's DataLoader on the same canonical
# episodes, taking turns within each round so both see the same machine load.
#
#   benches/peers/loader_side_by_side.sh [--work DIR] [--batches N] [--rounds R]
#
# DIR is a main job's --work folder (default ~/.cache/reel/main-job: run
# scripts/main-job.sh first); its canonical episodes are the data. Needs the
# LeRobot environment of benches/peers/README.md and Reel's CLIs built in release
# (scripts/main-job.sh builds them). Writes JSON lines and the all-episodes
# manifest to ~/.cache/reel/loader-side-by-side/ and prints one table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
work=$REEL_CACHE/main-job
batches=150
rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "loader_side_by_side: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${CARGO_TARGET_DIR:-$REEL_CACHE/target}/release
py=$REEL_CACHE/venv-lerobot/bin/python
out=$REEL_CACHE/loader-side-by-side
mkdir -p "$out"
: > "$out/reel.jsonl"
: > "$out/lerobot.jsonl"

# Every canonical episode, under the sampling rule of testdata/spec.toml (LeRobot's
# dataset is built from the same files).
"$bin/reel-curate" --warehouse "$work/store" --sql "SELECT * FROM episodes" \
  -o "$out/all.arrow" --anchor-hz 10 --before 1.0 --after 0.98 > /dev/null

for round in $(seq "$rounds"); do
  for shuffle in global locality; do
    for workers in 1 2; do
      echo "round $round: reel-load $shuffle, $workers workers" >&2
      "$bin/reel-load" --manifest "$out/all.arrow" --spec testdata/spec.toml --store "$work/store" \
        --batch-size 8 --workers "$workers" --batches "$batches" --shuffle "$shuffle" --seed "$round" \
        --json 2>/dev/null | sed "s/^{/{\"round\":$round,\"shuffle_name\":\"$shuffle\",/" >> "$out/reel.jsonl"
    done
  done
  echo "round $round: LeRobot, num_workers 0 and 2" >&2
  "$py" benches/peers/lerobot_load.py --episodes "$work/store/canonical" --work "$out/lerobot" \
    --batch-size 8 --batches "$batches" --workers 0,2 --rounds 1 2>/dev/null \
    | grep '^{' | sed "s/^{/{\"round\":$round,/" >> "$out/lerobot.jsonl"
done

"$REEL_CACHE/venv/bin/python" - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
reel = [json.loads(l) for l in open(os.path.join(out, "reel.jsonl"))]
lerobot = [json.loads(l) for l in open(os.path.join(out, "lerobot.jsonl"))]
best_lerobot = max(r["samples_per_s_per_core"] for r in lerobot)
print("| loader | configuration | round | samples/s | samples per CPU-second | vs best LeRobot per core | first batch s |")
print("|---|---|---|---|---|---|---|")
for r in lerobot:
    print(f"| LeRobot 0.6.1 | num_workers {r['num_workers']} | {r['round']} | {r['samples_per_s']:.1f} | "
          f"{r['samples_per_s_per_core']:.1f} | {r['samples_per_s_per_core'] / best_lerobot:.2f} | {r['time_to_first_batch_s']:.2f} |")
for r in reel:
    print(f"| Reel | {r['shuffle_name']}, {r['workers']} workers | {r['round']} | {r['samples_per_s']:.1f} | "
          f"{r['samples_per_cpu_s']:.1f} | {r['samples_per_cpu_s'] / best_lerobot:.2f} | {r['time_to_first_batch_s']:.2f} |")
PY
