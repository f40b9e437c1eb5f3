#!/usr/bin/env bash
# reel-export lerobot beside LeRobot's own conversion (benches/export/lerobot_convert.py) of
# the main job's 6 canonical episodes into a LeRobot v3.0 dataset at LeRobot's default
# encoding (SVT-AV1, GOP 2, CRF 30, preset 12), taking turns over 2 rounds; then video bytes
# and PSNR against the landing frames of both, and LeRobot 0.6.1 reading and training on
# Reel's (docs/BENCHMARKS.md, "Export: LeRobot datasets").
#
#   benches/export/run.sh
#
# Needs the main job's store (scripts/main-job.sh), Reel's test venv and LeRobot's venv.
# Writes under ~/.cache/reel/export-bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
work=$REEL_CACHE/main-job
out=$REEL_CACHE/export-bench
reel_py=$REEL_CACHE/venv/bin/python
lerobot_py=$REEL_CACHE/venv-lerobot/bin/python
rm -rf "$out" && mkdir -p "$out"
cargo build --release --quiet -p reel-export-cli -p reel-curate-cli
bin=$CARGO_TARGET_DIR/release

"$bin/reel-curate" --warehouse "$work/store" --sql "SELECT * FROM episodes ORDER BY episode_id" \
  --before 0 --after 0 -o "$out/all.arrow" > /dev/null 2>&1
"$reel_py" -c 'import pyarrow.ipc as ipc, json, sys
t = ipc.open_file(sys.argv[1]).read_all()
template = (t.schema.metadata or {}).get(b"reel.manifest.uri_template", b"").decode()
uris = t.column("uri").to_pylist() if "uri" in t.column_names else \
    [template.replace("{episode_id}", i) for i in t.column("episode_id").to_pylist()]
json.dump([u.split("/")[-1] for u in uris], open(sys.argv[2], "w"))' \
  "$out/all.arrow" "$out/episodes.json"

echo "| round | writer | CPU s | wall s | frames | episode-s per CPU-s |" > "$out/speed.md"
echo "|---|---|---|---|---|---|" >> "$out/speed.md"
for round in 1 2; do
  # One episode at a time, as LeRobot's conversion goes; the encoder's own threads in both.
  /usr/bin/time -f '%e %U %S' -o "$out/reel-$round.time" \
    "$bin/reel-export" lerobot --manifest "$out/all.arrow" --store "$work/store" \
    -o "$out/reel-$round" -j 1 -q > "$out/reel-$round.jsonl"
  /usr/bin/time -f '%e %U %S' -o "$out/lerobot-$round.time" \
    "$lerobot_py" benches/export/lerobot_convert.py --canonical "$work/store/canonical" \
    --episodes "$out/episodes.json" -o "$out/lerobot-$round" > "$out/lerobot-$round.json" 2> "$out/lerobot-$round.log"
  for writer in reel lerobot; do
    "$reel_py" -c 'import json, sys
round, writer, time_file, dataset = sys.argv[1:5]
wall, user, system = map(float, open(time_file).read().split())
info = json.load(open(dataset + "/meta/info.json"))
frames, fps = info["total_frames"], info["fps"]
cpu = user + system
name = "reel-export" if writer == "reel" else "LeRobot 0.6.1 (create / add_frame / save_episode)"
print(f"| {round} | {name} | {cpu:.1f} | {wall:.1f} | {frames} | {frames / fps / cpu:.3f} |")' \
      "$round" "$writer" "$out/$writer-$round.time" "$out/$writer-$round" >> "$out/speed.md"
  done
done
cat "$out/speed.md"

echo
"$reel_py" benches/random_access/quality.py --landing "$work/store/landing" --canonical "$work/store/canonical" \
  --lerobot "$out/lerobot-1" --exported "reel-export=$out/reel-1=$out/episodes.json" \
  | tee "$out/quality.jsonl" | "$reel_py" -c 'import json, sys
print("| dataset | KB per camera-second | PSNR dB against the landing frames | frames compared |")
print("|---|---|---|---|")
for line in sys.stdin:
    q = json.loads(line)
    row = (q["dataset"], q["bytes_per_camera_second"] / 1000, q["psnr_db"], q["frames_compared"])
    print("| %s | %.1f | %.2f | %d |" % row)'

echo
"$lerobot_py" testdata/lerobot/check_export.py "$out/reel-1" --train-steps 2 | tail -1 | cut -c1-400
