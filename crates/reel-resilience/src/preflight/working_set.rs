//! The manifest's working set and how much of it the cache already holds.

use std::path::{Path, PathBuf};

use reel_cache::WorkingSet;

use super::config::CacheCoverageConfig;
use super::report::{Check, Status};

const MIB: f64 = (1u64 << 20) as f64;

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
    // The working set is the distinct objects the episodes live in, as reel-warm fetches it.
    let objects: Vec<(String, u64)> = match manifest.distinct_objects().and_then(|objects| {
        objects
            .iter()
            .map(|e| Ok((e.uri()?.into_owned(), e.bytes())))
            .collect()
    }) {
        Ok(objects) => objects,
        Err(e) => {
            return (
                check.with(Status::Fail, None, None, format!("unreadable row: {e}")),
                None,
            );
        }
    };
    let set = WorkingSet::new(objects);
    let reason = format!(
        "mapped {} episodes in {} objects, {:.1} MiB working set",
        manifest.len(),
        set.len(),
        set.total_bytes() as f64 / MIB
    );
    (
        check.with(Status::Pass, Some(manifest.len() as f64), None, reason),
        Some(set),
    )
}

/// The coverage check and the working-set bytes not yet cached.
pub(super) fn check_coverage(
    dirs: &[PathBuf],
    set: Option<&WorkingSet>,
    config: &CacheCoverageConfig,
) -> (Check, u64) {
    let check = Check::new("cache_coverage", dirs.first().map(PathBuf::as_path), "%");
    let Some(set) = set else {
        return (check.skipped("no usable manifest"), 0);
    };
    if dirs.is_empty() || !dirs.iter().all(|d| d.is_dir()) {
        return (check.skipped("no usable cache folder"), set.total_bytes());
    }
    let mut cache = reel_cache::CacheConfig::new(dirs[0].clone(), u64::MAX);
    cache.dirs = dirs.to_vec();
    cache.block_size = config.block_size;
    cache.page_size = config.page_size;
    let coverage = match set.coverage(&cache) {
        Ok(coverage) => coverage,
        Err(e) => {
            let check = check.with(Status::Fail, None, None, e.to_string());
            return (check, set.total_bytes());
        }
    };
    let pct = coverage.cached_percent();
    let what = format!(
        "{} of {} objects wholly cached, {:.1} of {:.1} MiB",
        coverage.whole_objects,
        coverage.objects,
        coverage.cached_bytes as f64 / MIB,
        coverage.total_bytes as f64 / MIB
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
        coverage.missing_bytes(),
    )
}
