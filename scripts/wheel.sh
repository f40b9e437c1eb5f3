#!/usr/bin/env bash
# Reel's Python package as one abi3 wheel (CPython 3.10 and later) that `pip install`
# puts into any venv of a machine with FFmpeg's shared libraries, no Rust toolchain needed
# there. Prints the wheel's path on stdout.
#
#   scripts/wheel.sh [OUT_DIR]     # default dist/
#
# The release profile, as users train with; REEL_WHEEL_PROFILE=dev reuses the test
# suite's unoptimised build (the suite's wheel test does).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
out=$(realpath -m "${1:-$repo/dist}")
REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
profile=${REEL_WHEEL_PROFILE:-release}

# maturin in a venv of its own: building the wheel needs nothing else from Python.
tools=$REEL_CACHE/wheel-tools
if [ ! -x "$tools/bin/maturin" ]; then
  echo "wheel: installing maturin into $tools" >&2
  python3 -m venv "$tools"
  "$tools/bin/pip" install --quiet --disable-pip-version-check 'maturin>=1.9,<2' >&2
fi
mkdir -p "$out"
echo "wheel: building Reel's Python package ($profile profile) into $out" >&2
# The wheel links the system's FFmpeg, as the CLIs do: it is tagged for this platform
# (linux), not manylinux, whose rules forbid linking libraries outside its list.
(cd "$repo/crates/reel-python" && \
  "$tools/bin/maturin" build --quiet --profile "$profile" --compatibility linux --out "$out") >&2
ls -t "$out"/reel-*.whl | head -1
