#!/usr/bin/env bash
# Installs what Reel's test suite needs, and nothing twice; `setup.sh --main-job` only what
# the main job runs (the build tools, FFmpeg, PostgreSQL and Python's standard library;
# `--main-job --s3` adds s3s-fs for a main job on an S3 store):
#   - Debian packages: FFmpeg and HDF5 development libraries, clang/libclang, pkg-config, Python,
#     Slurm with munge (the one-node cluster of scripts/slurm.sh), and PostgreSQL (the
#     metadata database reel-cdc captures; tests and the main job start their own);
#   - a Python venv with the independent readers the tests use (scripts/requirements-test.txt),
#     and LeRobot's (benches/peers/requirements-lerobot.txt, Python 3.12);
#   - s3s-fs, the local S3-compatible server the object-store tests talk to.
# Everything user-level goes under $REEL_CACHE (default ~/.cache/reel).
# Without root it prints the exact command to run instead.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
mkdir -p "$REEL_CACHE"
main_job=
s3=
for arg in "$@"; do
  case "$arg" in
    --main-job) main_job=1 ;;
    --s3) s3=1 ;;
    *) echo "setup: unknown argument $arg (--main-job [--s3])" >&2; exit 2 ;;
  esac
done

apt_packages=(
  pkg-config clang libclang-dev
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev
  python3
  postgresql
)
if [ -z "$main_job" ]; then
  apt_packages+=(ffmpeg libhdf5-dev python3-venv slurm-wlm munge)
fi
missing=()
for package in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  install="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    sh -c "$install" >&2
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "setup: installing ${missing[*]} (sudo)" >&2
    sudo sh -c "$install" >&2
  else
    echo "setup: missing system packages: ${missing[*]}" >&2
    echo "setup: run this as root, then run me again:" >&2
    echo "  sudo sh -c '$install'" >&2
    exit 1
  fi
fi

# The local S3 server (0.14.1 is the last release that builds with Rust 1.95).
if { [ -z "$main_job" ] || [ -n "$s3" ]; } && [ ! -x "$REEL_CACHE/tools/bin/s3s-fs" ]; then
  echo "setup: building s3s-fs 0.14.1 into $REEL_CACHE/tools (once, a few minutes)" >&2
  cargo install --quiet --locked s3s-fs --version 0.14.1 --features binary --root "$REEL_CACHE/tools" >&2
fi
[ -n "$main_job" ] && exit 0

# Python readers, reinstalled only when the requirements change.
venv="$REEL_CACHE/venv"
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$here/requirements-test.txt" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating the Python venv in $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements-test.txt" >&2
  echo "$want" > "$stamp"
fi

# LeRobot's venv: LeRobot 0.6.1 reads back the datasets reel-export writes (and is the
# loader the benchmarks measure against). It needs Python >= 3.12, which Debian 12 does not
# package: $REEL_PYTHON312, else python3.12 on PATH, else a pyenv 3.12 build.
lerobot_venv="$REEL_CACHE/venv-lerobot"
lerobot_stamp="$lerobot_venv/.requirements.sha256"
lerobot_want=$(sha256sum "$here/../benches/peers/requirements-lerobot.txt" | cut -d' ' -f1)
if [ ! -x "$lerobot_venv/bin/python" ] || [ "$(cat "$lerobot_stamp" 2>/dev/null)" != "$lerobot_want" ]; then
  # The first candidate that runs as a 3.12 (a pyenv shim on PATH may name a version
  # pyenv has not selected, and fail).
  python312=
  for candidate in ${REEL_PYTHON312:-} $(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | sort -rV) \
    $(command -v python3.12 || true); do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      python312=$candidate
      break
    fi
  done
  if [ -z "$python312" ]; then
    echo "setup: LeRobot 0.6 needs Python 3.12: set REEL_PYTHON312 to one (none that runs on PATH or under ~/.pyenv)" >&2
    exit 1
  fi
  echo "setup: creating LeRobot's venv in $lerobot_venv with $python312" >&2
  [ -x "$lerobot_venv/bin/python" ] || "$python312" -m venv "$lerobot_venv"
  "$lerobot_venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/../benches/peers/requirements-lerobot.txt" >&2
  echo "$lerobot_want" > "$lerobot_stamp"
fi

# Reel's Python package (crates/reel-python, built by maturin) into the venv, rebuilt only
# when the Rust or Python it is made of changed, or when another checkout installed its own
# (the install is editable: it points at one checkout's Python files). The dev profile shares
# its dependencies with the test suite's; `maturin develop --release` gives the optimised build
# for training.
profile=${REEL_PYTHON_PROFILE:-dev}
package_stamp="$venv/.reel-package.sha256"
repo=$(cd "$here/.." && pwd)
package_want=$( (echo "$profile $repo"; cd "$repo" && find Cargo.toml Cargo.lock crates -type f \
  \( -name '*.rs' -o -name Cargo.toml -o -name '*.py' -o -name '*.pyi' -o -name pyproject.toml \) \
  -not -path '*/tests/*' | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$package_stamp" 2>/dev/null)" != "$package_want" ]; then
  echo "setup: building Reel's Python package into $venv ($profile profile)" >&2
  (cd "$repo/crates/reel-python" && \
    CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target} VIRTUAL_ENV=$venv PATH="$venv/bin:$PATH" \
    maturin develop --quiet --profile "$profile") >&2
  echo "$package_want" > "$package_stamp"
fi
