#!/usr/bin/env bash
# reel-import rlds beside TensorFlow Datasets' own reader on the same DROID-shaped RLDS
# builds (docs/BENCHMARKS.md, "Import: RLDS builds"): episodes and steps per CPU-second and
# peak memory of
#   - Reel reading every episode (`reel-import rlds --check`: TFRecord checksums, records,
#     every value, pictures kept as JPEG; one thread),
#   - TFDS iterating the build as a training input pipeline does, pictures left as JPEG
#     (`SkipDecoding`, what Reel reads) and decoded (TFDS's default),
#   - Reel's whole import (landing logs, canonical episodes with H.264 cameras, warehouse
#     rows; one thread) of the smaller build,
# at two build sizes, so memory that grows with the dataset shows.
#
#   benches/rlds/run.sh            # EPISODES="40 80" STEPS=60 by default
#
# Builds are written by TFDS itself (benches/rlds/make_build.py) into its own venv
# ($REEL_CACHE/venv-tfds, not the test venv). Writes under $REEL_CACHE/rlds-bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
venv=$REEL_CACHE/venv-tfds
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check tensorflow-cpu==2.21.0 tensorflow-datasets==4.9.10
fi
py=$venv/bin/python
out=$REEL_CACHE/rlds-bench
steps=${STEPS:-60}
sizes=${EPISODES:-40 80}
mkdir -p "$out"
export TF_CPP_MIN_LOG_LEVEL=3
for episodes in $sizes; do
  if [ ! -f "$out/build-$episodes/droid_bench/1.0.0/dataset_info.json" ]; then
    rm -rf "$out/build-$episodes"
    "$py" benches/rlds/make_build.py "$out/build-$episodes" "$episodes" "$steps" $(( (episodes + 9) / 10 )) >/dev/null 2>&1
  fi
done
cargo build --release --quiet -p reel-import-cli
bin=$CARGO_TARGET_DIR/release/reel-import

table=$out/results.md
echo "| build | reader | CPU s | wall s | episodes per CPU-s | steps per CPU-s | peak RSS MB |" > "$table"
echo "|---|---|---|---|---|---|---|" >> "$table"
row() { # build episodes label timefile
  awk -v b="$1" -v n="$2" -v s="$steps" -v label="$3" '{cpu = $2 + $3;
    printf "| %s | %s | %.2f | %.2f | %.2f | %.1f | %.0f |\n", b, label, cpu, $1, n / cpu, n * s / cpu, $4 / 1024}' "$4" >> "$table"
}
first=${sizes%% *}
for episodes in $sizes; do
  dir=$out/build-$episodes/droid_bench/1.0.0
  name="$episodes episodes, $(du -sm "$dir" | cut -f1) MB"
  /usr/bin/time -f '%e %U %S %M' -o "$out/reel-check.time" "$bin" rlds --check "$dir" -j 1 -q > "$out/check.jsonl"
  row "$name" "$episodes" "Reel, reading (--check, 1 thread)" "$out/reel-check.time"
  /usr/bin/time -f '%e %U %S %M' -o "$out/tfds-skip.time" "$py" benches/rlds/tfds_read.py "$dir" --skip-decoding > "$out/tfds-skip.json"
  row "$name" "$episodes" "TFDS, pictures as JPEG (SkipDecoding)" "$out/tfds-skip.time"
  /usr/bin/time -f '%e %U %S %M' -o "$out/tfds.time" "$py" benches/rlds/tfds_read.py "$dir" > "$out/tfds.json"
  row "$name" "$episodes" "TFDS, pictures decoded (default)" "$out/tfds.time"
  grep -q "\"episodes\": $episodes" "$out/tfds.json" || { echo "TFDS read $(cat "$out/tfds.json")" >&2; exit 1; }
  if [ "$episodes" = "$first" ]; then
    rm -rf "$out/store"
    /usr/bin/time -f '%e %U %S %M' -o "$out/reel-import.time" "$bin" rlds "$dir" --store "$out/store" -j 1 -q > "$out/import.jsonl"
    row "$name" "$episodes" "Reel, whole import (1 thread)" "$out/reel-import.time"
  fi
done
cat "$table"
