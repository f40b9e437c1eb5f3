#!/usr/bin/env bash
# Reel's whole test suite: unit, integration and doc tests of every crate,
# independent-reader checks (Python mcap, pyarrow), the Python package's pytest suite
# (with PyTorch), object-store tests against
# a real S3-compatible server on loopback, the cluster recipes on a one-node Slurm cluster
# (scripts/slurm.sh, started by the tests that need it), formatting, lints, and the CUDA
# build without CUDA. Every test that needs an external program (the Python readers, s3s-fs, ffmpeg)
# fails when it is missing: setup.sh installs them first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh

REEL_CACHE=${REEL_CACHE:-$HOME/.cache/reel}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$REEL_CACHE/target}
export REEL_PYTHON=$REEL_CACHE/venv/bin/python
export REEL_S3S_FS=$REEL_CACHE/tools/bin/s3s-fs
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# Incremental caches only cost disk on a suite that builds everything once.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

# A target folder kept between runs gathers test binaries of earlier revisions (hundreds of
# MB each with Polars linked in); drop those not rebuilt for two days, and the incremental
# caches, so the disk holds one revision's build.
if [ -d "$CARGO_TARGET_DIR/debug" ]; then
  rm -rf "$CARGO_TARGET_DIR/debug/incremental"
  find "$CARGO_TARGET_DIR/debug/deps" -maxdepth 1 -type f -executable -mtime +2 \
    ! -name '*.so' ! -name '*.rlib' -delete 2>/dev/null || true
fi
echo "test: target $CARGO_TARGET_DIR, $(df -h --output=avail "$(dirname "$CARGO_TARGET_DIR")" | tail -1 | tr -d ' ') free" >&2

cargo fmt --all --check
# Lints on every target; the CUDA backends are built in too, because they must compile on
# machines without CUDA (they load CUDA at run time).
cargo clippy --workspace --all-targets --features reel-muon/cuda,reel-loader/cuda -- -D warnings
cargo test --workspace --doc
# Unit, integration and CLI tests, then the Python package's (pytest, on the package
# setup.sh installed, with the CLIs those tests build their store with).
status=0
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast || status=$?
else
  cargo test --workspace --no-fail-fast --lib --bins --tests || status=$?
fi
# The scale harness at its small sizes (its large sizes are benchmarks: benches/scale/run.sh).
# Built with the workspace's features, like the tests above: nothing is built again.
cargo test --workspace --bench scale -- --rows 10000,100000 >/dev/null || status=$?
cargo test --workspace --bench cache_scale -- --blocks 3000 >/dev/null || status=$?
cargo test --workspace --bench scale_plan -- --local 3000 --s3 1000 >/dev/null || status=$?
cargo test --workspace --bench scale_state -- --episodes 1000 >/dev/null || status=$?
cargo build --profile test --quiet -p reel-synth-cli -p reel-plan-cli -p reel-ingest-cli \
  -p reel-curate-cli -p reel-load-cli -p reel-warm-cli -p reel-supervise-cli
REEL_BIN_DIR=$CARGO_TARGET_DIR/debug "$REEL_PYTHON" -m pytest -q crates/reel-python/tests || status=$?
exit $status
