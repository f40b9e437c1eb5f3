//! How much of its disk a cache takes when no capacity is given, and the free space that
//! choice and node checks start from.

use std::path::Path;

use reel_io::Store;

use crate::cache::BlockCache;
use crate::{CacheConfig, Error, Result};

/// Bytes of `dir`'s filesystem free for unprivileged users (what the cache, which runs
/// as one, can still write).
pub fn free_bytes(dir: &Path) -> Result<u64> {
    let stat = rustix::fs::statvfs(dir).map_err(|errno| Error::io(dir, errno.into()))?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// The capacity a cache gets by default: what it holds now plus nine tenths of the free
/// space of its first folder's disk. The tenth left over keeps room for the logs and
/// checkpoints that usually share the disk.
pub fn default_capacity(cache: &BlockCache) -> Result<u64> {
    let dir = cache.config().dirs.first().ok_or_else(|| Error::Config {
        reason: "no cache folder given".into(),
    })?;
    let free = free_bytes(dir)?;
    Ok(cache.usage()?.used_bytes.saturating_add(free / 10 * 9))
}

/// The cache for `store` with `config`, its capacity [`default_capacity`] when `capacity`
/// is None: the cache is opened unbounded first to measure what it holds.
pub fn open_with_capacity(
    mut config: CacheConfig,
    store: &Store,
    capacity: Option<u64>,
) -> Result<BlockCache> {
    config.capacity = match capacity {
        Some(capacity) => capacity,
        None => {
            let unbounded = CacheConfig {
                capacity: u64::MAX,
                ..config.clone()
            };
            default_capacity(&BlockCache::for_store(unbounded, store)?)?
        }
    };
    BlockCache::for_store(config, store)
}
