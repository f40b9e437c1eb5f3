//! Existing robot-learning datasets into Reel: each episode of a LeRobot dataset
//! ([`lerobot::Dataset`]), of HDF5 files in the ALOHA or robomimic layout
//! ([`hdf5::Hdf5Files`]), of an RLDS build (Open X-Embodiment, DROID, Bridge:
//! [`rlds::RldsDataset`]) or of a Zarr replay buffer (Diffusion Policy, UMI:
//! [`zarr::ZarrReplayBuffer`]) is read as a landing log ([`Source::landing_log`]), stored under
//! the store's `landing/` prefix, and ingested by the same pipeline as a robot's own logs —
//! canonical episode, quality checks, provenance stamp and warehouse row — on the
//! episode's fps grid, so state and action values arrive unchanged.
//!
//! [`import`] does both steps for a whole dataset, episodes in parallel. It resumes: a
//! landing log already stored is not read again, and the pipeline's completion records
//! skip what an earlier run finished. One bad episode is reported and the others go on.
//!
//! ```
//! use reel_import::lerobot::Dataset;
//!
//! let dataset = Dataset::open("../../testdata/lerobot/pusht_h264")?;
//! assert_eq!(dataset.info().fps, 10.0);
//! let first = &dataset.episodes()[0];
//! let log = dataset.landing_log(first)?;
//! let state = log.signals.iter().find(|s| s.topic == "/observation.state").expect("state");
//! assert_eq!(state.samples.len(), first.length);
//! assert_eq!(log.videos.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod grid;
pub mod hdf5;
pub mod lerobot;
mod record;
pub mod rlds;
pub mod zarr;

use std::collections::BTreeSet;

use rayon::prelude::*;
use reel_io::{ErrorKind, Kinded, Store};
use reel_landing::LandingLog;
use reel_pipeline::{BatchReport, BatchSpec, Event, Pipeline, PipelineConfig, RunOptions};
use serde::Serialize;

pub use error::{Error, Result};
pub use lerobot::keys;

/// A dataset Reel imports: its episodes, each read as a landing log.
pub trait Source: Sync {
    /// The dataset's name.
    fn name(&self) -> &str;
    /// What the import's batch key derives from (default: the name). A source that is
    /// one part of a dataset, imported beside the other parts, names its part.
    fn batch_name(&self) -> &str {
        self.name()
    }
    /// What it is (`lerobot`, `hdf5`, `rlds`, `zarr`): its landing logs go under
    /// `landing/<kind>/`.
    fn kind(&self) -> &'static str;
    /// Its episodes, in order.
    fn episodes(&self) -> Vec<SourceEpisode>;
    /// Episode `index` (a position in [`episodes`](Self::episodes)) as a landing log.
    fn landing_log(&self, index: usize) -> Result<LandingLog>;
}

/// One episode of a [`Source`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEpisode {
    /// The dataset's own index of it.
    pub index: i64,
    /// Its episode id in Reel, unique across datasets.
    pub id: String,
}

/// What became of one episode of the dataset on its way to the landing store.
#[derive(Debug, Clone, Serialize)]
pub struct Landed {
    /// Episode index in the dataset.
    pub episode_index: i64,
    /// Episode id in Reel.
    pub episode_id: String,
    /// Landing object key.
    pub landing_key: String,
    /// `landed` (written now), `present` (an earlier run wrote it) or `failed`.
    pub status: &'static str,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What happens during an import, for progress and JSON lines.
#[derive(Debug)]
pub enum ImportEvent<'a> {
    /// An episode was read into the landing store (or found there, or failed).
    Landed(&'a Landed),
    /// The pipeline reported on the landed episodes.
    Ingest(&'a Event),
}

/// An import's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    /// The dataset's name.
    pub dataset: String,
    /// Each episode's landing.
    pub landed: Vec<Landed>,
    /// The pipeline's report on the landed episodes.
    pub ingest: BatchReport,
}

impl ImportReport {
    /// Episodes that could not be read from the dataset.
    pub fn failed(&self) -> impl Iterator<Item = &Landed> {
        self.landed.iter().filter(|l| l.status == "failed")
    }
}

/// The x264 CRF an import re-encodes video with by default (H.264 that meets the canonical
/// rules is kept as it is). A dataset's video is already lossy, and a second generation at
/// the canonical 23 drifts from what the dataset's users trained on: at 12 the frames stay
/// within 40 dB PSNR of LeRobot's own decode of its AV1 (tests/import/lerobot.rs; 18 and 15 did
/// not, on small textured frames).
pub const IMPORT_CRF: f32 = 12.0;

/// Reel's default pipeline settings with [`IMPORT_CRF`]: the `base` an import starts from
/// when given no settings of its own.
pub fn default_config() -> PipelineConfig {
    let mut config = PipelineConfig::default();
    config.encode.crf = IMPORT_CRF;
    config
}

/// The pipeline settings an import of a dataset recorded at `fps` uses: `base` with every
/// stream's grid at the dataset's rate, so each value lands on a grid point unchanged.
pub fn config_for(fps: f64, base: &PipelineConfig) -> PipelineConfig {
    let mut config = base.clone();
    let r = &mut config.resample;
    (r.camera_hz, r.state_hz, r.action_hz, r.hand_hz, r.signal_hz) = (fps, fps, fps, fps, fps);
    config
}

/// The landing key of an imported episode: `landing/<kind>/<episode id>.mcap`.
pub fn landing_key(kind: &str, episode_id: &str) -> String {
    format!("landing/{kind}/{episode_id}.mcap")
}

/// Imports every episode of `source` into `store`: landing logs written (temporary name,
/// then rename; those present kept), then ingested with `config` (see [`config_for`]).
/// Episodes that cannot be read are reported in [`ImportReport::landed`], and episodes the
/// pipeline quarantines in its report; store failures end the run (rerun to resume).
pub fn import(
    source: &dyn Source,
    store: &Store,
    config: PipelineConfig,
    options: &RunOptions,
    on_event: &(dyn Fn(ImportEvent<'_>) + Sync),
) -> Result<ImportReport> {
    let prefix = format!("landing/{}/", source.kind());
    let present: BTreeSet<String> = store.list_recursive(&prefix)?.into_iter().collect();
    let episodes = source.episodes();
    let landed: Vec<Landed> = episodes
        .par_iter()
        .enumerate()
        .map(|(position, episode)| -> Result<Landed> {
            let mut landed = Landed {
                episode_index: episode.index,
                episode_id: episode.id.clone(),
                landing_key: landing_key(source.kind(), &episode.id),
                status: "present",
                error: None,
            };
            if !present.contains(&landed.landing_key) {
                let written = source.landing_log(position).and_then(|log| {
                    let bytes = reel_landing::write_landing(&landed.landing_key, &log)?;
                    store.write_atomic(&landed.landing_key, bytes)?;
                    Ok(())
                });
                match written {
                    Ok(()) => landed.status = "landed",
                    Err(e) if e.kind() == ErrorKind::BadInput => {
                        landed.status = "failed";
                        landed.error = Some(e.to_string());
                    }
                    Err(e) => return Err(e),
                }
            }
            on_event(ImportEvent::Landed(&landed));
            Ok(landed)
        })
        .collect::<Result<_>>()?;
    let batch = BatchSpec {
        key: format!(
            "import-{}-{}",
            source.kind(),
            record::path_segment(source.batch_name())
        ),
        landing_keys: landed
            .iter()
            .filter(|l| l.status != "failed")
            .map(|l| l.landing_key.clone())
            .collect(),
    };
    let pipeline = Pipeline::new(store.clone(), store.clone(), config)?;
    let ingest = pipeline.run(&batch, options, &|event| {
        on_event(ImportEvent::Ingest(event))
    })?;
    Ok(ImportReport {
        dataset: source.name().to_owned(),
        landed,
        ingest,
    })
}

/// What reading one episode of a dataset found, for [`check`].
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    /// Episode id in Reel.
    pub episode_id: String,
    /// Its streams' samples and pictures, when it read.
    pub messages: usize,
    /// Why it did not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads every episode of `source` into its landing log, episodes in parallel, and
/// writes nothing: a dataset checked before an import (and the importer's own reading
/// speed). Bad episodes are reported in the result; store failures end the run.
pub fn check(source: &dyn Source, on_episode: &(dyn Fn(&Checked) + Sync)) -> Result<Vec<Checked>> {
    source
        .episodes()
        .par_iter()
        .enumerate()
        .map(|(position, episode)| {
            let checked = match source.landing_log(position) {
                Ok(log) => Checked {
                    episode_id: episode.id.clone(),
                    messages: log.signals.iter().map(|s| s.samples.len()).sum::<usize>()
                        + log.images.iter().map(|i| i.frames.len()).sum::<usize>()
                        + log.videos.iter().map(|v| v.units.len()).sum::<usize>(),
                    error: None,
                },
                Err(e) if e.kind() == ErrorKind::BadInput => Checked {
                    episode_id: episode.id.clone(),
                    messages: 0,
                    error: Some(e.to_string()),
                },
                Err(e) => return Err(e),
            };
            on_episode(&checked);
            Ok(checked)
        })
        .collect()
}
