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
cargo build --release --quiet -p reel-synth-cli -p reel-plan-cli -p reel-ingest-cli -p reel-inspect-cli
bin=$CARGO_TARGET_DIR/release

# Start from nothing: the job owns $work.
rm -rf "$work"
store=$work/store
mkdir -p "$store/landing"

echo "== synth: $episodes landing episodes of ${seconds}s, $cameras cameras" >&2
"$bin/reel-synth" --out "$store/landing" --episodes "$episodes" --seconds "$seconds" \
  --cameras "$cameras" --seed "$seed" --fault-rate 1.5 > "$work/synth.jsonl"

echo "== plan: bin-pack the landing episodes into 2 ingest batches" >&2
"$bin/reel-plan" "$store/landing" -o "$work/plan.json" --batches 2 > "$work/plan.jsonl"

# On a cluster each batch is one task of a Kubernetes Indexed Job or a Slurm
# array (docs/); here they run one after the other.
for batch in 0 1; do
  echo "== ingest: batch $batch (resample, quality checks, H.264 canonical MCAP, warehouse rows)" >&2
  "$bin/reel-ingest" --plan "$work/plan.json" --batch "$batch" --store "$store" > "$work/ingest-$batch.jsonl"
done

echo "== layout of one canonical episode" >&2
first=$(ls "$store"/canonical/*.mcap | head -1)
"$bin/reel-inspect" "$first" >&2

# Summary from the machine output of each stage.
"$REEL_CACHE/venv/bin/python" - "$work" "$store" <<'PY' >&2
import glob, json, os, sys
work, store = sys.argv[1], sys.argv[2]
def lines(pattern):
    for path in sorted(glob.glob(os.path.join(work, pattern))):
        for line in open(path):
            if line.strip():
                yield json.loads(line)
synth = list(lines("synth.jsonl"))
steps = [l for l in lines("ingest-*.jsonl") if "step" in l]
canonical = [l for l in steps if l["step"] == "canonical"]
flagged = [l for l in canonical if l.get("qc_flags")]
quarantined = [q for l in lines("ingest-*.jsonl") if "batch_report" in l for q in l["batch_report"]["quarantined"]]
landing = sum(l["bytes"] for l in synth)
canon = sum(os.path.getsize(p) for p in glob.glob(os.path.join(store, "canonical", "*.mcap")))
parts = glob.glob(os.path.join(store, "episodes", "**", "*.parquet"), recursive=True)
rows = [
    ("landing episodes", len(synth)),
    ("episode-seconds", f"{sum(l['duration_s'] for l in synth):.0f}"),
    ("landing MB (per-frame JPEG)", f"{landing / 1e6:.1f}"),
    ("canonical episodes", len(canonical)),
    ("canonical MB (H.264, topic groups)", f"{canon / 1e6:.1f}"),
    ("canonical / landing bytes", f"{canon / landing:.2f}" if landing else "-"),
    ("episodes with QC flags", len(flagged)),
    ("quarantined", len(quarantined)),
    ("warehouse files", len(parts)),
]
print("\nmain job summary")
for name, value in rows:
    print(f"  {name:<40} {value:>10}")
for l in flagged:
    print(f"  QC {l['episode_id']}: {l['qc_flags']}")
PY
echo "main-job: done; store in $store, machine output in $work/*.jsonl" >&2
