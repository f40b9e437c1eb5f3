#!/bin/bash
# Ingest a whole plan as a Slurm job array: one task per batch; the task id
# ($SLURM_ARRAY_TASK_ID, read by reel-ingest) is the batch it runs.
#
#   reel-plan /data/landing -o plan.json --batches 64
#   sbatch --array=0-63%32 slurm-array.sh plan.json /data/reel-store
#
# %32 caps the tasks running at once; REEL_START_JITTER_MS (default 30000)
# spreads their first requests. A failed task can be resubmitted alone
# (sbatch --array=17 …): reel-ingest resumes from the batch's completion
# records in the store, so only what was not committed is redone.
#SBATCH --job-name=reel-ingest
#SBATCH --cpus-per-task=8
#SBATCH --mem=8G
#SBATCH --time=04:00:00
#SBATCH --output=reel-ingest-%A_%a.log
set -euo pipefail

plan=${1:?usage: sbatch --array=0-N slurm-array.sh PLAN.json STORE [extra reel-ingest args]}
store=${2:?usage: sbatch --array=0-N slurm-array.sh PLAN.json STORE [extra reel-ingest args]}
shift 2

# JSON lines (one per episode and step) go to a file per task; progress to the log.
exec reel-ingest \
  --plan "$plan" \
  --store "$store" \
  --jobs "${SLURM_CPUS_PER_TASK:-8}" \
  --start-jitter-ms "${REEL_START_JITTER_MS:-30000}" \
  "$@" > "reel-ingest-${SLURM_ARRAY_JOB_ID:-0}_${SLURM_ARRAY_TASK_ID:?not run as an array task}.jsonl"
