#!/usr/bin/env bash
# Reel's main job, end to end on local defaults: a local folder plays the
# object store. Each stage is one of Reel's CLIs, chained as a user would.
#
#   scripts/main-job.sh [--episodes N] [--seconds S] [--cameras C] [--seed K] [--work DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

episodes=6
seconds=10
cameras=3
seed=0
REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
work=$REEL_CACHE/main-job
while [ $# -gt 0 ]; do
  case "$1" in
    --episodes) episodes=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --cameras) cameras=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "main-job: unknown argument $1" >&2; exit 2 ;;
  esac
done

scripts/setup.sh
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
echo "main-job: building the CLIs (release)" >&2
cargo build --release --quiet -p reel-synth-cli
bin=$CARGO_TARGET_DIR/release

# Start from nothing: the job owns $work.
rm -rf "$work"
store=$work/store
mkdir -p "$store/landing"

echo "== synth: $episodes landing episodes of ${seconds}s, $cameras cameras" >&2
"$bin/reel-synth" --out "$store/landing" --episodes "$episodes" --seconds "$seconds" \
  --cameras "$cameras" --seed "$seed" --fault-rate 1.5 > "$work/synth.jsonl"

echo "main-job: done; landing episodes in $store/landing, one JSON line each in $work/synth.jsonl" >&2
