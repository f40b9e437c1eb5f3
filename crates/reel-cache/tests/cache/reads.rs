//! Reads equal the remote's bytes, whether served from blocks, fetched, or both;
//! adjacent misses share one request and each block is fetched once.

use std::sync::Arc;

use proptest::prelude::*;
use reel_cache::BlockCache;
use reel_io::ByteSource;
use reel_io::test_support::S3Server;

use crate::{BLOCK, block_files, check_ranges, config, local_store, pattern, range_strategy};

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
