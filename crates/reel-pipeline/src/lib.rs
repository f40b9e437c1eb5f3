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
//! 6. [`episode_rows`]: one row per episode, committed to the warehouse's episode tables
//!    (`reel_warehouse`).
//! 7. [`Enricher`]s label canonical episodes (built in: [`MotionSegments`]).
//!
//! [`process_episode`] runs steps 1–5 for one episode in memory. The config's topic rules
//! ([`TopicConfig`]) apply as the landing episode is read; with `resample.grid =
//! "as_recorded"` ([`Grid::AsRecorded`]) every stream is written at its recorded times
//! instead of on the grid, the profile `reel-pack` runs through [`pack`]. The DAG engine
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

mod as_recorded;
mod camera;
mod canonical;
mod config;
mod derive;
mod engine;
mod enrich;
mod episode;
mod index;
mod plan;
mod process;
mod qc;
mod resample;
mod segment;
mod state;
#[cfg(feature = "test-support")]
pub mod test_support;

pub use as_recorded::pack;
pub use camera::{CameraOutput, FrameStat, encode_camera};
pub use canonical::{EpisodeSummary, ProcessedEpisode, Provenance, StreamStats, write_canonical};
pub use config::PipelineConfig;
pub use derive::{ACCELERATION_TOPIC, VELOCITY_TOPIC, derive_signals};
pub use engine::{
    BatchReport, BatchSpec, EpisodeEvent, EpisodeStatus, Event, Pipeline, Profile, RunOptions,
    StaleEpisode, Step, StepReport, current_landing_keys, stale_episodes,
};
pub use enrich::{Enricher, LabelSet, MotionSegments, Segment};
pub use episode::{EpisodeInfo, Landing, decode_landing, decode_recording, source_keys};
pub use index::{episode_rows, row_of};
pub use plan::{
    BatchTarget, Plan, PlanBatch, PlanEpisode, bin_pack, list_landing, list_rlds_shards, make_plan,
    start_jitter,
};
pub use process::{process_episode, process_recording};
pub use qc::{CameraStats, CheckKind, Finding, QcConfig, QcMetrics, QcReport, quality_check};
pub use reel_io::{ErrorKind, Kinded};
pub use reel_landing::{EncodeConfig, PackConfig, PackReport, TopicConfig, TopicRule};
pub use resample::{
    CameraGrid, Grid, GridSignal, ResampleConfig, Resampled, recorded_grid, resample,
};
pub use state::{Claim, CommitRecord, Quarantine, StateStore};

/// Version of the ingest pipeline stamped on every output (provenance).
pub const PIPELINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Version of the warehouse schema this pipeline writes.
pub const SCHEMA_VERSION: u32 = reel_warehouse::episodes::EPISODE_SCHEMA_VERSION as u32;

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
    /// Committing to the warehouse's tables failed.
    #[error("cannot commit to the warehouse: {0}")]
    Warehouse(#[from] reel_warehouse::WarehouseError),
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

/// The kind decides what ingest does: bad input is quarantined and the run goes on; the
/// environment fails the batch (nothing is quarantined, a rerun on a good worker resumes
/// it); a changed object is read again; a transient failure fails the batch for a retry.
impl Kinded for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Self::Io(e) => e.kind(),
            Self::Mcap(e) => e.kind(),
            Self::Video { source, .. } => source.kind(),
            Self::Landing { .. } => ErrorKind::BadInput,
            // An outage of the warehouse's store is retried like any other.
            Self::Warehouse(e) if e.kind() == ErrorKind::Transient => ErrorKind::Transient,
            // Plans, state records, configs and the warehouse belong to the run, not to
            // one landing episode.
            Self::Json { .. } | Self::Warehouse(_) | Self::Plan { .. } | Self::Config(_) => {
                ErrorKind::Environment
            }
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wall-clock time in ns since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_of_a_wrapped_error_is_its_cause_s() {
        let video = |source| Error::Video {
            name: "ep.mcap".into(),
            topic: "/cam".into(),
            source,
        };
        let missing_codec = video(reel_video::Error::CodecMissing("libx264".into()));
        assert_eq!(missing_codec.kind(), ErrorKind::Environment);
        let bad_frame = video(reel_video::Error::InvalidInput("odd size".into()));
        assert_eq!(bad_frame.kind(), ErrorKind::BadInput);
        let truncated = Error::Mcap(reel_mcap::Error::Truncated {
            name: "ep.mcap".into(),
            len: 3,
        });
        assert_eq!(truncated.kind(), ErrorKind::BadInput);
        let absent = Error::Mcap(reel_mcap::Error::Io(reel_io::Error::NotFound {
            name: "s3://b/ep.mcap".into(),
        }));
        assert_eq!(absent.kind(), ErrorKind::Environment);
        let replaced = Error::Io(reel_io::Error::Changed {
            name: "canonical/ep.mcap".into(),
        });
        assert_eq!(replaced.kind(), ErrorKind::Changed);
        assert_eq!(Error::Config("x".into()).kind(), ErrorKind::Environment);
        let landing = Error::Landing {
            name: "ep.mcap".into(),
            reason: "no cameras".into(),
        };
        assert_eq!(landing.kind(), ErrorKind::BadInput);
    }
}
