#!/usr/bin/env bash
# reel-import beside the bare transcode of the same video, on LeRobot 0.6.1 datasets of
# the main job's 6 landing episodes (the three benches/random_access/run.sh builds:
# AV1 g2 crf30, H.264 g2 crf30, H.264 g30 crf23); then canonical video bytes and PSNR
# against the landing frames beside each dataset's own (docs/BENCHMARKS.md, "Import:
# LeRobot datasets").
#
#   benches/import/run.sh
#
# Needs benches/random_access/run.sh's LeRobot datasets (~/.cache/reel/random-access/lerobot),
# the main job's store and Reel's test venv. Writes under ~/.cache/reel/import-bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
work=$REEL_CACHE/main-job
datasets=$REEL_CACHE/random-access/lerobot
out=$REEL_CACHE/import-bench
reel_py=$REEL_CACHE/venv/bin/python
mkdir -p "$out"
cargo build --release --quiet -p reel-import-cli
bin=$CARGO_TARGET_DIR/release

cpu() { awk '{printf "%.2f", $2 + $3}' "$1"; }
wall() { awk '{printf "%.2f", $1}' "$1"; }

echo "| dataset | episode-seconds | reel-import CPU s | wall s | episode-s per CPU-s | transcode floor CPU s | import / floor |" > "$out/speed.md"
echo "|---|---|---|---|---|---|---|" >> "$out/speed.md"
quality_args=()
for dataset in "$datasets"/lerobot-*; do
  name=$(basename "$dataset")
  store=$out/$name
  rm -rf "$store"
  # One worker: CPU per episode-second, comparable with the floor's one thread.
  /usr/bin/time -f '%e %U %S' -o "$out/$name.import.time" \
    "$bin/reel-import" lerobot "$dataset" --store "$store" -j 1 -q > "$out/$name.jsonl"
  # The floor: FFmpeg decoding every video file and libx264 encoding its frames with the
  # import's settings (CRF 12, preset medium, tune fastdecode, GOP 30, no B-frames, one
  # thread each), nothing else.
  /usr/bin/time -f '%e %U %S' -o "$out/$name.floor.time" bash -c '
    for video in "$1"/videos/*/*/*.mp4; do
      ffmpeg -v error -threads 1 -i "$video" -c:v libx264 -threads 1 -preset medium -tune fastdecode \
        -crf 12 -x264-params keyint=30:min-keyint=30:scenecut=0:bframes=0 -f null -
    done' _ "$dataset"
  seconds=$("$reel_py" -c 'import json,sys; i=json.load(open(sys.argv[1])); print(i["total_frames"] / i["fps"])' "$dataset/meta/info.json")
  import_cpu=$(cpu "$out/$name.import.time")
  floor_cpu=$(cpu "$out/$name.floor.time")
  "$reel_py" -c 'import sys
name, seconds, cpu, wall, floor = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
print(f"| {name} | {seconds:.1f} | {cpu:.2f} | {wall:.2f} | {seconds / cpu:.2f} | {floor:.2f} | {cpu / floor:.2f} |")' \
    "$name" "$seconds" "$import_cpu" "$(wall "$out/$name.import.time")" "$floor_cpu" >> "$out/speed.md"
  quality_args+=(--lerobot "$dataset" --imported "reel-import of $name=$store=$dataset")
done
cat "$out/speed.md"

echo
"$reel_py" benches/random_access/quality.py --landing "$work/store/landing" --canonical "$work/store/canonical" \
  "${quality_args[@]}" | tee "$out/quality.jsonl" | "$reel_py" -c 'import json,sys
print("| dataset | KB per camera-second | PSNR dB against the landing frames |")
print("|---|---|---|")
for line in sys.stdin:
    r = json.loads(line)
    name, kb, db = r["dataset"], r["bytes_per_camera_second"] / 1000, r["psnr_db"]
    print(f"| {name} | {kb:.1f} | {db:.2f} |")'
