//! Warming pins a working set that eviction spares; a set that cannot fit fails up
//! front, an interrupted warm resumes, and capacity is kept while filling.

use std::path::Path;
use std::time::{Duration, SystemTime};

use reel_cache::{BlockCache, Error, WarmItem, WarmOptions};
use reel_io::ByteSource;

use crate::{BLOCK, block_files, config, local_store, pattern};

#[test]
fn warm_pins_and_eviction_spares_the_pinned_set() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    for name in ["a", "b", "c"] {
        store
            .write_atomic(&format!("{name}.bin"), pattern(8 * BLOCK as usize, 1))
            .unwrap();
    }
    let cache_dir = tempfile::tempdir().unwrap();
    // Room for about 12 blocks; slack of one block.
    let block_disk = BLOCK + 48 + 8 * 16 + 8;
    let mut config = config(cache_dir.path(), 12 * block_disk);
    config.eviction_slack = Some(block_disk);
    let cache = BlockCache::for_store(config, &store).unwrap();

    let options = WarmOptions {
        pin: Some("job".into()),
        concurrency: 4,
        verify: false,
    };
    let plan = cache
        .plan_warm(&[WarmItem::whole("a.bin")], &options)
        .unwrap();
    assert_eq!(plan.disk_bytes, 8 * block_disk);
    cache.warm(plan, &options, |_| {}).unwrap();
    assert_eq!(cache.pins().unwrap()[0].objects[0].path, "a.bin");

    // Reading b and c (16 more blocks) must evict only b's and c's blocks.
    let b = cache.object("b.bin").unwrap();
    let c = cache.object("c.bin").unwrap();
    b.read_range(0..8 * BLOCK).unwrap();
    // Make b's blocks clearly older than c's.
    for file in block_files(cache_dir.path()) {
        if file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            == b.dir_name()
        {
            let f = std::fs::File::options().write(true).open(&file).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(3600))
                .unwrap();
        }
    }
    c.read_range(0..8 * BLOCK).unwrap();
    cache.evict().unwrap();
    let a = cache.object("a.bin").unwrap();
    for i in 0..a.num_blocks() {
        assert!(a.is_cached(i, true), "pinned block {i} was evicted");
    }
    let cached = |o: &reel_cache::CachedObject| (0..8).filter(|&i| o.is_cached(i, false)).count();
    assert!(cached(&b) < cached(&c), "b {} c {}", cached(&b), cached(&c));
    let m = cache.metrics();
    assert!(m.pages_evicted >= 12, "{m:?}");
    let total: u64 = block_files(cache_dir.path())
        .iter()
        .map(|f| f.metadata().unwrap().len())
        .sum();
    assert!(total <= 12 * block_disk, "{total}");

    // Unpinned, a's blocks are fair game.
    cache.unpin("job").unwrap();
    assert!(cache.pins().unwrap().is_empty());
}

#[test]
fn a_set_that_cannot_fit_fails_before_fetching() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    store
        .write_atomic("a.bin", pattern(10 * BLOCK as usize, 1))
        .unwrap();
    store
        .write_atomic("b.bin", pattern(10 * BLOCK as usize, 2))
        .unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 15 * BLOCK), &store).unwrap();
    let first = WarmOptions {
        pin: Some("first".into()),
        ..WarmOptions::default()
    };
    let plan = cache
        .plan_warm(&[WarmItem::whole("a.bin")], &first)
        .unwrap();
    cache.warm(plan, &first, |_| {}).unwrap();
    let requests = cache.metrics().remote_requests;

    let second = WarmOptions {
        pin: Some("second".into()),
        ..WarmOptions::default()
    };
    let err = cache
        .plan_warm(&[WarmItem::whole("b.bin")], &second)
        .unwrap_err();
    assert!(matches!(err, Error::WontFit { .. }), "{err}");
    assert!(
        err.to_string().contains("pinned by other working sets"),
        "{err}"
    );
    assert_eq!(cache.metrics().remote_requests, requests);
    // Re-warming the first set under its own name fits: it replaces its own pins.
    cache
        .plan_warm(&[WarmItem::whole("a.bin")], &first)
        .unwrap();
}

#[test]
fn warm_resumes_after_a_crash() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(20 * BLOCK as usize + 5, 4);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    // What a crash leaves: some blocks, a temporary file, a block cut short by a power cut.
    object.read_range(0..7 * BLOCK).unwrap();
    let files = block_files(cache_dir.path());
    let tmp = files[0].with_file_name(".9.blk.dead-1-0.tmp");
    std::fs::write(&tmp, b"half a block").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    let cut = files.iter().find(|f| f.ends_with("3.blk")).unwrap();
    std::fs::write(cut, &std::fs::read(cut).unwrap()[..100]).unwrap();
    drop(cache);

    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let options = WarmOptions::default();
    let plan = cache
        .plan_warm(&[WarmItem::whole("a.bin")], &options)
        .unwrap();
    assert_eq!(plan.blocks, 21);
    assert_eq!(plan.cached_bytes, 6 * BLOCK);
    let report = cache.warm(plan, &options, |_| {}).unwrap();
    assert_eq!(report.fetched_bytes, 14 * BLOCK + 5);
    let scan = cache.evict().unwrap().unwrap();
    assert_eq!(scan.stale_temps_removed, 1);
    assert_eq!(scan.blocks, 21);
    let object = cache.object("a.bin").unwrap();
    for i in 0..21 {
        assert!(object.is_cached(i, true));
    }
    let before = cache.metrics();
    assert_eq!(
        &object.read_range(0..data.len() as u64).unwrap()[..],
        &data[..]
    );
    assert_eq!(cache.metrics().remote_requests, before.remote_requests);
}

#[test]
fn filling_below_capacity_counts_writes_instead_of_scanning_and_still_evicts_at_capacity() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    for i in 0..6 {
        store
            .write_atomic(&format!("o{i}.bin"), pattern(4 * BLOCK as usize, i))
            .unwrap();
    }
    let cache_dir = tempfile::tempdir().unwrap();
    let block_disk = BLOCK + 48 + 8 * 16 + 8;
    // Room for 16 blocks, a due check after every block written.
    let mut config = config(cache_dir.path(), 16 * block_disk);
    config.eviction_slack = Some(block_disk);
    let cache = BlockCache::for_store(config, &store).unwrap();
    let record = |dir: &Path| -> u64 {
        let text = std::fs::read(dir.join("usage.json")).expect("usage record");
        serde_json::from_slice::<serde_json::Value>(&text).unwrap()["used_bytes"]
            .as_u64()
            .unwrap()
    };
    // The first due check scans (no record yet); the next ones only add what was written.
    for i in 0..3 {
        cache
            .object(&format!("o{i}.bin"))
            .unwrap()
            .read_range(0..4 * BLOCK)
            .unwrap();
    }
    let usage = cache.usage().unwrap();
    assert_eq!(usage.blocks, 12);
    assert_eq!(
        record(cache_dir.path()),
        usage.used_bytes,
        "the record follows the writes"
    );
    // Past capacity, the due check scans and evicts the least recently used.
    for i in 3..6 {
        cache
            .object(&format!("o{i}.bin"))
            .unwrap()
            .read_range(0..4 * BLOCK)
            .unwrap();
    }
    let usage = cache.usage().unwrap();
    assert!(usage.used_bytes <= 16 * block_disk, "{usage:?}");
    assert!(
        usage.blocks >= 14,
        "evicts to capacity less the slack, no more: {usage:?}"
    );
    assert_eq!(record(cache_dir.path()), usage.used_bytes);
}
