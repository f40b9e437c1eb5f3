//! The DAG's vocabulary: steps, the profiles that select them, the batch a run covers
//! and how a run treats existing state. Steps run in the order of [`Step::ALL`]; a profile
//! that leaves out a step works from that step's outputs already in the store.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::{Error, Result};

/// A step of the ingest DAG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Decode → resample → derive → quality checks → encode the canonical MCAP. Reads the
    /// landing object; writes `canonical/<episode>.mcap` or a quarantine record.
    Canonical,
    /// Label canonical episodes with every enricher. Reads `canonical/<episode>.mcap`;
    /// writes `labels/<enricher>/<episode>.json`.
    Enrich,
    /// One warehouse row per episode, one Parquet file per batch. Reads the canonical
    /// summaries; writes `episodes/part-<batch>-<pipeline version>.parquet`.
    Index,
}

impl Step {
    /// Every step in dependency order.
    pub const ALL: [Step; 3] = [Step::Canonical, Step::Enrich, Step::Index];

    /// Name used in state keys and events.
    pub fn name(self) -> &'static str {
        match self {
            Self::Canonical => "canonical",
            Self::Enrich => "enrich",
            Self::Index => "index",
        }
    }
}

/// Which steps a run performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Every step.
    #[default]
    Full,
    /// Re-index only: warehouse rows from existing canonical episodes.
    Metadata,
    /// Enrichment only: new labels for existing canonical episodes.
    Relabel,
}

impl Profile {
    /// The steps, in dependency order.
    pub fn steps(self) -> &'static [Step] {
        match self {
            Self::Full => &Step::ALL,
            Self::Metadata => &[Step::Index],
            Self::Relabel => &[Step::Enrich],
        }
    }

    /// Parses `full`, `metadata` or `relabel`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "full" => Some(Self::Full),
            "metadata" => Some(Self::Metadata),
            "relabel" => Some(Self::Relabel),
            _ => None,
        }
    }
}

/// The episodes one run processes, under a key that names its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// Batch key (state and warehouse part names).
    pub key: String,
    /// Landing object keys.
    pub landing_keys: Vec<String>,
}

impl BatchSpec {
    /// Batch `index` of `plan`.
    pub fn from_plan(plan: &Plan, index: usize) -> Result<Self> {
        let batch = plan.batches.get(index).ok_or_else(|| Error::Plan {
            name: plan.plan_id.clone(),
            reason: format!("no batch {index} (the plan has {})", plan.batches.len()),
        })?;
        Ok(Self {
            key: plan.batch_key(index),
            landing_keys: batch.episodes.iter().map(|e| e.key.clone()).collect(),
        })
    }

    /// One episode, as a collection trigger sends it: the same steps as a batch.
    pub fn single(landing_key: &str) -> Self {
        let stem: String = stem_of(landing_key)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Self {
            key: format!("one-{stem}"),
            landing_keys: vec![landing_key.to_owned()],
        }
    }
}

/// The episode id a landing key stands for: its file name without `.mcap`, or a rosbag2
/// recording's folder name.
pub(crate) fn stem_of(landing_key: &str) -> &str {
    let stem = reel_landing::recording_stem(landing_key);
    stem.rsplit('/').next().unwrap_or(stem)
}

/// How a run treats existing state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunOptions {
    /// Steps to run.
    pub profile: Profile,
    /// Recompute even what is recorded done (for the selected episodes).
    pub replay: bool,
    /// Only these episodes (ids or landing keys); the others keep their recorded state.
    pub only: Option<BTreeSet<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_name_their_steps_in_dependency_order() {
        assert_eq!(
            Profile::from_name("metadata").map(Profile::steps),
            Some(&[Step::Index][..])
        );
        assert_eq!(
            Profile::from_name("relabel").map(Profile::steps),
            Some(&[Step::Enrich][..])
        );
        assert_eq!(
            Profile::from_name("full").map(Profile::steps),
            Some(&Step::ALL[..])
        );
        assert!(Profile::from_name("fast").is_none());
    }
}
