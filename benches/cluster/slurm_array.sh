#!/usr/bin/env bash
# Ingest on the one-node Slurm cluster of scripts/slurm.sh beside the same batches run one
# after another by hand: the wall time of docs/ingest/slurm-array.sh as an array of
# BATCHES tasks, CONCURRENT at once, one CPU each, against the same reel-ingest runs in
# sequence, and what the scheduler costs: the wait from submission to the first task,
# the slot time left idle between tasks, and `sbatch --wait`'s own polling. Each mode ingests the
# same landing folder into a store of its own, twice (rounds alternate the modes).
#
#   benches/cluster/slurm_array.sh [EPISODES] [BATCHES] [CONCURRENT] [ROUNDS]
#
# Uses the release CLIs in $CARGO_TARGET_DIR/release (cargo build --release -p
# reel-synth-cli -p reel-plan-cli -p reel-ingest-cli).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
episodes=${1:-8} batches=${2:-4} concurrent=${3:-2} rounds=${4:-2}
bin=${CARGO_TARGET_DIR:-$HOME/.cache/reel/target}/release
export PATH="$bin:$PATH"
scripts/slurm.sh start
eval "$(scripts/slurm.sh env)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
reel-synth -o "$work/landing" --episodes "$episodes" --seconds 10 -q > /dev/null
reel-plan "$work/landing" -o "$work/plan.json" --batches "$batches" > /dev/null
now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }
for round in $(seq "$rounds"); do
  store="$work/seq-$round"
  start=$(now)
  for b in $(seq 0 $((batches - 1))); do
    reel-ingest --plan "$work/plan.json" --batch "$b" --store "$store" --jobs 1 -q > /dev/null
  done
  sequential=$(calc "$(now) - $start")

  store="$work/array-$round"
  mkdir -p "$work/logs-$round"
  start=$(now)
  job=$(sbatch --parsable --wait --array=0-$((batches - 1))%"$concurrent" --cpus-per-task=1 \
    --mem=2G --chdir="$work/logs-$round" --output="$work/logs-$round/%A_%a.log" \
    --export=ALL,REEL_START_JITTER_MS=0 docs/ingest/slurm-array.sh "$work/plan.json" "$store")
  array=$(calc "$(now) - $start")
  # Slurm's own record of each task (whole seconds): submit, start and end.
  first_start=""; last_end=0; busy=0; submit=""
  for b in $(seq 0 $((batches - 1))); do
    record=$(scontrol show job -o "${job}_$b")
    field() { date -d "$(sed "s/.* $1=\([^ ]*\).*/\1/" <<< "$record")" +%s; }
    s=$(field StartTime) e=$(field EndTime)
    submit=${submit:-$(field SubmitTime)}
    busy=$((busy + e - s))
    [ -z "$first_start" ] || [ "$s" -lt "$first_start" ] && first_start=$s
    [ "$e" -gt "$last_end" ] && last_end=$e
  done
  span=$((last_end - first_start))
  printf '{"round": %d, "episodes": %d, "batches": %d, "concurrent": %d, "sequential_s": %.2f, "sbatch_wait_s": %.2f, "first_start_s": %d, "array_span_s": %d, "speedup": %.2f, "task_seconds_sum": %d, "idle_slot_s_per_task": %.2f}\n' \
    "$round" "$episodes" "$batches" "$concurrent" "$sequential" "$array" "$((first_start - submit))" \
    "$span" "$(calc "$sequential / $span")" "$busy" "$(calc "($span * $concurrent - $busy) / $batches")"
done
