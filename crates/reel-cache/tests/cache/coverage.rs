//! `cached_coverage` counts exactly the blocks a cache holds, without the remote.

use std::path::Path;

use reel_cache::{BlockCache, CacheConfig, Coverage, cached_coverage};
use reel_io::{ByteSource, Store};

use super::BLOCK;

/// A cache spread over `dirs`, with the suite's block and page sizes.
fn config(dirs: &[&Path]) -> CacheConfig {
    let mut config = CacheConfig::new(dirs[0], 1 << 30);
    config.dirs = dirs.iter().map(|d| d.to_path_buf()).collect();
    config.block_size = BLOCK;
    config.page_size = 4 << 10;
    config
}

#[test]
fn counts_blocks_read_through_the_cache_and_never_asks_the_remote() {
    let remote = tempfile::tempdir().unwrap();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(remote.path().to_str().unwrap()).unwrap();
    let len = 5 * BLOCK + 100; // six blocks, the last one short
    store
        .write_atomic("ep.mcap", vec![7u8; len as usize])
        .unwrap();
    let config = config(&[a.path(), b.path()]);
    assert_eq!(cached_coverage(&config, "ep.mcap").unwrap(), None);

    let cache = BlockCache::for_store(config.clone(), &store).unwrap();
    let object = cache.object("ep.mcap").unwrap();
    // Blocks 1 and 5 (the short tail).
    object.read_range(BLOCK + 10..BLOCK + 20).unwrap();
    object.read_range(len - 50..len).unwrap();
    drop(cache);
    // The remote is gone: coverage is read from the cache folders alone.
    drop(remote);

    let coverage = cached_coverage(&config, "ep.mcap").unwrap().unwrap();
    assert_eq!(
        coverage,
        Coverage {
            len,
            blocks: 6,
            cached_blocks: 2,
            cached_bytes: BLOCK + 100,
        }
    );
}

#[test]
fn a_damaged_block_does_not_count() {
    let remote = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(remote.path().to_str().unwrap()).unwrap();
    store
        .write_atomic("ep.mcap", vec![1u8; 2 * BLOCK as usize])
        .unwrap();
    let config = config(&[dir.path()]);
    let cache = BlockCache::for_store(config.clone(), &store).unwrap();
    cache
        .object("ep.mcap")
        .unwrap()
        .read_range(0..2 * BLOCK)
        .unwrap();
    let full = cached_coverage(&config, "ep.mcap").unwrap().unwrap();
    assert_eq!((full.cached_blocks, full.cached_bytes), (2, 2 * BLOCK));

    // Truncate one block file: its length no longer matches its header.
    let object_dir = std::fs::read_dir(dir.path().join("blocks"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let block = object_dir.join("0.blk");
    let bytes = std::fs::read(&block).unwrap();
    std::fs::write(&block, &bytes[..bytes.len() - 1]).unwrap();
    let damaged = cached_coverage(&config, "ep.mcap").unwrap().unwrap();
    assert_eq!((damaged.cached_blocks, damaged.cached_bytes), (1, BLOCK));
}

#[test]
fn a_missing_cache_folder_is_an_empty_cache_and_is_not_created() {
    let parent = tempfile::tempdir().unwrap();
    let missing = parent.path().join("nowhere");
    assert_eq!(
        cached_coverage(&config(&[&missing]), "ep.mcap").unwrap(),
        None
    );
    assert!(!missing.exists());
}
