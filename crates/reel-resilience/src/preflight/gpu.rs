//! GPU health: count, uncorrected ECC errors and row remapping, as `nvidia-smi` reports them.

use std::time::Duration;

use super::config::GpuConfig;
use super::nvidia_smi::{self, GpuRow};
use super::report::{Check, Status};

pub(super) fn check_gpus(config: &GpuConfig) -> Vec<Check> {
    let count = Check::new("gpu_count", None, "GPUs");
    let ecc = Check::new("gpu_ecc_uncorrected", None, "errors");
    let remap = Check::new("gpu_remapped_rows", None, "GPUs");
    let Some(smi) = nvidia_smi::find_on_path("nvidia-smi") else {
        let why = "nvidia-smi is not on PATH";
        return vec![count.skipped(why), ecc.skipped(why), remap.skipped(why)];
    };
    let timeout = Duration::from_secs_f64(config.timeout_s.max(0.1));
    let gpus = match nvidia_smi::query(&smi, timeout) {
        Ok(gpus) => gpus,
        Err(e) => {
            let reason = format!("{} failed: {e}", smi.display());
            return vec![
                count.with(
                    Status::Fail,
                    None,
                    config.expected_count.map(f64::from),
                    reason.clone(),
                ),
                ecc.skipped("no GPU data"),
                remap.skipped("no GPU data"),
            ];
        }
    };

    let n = gpus.len() as f64;
    let count = match config.expected_count {
        Some(expected) => count.at_least(n, f64::from(expected), "devices nvidia-smi lists".into()),
        None if gpus.is_empty() => count.with(
            Status::Warn,
            Some(0.0),
            None,
            "nvidia-smi lists no device".into(),
        ),
        None => count.with(
            Status::Pass,
            Some(n),
            None,
            format!("{} listed: {}", gpus.len(), gpu_names(&gpus)),
        ),
    };

    let reported: Vec<_> = gpus
        .iter()
        .filter_map(|g| g.ecc_uncorrected.map(|e| (g.index, e)))
        .collect();
    let ecc = if reported.is_empty() {
        ecc.skipped("no GPU reports ECC counters (ECC off or unsupported)")
    } else {
        let total: u64 = reported.iter().map(|(_, e)| e).sum();
        let worst: Vec<String> = reported
            .iter()
            .filter(|(_, e)| *e > 0)
            .map(|(i, e)| format!("GPU {i}: {e}"))
            .collect();
        let status = if total > config.max_uncorrected_ecc {
            Status::Fail
        } else {
            Status::Pass
        };
        let reason = format!(
            "uncorrected volatile ECC errors over {} GPUs: {total} (limit {}){}",
            reported.len(),
            config.max_uncorrected_ecc,
            if worst.is_empty() {
                String::new()
            } else {
                format!("; {}", worst.join(", "))
            }
        );
        ecc.with(
            status,
            Some(total as f64),
            Some(config.max_uncorrected_ecc as f64),
            reason,
        )
    };

    let known: Vec<_> = gpus
        .iter()
        .filter(|g| g.remap_pending.is_some() || g.remap_failure.is_some())
        .collect();
    let remap = if known.is_empty() {
        remap.skipped("no GPU reports row remapping (pre-Ampere, or the driver does not expose it)")
    } else {
        let bad: Vec<String> = known
            .iter()
            .filter(|g| g.remap_pending == Some(true) || g.remap_failure == Some(true))
            .map(|g| format!("GPU {}", g.index))
            .collect();
        if bad.is_empty() {
            remap.with(
                Status::Pass,
                Some(0.0),
                Some(0.0),
                format!("no pending or failed row remapping on {} GPUs", known.len()),
            )
        } else {
            remap.with(
                Status::Fail,
                Some(bad.len() as f64),
                Some(0.0),
                format!(
                    "row remapping pending or failed (the GPU needs a reset or repair): {}",
                    bad.join(", ")
                ),
            )
        }
    };
    vec![count, ecc, remap]
}

fn gpu_names(gpus: &[GpuRow]) -> String {
    gpus.iter()
        .map(|g| format!("{} {}", g.index, g.name))
        .collect::<Vec<_>>()
        .join(", ")
}
