#!/usr/bin/env bash
# reel-muon's CPU Muon step beside torch.optim.Muon (as shipped: Newton–Schulz in bf16; and with
# Newton–Schulz in f32) on the small transformer's hidden matrices, same thread count, two rounds
# interleaved so both see the same machine load. Outside CI; needs the peer venv of torch_muon.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS=${THREADS:-2}
PY=${REEL_PEERS_PYTHON:-$HOME/.cache/reel/venv-peers/bin/python}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/reel/target}
cargo bench -p reel-muon --bench muon_step --no-run >&2
for round in 1 2; do
  RAYON_NUM_THREADS=$THREADS cargo bench -q -p reel-muon --bench muon_step -- muon_step 2>/dev/null
  "$PY" benches/peers/torch_muon.py --threads "$THREADS"
done
