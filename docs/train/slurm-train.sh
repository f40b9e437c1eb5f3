#!/bin/bash
# Train on a Slurm allocation, one task per node (docs/CLUSTER.md §4): warm the node's
# block cache with what the sample spec reads, then one reel-supervise around torchrun
# (node checks, restart from the last complete checkpoint after a crash or a hang).
#
#   export STORE='s3://reel-corpus/v1?region=eu-west-1'
#   export MANIFEST="s3://reel-corpus/v1/runs/42/train.arrow?region=eu-west-1"
#   export RUN=/shared/run-42          # spec.toml in it; checkpoints and logs go there
#   sbatch --nodes=16 --gpus-per-node=8 docs/train/slurm-train.sh
#
# Everything else has a default that the environment overrides: SPEC ($RUN/spec.toml),
# CACHE (/nvme/reel-cache), GPUS_PER_NODE (8), TRAINER (examples/train_torch.py),
# TRAINER_ARGS (extra trainer flags), HANG_AFTER (900 s without a heartbeat),
# MAX_RESTARTS (5), WARM_CONCURRENCY (64), MASTER_ADDR (the first node's name).
#SBATCH --job-name=reel-train
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --requeue
set -euo pipefail

: "${STORE:?set STORE to the store URI}" "${MANIFEST:?set MANIFEST to the manifest URI}"
: "${RUN:?set RUN to the run folder (shared by the nodes)}"
export STORE MANIFEST RUN
export SPEC=${SPEC:-$RUN/spec.toml}
export CACHE=${CACHE:-/nvme/reel-cache}
export GPUS_PER_NODE=${GPUS_PER_NODE:-8}
export TRAINER=${TRAINER:-examples/train_torch.py}
export TRAINER_ARGS=${TRAINER_ARGS:-}
export HANG_AFTER=${HANG_AFTER:-900}
export MAX_RESTARTS=${MAX_RESTARTS:-5}
MASTER=${MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)}
export MASTER

# Warm each node's cache with the spec's working set (exits non-zero, before fetching,
# if it cannot fit).
srun --output="$RUN/warm-%N.jsonl" reel-warm --manifest "$MANIFEST" --store "$STORE" \
  --spec "$SPEC" --cache "$CACHE" --concurrency "${WARM_CONCURRENCY:-64}" --quiet

# One supervisor per node; its events (JSON lines) per node, its log beside them.
srun --kill-on-bad-exit=0 --output="$RUN/events-%N.jsonl" --error="$RUN/supervise-%N.log" \
  bash -c 'exec reel-supervise --max-restarts "$MAX_RESTARTS" --checkpoints "$RUN/checkpoints" \
    --heartbeat "/tmp/reel-heartbeat-$SLURM_JOB_ID" --hang-after "$HANG_AFTER" \
    --preflight-cache "$CACHE" -- \
    torchrun --nnodes="$SLURM_NNODES" --node-rank="$SLURM_NODEID" --master-addr="$MASTER" \
      --nproc-per-node="$GPUS_PER_NODE" "$TRAINER" --manifest "$MANIFEST" --spec "$SPEC" \
      --store "$STORE" --cache "$CACHE" --checkpoints "$RUN/checkpoints" $TRAINER_ARGS'
