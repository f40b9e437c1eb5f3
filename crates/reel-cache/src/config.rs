//! Cache configuration.

use std::path::PathBuf;
use std::time::Duration;

/// Default block size: 4 MiB, large enough that one ranged GET amortizes a round trip,
/// small enough that a short read does not drag in much more than it needs.
pub const DEFAULT_BLOCK_SIZE: u64 = 4 << 20;
/// Default checksum page: 64 KiB.
pub const DEFAULT_PAGE_SIZE: u32 = 64 << 10;

/// Default number of block files a process keeps open: 1 GiB of 4 MiB blocks.
pub const DEFAULT_OPEN_BLOCKS: usize = 256;

/// How a [`BlockCache`](crate::BlockCache) is laid out and how it talks to the remote.
///
/// Every process sharing a cache folder must use the same `dirs` in the same order and
/// the same `block_size` and `page_size` (blocks of other sizes are kept apart, never
/// mixed up, but they are not shared either).
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Local folders holding blocks (one per NVMe device, say). Blocks are spread over
    /// them by hash; metadata, pins and the eviction lock live in the first one.
    pub dirs: Vec<PathBuf>,
    /// Bytes the cache may occupy on disk, headers included, over all `dirs`. A soft
    /// bound: each process rescans after writing `eviction_slack` bytes, so the overshoot
    /// is at most that much per process.
    pub capacity: u64,
    /// Bytes per block (a multiple of `page_size`).
    pub block_size: u64,
    /// Bytes covered by one checksum inside a block.
    pub page_size: u32,
    /// Ranged GETs in flight at once from this process.
    pub max_concurrent_fetches: usize,
    /// Largest coalesced request: adjacent missing blocks are fetched in one GET up to
    /// this many bytes.
    pub max_request_bytes: u64,
    /// Retries of a failed remote request (with exponential backoff and jitter).
    pub retries: usize,
    /// First retry delay; it doubles on each retry.
    pub retry_min_delay: Duration,
    /// Longest retry delay.
    pub retry_max_delay: Duration,
    /// Use the version recorded in the cache for an object without asking the remote.
    /// Right for immutable objects (Reel's canonical episodes are never rewritten in
    /// place); when false, each open asks the remote for the object's current version
    /// and falls back to the recorded one only if the remote cannot be reached.
    pub trust_cached_metadata: bool,
    /// Bytes this process writes between capacity scans; `None` picks
    /// `min(capacity / 16, 1 GiB)`.
    pub eviction_slack: Option<u64>,
    /// Block files this process keeps open (one file descriptor each) so that hits on
    /// them skip the open, the header read and the hashing of pages already verified.
    /// 0 opens and verifies the block on every read. A held block that another process
    /// evicts keeps its disk space until this process closes it, which it does on the
    /// block's next use or within about a second of opening another block.
    pub open_blocks: usize,
}

impl CacheConfig {
    /// A cache in `dir` holding at most `capacity` bytes, with default settings.
    pub fn new(dir: impl Into<PathBuf>, capacity: u64) -> Self {
        Self {
            dirs: vec![dir.into()],
            capacity,
            block_size: DEFAULT_BLOCK_SIZE,
            page_size: DEFAULT_PAGE_SIZE,
            max_concurrent_fetches: 16,
            max_request_bytes: 16 << 20,
            retries: 4,
            retry_min_delay: Duration::from_millis(100),
            retry_max_delay: Duration::from_secs(5),
            trust_cached_metadata: false,
            eviction_slack: None,
            open_blocks: DEFAULT_OPEN_BLOCKS,
        }
    }

    pub(crate) fn slack(&self) -> u64 {
        self.eviction_slack
            .unwrap_or_else(|| (self.capacity / 16).min(1 << 30))
            .max(1)
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.dirs.is_empty() {
            return Err("no cache folder given".into());
        }
        if self.page_size == 0 || self.block_size == 0 {
            return Err("block and page sizes must be positive".into());
        }
        if !self.block_size.is_multiple_of(u64::from(self.page_size)) {
            return Err(format!(
                "block size {} is not a multiple of the page size {}",
                self.block_size, self.page_size
            ));
        }
        if self.block_size > u64::from(u32::MAX) {
            return Err(format!("block size {} is over 4 GiB", self.block_size));
        }
        if self.max_concurrent_fetches == 0 {
            return Err("max_concurrent_fetches must be at least 1".into());
        }
        Ok(())
    }
}
