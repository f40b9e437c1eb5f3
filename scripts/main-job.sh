#!/usr/bin/env bash
# Reel's main job, end to end on local defaults: a local folder plays the
# object store. Each stage is one of Reel's CLIs, chained as a user would.
#
#   scripts/main-job.sh [--episodes N] [--seconds S] [--cameras C] [--seed K] [--work DIR]
#                       [--batches B] [--workers W] [--steps N] [--crash-after STEP]
#                       [--store DIR|s3://BUCKET/PREFIX[?endpoint=…&region=…]]
#
# With --store s3://… and no endpoint (in the URI or AWS_ENDPOINT_URL), the job
# starts an S3-compatible server (s3s-fs) on loopback for its own run.
#
# The job's episodes are robot logs made by reel-synth. Existing datasets take the
# same path from landing on, through reel-import (README, "Using the crates"):
# `reel-import lerobot|hdf5|rlds|zarr … --store STORE`, then compact, curate, load
# as below; `reel-plan --rlds` / `--zarr` split a large RLDS build or Zarr replay
# buffer into the batches of a Slurm array.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

episodes=6
seconds=10
cameras=3
seed=0
batches=30
workers=2
steps=150
crash_after=
store=
REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
work=$REEL_CACHE/main-job
while [ $# -gt 0 ]; do
  case "$1" in
    --episodes) episodes=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --cameras) cameras=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --crash-after) crash_after=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "main-job: unknown argument $1" >&2; exit 2 ;;
  esac
done

# An S3 store without an endpoint: the job serves one itself (s3s-fs on loopback).
own_s3=
[[ $store == s3://* && $store != *endpoint=* && -z ${AWS_ENDPOINT_URL:-} ]] && own_s3=1
# Only what the job runs: no test venvs, no Python package (scripts/test.sh adds those).
scripts/setup.sh --main-job ${own_s3:+--s3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
echo "main-job: building the CLIs (release)" >&2
cargo build --release --quiet -p reel-synth-cli -p reel-plan-cli -p reel-ingest-cli -p reel-inspect-cli \
  -p reel-curate-cli -p reel-warm-cli -p reel-load-cli -p reel-preflight-cli -p reel-supervise-cli \
  -p reel-train-policy -p reel-cdc-cli
bin=$CARGO_TARGET_DIR/release

# Start from nothing: the job owns $work (not a remote store: ingest is
# idempotent there, and reuses what an earlier run already produced).
rm -rf "$work"
mkdir -p "$work"
cleanup=()
trap 'for c in "${cleanup[@]}"; do $c 2>/dev/null || true; done' EXIT
if [ -z "$store" ]; then
  store=$work/store
  mkdir -p "$store"
elif [ -n "$own_s3" ]; then
  # A real S3-compatible server on loopback, serving a folder under $work.
  bucket=${store#s3://}; bucket=${bucket%%[/?]*}
  mkdir -p "$work/s3/$bucket"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export AWS_ACCESS_KEY_ID=reel-main-job AWS_SECRET_ACCESS_KEY=reel-main-job-secret AWS_REGION=us-east-1
  "$REEL_CACHE/tools/bin/s3s-fs" --host 127.0.0.1 --port "$port" --access-key "$AWS_ACCESS_KEY_ID" \
    --secret-key "$AWS_SECRET_ACCESS_KEY" "$work/s3" > "$work/s3s-fs.log" 2>&1 &
  s3_pid=$!
  cleanup+=("kill $s3_pid")
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  [[ $store == *\?* ]] && store="$store&" || store="$store?"
  store="${store}endpoint=http://127.0.0.1:$port&region=us-east-1"
  echo "main-job: S3-compatible server (s3s-fs) on 127.0.0.1:$port serving $work/s3" >&2
fi
# The URI of a path inside the store (an S3 URI keeps its query after the path).
at() {
  local base=${store%%\?*} query=
  [[ $store == *\?* ]] && query="?${store#*\?}"
  echo "${base%/}/$1$query"
}

echo "== synth: $episodes landing episodes of ${seconds}s, $cameras cameras" >&2
"$bin/reel-synth" -o "$(at landing)" --episodes "$episodes" --seconds "$seconds" \
  --cameras "$cameras" --seed "$seed" --fault-rate 1.5 > "$work/synth.jsonl"

echo "== plan: bin-pack the landing episodes into 2 ingest batches" >&2
"$bin/reel-plan" "$(at landing)" -o "$work/plan.json" --batches 2 > "$work/plan.jsonl"

# On a cluster each batch is one task of a Kubernetes Indexed Job or a Slurm
# array (docs/); here they run one after the other.
for batch in 0 1; do
  echo "== ingest: batch $batch (resample, quality checks, H.264 canonical MCAP, warehouse rows)" >&2
  "$bin/reel-ingest" --plan "$work/plan.json" --batch "$batch" --store "$store" > "$work/ingest-$batch.jsonl"
done

echo "== layout of one canonical episode" >&2
mapfile -t canonical < <(grep -h '"step":"canonical"' "$work"/ingest-*.jsonl | grep '"status":"done"' \
  | sed -E 's/.*"episode_id":"([^"]+)".*/\1/' | sort)
"$bin/reel-inspect" "$(at "canonical/${canonical[0]}.mcap")" >&2
for id in "${canonical[@]}"; do
  "$bin/reel-inspect" --json "$(at "canonical/$id.mcap")"
done > "$work/inspect.jsonl"

# The sample every training step reads (testdata/spec.toml) reaches 1.0 s back and
# 0.98 s ahead of its anchor: curate with the same rule, so the loader uses the
# manifest's own sample index.
# The most recent episode is held out from training to measure the policy on.
usable="NOT qc_camera_blackout AND NOT qc_corrupt_frames"
latest="SELECT episode_id FROM episodes WHERE $usable ORDER BY recorded_at DESC LIMIT 1"
echo "== compact: the latest version of each episode, sorted for queries" >&2
"$bin/reel-compact" --warehouse "$store" > "$work/compact.jsonl"

# Operations keep episodes' status and reviews in the metadata database (PostgreSQL);
# reel-cdc carries its changes into the warehouse, where curation joins them.
echo "== metadata: reviews written into PostgreSQL, captured into the warehouse by reel-cdc" >&2
postgres=$(scripts/metadata-db.sh start "$work/metadata-db")
cleanup+=("scripts/metadata-db.sh stop $work/metadata-db")
for id in "${canonical[@]}"; do
  echo "INSERT INTO episodes (episode_id, status, robot, operator) VALUES ('$id', 'ingested', 'sim-arm', 'op-main');"
  echo "INSERT INTO annotations (episode_id, key, value, author) VALUES ('$id', 'review', 'keep', 'main-job');"
done | psql -q -X -v ON_ERROR_STOP=1 "$postgres" > /dev/null
"$bin/reel-cdc" --postgres "$postgres" --warehouse "$store" --once --quiet > "$work/cdc.jsonl"
"$bin/reel-cdc" --postgres "$postgres" --drop --quiet > /dev/null

echo "== curate: SQL over the warehouse into memory-mapped train and held-out manifests" >&2
reviewed="SELECT episode_id FROM annotations WHERE key = 'review' AND value = 'keep'"
"$bin/reel-curate" --warehouse "$store" \
  --sql "SELECT * FROM episodes WHERE $usable AND episode_id IN ($reviewed) AND episode_id NOT IN ($latest) ORDER BY recorded_at" \
  -o "$work/manifest.arrow" --anchor-hz 10 --before 1.0 --after 0.98 > "$work/curate.jsonl"
"$bin/reel-curate" --warehouse "$store" \
  --sql "SELECT * FROM episodes WHERE episode_id IN ($latest)" \
  -o "$work/heldout.arrow" --anchor-hz 10 --before 1.0 --after 0.98 > "$work/curate-heldout.jsonl"

echo "== warm: fetch what the loader reads of both manifests into the node-local block cache" >&2
for m in manifest heldout; do
  "$bin/reel-warm" --manifest "$work/$m.arrow" --spec testdata/spec.toml --store "$store" --cache "$work/cache" \
    --capacity 4G --quiet > "$work/warm-$m.jsonl"
done

echo "== load: $batches batches of the default sample through the cache" >&2
"$bin/reel-load" --manifest "$work/manifest.arrow" --spec testdata/spec.toml --store "$store" \
  --cache "$work/cache" --cache-capacity 4GiB --batch-size 8 --jobs "$workers" --batches "$batches" \
  --json > "$work/load.jsonl"

# Training: one supervisor per node runs the node checks, starts the trainer, and
# restarts it from its last complete checkpoint if it crashes or stops beating.
echo "== train: a policy on reel-loader batches with Muon, under reel-supervise" >&2
rm -rf "$work/checkpoints"
"$bin/reel-supervise" --checkpoints "$work/checkpoints" --heartbeat "$work/heartbeat" --hang-after 120 \
  --backoff-ms 200 --preflight-cache "$work/cache" --preflight-manifest "$work/manifest.arrow" -- \
  "$bin/train-policy" --manifest "$work/manifest.arrow" --heldout "$work/heldout.arrow" \
  --spec testdata/spec.toml --store "$store" --cache "$work/cache" --steps "$steps" \
  --workers "$workers" --summary "$work/train.json" ${crash_after:+--crash-after "$crash_after"} \
  > "$work/supervise.jsonl"

# Summary from the machine output of each stage.
python3 - "$work" <<'PY' >&2
import glob, json, os, sys
work = sys.argv[1]
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
canon = sum(l["bytes"] for l in lines("inspect.jsonl"))
commits = {l["batch_report"]["warehouse_commit"] for l in lines("ingest-*.jsonl") if l.get("batch_report", {}).get("warehouse_commit")}
rows = [
    ("landing episodes", len(synth)),
    ("episode-seconds", f"{sum(l['duration_s'] for l in synth):.0f}"),
    ("landing MB (per-frame JPEG)", f"{landing / 1e6:.1f}"),
    ("canonical episodes", len(canonical)),
    ("canonical MB (H.264, topic groups)", f"{canon / 1e6:.1f}"),
    ("canonical / landing bytes", f"{canon / landing:.2f}" if landing else "-"),
    ("episodes with QC flags", len(flagged)),
    ("quarantined", len(quarantined)),
    ("warehouse commits (ingest batches)", len(commits)),
]
curate = next(lines("curate.jsonl"), {})
compaction = next(lines("compact.jsonl"), {})
heldout = next(lines("curate-heldout.jsonl"), {})
warm = list(lines("warm-*.jsonl"))
load = next(lines("load.jsonl"), {})
train = json.load(open(os.path.join(work, "train.json")))
restarts = [e for e in lines("supervise.jsonl") if e.get("event") == "restart"]
rows += [
    ("warehouse compaction: episodes / files", f"{compaction.get('rows', '-')} / {compaction.get('files', '-')}"),
    ("metadata changes captured (reel-cdc)", sum(sum(l.get("changes", {}).values()) for l in lines("cdc.jsonl") if "summary" not in l)),
    ("manifest rows: train / held-out", f"{curate.get('rows', '-')} / {heldout.get('rows', '-')}"),
    ("QC rejections (left out by the query)", len(canonical) - curate.get("rows", 0) - heldout.get("rows", 0)),
    ("training samples in the manifest", curate.get("samples", "-")),
    ("curation seconds", f"{curate.get('seconds', 0):.2f}"),
    ("MB warmed into the cache", f"{sum(w.get('report', {}).get('fetched_bytes', 0) for w in warm) / 1e6:.1f}"),
    ("loader cache hit rate", f"{100 * (load.get('cache_hit_rate') or 0):.1f}%"),
    ("loader samples/s", f"{load.get('samples_per_s', 0):.1f}"),
    ("loader samples per CPU-second", f"{load.get('samples_per_cpu_s', 0):.1f}"),
    ("loader time to first batch, s", f"{load.get('time_to_first_batch_s', 0):.2f}"),
    ("training steps (restarts)", f"{train['steps']} ({len(restarts)})"),
    ("training steps/s", f"{train['steps_per_s']:.1f}"),
    ("share of step time waiting for data", f"{100 * train['data_wait_share']:.0f}%"),
    ("held-out loss before -> after", f"{train['heldout_loss_before']:.4f} -> {train['heldout_loss_after']:.4f}"),
]
print("\nmain job summary")
for name, value in rows:
    print(f"  {name:<40} {value:>10}")
for l in flagged:
    print(f"  QC {l['episode_id']}: {l['qc_flags']}")
PY
echo "main-job: done; store $store, machine output in $work/*.jsonl" >&2
