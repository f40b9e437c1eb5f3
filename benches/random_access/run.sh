#!/usr/bin/env bash
# Random access side by side: Reel's loader on landing episodes ingested with each
# encoding, and LeRobot 0.6.1's DataLoader on LeRobot datasets of the same episodes, in
# one run; then storage and PSNR against the landing frames, and the chart
# (docs/BENCHMARKS.md, "Random access").
#
#   benches/random_access/run.sh [--batches N] [--landing DIR] [--out DIR] [--png FILE]
#                                [--lerobot-from canonical|lossless] [--sweep] [--no-loading]
#
# --landing: the landing episodes (default: the main job's). --lerobot-from: LeRobot's
# datasets are built from Reel's canonical episodes (default; their frames are then a
# second generation) or from a lossless ingest (H.264 at CRF 0: the landing pictures in
# 4:2:0, what every encoder here starts from). --sweep: rate–distortion points too (each
# encoding family at several CRFs, storage and PSNR only; rate_distortion.py compares
# them at equal PSNR). --no-loading: ingest, build and measure quality, no timed loading.
#
# Needs the LeRobot environment of benches/peers/README.md (~/.cache/reel/venv-lerobot,
# with matplotlib) and Reel's test venv (~/.cache/reel/venv); by default scripts/main-job.sh's
# output (~/.cache/reel/main-job). Writes everything under --out (default
# ~/.cache/reel/random-access) and the chart to --png (default docs/random-access.png).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
batches=100
landing=$REEL_CACHE/main-job/store/landing
out=$REEL_CACHE/random-access
png=docs/random-access.png
lerobot_from=canonical
sweep=0
loading=1
while [ $# -gt 0 ]; do
  case "$1" in
    --batches) batches=$2; shift 2 ;;
    --landing) landing=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --png) png=$2; shift 2 ;;
    --lerobot-from) lerobot_from=$2; shift 2 ;;
    --sweep) sweep=1; shift ;;
    --no-loading) loading=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$lerobot_from" in canonical|lossless) ;; *) echo "run.sh: --lerobot-from canonical or lossless" >&2; exit 2 ;; esac
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
lerobot_py=$REEL_CACHE/venv-lerobot/bin/python
reel_py=$REEL_CACHE/venv/bin/python
mkdir -p "$out"

# The CLIs it runs (built as the main job builds them: the same packages unify the same
# features, so neither build recompiles Polars after the other), and the loader benchmark
# when it times loading.
cargo build --release --quiet -p reel-synth-cli -p reel-plan-cli -p reel-ingest-cli -p reel-inspect-cli \
  -p reel-curate-cli -p reel-warm-cli -p reel-load-cli -p reel-preflight-cli -p reel-supervise-cli \
  -p reel-train-policy -p reel-cdc-cli
bin=$CARGO_TARGET_DIR/release
if [ "$loading" = 1 ]; then
  loader=$(cargo bench -p reel-loader --bench loader --no-run --message-format json 2>/dev/null \
    | "$reel_py" -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "loader" and m.get("executable"):
        print(m["executable"])')
fi

# Reel's encodings: name, then reel-ingest's encoding arguments. The first and the
# fourth are the named encodings; the others isolate one lever each.
encodings=(
  "canonical|--encoding canonical"
  "gop2-crf23-zstd|--config $out/gop2-crf23-zstd.toml"
  "gop2-crf23-raw|--config $out/gop2-crf23-raw.toml"
  "random-access|--encoding random-access"
  "star15-crf23-zstd|--config $out/star15-crf23-zstd.toml"
  "random-access-signals2s|--config $out/random-access-signals2s.toml"
)
printf '[encode]\ngop = 2\n' > "$out/gop2-crf23-zstd.toml"
printf '[encode]\ngop = 2\ncompress_chunks = false\n' > "$out/gop2-crf23-raw.toml"
printf '[encode]\ngop = 15\nstructure = "star"\n' > "$out/star15-crf23-zstd.toml"
printf '[encode]\ngop = 2\ncrf = 26.0\ncompress_chunks = false\nsignal_window_s = 2.0\n' \
  > "$out/random-access-signals2s.toml"
# LeRobot's source when built from a lossless ingest.
if [ "$lerobot_from" = lossless ]; then
  encodings+=("lossless|--config $out/lossless.toml")
  printf '[encode]\ngop = 30\ncrf = 0.0\n' > "$out/lossless.toml"
fi
# Rate–distortion points: the random-access settings at other CRFs, with and without
# libx264's fastdecode tune (no CABAC, no deblocking), with its psnr tune (no psychovisual
# rate-distortion or adaptive quantisation) and at a slower preset.
sweep_encodings=()
if [ "$sweep" = 1 ]; then
  for tune in fastdecode none fastdecode-psnr; do
    for preset in medium slower; do
      for crf in 20 23 26 29 32 35; do
        [ "$preset" = slower ] && { [ "$crf" -lt 26 ] || [ "$tune" = fastdecode-psnr ]; } && continue
        name=ra-$preset-$tune-crf$crf
        sweep_encodings+=("$name|--config $out/$name.toml")
        case "$tune" in none) t="" ;; fastdecode-psnr) t="fastdecode,psnr" ;; *) t=$tune ;; esac
        printf '[encode]\ngop = 2\ncrf = %s.0\npreset = "%s"\ntune = "%s"\ncompress_chunks = false\nsignal_window_s = 0.5\n' \
          "$crf" "$preset" "$t" > "$out/$name.toml"
      done
    done
  done
fi

quality_args=()
for entry in "${encodings[@]}" "${sweep_encodings[@]}"; do
  name=${entry%%|*}; flags=${entry#*|}
  store=$out/$name
  if [ ! -f "$out/$name.arrow" ]; then
    rm -rf "$store"
    echo "== ingest: $name" >&2
    for episode in "$landing"/*.mcap; do
      # shellcheck disable=SC2086
      "$bin/reel-ingest" --episode "$episode" --store "$store" $flags -j 2 --quiet > /dev/null
    done
    "$bin/reel-curate" --warehouse "$store" --sql "SELECT * FROM episodes" -o "$out/$name.arrow" \
      --anchor-hz 10 --before 1.0 --after 0.98 > /dev/null 2> /dev/null
  fi
  quality_args+=(--reel "$name=$store")
done

: > "$out/loading.jsonl"
: > "$out/floor.jsonl"
reel_rows() {
  local name=$1 shuffle=$2
  "$loader" --bench --manifest "$out/$name.arrow" --store "$out/$name" --spec testdata/spec.toml \
    --batches "$batches" --workers 1 --runs 10 --shuffles "$shuffle" --floor > "$out/reel-$name-$shuffle.md"
  grep '^| [gl]' "$out/reel-$name-$shuffle.md" | "$reel_py" -c 'import json,sys
name = sys.argv[1]
for line in sys.stdin:
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    print(json.dumps({"peer": "Reel", "encoding": name, "configuration": c[0] + ", 1 thread",
        "samples_per_s": float(c[3]), "samples_per_cpu_s": float(c[4]),
        "frames_decoded_per_sample": float(c[5]), "first_batch_s": float(c[7].split()[0]),
        "peak_rss_mib": float(c[8]), "gop_cache_hits_pct": float(c[9])}))' "$name" >> "$out/loading.jsonl"
  # The floor: the same samples replayed as bare decodes (crates/reel-loader/benches/loader/floor.rs).
  grep '^| floor: ' "$out/reel-$name-$shuffle.md" | "$reel_py" -c 'import json,sys
name = sys.argv[1]
for line in sys.stdin:
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    print(json.dumps({"encoding": name, "configuration": c[0].removeprefix("floor: "),
        "reel_cpu_ms_per_sample": float(c[3]), "reel_frames_decoded_per_sample": float(c[4]),
        "replay_frames_decoded_per_sample": float(c[5]), "bare_decode_us_per_frame": float(c[6]),
        "bare_decode_rgb_us_per_frame": float(c[7]), "floor_ms_per_sample": float(c[8]),
        "reel_over_floor": float(c[9]), "reel_over_floor_rgb": float(c[10])}))' "$name" >> "$out/floor.jsonl"
}
lerobot_rows() {
  local label=$1; shift
  "$lerobot_py" benches/peers/lerobot_load.py --episodes "$lerobot_source" --work "$out/lerobot" \
    --batch-size 8 --batches "$batches" "$@" 2> "$out/lerobot-$label.log" \
    | "$reel_py" -c 'import json,sys
label = sys.argv[1]
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        output = "uint8" if r["uint8"] else "float32"
        workers = r["num_workers"]
        print(json.dumps({"peer": "LeRobot " + r["lerobot_version"], "encoding": label,
            "configuration": f"num_workers {workers}, {output}",
            "samples_per_s": r["samples_per_s"], "samples_per_cpu_s": r["samples_per_s_per_core"],
            # Each frame decodes from its keyframe: (g + 1) / 2 frames on average, 6 per sample.
            "frames_decoded_per_sample": 6 * (r["gop"] + 1) / 2, "frames_decoded_derived": True,
            "first_batch_s": r["time_to_first_batch_s"], "peak_rss_mib": r["peak_rss_mib"]}))' "$label" >> "$out/loading.jsonl"
}

lerobot_source=$out/$lerobot_from/canonical
if [ "$loading" = 1 ]; then
  echo "== loading, one configuration after the other" >&2
  lerobot_rows "LeRobot av1 g2 crf30" --workers 0,1,2 --uint8
  lerobot_rows "LeRobot av1 g2 crf30" --workers 1
  lerobot_rows "LeRobot h264 g2 crf30" --workers 0,1,2 --uint8 --vcodec h264
  lerobot_rows "LeRobot h264 g30 crf23 (Reel's canonical)" --workers 1 --uint8 --vcodec h264 --gop 30 --crf 23
  for entry in "${encodings[@]}"; do
    name=${entry%%|*}
    [ "$name" = lossless ] && continue
    reel_rows "$name" global
    reel_rows "$name" locality
  done
else
  # The datasets alone (no num_workers: built, not timed).
  lerobot_rows "LeRobot av1 g2 crf30" --workers ""
  lerobot_rows "LeRobot h264 g2 crf30" --workers "" --vcodec h264
fi
if [ "$sweep" = 1 ]; then
  for crf in 18 22 26 34 38; do lerobot_rows "LeRobot av1 g2 crf$crf" --workers "" --crf "$crf"; done
  for crf in 18 22 26 34 38; do lerobot_rows "LeRobot h264 g2 crf$crf" --workers "" --vcodec h264 --crf "$crf"; done
fi

echo "== storage and PSNR against the landing frames" >&2
# One result per dataset, measured again only when its dataset is newer.
mkdir -p "$out/quality"
measure() {
  local result=$out/quality/$1.json dataset=$2; shift 2
  if [ ! -f "$result" ] || [ "$dataset" -nt "$result" ]; then
    "$reel_py" benches/random_access/quality.py --landing "$landing" "$@" --canonical "$lerobot_source" \
      > "$result.partial"
    mv "$result.partial" "$result"
  fi
  cat "$result"
}
{
  for item in "${quality_args[@]}"; do
    [ "$item" = --reel ] && continue
    name=${item%%=*}
    measure "$name" "$out/$name.arrow" --reel "$item"
  done
  for d in "$out"/lerobot/lerobot-*; do
    measure "$(basename "$d")" "$d/reel_peer_build.json" --lerobot "$d"
  done
} > "$out/quality.jsonl"

if [ "$loading" = 1 ]; then
  "$lerobot_py" benches/random_access/chart.py --loading "$out/loading.jsonl" --quality "$out/quality.jsonl" \
    --floor "$out/floor.jsonl" --png "$png"
fi
if [ "$sweep" = 1 ]; then
  "$lerobot_py" benches/random_access/rate_distortion.py --quality "$out/quality.jsonl" \
    --png "${png%.png}-rd.png"
fi
