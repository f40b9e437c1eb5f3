//! What a loader's workers share: the catalog of episodes and the epoch's positions, the
//! resolved plans, the GOP cache, the batch buffers and the counts of what they did.

use std::sync::{Arc, Mutex, PoisonError};

use crate::gop_cache::GopCache;
use crate::host::BufferPool;
use crate::mixture::Catalog;
use crate::options::LoaderOptions;
use crate::resolve::{CameraPlan, DepthPlan, ProprioPlan};

/// What a worker did, for throughput reports.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WorkerCounts {
    pub frames_decoded: u64,
    pub chunks_read: u64,
    /// Frames the samples asked for, and those found in the shared GOP cache.
    pub frames_wanted: u64,
    pub frames_cached: u64,
}

impl WorkerCounts {
    pub(crate) fn plus(&self, other: &Self) -> Self {
        Self {
            frames_decoded: self.frames_decoded + other.frames_decoded,
            chunks_read: self.chunks_read + other.chunks_read,
            frames_wanted: self.frames_wanted + other.frames_wanted,
            frames_cached: self.frames_cached + other.frames_cached,
        }
    }

    /// What was done since `earlier` (counts only grow).
    pub(crate) fn since(&self, earlier: &Self) -> Self {
        Self {
            frames_decoded: self.frames_decoded - earlier.frames_decoded,
            chunks_read: self.chunks_read - earlier.chunks_read,
            frames_wanted: self.frames_wanted - earlier.frames_wanted,
            frames_cached: self.frames_cached - earlier.frames_cached,
        }
    }
}

pub(crate) struct Shared {
    /// The manifests, where their episodes are read from, and the epoch's positions.
    pub catalog: Catalog,
    /// A hash of the spec, for [`crate::RunIdentity`].
    pub spec_hash: String,
    pub cameras: Vec<CameraPlan>,
    pub depths: Vec<DepthPlan>,
    pub proprio: Vec<ProprioPlan>,
    /// Every numeric topic of the spec, read together (one read of their group).
    pub proprio_topics: Vec<String>,
    pub whole_gops: bool,
    /// Decoded GOPs kept for the next samples, shared by every worker.
    pub gops: Arc<GopCache>,
    /// Batch buffers, reused once the consumer drops a batch.
    pub buffers: Arc<BufferPool>,
    pub signal_widen_ns: i64,
    pub options: LoaderOptions,
    /// What every worker did so far, added after each batch.
    pub(crate) counts: Mutex<WorkerCounts>,
    /// Makes the worker that takes this batch panic, to test how a lost worker surfaces.
    #[cfg(test)]
    pub panic_on_batch: std::sync::OnceLock<u64>,
}

impl Shared {
    pub(crate) fn counts(&self) -> WorkerCounts {
        *self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn add_counts(&self, more: WorkerCounts) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        *counts = counts.plus(&more);
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("sources", &self.catalog.len())
            .field("options", &self.options)
            .finish()
    }
}
