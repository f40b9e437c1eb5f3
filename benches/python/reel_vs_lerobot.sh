#!/usr/bin/env bash
# reel.torch.ReelDataset beside LeRobot 0.6.1's LeRobotDataset on the main job's episodes,
# two rounds taking turns (docs/BENCHMARKS.md, "ReelDataset beside LeRobot 0.6.1").
# Needs scripts/main-job.sh's output, Reel's release CLIs, the reel package in
# ~/.cache/reel/venv and LeRobot's venv of benches/peers/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
W=~/.cache/reel/main-job; O=~/.cache/reel/reel-vs-lerobot; mkdir -p $O
~/.cache/reel/target/release/reel-curate --warehouse $W/store --sql "SELECT * FROM episodes" -o $O/all.arrow --anchor-hz 10 --before 1.0 --after 0.98 > /dev/null
LR=~/.cache/reel/venv-lerobot/bin/python
for round in 1 2; do
  $LR benches/peers/lerobot_load.py --episodes $W/store/canonical --work ~/.cache/reel/lerobot-peer --batch-size 8 --batches 100 --workers 0,2 --uint8 2>/dev/null | grep '^|'
  $LR benches/peers/lerobot_load.py --episodes $W/store/canonical --work ~/.cache/reel/lerobot-peer --batch-size 8 --batches 100 --workers 0,2 --uint8 --vcodec h264 2>/dev/null | grep '^|'
  for sh in locality global; do
    ~/.cache/reel/venv/bin/python benches/peers/lerobot_load.py --reel --manifest $O/all.arrow --spec testdata/spec.toml --store $W/store --batch-size 8 --batches 100 --reel-workers 1,2 --shuffle $sh --seed $round 2>/dev/null | grep '^|'
  done
done
