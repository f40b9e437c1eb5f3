//! How much of an object a cache holds, read from the cache folders alone.

use crate::block::BlockFile;
use crate::layout::{block_path, object_id, read_meta};
use crate::{CacheConfig, Error, Result};

/// The blocks of one object version present in a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Length of the object in bytes, as the cache recorded it.
    pub len: u64,
    /// Blocks the object spans.
    pub blocks: u64,
    /// Blocks on disk with a valid header.
    pub cached_blocks: u64,
    /// Object bytes those blocks hold.
    pub cached_bytes: u64,
}

/// How much of object `path` the cache described by `config` holds, judged from its
/// folders alone: no remote request is made and nothing is written, so a node can be
/// checked before a job starts without credentials or network.
///
/// The object version is the one the cache last recorded for `path` (as with
/// [`CacheConfig::trust_cached_metadata`]). A block counts when its file is on disk with a
/// valid header of the right length; payload checksums are left to reads. `Ok(None)` if
/// the cache has never seen the object.
pub fn cached_coverage(config: &CacheConfig, path: &str) -> Result<Option<Coverage>> {
    config
        .validate()
        .map_err(|reason| Error::Config { reason })?;
    let Some(meta) = read_meta(config, path) else {
        return Ok(None);
    };
    let id = object_id(&meta.path, &meta.version, config.block_size);
    let mut coverage = Coverage {
        len: meta.len,
        blocks: meta.len.div_ceil(config.block_size),
        ..Coverage::default()
    };
    for index in 0..coverage.blocks {
        let start = index * config.block_size;
        let payload = (start + config.block_size).min(meta.len) - start;
        let path = block_path(config, id, index);
        if BlockFile::open(&path, payload, config.page_size, (id, index)).is_ok() {
            coverage.cached_blocks += 1;
            coverage.cached_bytes += payload;
        }
    }
    Ok(Some(coverage))
}
