#!/usr/bin/env bash
# reel-import zarr beside Python zarr reading the same replay buffers (docs/BENCHMARKS.md,
# "Import: Zarr replay buffers"): episodes and steps per CPU-second and peak memory of
#   - Reel reading every episode (`reel-import zarr --check`: every chunk decoded, pictures
#     and values as the landing log holds them; one thread),
#   - zarr-python reading every episode's arrays into NumPy (Diffusion Policy's
#     ReplayBuffer access; numcodecs' Blosc, imagecodecs' libjxl),
#   - Reel's whole import (landing logs, canonical episodes with H.264 cameras, warehouse
#     rows; one thread) of the smaller UMI-shaped buffer,
# for a UMI-shaped buffer (JPEG XL pictures) and a Diffusion Policy PushT-shaped one
# (float32 pictures, Blosc LZ4), each at two sizes so memory that grows with the buffer
# shows.
#
#   benches/zarr/run.sh            # EPISODES="100 200" STEPS=50 by default
#
# Buffers are written by Python zarr (benches/zarr/make_buffer.py) in its own venv
# ($REEL_CACHE/venv-zarr, not the test venv). Writes under $REEL_CACHE/zarr-bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
venv=$REEL_CACHE/venv-zarr
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check zarr==3.1.6 numcodecs==0.16.6 imagecodecs==2026.3.6
fi
py=$venv/bin/python
out=$REEL_CACHE/zarr-bench
steps=${STEPS:-50}
sizes=${EPISODES:-100 200}
mkdir -p "$out"
for layout in umi pusht; do
  for episodes in $sizes; do
    buffer=$out/$layout-$episodes.zarr
    [ -f "$buffer/meta/episode_ends/.zarray" ] || "$py" benches/zarr/make_buffer.py "$buffer" "$layout" "$episodes" "$steps"
  done
done
cargo build --release --quiet -p reel-import-cli
bin=$CARGO_TARGET_DIR/release/reel-import

table=$out/results.md
echo "| buffer | reader | CPU s | wall s | episodes per CPU-s | steps per CPU-s | peak RSS MB |" > "$table"
echo "|---|---|---|---|---|---|---|" >> "$table"
row() { # buffer episodes label timefile
  awk -v b="$1" -v n="$2" -v s="$steps" -v label="$3" '{cpu = $2 + $3;
    printf "| %s | %s | %.2f | %.2f | %.2f | %.1f | %.0f |\n", b, label, cpu, $1, n / cpu, n * s / cpu, $4 / 1024}' "$4" >> "$table"
}
first=${sizes%% *}
for layout in umi pusht; do
  for episodes in $sizes; do
    buffer=$out/$layout-$episodes.zarr
    name="$layout, $episodes episodes, $(du -sm "$buffer" | cut -f1) MB"
    /usr/bin/time -f '%e %U %S %M' -o "$out/reel-check.time" "$bin" zarr --check "$buffer" --fps 10 -j 1 -q > "$out/check.jsonl"
    row "$name" "$episodes" "Reel, reading (--check, 1 thread)" "$out/reel-check.time"
    /usr/bin/time -f '%e %U %S %M' -o "$out/zarr.time" "$py" benches/zarr/zarr_read.py "$buffer" > "$out/zarr.json"
    row "$name" "$episodes" "zarr-python, every episode into NumPy" "$out/zarr.time"
    grep -q "\"episodes\": $episodes" "$out/zarr.json" || { echo "zarr read $(cat "$out/zarr.json")" >&2; exit 1; }
    if [ "$layout" = umi ] && [ "$episodes" = "$first" ]; then
      rm -rf "$out/store"
      /usr/bin/time -f '%e %U %S %M' -o "$out/reel-import.time" "$bin" zarr "$buffer" --fps 10 --store "$out/store" -j 1 -q > "$out/import.jsonl"
      row "$name" "$episodes" "Reel, whole import (1 thread)" "$out/reel-import.time"
    fi
  done
done
cat "$table"
