//! Several processes and many threads share one cache folder and one handle table.

use std::path::Path;
use std::sync::Arc;

use reel_cache::BlockCache;
use reel_io::{ByteSource, Store};

use crate::{BLOCK, block_files, config, local_store, pattern};

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
                .args([
                    "sharing::processes_share_one_cache",
                    "--exact",
                    "--test-threads=1",
                ])
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
