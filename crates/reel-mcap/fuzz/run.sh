#!/usr/bin/env bash
# Fuzzes reel-mcap's EpisodeReader for a bounded time (not part of CI).
#
#   crates/reel-mcap/fuzz/run.sh [SECONDS]     # default 300
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a nightly toolchain; where only a
# stable one exists, its nightly features are unlocked with RUSTC_BOOTSTRAP=1 (the ASan
# runtime ships with stable's standard library on x86_64 Linux). The corpus is
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
if cargo +nightly --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz)
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
fi
log="$(mktemp)"
status=0
"${fuzz[@]}" run -O episode_reader "$corpus" -- -max_total_time="$budget" -rss_limit_mb=4096 \
  -max_len=262144 2>&1 | tee "$log" || status=$?
summary="$(grep -E '^(#[0-9]+.*DONE|Done [0-9]+ runs)' "$log" | tail -1 || true)"
echo "- $(date -u +%Y-%m-%dT%H:%MZ) \`./run.sh $budget\` ($("${fuzz[@]}" --version), $(rustc --version)): exit=$status ${summary}" >> "$here/RESULTS.md"
exit "$status"
