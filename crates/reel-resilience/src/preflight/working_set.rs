//! The manifest's working set and how much of it the cache already holds.

use std::path::{Path, PathBuf};

use super::config::CacheCoverageConfig;
use super::report::{Check, Status};

/// One object of the working set: its path in the store and its size.
type WorkingSet = Vec<(String, u64)>;

pub(super) fn check_manifest(path: Option<&Path>) -> (Check, Option<WorkingSet>) {
    let check = Check::new("manifest", path, "episodes");
    let Some(path) = path else {
        return (check.skipped("no manifest given"), None);
    };
    let manifest = match reel_manifest::Manifest::open(path) {
        Ok(m) => m,
        Err(e) => {
            return (
                check.with(
                    Status::Fail,
                    None,
                    None,
                    format!("cannot map the manifest: {e}"),
                ),
                None,
            );
        }
    };
    // The working set is the distinct objects the episodes live in.
    let set: Vec<(String, u64)> = match manifest.distinct_objects().and_then(|objects| {
        objects
            .iter()
            .map(|e| Ok((e.uri()?.to_owned(), e.bytes())))
            .collect()
    }) {
        Ok(set) => set,
        Err(e) => {
            return (
                check.with(Status::Fail, None, None, format!("unreadable row: {e}")),
                None,
            );
        }
    };
    let bytes: u64 = set.iter().map(|(_, b)| b).sum();
    let reason = format!(
        "mapped {} episodes in {} objects, {:.1} MiB working set",
        manifest.len(),
        set.len(),
        bytes as f64 / (1u64 << 20) as f64
    );
    (
        check.with(Status::Pass, Some(manifest.len() as f64), None, reason),
        Some(set),
    )
}

/// The coverage check and the working-set bytes not yet cached.
pub(super) fn check_coverage(
    dirs: &[PathBuf],
    set: Option<&[(String, u64)]>,
    config: &CacheCoverageConfig,
) -> (Check, u64) {
    let check = Check::new("cache_coverage", dirs.first().map(PathBuf::as_path), "%");
    let Some(set) = set else {
        return (check.skipped("no usable manifest"), 0);
    };
    let total: u64 = set.iter().map(|(_, b)| b).sum();
    if dirs.is_empty() || !dirs.iter().all(|d| d.is_dir()) {
        return (check.skipped("no usable cache folder"), total);
    }
    let mut cache = reel_cache::CacheConfig::new(dirs[0].clone(), u64::MAX);
    cache.dirs = dirs.to_vec();
    cache.block_size = config.block_size;
    cache.page_size = config.page_size;
    let mut cached = 0u64;
    let mut whole = 0usize;
    for (path, bytes) in set {
        match reel_cache::cached_coverage(&cache, path) {
            Ok(Some(c)) => {
                cached += c.cached_bytes.min(*bytes);
                whole += usize::from(c.cached_blocks == c.blocks);
            }
            Ok(None) => {}
            Err(e) => return (check.with(Status::Fail, None, None, e.to_string()), total),
        }
    }
    let pct = if total == 0 {
        100.0
    } else {
        100.0 * cached as f64 / total as f64
    };
    let what = format!(
        "{whole} of {} objects wholly cached, {:.1} of {:.1} MiB",
        set.len(),
        cached as f64 / (1u64 << 20) as f64,
        total as f64 / (1u64 << 20) as f64
    );
    let (status, threshold, reason) = if pct < config.fail_below_pct {
        (
            Status::Fail,
            config.fail_below_pct,
            format!("{what}: {pct:.1} % is below {:.1} %", config.fail_below_pct),
        )
    } else if pct < config.warn_below_pct {
        (
            Status::Warn,
            config.warn_below_pct,
            format!(
                "{what}: {pct:.1} % is below {:.1} % (misses will be read from the remote store)",
                config.warn_below_pct
            ),
        )
    } else {
        (
            Status::Pass,
            config.warn_below_pct,
            format!("{what}: {pct:.1} %"),
        )
    };
    (
        check.with(status, Some(pct), Some(threshold), reason),
        total - cached,
    )
}
