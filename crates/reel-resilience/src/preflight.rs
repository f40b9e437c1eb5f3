//! Checks a node before a job starts.
//!
//! A bad node rarely raises an alert: a cache disk that writes at a tenth of its speed, a
//! filesystem with no room for the working set, a GPU with uncorrected ECC errors, a clock
//! years in the past. [`run`] measures each of these and compares it with a threshold from
//! [`PreflightConfig`], so a job can refuse a node before it holds the rest of the fleet
//! hostage. Every check reports its name, [`Status`], measured value, threshold and a
//! reason in words; a check that cannot apply (no manifest given, no `nvidia-smi`) is
//! [`Status::Skipped`] with the reason, never silently passed.
//!
//! Files: `report` (the [`Report`] and its [`Check`]s), `config` (thresholds, from TOML),
//! `disk` (cache folders writable, fast and roomy enough), `working_set` (the manifest's
//! objects and how much of them the cache holds), `memory`, `clock`, `gpu` (the GPU checks)
//! and `nvidia_smi` (querying and parsing it).

mod clock;
mod config;
mod disk;
mod gpu;
mod memory;
mod nvidia_smi;
mod report;
mod working_set;

use std::path::PathBuf;

pub use config::{
    CacheCoverageConfig, ClockConfig, ConfigError, GpuConfig, IoConfig, MemoryConfig,
    PreflightConfig, SpaceConfig,
};
pub use report::{Check, Report, Status};

/// What to check: the node-local cache folders and, optionally, the job's manifest.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// Cache folders (the first holds the cache's metadata, as in `reel-cache`).
    pub cache_dirs: Vec<PathBuf>,
    /// The training manifest whose working set the cache should hold.
    pub manifest: Option<PathBuf>,
}

/// Runs every check against `target` and returns the report. Never fails: what cannot be
/// checked is reported as a failed or skipped check.
pub fn run(target: &Target, config: &PreflightConfig) -> Report {
    let mut checks = Vec::new();
    for dir in &target.cache_dirs {
        let check = disk::check_writable(dir);
        let writable = check.status == Status::Pass;
        checks.push(check);
        checks.extend(disk::check_throughput(dir, writable, &config.io));
    }
    if target.cache_dirs.is_empty() {
        checks.push(Check::new("cache_writable", None, "").skipped("no cache folder given"));
    }

    let manifest = working_set::check_manifest(target.manifest.as_deref());
    let working_set = manifest.1;
    checks.push(manifest.0);
    let (coverage, missing_bytes) =
        working_set::check_coverage(&target.cache_dirs, working_set.as_ref(), &config.cache);
    checks.push(coverage);
    for dir in &target.cache_dirs {
        // Blocks spread evenly over the folders by hash.
        let share = missing_bytes / target.cache_dirs.len() as u64;
        checks.push(disk::check_free_space(dir, share, &config.space));
    }

    checks.push(memory::check_memory(&config.memory));
    checks.extend(clock::check_clock(&config.clock));
    checks.extend(gpu::check_gpus(&config.gpu));
    Report {
        host: host_name(),
        passed: checks.iter().all(|c| c.status != Status::Fail),
        checks,
    }
}

/// Removes a test file however the check that wrote it ends.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}
