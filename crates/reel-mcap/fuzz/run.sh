#!/usr/bin/env bash
# Fuzzes reel-mcap's EpisodeReader for a bounded time (not part of CI).
#
#   crates/reel-mcap/fuzz/run.sh [SECONDS]     # default 300
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The corpus is
# seeded with small canonical episodes packed from reel-synth landing logs. Crashes land
# in crates/reel-mcap/fuzz/artifacts/; the summary line is appended to fuzz/RESULTS.md.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
budget="${1:-300}"
corpus="$here/corpus/episode_reader"
mkdir -p "$corpus"
if [ -z "$(ls -A "$corpus")" ]; then
  tmp="$(mktemp -d)"
  (cd "$root" && cargo run -q --release -p reel-synth-cli -- --out "$tmp/landing" --episodes 3 --seconds 2 \
      --cameras 2 --width 64 --height 48 >/dev/null)
  (cd "$root" && cargo run -q --release -p reel-pack-cli -- "$tmp"/landing/*.mcap -o "$corpus" >/dev/null)
  rm -rf "$tmp"
fi
cd "$here"
log="$(mktemp)"
status=0
cargo +nightly fuzz run episode_reader "$corpus" -- -max_total_time="$budget" -rss_limit_mb=4096 \
  -max_len=262144 2>&1 | tee "$log" || status=$?
summary="$(grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs)' "$log" | tail -1 || true)"
echo "$(date -u +%Y-%m-%dT%H:%MZ) budget=${budget}s exit=$status ${summary}" >> "$here/RESULTS.md"
exit "$status"
