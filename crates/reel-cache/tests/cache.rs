//! The cache returns exactly what the remote holds, whatever happens to its disk, its
//! remote or the processes sharing it.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opendal::layers::ChaosLayer;
use proptest::prelude::*;
use reel_cache::{BlockCache, CacheConfig, Error, WarmItem, WarmOptions};
use reel_io::test_support::S3Server;
use reel_io::{ByteSource, Store};

const BLOCK: u64 = 64 << 10;

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

/// Small blocks and pages so that short tests cross many of both; fast retries.
fn config(dir: &Path, capacity: u64) -> CacheConfig {
    let mut config = CacheConfig::new(dir, capacity);
    config.block_size = BLOCK;
    config.page_size = 4 << 10;
    config.max_request_bytes = 4 * BLOCK;
    config.retries = 3;
    config.retry_min_delay = Duration::from_millis(5);
    config.retry_max_delay = Duration::from_millis(20);
    config
}

fn local_store(dir: &Path) -> Store {
    Store::open(dir.to_str().unwrap()).unwrap()
}

/// All block files under a cache folder.
fn block_files(cache_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for object in std::fs::read_dir(cache_dir.join("blocks")).unwrap() {
        for file in std::fs::read_dir(object.unwrap().path()).unwrap() {
            out.push(file.unwrap().path());
        }
    }
    out.sort();
    out
}

fn check_ranges(object: &dyn ByteSource, data: &[u8], ranges: &[(u64, u64)]) {
    let len = data.len() as u64;
    for &(a, b) in ranges {
        let (start, end) = (a.min(b) % (len + 1), a.max(b) % (len + 1));
        let (start, end) = (start.min(end), start.max(end));
        let got = object.read_range(start..end).unwrap();
        assert_eq!(
            &got[..],
            &data[start as usize..end as usize],
            "{start}..{end}"
        );
    }
}

fn range_strategy() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..1_200_000, 0u64..1_200_000), 1..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// One cache per case, warmed by earlier reads of the same case: hits, misses and
    /// reads straddling both all equal the bytes of the object.
    #[test]
    fn local_folder_reads_equal_direct_reads(ranges in range_strategy(), len in 1usize..1_000_000) {
        let remote = tempfile::tempdir().unwrap();
        let store = local_store(remote.path());
        let data = pattern(len, 7);
        store.write_atomic("eps/a.mcap", data.clone()).unwrap();
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
        let object = cache.object("eps/a.mcap").unwrap();
        check_ranges(&object, &data, &ranges);
        // And once more, now mostly from disk.
        check_ranges(&object, &data, &ranges);
        let direct = store.source("eps/a.mcap");
        check_ranges(&direct, &data, &ranges);
    }
}

#[test]
fn s3_reads_equal_direct_reads() {
    let server = S3Server::start("landing").unwrap();
    let store = server.store("landing", "canonical").unwrap();
    let data = pattern(900_001, 3);
    store.write_atomic("ep-0.mcap", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("ep-0.mcap").unwrap();
    assert!(!object.version().is_empty());
    let direct = store.source("ep-0.mcap");

    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 16,
        ..ProptestConfig::default()
    });
    runner
        .run(&range_strategy(), |ranges| {
            check_ranges(&object, &data, &ranges);
            check_ranges(&direct, &data, &ranges);
            Ok(())
        })
        .unwrap();
    let metrics = cache.metrics();
    assert!(metrics.hits > 0 && metrics.misses > 0, "{metrics:?}");
    assert_eq!(metrics.get_errors, 0);
}

#[test]
fn adjacent_misses_are_coalesced_and_hits_never_reach_the_remote() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(10 * BLOCK as usize + 100, 1);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("a.bin").unwrap();

    // Blocks 1..=3: one request for three blocks.
    let got = object.read_range(BLOCK + 10..3 * BLOCK + 20).unwrap();
    assert_eq!(
        &got[..],
        &data[BLOCK as usize + 10..3 * BLOCK as usize + 20]
    );
    let m = cache.metrics();
    assert_eq!((m.remote_requests, m.misses, m.hits), (1, 3, 0));
    assert_eq!(m.bytes_read_external, 3 * BLOCK);
    assert_eq!(m.bytes_requested_external, 2 * BLOCK + 10);

    // Blocks 0..=9: 1..=3 are hits; 0 is one run, 4..=9 is split by max_request_bytes.
    let got = object.read_range(0..data.len() as u64).unwrap();
    assert_eq!(&got[..], &data[..]);
    let m = cache.metrics();
    assert_eq!((m.remote_requests, m.hits), (1 + 1 + 2, 3));

    // Everything is cached now.
    let before = cache.metrics();
    let got = object.read_range(5..data.len() as u64 - 5).unwrap();
    assert_eq!(&got[..], &data[5..data.len() - 5]);
    let m = cache.metrics();
    assert_eq!(m.remote_requests, before.remote_requests);
    assert_eq!(m.hits - before.hits, 11);
    assert!(m.hit_rate() > 0.5, "{m:?}");
    assert_eq!(block_files(cache_dir.path()).len(), 11);
}

#[test]
fn one_fetch_per_block_across_threads() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = Arc::new(pattern(8 * BLOCK as usize, 9));
    store.write_atomic("a.bin", data.to_vec()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let object = object.clone();
            let data = Arc::clone(&data);
            s.spawn(move || {
                // Overlapping ranges in different orders.
                for i in 0..8u64 {
                    let b = (i + t) % 8;
                    let range = b * BLOCK..((b + 2) * BLOCK).min(8 * BLOCK);
                    let got = object.read_range(range.clone()).unwrap();
                    assert_eq!(&got[..], &data[range.start as usize..range.end as usize]);
                }
            });
        }
    });
    assert_eq!(cache.metrics().bytes_read_external, 8 * BLOCK);
}

#[test]
fn corrupt_blocks_are_dropped_and_fetched_again() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(3 * BLOCK as usize, 5);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    object.read_range(0..3 * BLOCK).unwrap();

    let files = block_files(cache_dir.path());
    assert_eq!(files.len(), 3);
    // A flipped payload bit in block 1, a truncated block 2.
    let mut bytes = std::fs::read(&files[1]).unwrap();
    let at = bytes.len() - 1000;
    bytes[at] ^= 1;
    std::fs::write(&files[1], bytes).unwrap();
    let bytes = std::fs::read(&files[2]).unwrap();
    std::fs::write(&files[2], &bytes[..bytes.len() / 2]).unwrap();

    let before = cache.metrics();
    let got = object.read_range(0..3 * BLOCK).unwrap();
    assert_eq!(&got[..], &data[..]);
    let m = cache.metrics();
    assert_eq!(m.corrupt_blocks - before.corrupt_blocks, 2);
    assert_eq!(
        m.bytes_read_external - before.bytes_read_external,
        2 * BLOCK
    );
    // The replacements are good: another read is all hits.
    let before = cache.metrics();
    assert_eq!(&object.read_range(0..3 * BLOCK).unwrap()[..], &data[..]);
    let m = cache.metrics();
    assert_eq!((m.hits - before.hits, m.misses - before.misses), (3, 0));
}

#[test]
fn a_block_copied_from_another_object_is_refused() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let (a, b) = (
        pattern(2 * BLOCK as usize, 7),
        pattern(2 * BLOCK as usize, 8),
    );
    store.write_atomic("a.bin", a.clone()).unwrap();
    store.write_atomic("b.bin", b.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let (object_a, object_b) = (
        cache.object("a.bin").unwrap(),
        cache.object("b.bin").unwrap(),
    );
    object_a.read_range(0..2 * BLOCK).unwrap();
    object_b.read_range(0..2 * BLOCK).unwrap();
    let files = block_files(cache_dir.path());
    assert_eq!(files.len(), 4);
    let of = |object: &str| -> Vec<&PathBuf> {
        let dir = files.iter().find(|f| {
            std::fs::read(f)
                .unwrap()
                .ends_with(&if object == "a" { &a } else { &b }[BLOCK as usize..])
        });
        let dir = dir.unwrap().parent().unwrap();
        files.iter().filter(|f| f.parent() == Some(dir)).collect()
    };
    let (blocks_a, blocks_b) = (of("a"), of("b"));
    // Block 0 of a, copied over block 0 of b (same size, valid checksums); block 1 of b
    // renamed over its block 0.
    std::fs::copy(blocks_a[0], blocks_b[0]).unwrap();
    assert!(
        !object_b.is_cached(0, true),
        "another object's block passed --verify"
    );
    std::fs::copy(blocks_a[0], blocks_b[0]).unwrap();
    assert_eq!(&object_b.read_range(0..2 * BLOCK).unwrap()[..], &b[..]);
    std::fs::copy(blocks_b[1], blocks_b[0]).unwrap();
    assert!(
        !object_b.is_cached(0, true),
        "another offset's block passed --verify"
    );
    assert_eq!(&object_b.read_range(0..2 * BLOCK).unwrap()[..], &b[..]);
}

#[test]
fn a_new_object_version_never_meets_old_blocks() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    store.write_atomic("a.bin", pattern(100_000, 1)).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let old = cache.object("a.bin").unwrap();
    old.read_range(0..100_000).unwrap();
    let new_data = pattern(120_000, 2);
    store.write_atomic("a.bin", new_data.clone()).unwrap();
    let new = cache.object("a.bin").unwrap();
    assert_ne!(old.version(), new.version());
    assert_eq!(&new.read_range(0..120_000).unwrap()[..], &new_data[..]);
}

#[test]
fn remote_down_hits_are_served_and_misses_name_the_object() {
    let server = S3Server::start("landing").unwrap();
    let store = server.store("landing", "canonical").unwrap();
    let data = pattern(4 * BLOCK as usize, 11);
    store.write_atomic("ep-1.mcap", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    cache
        .object("ep-1.mcap")
        .unwrap()
        .read_range(0..2 * BLOCK)
        .unwrap();
    drop(server);

    // Opening falls back to the recorded version; blocks 0 and 1 are still served.
    let object = cache.object("ep-1.mcap").unwrap();
    let got = object.read_range(100..2 * BLOCK).unwrap();
    assert_eq!(&got[..], &data[100..2 * BLOCK as usize]);
    let err = object.read_range(BLOCK..3 * BLOCK).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("s3://landing/canonical/ep-1.mcap"),
        "{message}"
    );
    assert!(matches!(err, reel_io::Error::Store { .. }), "{err:?}");
    // An object the cache never saw cannot be opened, with a clear error.
    let err = cache.object("ep-2.mcap").unwrap_err();
    assert!(err.to_string().contains("ep-2.mcap"), "{err}");
    assert!(cache.metrics().get_errors > 0);
}

#[test]
fn a_local_store_gone_is_down_not_empty() {
    let remote = tempfile::tempdir().unwrap();
    let root = remote.path().join("store");
    let store = local_store(&root);
    let data = pattern(4 * BLOCK as usize, 12);
    store.write_atomic("ep-1.mcap", data.clone()).unwrap();
    store.write_atomic("ep-2.mcap", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let seen = cache.object("ep-1.mcap").unwrap();
    seen.read_range(0..2 * BLOCK).unwrap();

    // One object removed while its store is there: gone, whatever the cache holds.
    std::fs::remove_file(root.join("ep-2.mcap")).unwrap();
    let err = cache.object("ep-2.mcap").unwrap_err();
    assert!(
        matches!(
            err,
            reel_cache::Error::Source(reel_io::Error::NotFound { .. })
        ),
        "{err:?}"
    );

    // The whole folder gone (unmounted, removed): cached blocks are still served.
    std::fs::remove_dir_all(&root).unwrap();
    let object = cache.object("ep-1.mcap").unwrap();
    assert_eq!(
        &object.read_range(10..2 * BLOCK).unwrap()[..],
        &data[10..2 * BLOCK as usize]
    );
    let err = object.read_range(2 * BLOCK..3 * BLOCK).unwrap_err();
    assert!(err.to_string().contains("ep-1.mcap"), "{err}");

    // A reader opened after it went: the same, and the folder is not created again.
    let uri = root.to_str().unwrap();
    let reopened =
        BlockCache::for_existing_store(config(cache_dir.path(), 1 << 30), uri, &Default::default())
            .unwrap();
    assert!(reopened.store_missing());
    let object = reopened.object("ep-1.mcap").unwrap();
    assert_eq!(
        &object.read_range(0..2 * BLOCK).unwrap()[..],
        &data[..2 * BLOCK as usize]
    );
    let err = object.read_range(3 * BLOCK..4 * BLOCK).unwrap_err();
    assert!(
        err.to_string().contains(&format!("{uri}/ep-1.mcap")),
        "{err}"
    );
    let err = reopened.object("ep-3.mcap").unwrap_err();
    assert!(err.to_string().contains("ep-3.mcap"), "{err}");
    assert!(!root.exists());
    // With the folder there, the cache is an ordinary one.
    let store = local_store(&root);
    store.write_atomic("ep-1.mcap", data.clone()).unwrap();
    let present =
        BlockCache::for_existing_store(config(cache_dir.path(), 1 << 30), uri, &Default::default())
            .unwrap();
    assert!(!present.store_missing());
}

#[test]
fn faults_injected_by_the_chaos_layer_are_retried() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(40 * BLOCK as usize, 13);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let chaotic = store.operator().clone().layer(ChaosLayer::new(0.3));
    let cache_dir = tempfile::tempdir().unwrap();
    let mut config = config(cache_dir.path(), 1 << 30);
    config.retries = 30;
    config.retry_min_delay = Duration::from_millis(1);
    config.retry_max_delay = Duration::from_millis(2);
    let cache = BlockCache::new(config, chaotic, "chaos").unwrap();
    let object = cache.object("a.bin").unwrap();
    for b in (0..40).step_by(3) {
        let range = b * BLOCK + 7..((b + 2) * BLOCK).min(40 * BLOCK);
        let got = object.read_range(range.clone()).unwrap();
        assert_eq!(&got[..], &data[range.start as usize..range.end as usize]);
    }
    // Without retries the same faults surface as errors naming the object.
    let cache_dir = tempfile::tempdir().unwrap();
    let mut config = config_no_retry(cache_dir.path());
    config.retries = 0;
    let always = store.operator().clone().layer(ChaosLayer::new(1.0));
    let cache = BlockCache::new(config, always, "chaos").unwrap();
    let err = cache
        .object("a.bin")
        .unwrap()
        .read_range(0..10)
        .unwrap_err();
    assert!(err.to_string().contains("chaos/a.bin"), "{err}");
}

fn config_no_retry(dir: &Path) -> CacheConfig {
    let mut c = config(dir, 1 << 30);
    c.retries = 0;
    c
}

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

/// Several processes (this test binary, re-run as children) read the same objects
/// through one cold cache at once; every read is right and the cache ends up whole.
#[test]
fn processes_share_one_cache() {
    const CHILD: &str = "REEL_CACHE_TEST_CHILD";
    if let Ok(spec) = std::env::var(CHILD) {
        let (remote, cache_dir, seed) = {
            let mut parts = spec.split('|');
            (
                parts.next().unwrap().to_owned(),
                parts.next().unwrap().to_owned(),
                parts.next().unwrap().parse::<u64>().unwrap(),
            )
        };
        let store = Store::open(&remote).unwrap();
        let cache = BlockCache::for_store(config(Path::new(&cache_dir), 1 << 30), &store).unwrap();
        for k in 0..4 {
            let name = format!("ep-{}.bin", (k + seed) % 4);
            let data = store.read(&name).unwrap();
            let object = cache.object(&name).unwrap();
            let len = data.len() as u64;
            for i in 0..24 {
                let start = (i * 37_813 + seed * 101) % len;
                let end = (start + 150_000).min(len);
                let got = object.read_range(start..end).unwrap();
                assert_eq!(&got[..], &data[start as usize..end as usize]);
            }
        }
        return;
    }
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    for k in 0..4 {
        store
            .write_atomic(
                &format!("ep-{k}.bin"),
                pattern(1_000_000 + k * 1000, k as u32),
            )
            .unwrap();
    }
    let cache_dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let spawned: Vec<_> = (0..4)
        .map(|seed| {
            std::process::Command::new(&exe)
                .args(["processes_share_one_cache", "--exact", "--test-threads=1"])
                .env(
                    CHILD,
                    format!(
                        "{}|{}|{}",
                        remote.path().display(),
                        cache_dir.path().display(),
                        seed
                    ),
                )
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in spawned {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed: {stdout}");
        // The child really ran the reader (a name filter matching nothing also succeeds).
        assert!(stdout.contains("1 passed"), "{stdout}");
    }
    // No temporary files left, every block verifies, every byte matches.
    let files = block_files(cache_dir.path());
    assert!(
        files
            .iter()
            .all(|f| f.extension().is_some_and(|e| e == "blk")),
        "{files:?}"
    );
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    for k in 0..4 {
        let object = cache.object(&format!("ep-{k}.bin")).unwrap();
        let data = store.read(&format!("ep-{k}.bin")).unwrap();
        assert_eq!(
            &object.read_range(0..data.len() as u64).unwrap()[..],
            &data[..]
        );
    }
}

/// A block this process holds open and has verified is replaced on disk (renamed over,
/// as another process would) or rewritten in place: either way the next read follows the
/// file now at the block's path, finds it corrupt, drops it and fetches it again.
#[test]
fn a_held_block_changed_on_disk_is_checked_again() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(3 * BLOCK as usize, 21);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    object.read_range(0..3 * BLOCK).unwrap();
    // Hits: every block is now held open with every page verified.
    assert_eq!(&object.read_range(0..3 * BLOCK).unwrap()[..], &data[..]);

    let files = block_files(cache_dir.path());
    let flip = |bytes: &mut Vec<u8>| {
        let at = bytes.len() - 3000;
        bytes[at] ^= 0x10;
    };
    // Block 0 replaced by a corrupt copy through a rename.
    let mut bytes = std::fs::read(&files[0]).unwrap();
    flip(&mut bytes);
    let tmp = files[0].with_file_name(".0.blk.other-1-0.tmp");
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::rename(&tmp, &files[0]).unwrap();
    // Block 1 rewritten in place. File times tick in jiffies: let one pass so that the
    // write gives the file a modification time its handle has not seen.
    std::thread::sleep(Duration::from_millis(30));
    let mut bytes = std::fs::read(&files[1]).unwrap();
    flip(&mut bytes);
    std::fs::write(&files[1], &bytes).unwrap();

    let before = cache.metrics();
    assert_eq!(&object.read_range(0..3 * BLOCK).unwrap()[..], &data[..]);
    let m = cache.metrics();
    assert_eq!(m.corrupt_blocks - before.corrupt_blocks, 2);
    assert_eq!((m.hits - before.hits, m.misses - before.misses), (1, 2));
    assert_eq!(
        m.bytes_read_external - before.bytes_read_external,
        2 * BLOCK
    );
    for i in 0..3 {
        assert!(object.is_cached(i, true), "block {i}");
    }
}

/// What open handles do not catch: a page that changes below the file system (its
/// file's metadata intact) after this process verified it. `is_cached(_, true)` (what
/// `reel-warm --verify` runs) re-reads and re-hashes every page, so it catches it.
#[test]
fn a_full_verify_catches_what_held_handles_trust() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(2 * BLOCK as usize, 23);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    object.read_range(0..2 * BLOCK).unwrap();
    object.read_range(0..2 * BLOCK).unwrap();

    let file = &block_files(cache_dir.path())[1];
    let modified = file.metadata().unwrap().modified().unwrap();
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 1;
    std::fs::write(file, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(modified)
        .unwrap();

    let before = cache.metrics();
    assert!(object.is_cached(0, true));
    assert!(!object.is_cached(1, true));
    assert_eq!(cache.metrics().corrupt_blocks - before.corrupt_blocks, 1);
    assert!(!file.exists(), "the corrupt block was dropped");
    assert_eq!(&object.read_range(0..2 * BLOCK).unwrap()[..], &data[..]);
    assert_eq!(cache.metrics().misses - before.misses, 1);
}

/// Another process (a second cache over the same folder) evicts blocks this process
/// holds open: they are not served from the unlinked files but fetched again, and the
/// cache ends up whole.
#[test]
fn blocks_evicted_while_held_are_fetched_again() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = pattern(6 * BLOCK as usize, 25);
    store.write_atomic("a.bin", data.clone()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BlockCache::for_store(config(cache_dir.path(), 1 << 30), &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    object.read_range(0..6 * BLOCK).unwrap();
    object.read_range(0..6 * BLOCK).unwrap();

    let block_disk = BLOCK + 48 + 8 * 16 + 8;
    let mut small = config(cache_dir.path(), block_disk / 2);
    small.eviction_slack = Some(1);
    let other = BlockCache::for_store(small, &store).unwrap();
    let scan = other.evict().unwrap().unwrap();
    assert_eq!(scan.evicted_blocks, 6, "{scan:?}");
    assert!(block_files(cache_dir.path()).is_empty());

    let before = cache.metrics();
    assert_eq!(&object.read_range(0..6 * BLOCK).unwrap()[..], &data[..]);
    let m = cache.metrics();
    assert_eq!(m.misses - before.misses, 6);
    assert_eq!(
        m.bytes_read_external - before.bytes_read_external,
        6 * BLOCK
    );
    assert_eq!(block_files(cache_dir.path()).len(), 6);

    // Evicted by this process's own scan: its handles are closed with the files.
    let mut small = config(cache_dir.path(), block_disk / 2);
    small.eviction_slack = Some(1);
    let cache = BlockCache::for_store(small, &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    object.read_range(0..6 * BLOCK).unwrap();
    assert!(cache.evict().unwrap().unwrap().evicted_blocks > 0);
    assert_eq!(&object.read_range(0..6 * BLOCK).unwrap()[..], &data[..]);
}

/// Many threads read the same cached blocks through a table far smaller than the set,
/// so handles are opened, shared, pushed out and reopened under them.
#[test]
fn many_threads_hit_the_same_blocks_through_a_small_table() {
    let remote = tempfile::tempdir().unwrap();
    let store = local_store(remote.path());
    let data = Arc::new(pattern(8 * BLOCK as usize + 333, 27));
    store.write_atomic("a.bin", data.to_vec()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let mut config = config(cache_dir.path(), 1 << 30);
    config.open_blocks = 3;
    let cache = BlockCache::for_store(config, &store).unwrap();
    let object = cache.object("a.bin").unwrap();
    let len = data.len() as u64;
    object.read_range(0..len).unwrap();
    let before = cache.metrics();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let object = object.clone();
            let data = Arc::clone(&data);
            s.spawn(move || {
                for i in 0..200u64 {
                    let start = (i * 7919 + t * 104_729) % len;
                    let end = (start + 1 + (i * 31_337 + t) % (2 * BLOCK)).min(len);
                    let got = object.read_range(start..end).unwrap();
                    assert_eq!(&got[..], &data[start as usize..end as usize]);
                }
            });
        }
    });
    let m = cache.metrics();
    assert_eq!(m.misses, before.misses);
    assert_eq!(m.remote_requests, before.remote_requests);
    assert_eq!(m.corrupt_blocks, 0);
    assert!(m.hits - before.hits >= 8 * 200);
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
