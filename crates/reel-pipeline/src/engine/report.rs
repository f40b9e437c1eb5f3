//! What a run reports: an event per episode and step as it goes, counts per step, and
//! the batch's report at the end.

use serde::{Deserialize, Serialize};

use crate::engine::dag::Step;
use crate::state::{CommitRecord, Quarantine};

/// What happened to one episode in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStatus {
    /// Computed and written now.
    Done,
    /// Its artifact already existed (an earlier or concurrent run made it).
    Reused,
    /// The landing episode cannot be ingested; see the quarantine record.
    Quarantined,
    /// No canonical episode to work from (never ingested or quarantined).
    Missing,
}

/// One JSON line per episode and step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeEvent {
    /// Step.
    pub step: Step,
    /// Batch key.
    pub batch: String,
    /// Episode id.
    pub episode_id: String,
    /// Landing object.
    pub landing_key: String,
    /// Outcome.
    pub status: EpisodeStatus,
    /// Wall time spent on it, seconds.
    pub seconds: f64,
    /// Raised quality flags (canonical step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qc_flags: Option<String>,
    /// Canonical duration, seconds (canonical step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Why it was quarantined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Progress of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A step starts on a batch of `episodes`.
    StepStarted {
        /// Step.
        step: Step,
        /// Episodes it will look at.
        episodes: usize,
    },
    /// An episode went through a step.
    Episode(EpisodeEvent),
    /// A step was already complete for the batch.
    StepSkipped {
        /// Step.
        step: Step,
        /// Episodes its record covers.
        episodes: usize,
    },
    /// A step's completion record was written.
    StepCommitted {
        /// Step.
        step: Step,
        /// Record key.
        key: String,
    },
}

/// Counts of one step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct StepReport {
    /// Step.
    pub step: Option<Step>,
    /// The completion record already covered the batch.
    pub skipped: bool,
    /// Episodes computed now.
    pub done: usize,
    /// Episodes whose artifacts existed.
    pub reused: usize,
    /// Episodes quarantined.
    pub quarantined: usize,
    /// Episodes without a canonical episode.
    pub missing: usize,
}

/// What a run did to a batch.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct BatchReport {
    /// Batch key.
    pub batch: String,
    /// Per step, in order.
    pub steps: Vec<StepReport>,
    /// Quarantined episodes of the batch.
    pub quarantined: Vec<Quarantine>,
    /// The episode tables' versions after the batch's commit (index step), as
    /// `ingestions@V episodes@W`.
    pub warehouse_commit: Option<String>,
}

impl BatchReport {
    /// Takes what the batch report keeps from a step's completion record, written now or
    /// found complete: the canonical step's quarantined episodes, the index step's commit.
    pub(crate) fn absorb(&mut self, step: Step, record: &CommitRecord) {
        match step {
            Step::Canonical => self.quarantined = record.quarantined.clone(),
            Step::Enrich => {}
            Step::Index => self.warehouse_commit = record.artifacts.first().cloned(),
        }
    }
}
