#!/usr/bin/env bash
# reel.torch.ReelDataset beside LeRobot 0.6.1's LeRobotDataset on the main job's episodes,
# two rounds taking turns (docs/BENCHMARKS.md, "ReelDataset beside LeRobot 0.6.1"). Reel
# reads the episodes twice over: the main job's store (the canonical encoding) and the
# same landing episodes ingested with `--encoding random-access`.
# Needs scripts/main-job.sh's output, Reel's release CLIs, the reel package in
# ~/.cache/reel/venv and LeRobot's venv of benches/peers/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
W=~/.cache/reel/main-job; O=~/.cache/reel/reel-vs-lerobot; mkdir -p $O
BIN=~/.cache/reel/target/release
curate() { $BIN/reel-curate --warehouse "$1" --sql "SELECT * FROM episodes" -o "$2" --anchor-hz 10 --before 1.0 --after 0.98 > /dev/null; }
curate $W/store $O/all.arrow
if [ ! -f $O/random-access.arrow ]; then
  rm -rf $O/random-access
  for landing in $W/store/landing/*.mcap; do
    $BIN/reel-ingest --episode "$landing" --store $O/random-access --encoding random-access -j 2 --quiet > /dev/null
  done
  curate $O/random-access $O/random-access.arrow
fi
LR=~/.cache/reel/venv-lerobot/bin/python
for round in 1 2; do
  $LR benches/peers/lerobot_load.py --episodes $W/store/canonical --work ~/.cache/reel/lerobot-peer --batch-size 8 --batches 100 --workers 0,2 --uint8 2>/dev/null | grep '^|'
  $LR benches/peers/lerobot_load.py --episodes $W/store/canonical --work ~/.cache/reel/lerobot-peer --batch-size 8 --batches 100 --workers 0,2 --uint8 --vcodec h264 2>/dev/null | grep '^|'
  for store in "canonical|$O/all.arrow|$W/store" "random-access|$O/random-access.arrow|$O/random-access"; do
    IFS='|' read -r label manifest dir <<< "$store"
    for sh in locality global; do
      ~/.cache/reel/venv/bin/python benches/peers/lerobot_load.py --reel --manifest "$manifest" --spec testdata/spec.toml \
        --store "$dir" --encoding-label "$label" --batch-size 8 --batches 100 --reel-workers 1,2 --shuffle $sh --seed $round 2>/dev/null | grep '^|'
    done
  done
done
