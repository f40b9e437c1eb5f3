//! The cache returns exactly what the remote holds, whatever happens to its disk, its
//! remote or the processes sharing it; its coverage counts exactly the blocks it holds.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

mod coverage;
mod integrity;
mod reads;
mod remote_faults;
mod sharing;
mod warm_and_evict;

use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use reel_cache::CacheConfig;
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
