//! Reel's ingest stage: landing logs in, training-ready canonical episodes and warehouse
//! rows out, on one machine or thousands.
//!
//! One episode goes through typed steps, each a plain function tested on its own:
//!
//! 1. [`decode_landing`]: parse the landing MCAP (ROS 2 or Foxglove) and its `episode`
//!    metadata.
//! 2. [`resample`]: put every stream on one time grid per episode (one origin, a target
//!    rate per stream kind); state and actions interpolated linearly, cameras
//!    nearest-previous with duplicated/dropped counts; gaps longer than a bound are
//!    recorded, never filled.
//! 3. [`derive_signals`]: joint velocities and accelerations on the state grid.
//! 4. [`encode_camera`] decodes every landing frame once, measures it for the quality
//!    checks and encodes the resampled frames to H.264; [`quality_check`] turns those
//!    measurements and the raw streams into flags, metrics and time spans.
//! 5. [`write_canonical`]: the canonical MCAP through `reel-mcap`, stamped with provenance.
//! 6. [`encode_warehouse`]: one warehouse row per episode (Parquet via arrow-rs).
//! 7. [`Enricher`]s label canonical episodes (built in: [`MotionSegments`]).
//!
//! [`process_episode`] runs steps 1–5 for one episode in memory. The DAG engine
//! ([`Pipeline`]) runs the steps a [`Profile`] selects over a [`BatchSpec`] — one episode
//! for a collection trigger or a bin-packed batch of a [`Plan`] — and records each step's
//! completion per batch through opendal, so a killed run resumes where it stopped and many
//! runs can share one store (a local folder or S3).
//!
//! ```
//! use reel_pipeline::{PipelineConfig, process_episode};
//! use reel_synth::{SynthConfig, generate_episode};
//!
//! let synth = SynthConfig { seconds: 1.0, width: 64, height: 48, cameras: 1, ..SynthConfig::default() };
//! let landing = generate_episode(&synth, 0)?;
//! let processed = process_episode("landing.mcap", &landing.name, &landing.mcap, &PipelineConfig::default())?;
//! assert_eq!(processed.summary.episode_id, landing.name);
//! assert!(processed.summary.qc.summary().pass());
//! assert!(processed.summary.state_steps >= 190); // 1 s of joint states on a 200 Hz grid
//! assert!(processed.bytes.starts_with(b"\x89MCAP0\r\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod camera;
mod canonical;
mod derive;
mod engine;
mod enrich;
mod episode;
mod index;
mod plan;
mod qc;
mod resample;
mod state;

pub use camera::{CameraOutput, EncodeConfig, FrameStat, encode_camera};
pub use canonical::{
    EpisodeSummary, ProcessedEpisode, Provenance, StreamStats, process_episode, write_canonical,
};
pub use derive::{ACCELERATION_TOPIC, VELOCITY_TOPIC, derive_signals};
pub use engine::{
    BatchReport, BatchSpec, EpisodeEvent, EpisodeStatus, Event, Pipeline, PipelineConfig, Profile,
    RunOptions, StaleEpisode, Step, StepReport, current_landing_keys, stale_episodes,
};
pub use enrich::{Enricher, LabelSet, MotionSegments, Segment};
pub use episode::{EpisodeInfo, Landing, decode_landing};
pub use index::{encode_warehouse, row_of};
pub use plan::{
    BatchTarget, Plan, PlanBatch, PlanEpisode, bin_pack, list_landing, make_plan, start_jitter,
};
pub use qc::{CameraStats, CheckKind, Finding, QcConfig, QcMetrics, QcReport, quality_check};
pub use resample::{CameraGrid, GridSignal, ResampleConfig, Resampled, resample};
pub use state::{CommitRecord, Quarantine, StateStore};

/// Version of the ingest pipeline stamped on every output (provenance).
pub const PIPELINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Version of the warehouse schema this pipeline writes.
pub const SCHEMA_VERSION: u32 = reel_manifest::warehouse::WAREHOUSE_SCHEMA_VERSION;

/// Errors of the ingest pipeline. Every variant names the file or object it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing the store failed.
    #[error(transparent)]
    Io(#[from] reel_io::Error),
    /// The container library rejected a file.
    #[error(transparent)]
    Mcap(#[from] reel_mcap::Error),
    /// Encoding video failed.
    #[error("{name}: camera `{topic}`: {source}")]
    Video {
        /// Episode.
        name: String,
        /// Camera topic.
        topic: String,
        /// Codec error.
        #[source]
        source: reel_video::Error,
    },
    /// A landing episode that cannot be ingested.
    #[error("{name}: {reason}")]
    Landing {
        /// Episode.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A JSON document (plan, state record, label set) that does not parse.
    #[error("{name}: invalid JSON: {source}")]
    Json {
        /// Object.
        name: String,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// Writing the warehouse failed.
    #[error("{name}: cannot write the warehouse: {reason}")]
    Warehouse {
        /// Object.
        name: String,
        /// Arrow or Parquet error.
        reason: String,
    },
    /// An invalid plan or batch request.
    #[error("{name}: {reason}")]
    Plan {
        /// Plan file.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// An invalid configuration.
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl Error {
    /// Whether this is a read of an object that another writer replaced meanwhile.
    pub fn is_object_changed(&self) -> bool {
        matches!(
            self,
            Self::Io(reel_io::Error::Changed { .. })
                | Self::Mcap(reel_mcap::Error::Io(reel_io::Error::Changed { .. }))
        )
    }

    /// Whether the error lies in the landing episode itself (quarantine it and go on),
    /// as opposed to the store or the environment (fail the batch so it is retried).
    pub fn is_bad_input(&self) -> bool {
        match self {
            Self::Landing { .. } | Self::Video { .. } => true,
            Self::Mcap(e) => !matches!(e, reel_mcap::Error::Io(_)),
            _ => false,
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// FNV-1a 64 over bytes: stable across runs and platforms, for ids and digests.
pub(crate) fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Wall-clock time in ns since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}
