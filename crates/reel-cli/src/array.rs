//! Which batch of a plan this worker runs: the flag, else the index a Kubernetes Indexed
//! Job or a Slurm array gives each of its tasks.

use anyhow::{Context, bail};

/// `explicit`, else `$JOB_COMPLETION_INDEX` (Kubernetes), else `$SLURM_ARRAY_TASK_ID`.
pub fn batch_index(explicit: Option<usize>) -> anyhow::Result<usize> {
    if let Some(i) = explicit {
        return Ok(i);
    }
    for var in ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"] {
        if let Ok(value) = std::env::var(var) {
            return value
                .trim()
                .parse()
                .with_context(|| format!("${var} is `{value}`, not a batch index"));
        }
    }
    bail!("--batch is required (or $JOB_COMPLETION_INDEX / $SLURM_ARRAY_TASK_ID)")
}
