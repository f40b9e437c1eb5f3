//! A node-local block cache on NVMe in front of object storage.
//!
//! Training reads episodes from local disk at local-disk speed; the remote store is read
//! once, when the working set is warmed, and again only on a miss. [`BlockCache`] sits in
//! front of an opendal [`Operator`](opendal::Operator) (a local folder or an S3 prefix,
//! usually opened as a [`reel_io::Store`]) and hands out [`CachedObject`]s, which are
//! [`reel_io::ByteSource`]s: the container reader does not know it reads through a cache.
//!
//! - Fixed, aligned blocks (4 MiB by default), one file per block, keyed by object path,
//!   version (ETag) and block index, spread over one or more local folders.
//! - Every process on a node shares the folders with no daemon: blocks are written under
//!   a temporary name and renamed, checksummed per 64 KiB page, and each page is verified
//!   when a process first reads it through an open block file; a corrupt block is dropped
//!   and fetched again.
//! - Each process keeps a bounded table of open block files, so a hit on a held block is
//!   one `fstat` and the `pread`s of a plain file read, without re-hashing pages that the
//!   handle verified in the last minute.
//! - Misses are coalesced into one ranged GET per run of adjacent blocks, fetched once
//!   however many threads want them, with bounded concurrency and retries with backoff.
//! - Capacity is enforced by least-recently-used eviction; pin lists (written by
//!   [`BlockCache::warm`]) protect a warmed working set from it. [`default_capacity`]
//!   picks a capacity from the disk's free space.
//! - A [`WorkingSet`] lists the objects a job reads whole (paths and sizes, from any
//!   source: the cache knows nothing of what they contain), turns them into
//!   [`WarmItem`]s and measures how much of them a cache holds without a remote request.
//! - [`CacheMetrics`] counts hits, bytes read from the cache and from the remote,
//!   evictions and errors, under Alluxio's names.
//!
//! ```
//! use reel_cache::{BlockCache, CacheConfig, WarmItem, WarmOptions};
//! use reel_io::{ByteSource, Store};
//!
//! let remote_dir = tempfile::tempdir()?;
//! let store = Store::open(remote_dir.path().to_str().unwrap())?;
//! let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
//! store.write_atomic("canonical/ep-0.mcap", data.clone())?;
//!
//! let cache_dir = tempfile::tempdir()?;
//! let mut config = CacheConfig::new(cache_dir.path(), 1 << 30);
//! config.block_size = 64 << 10;
//! let cache = BlockCache::for_store(config, &store)?;
//!
//! // Warm the working set and pin it, then read: every read is a hit.
//! let options = WarmOptions { pin: Some("job-1".into()), ..WarmOptions::default() };
//! let plan = cache.plan_warm(&[WarmItem::whole("canonical/ep-0.mcap")], &options)?;
//! let report = cache.warm(plan, &options, |_progress| {})?;
//! assert_eq!(report.fetched_bytes, 300_000);
//!
//! let episode = cache.object("canonical/ep-0.mcap")?;
//! assert_eq!(&episode.read_range(100_000..100_100)?[..], &data[100_000..100_100]);
//! let metrics = cache.metrics();
//! assert_eq!(metrics.hits, 1);
//! assert_eq!(metrics.hit_rate(), 1.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod block;
mod cache;
mod capacity;
mod config;
mod coverage;
mod evict;
mod fill;
mod in_flight;
mod layout;
mod metrics;
mod open_blocks;
mod read;
mod warm;
mod working_set;

use std::path::{Path, PathBuf};

pub use cache::{BlockCache, CachedObject};
pub use capacity::{default_capacity, free_bytes, open_with_capacity};
pub use config::{CacheConfig, DEFAULT_BLOCK_SIZE, DEFAULT_OPEN_BLOCKS, DEFAULT_PAGE_SIZE};
pub use coverage::{Coverage, cached_coverage};
pub use evict::{PinList, PinnedObject, ScanReport};
pub use metrics::CacheMetrics;
pub use warm::{WarmItem, WarmOptions, WarmPlan, WarmProgress, WarmReport};
pub use working_set::{WorkingSet, WorkingSetCoverage, WorkingSetObject, default_pin_name};

/// Errors of the cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading an object failed (remote unreachable, object missing, bad range...).
    #[error(transparent)]
    Source(#[from] reel_io::Error),
    /// A local cache file or folder could not be used.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration is unusable.
    #[error("invalid cache configuration: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
    /// A pin list that cannot be read; eviction stops rather than ignore it.
    #[error("{path}: invalid pin list: {reason}")]
    BadPinList {
        /// The pin list file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The working set does not fit in the cache beside the other pinned sets.
    #[error(
        "working set needs {needed} bytes but the cache holds {capacity} bytes, \
         {pinned_by_others} of them pinned by other working sets"
    )]
    WontFit {
        /// Disk bytes of the working set.
        needed: u64,
        /// Disk bytes pinned by other pin lists.
        pinned_by_others: u64,
        /// Cache capacity.
        capacity: u64,
    },
}

/// The store's errors keep their kind; the cache's own folders, settings and pin lists are
/// the environment's.
impl reel_io::Kinded for Error {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::Source(e) => e.kind(),
            Self::Io { source, .. } => ErrorKind::of_io(source),
            Self::Config { .. } | Self::BadPinList { .. } | Self::WontFit { .. } => {
                ErrorKind::Environment
            }
        }
    }
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
