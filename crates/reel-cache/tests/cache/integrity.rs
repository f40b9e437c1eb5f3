//! A block that fails its checks, on opening or after this process verified it, is
//! dropped and fetched again, never served.

use std::path::PathBuf;
use std::time::Duration;

use reel_cache::BlockCache;
use reel_io::ByteSource;

use crate::{BLOCK, block_files, config, local_store, pattern};

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
