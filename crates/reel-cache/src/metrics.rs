//! Cache counters, named as Alluxio's client cache names them so dashboards carry over.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one [`BlockCache`](crate::BlockCache) in this process.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) bytes_read_cache: AtomicU64,
    pub(crate) bytes_requested_external: AtomicU64,
    pub(crate) bytes_read_external: AtomicU64,
    pub(crate) bytes_written_cache: AtomicU64,
    pub(crate) remote_requests: AtomicU64,
    pub(crate) pages_evicted: AtomicU64,
    pub(crate) bytes_evicted: AtomicU64,
    pub(crate) corrupt_blocks: AtomicU64,
    pub(crate) get_errors: AtomicU64,
    pub(crate) put_errors: AtomicU64,
    pub(crate) put_skipped_full: AtomicU64,
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self) -> CacheMetrics {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CacheMetrics {
            hits: get(&self.hits),
            misses: get(&self.misses),
            bytes_read_cache: get(&self.bytes_read_cache),
            bytes_requested_external: get(&self.bytes_requested_external),
            bytes_read_external: get(&self.bytes_read_external),
            bytes_written_cache: get(&self.bytes_written_cache),
            remote_requests: get(&self.remote_requests),
            pages_evicted: get(&self.pages_evicted),
            bytes_evicted: get(&self.bytes_evicted),
            corrupt_blocks: get(&self.corrupt_blocks),
            get_errors: get(&self.get_errors),
            put_errors: get(&self.put_errors),
            put_skipped_full: get(&self.put_skipped_full),
        }
    }
}

/// A snapshot of a cache's counters since it was opened in this process.
///
/// A "page" in Alluxio's names is one cache block here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheMetrics {
    /// Block reads served from local disk.
    pub hits: u64,
    /// Block reads that had to go to the remote store.
    pub misses: u64,
    /// Bytes returned to callers from local disk (`Client.CacheBytesReadCache`).
    pub bytes_read_cache: u64,
    /// Bytes callers asked for that were not cached (`Client.CacheBytesRequestedExternal`).
    pub bytes_requested_external: u64,
    /// Bytes fetched from the remote store, whole blocks (`Client.CacheBytesReadExternal`).
    pub bytes_read_external: u64,
    /// Bytes of block payload written to local disk (`Client.CacheBytesWrittenCache`).
    pub bytes_written_cache: u64,
    /// Ranged GETs sent to the remote store (after coalescing).
    pub remote_requests: u64,
    /// Blocks evicted (`Client.CachePagesEvicted`).
    pub pages_evicted: u64,
    /// Bytes evicted (`Client.CacheBytesEvicted`).
    pub bytes_evicted: u64,
    /// Cached blocks found corrupt, dropped and fetched again.
    pub corrupt_blocks: u64,
    /// Failed reads, local or remote (`Client.CacheGetErrors`).
    pub get_errors: u64,
    /// Failed block writes (`Client.CachePutErrors`).
    pub put_errors: u64,
    /// Blocks not written because the cache was full of pinned data
    /// (`Client.CachePutInsufficientSpaceErrors`).
    pub put_skipped_full: u64,
}

impl CacheMetrics {
    /// Share of requested bytes served from local disk (`Client.CacheHitRate`), 0 when
    /// nothing was read.
    pub fn hit_rate(&self) -> f64 {
        let total = self.bytes_read_cache + self.bytes_requested_external;
        if total == 0 {
            0.0
        } else {
            self.bytes_read_cache as f64 / total as f64
        }
    }

    /// The counters under Alluxio's metric names, in a stable order.
    pub fn alluxio_names(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("Client.CacheHitRate", self.hit_rate()),
            ("Client.CacheBytesReadCache", self.bytes_read_cache as f64),
            (
                "Client.CacheBytesRequestedExternal",
                self.bytes_requested_external as f64,
            ),
            (
                "Client.CacheBytesReadExternal",
                self.bytes_read_external as f64,
            ),
            (
                "Client.CacheBytesWrittenCache",
                self.bytes_written_cache as f64,
            ),
            ("Client.CachePagesEvicted", self.pages_evicted as f64),
            ("Client.CacheBytesEvicted", self.bytes_evicted as f64),
            ("Client.CacheGetErrors", self.get_errors as f64),
            ("Client.CachePutErrors", self.put_errors as f64),
            (
                "Client.CachePutInsufficientSpaceErrors",
                self.put_skipped_full as f64,
            ),
            ("Reel.CacheCorruptPages", self.corrupt_blocks as f64),
            ("Reel.CacheRemoteRequests", self.remote_requests as f64),
        ]
    }

    /// The Alluxio-named counters as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        self.alluxio_names()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), serde_json::json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}
