#!/usr/bin/env bash
# The scale harness: each stage measured on metadata-scale inputs, from small sizes up,
# one JSON line per measurement into $OUT/scale.jsonl, then the table and docs/scale.png.
#
#   benches/scale/run.sh                    # release builds (cargo bench), the sizes below
#   PROFILE=test benches/scale/run.sh       # the test profile (cargo test --bench): no
#                                           # release build, Reel's crates at opt-level 1
#
# The 5·10^7-row manifest is about 5 GB on disk while it is measured; the cache's 10^6
# blocks 4 GB; the landing prefix of 10^6 objects 2.5 GB; the ingest records of 10^6
# episodes 2 GB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
export REEL_S3S_FS=${REEL_S3S_FS:-$REEL_CACHE/tools/bin/s3s-fs}
OUT=${OUT:-$REEL_CACHE/bench/scale}
ROWS=${ROWS:-10000,100000,1000000,10000000,50000000}
BLOCKS=${BLOCKS:-10000,100000,1000000}
LOCAL=${LOCAL:-10000,100000,1000000}
S3=${S3:-1000,10000,100000}
EPISODES=${EPISODES:-10000,100000,1000000}
mkdir -p "$OUT"
if [ "${PROFILE:-release}" = test ]; then
  bench() { cargo test --workspace --bench "$@"; }
else
  bench() { cargo bench --workspace --bench "$@"; }
fi

{
  bench scale -- --rows "$ROWS" --dir "$OUT/loader"
  bench cache_scale -- --blocks "$BLOCKS" --dir "$OUT/cache"
  bench scale_plan -- --local "$LOCAL" --s3 "$S3" --dir "$OUT/plan"
  bench scale_state -- --episodes "$EPISODES" --dir "$OUT/state"
} > "$OUT/scale.jsonl"

# The chart needs matplotlib: a small venv of its own, made once.
chart_venv="$REEL_CACHE/venv-chart"
[ -x "$chart_venv/bin/python" ] || { python3 -m venv "$chart_venv" && "$chart_venv/bin/pip" install --quiet matplotlib==3.10.8; }
"$chart_venv/bin/python" benches/scale/chart.py "$OUT/scale.jsonl" --png docs/scale.png
