//! How a loader runs: batch size, workers, shard, order and the limits it keeps.

use reel_video::RgbConversion;

use crate::order::Shuffle;

/// How the loader runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderOptions {
    pub batch_size: usize,
    /// Worker threads building batches.
    pub workers: usize,
    /// Batches built ahead of the consumer, at most.
    pub prefetch: usize,
    pub seed: u64,
    pub rank: usize,
    pub world: usize,
    pub shuffle: Shuffle,
    /// Leave out a last, smaller batch.
    pub drop_last: bool,
    /// Decoded GOPs kept for nearby samples, per worker (the cache is shared).
    pub gop_cache: usize,
    /// Allocate batch buffers in page-locked host memory through this CUDA device (the
    /// rank's own GPU), for asynchronous copies to it; needs feature `cuda`, and falls
    /// back to pageable memory where no CUDA driver or device is present
    /// ([`Loader::host_memory`] says which).
    pub pin_memory: Option<usize>,
    /// YUV→RGB conversion of decoded frames: swscale's SIMD path by default (a few
    /// levels from the accurate conversion at chroma edges, several times cheaper).
    pub rgb: RgbConversion,
    /// The share of an epoch's samples that may be skipped (their episode corrupt, or
    /// not what the manifest says) before the epoch fails with
    /// [`LoaderError::TooManySkipped`]: one bad episode costs its samples, a broken
    /// dataset stops the run. Default 0.01.
    pub max_skipped: f64,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        Self {
            batch_size: 8,
            workers: 2,
            prefetch: 4,
            seed: 0,
            rank: 0,
            world: 1,
            shuffle: Shuffle::Locality { run: 10 },
            drop_last: false,
            gop_cache: 16,
            pin_memory: None,
            rgb: RgbConversion::Fast,
            max_skipped: 0.01,
        }
    }
}
