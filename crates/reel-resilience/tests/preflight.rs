//! Preflight's cache coverage against a cache warmed by reel-cache, and the clock skew
//! check against a real file.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use reel_cache::{BlockCache, CacheConfig, WarmItem, WarmOptions};
use reel_io::Store;
use reel_manifest::{ManifestMeta, ManifestRow, SamplingRule, write_manifest};
use reel_resilience::preflight::{self, PreflightConfig, Status, Target};

const BLOCK: u64 = 64 << 10;

fn easy_config() -> PreflightConfig {
    let mut config = PreflightConfig::default();
    config.io.test_mib = 1;
    config.io.min_write_mib_s = 0.0;
    config.io.min_read_mib_s = 0.0;
    config.space.headroom_mib = 0;
    config.memory.min_available_mib = 0;
    config.cache.block_size = BLOCK;
    config.cache.page_size = 4 << 10;
    config
}

#[test]
fn coverage_counts_the_warmed_share_of_the_working_set() {
    let remote = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let store = Store::open(remote.path().to_str().unwrap()).unwrap();
    let sizes = [3 * BLOCK, BLOCK];
    for (i, size) in sizes.iter().enumerate() {
        store
            .write_atomic(&format!("ep-{i}.mcap"), vec![i as u8; *size as usize])
            .unwrap();
    }
    let uris = ["ep-0.mcap", "ep-1.mcap"];
    // Two episodes share the first object: it counts once.
    let rows: Vec<ManifestRow<'_>> = [("a", 0), ("b", 0), ("c", 1)]
        .iter()
        .map(|&(id, object)| ManifestRow {
            episode_id: id,
            uri: uris[object],
            end_ns: 1_000_000_000,
            bytes: sizes[object],
            ..Default::default()
        })
        .collect();
    let manifest = work.path().join("manifest.arrow");
    let rule = SamplingRule::at_hz(10.0, 0.0, 0.0);
    write_manifest(&manifest, &rows, &ManifestMeta::new("q", "s", rule)).unwrap();

    // Warm only the first object.
    let mut cache_config = CacheConfig::new(cache_dir.path(), 1 << 30);
    cache_config.block_size = BLOCK;
    cache_config.page_size = 4 << 10;
    let cache = BlockCache::for_store(cache_config, &store).unwrap();
    let options = WarmOptions::default();
    let plan = cache
        .plan_warm(&[WarmItem::whole(uris[0])], &options)
        .unwrap();
    cache.warm(plan, &options, |_| {}).unwrap();

    let target = Target {
        cache_dirs: vec![cache_dir.path().to_owned()],
        manifest: Some(manifest),
    };
    let report = preflight::run(&target, &easy_config());
    let coverage = report
        .checks
        .iter()
        .find(|c| c.name == "cache_coverage")
        .unwrap();
    assert_eq!(coverage.status, Status::Warn);
    assert_eq!(coverage.value, Some(75.0));
    assert!(coverage.reason.starts_with("1 of 2 objects wholly cached"));
    assert!(report.passed);

    // Requiring the whole working set turns the warning into a failure.
    let mut strict = easy_config();
    strict.cache.fail_below_pct = 100.0;
    let report = preflight::run(&target, &strict);
    assert!(!report.passed);
    assert_eq!(
        report
            .failures()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["cache_coverage"]
    );
}

#[test]
fn clock_skew_against_a_local_reference_is_about_zero() {
    let cache_dir = tempfile::tempdir().unwrap();
    let reference = tempfile::tempdir().unwrap();
    let mut config = easy_config();
    config.clock.reference_dir = Some(reference.path().to_owned());
    let target = Target {
        cache_dirs: vec![cache_dir.path().to_owned()],
        manifest: None,
    };
    let report = preflight::run(&target, &config);
    let skew = report
        .checks
        .iter()
        .find(|c| c.name == "clock_skew")
        .unwrap();
    // The local kernel stamps the file: the skew is bounded by the write's duration and
    // the filesystem's timestamp granularity.
    assert_eq!(skew.status, Status::Pass);
    assert!(skew.value.unwrap().abs() < 1.0);
    assert_eq!(std::fs::read_dir(reference.path()).unwrap().count(), 0);
}
