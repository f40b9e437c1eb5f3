//! The records a lineage walk emits, one per link, as JSON lines (`kind` names the link)
//! or as text.

use reel_loader::RunIdentity;
use serde::Serialize;

/// Whether what is there now is what the run read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Its hash or digest is the one recorded.
    Same,
    /// Something else is there under the same name now.
    Changed,
    /// Nothing is there now (or it cannot be read: see `problem`).
    Missing,
    /// Nothing was recorded to compare with (written before Reel recorded it), or it was
    /// not checked (`verify` off).
    #[default]
    Unchecked,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Self::Same => "same",
            Self::Changed => "CHANGED",
            Self::Missing => "MISSING",
            Self::Unchecked => "unchecked",
        }
    }
}

/// A manifest a run loaded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManifestLineage {
    /// Its source index in the loader (0 for one manifest).
    pub source: usize,
    /// Where it was opened from.
    pub location: String,
    /// The content hash the loader state recorded, if any.
    pub recorded_hash: Option<String>,
    /// Its content hash now.
    pub content_hash: Option<String>,
    pub status: Status,
    pub query: String,
    /// The versions of the warehouse's tables the curation read (`episodes@12
    /// ingestions@12`): what `reel-curate --as-of` runs it at again.
    pub warehouse_snapshot: String,
    /// The change-data-capture position the database's tables were read at, if any.
    pub cdc_position: Option<String>,
    pub created_at: String,
    pub rows: usize,
    pub samples: u64,
    /// Why it could not be read.
    pub problem: Option<String>,
}

/// One episode of a manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EpisodeLineage {
    pub source: usize,
    pub row: usize,
    pub episode_id: String,
    /// The canonical object, relative to its store.
    pub uri: String,
    /// The canonical object's digest the manifest recorded (`xxh3_64:…`).
    pub recorded_digest: Option<String>,
    /// Its digest now.
    pub digest: Option<String>,
    pub status: Status,
    pub pipeline_version: Option<String>,
    pub schema_version: Option<u32>,
    pub robot_software_version: Option<String>,
    pub config_digest: Option<String>,
    /// The landing recording it was made from, and that recording's digest.
    pub landing_key: Option<String>,
    pub landing_digest: Option<String>,
    /// Why it could not be read.
    pub problem: Option<String>,
}

/// One link of the chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// The checkpoint: its folder, step and files.
    Checkpoint {
        path: String,
        step: u64,
        files: Vec<String>,
    },
    /// One rank's loader state in it.
    LoaderState {
        rank: u64,
        world: u64,
        epoch: u64,
        batch: u64,
        run: RunIdentity,
    },
    Manifest(ManifestLineage),
    Episode(EpisodeLineage),
}

impl Record {
    /// The record as one line for people.
    pub fn text(&self) -> String {
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        match self {
            Self::Checkpoint { path, step, files } => {
                format!("checkpoint {path}: step {step} ({})", files.join(", "))
            }
            Self::LoaderState {
                rank,
                world,
                epoch,
                batch,
                run,
            } => format!(
                "  loader state: rank {rank} of {world} at epoch {epoch} batch {batch} (seed {}, \
                 batch size {}, spec {})",
                run.seed, run.batch_size, run.spec
            ),
            Self::Manifest(m) => format!(
                "  manifest {} {}: {} ({}); query {:?}; table versions {}; cdc position {}; created {}; \
                 {} rows, {} samples{}",
                m.source,
                m.location,
                m.status.word(),
                or(&m.content_hash),
                m.query,
                m.warehouse_snapshot,
                or(&m.cdc_position),
                m.created_at,
                m.rows,
                m.samples,
                m.problem
                    .as_ref()
                    .map(|p| format!(": {p}"))
                    .unwrap_or_default()
            ),
            Self::Episode(e) => format!(
                "    episode {}/{} {} {} {} ({}); pipeline {}, schema {}, robot software {}; \
                 landing {} {}{}",
                e.source,
                e.row,
                e.episode_id,
                e.uri,
                e.status.word(),
                or(&e.digest.clone().or(e.recorded_digest.clone())),
                or(&e.pipeline_version),
                e.schema_version
                    .map_or_else(|| "-".to_string(), |v| v.to_string()),
                or(&e.robot_software_version),
                or(&e.landing_key),
                or(&e.landing_digest),
                e.problem
                    .as_ref()
                    .map(|p| format!(": {p}"))
                    .unwrap_or_default()
            ),
        }
    }
}
