//! Durable pipeline state: small JSON records in the store, written atomically.
//!
//! * `state/<step>/<batch>@<pipeline version>.json` — a step's completion record for one
//!   batch: the episodes it covers, their summaries or artifacts, and the quarantined
//!   ones. One write per batch and step, however many episodes the batch holds.
//! * `quarantine/<landing key without .mcap>.json` — why a landing episode could not be
//!   ingested (keyed by the landing object, so two landing objects never share a record).
//! * `claims/<episode>.json` — which landing object owns an episode id.
//!
//! Records are whole objects written with [`Store::write_atomic`] (temp + rename on a
//! folder, one PUT on S3), so a reader sees a complete record or none.

use reel_io::Store;
use serde::{Deserialize, Serialize};

use crate::canonical::EpisodeSummary;
use crate::{Error, Result};

/// A step's completion record for one batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// Step name.
    pub step: String,
    /// Batch key.
    pub batch: String,
    /// Pipeline version that ran the step.
    pub pipeline_version: String,
    /// Digest of the settings it ran with.
    pub config_digest: String,
    /// When it was written (ns since the epoch).
    pub committed_at_ns: i64,
    /// Landing keys the record covers (done or quarantined).
    pub landing_keys: Vec<String>,
    /// Summaries of the episodes (canonical step).
    #[serde(default)]
    pub summaries: Vec<EpisodeSummary>,
    /// Artifacts written or confirmed (label sets, warehouse parts).
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// Episodes quarantined.
    #[serde(default)]
    pub quarantined: Vec<Quarantine>,
}

/// A landing episode that could not be ingested, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quarantine {
    /// Episode id (the landing object's stem).
    pub episode_id: String,
    /// Landing object.
    pub landing_key: String,
    /// The error, naming the file and what is wrong.
    pub reason: String,
    /// Pipeline version that tried.
    pub pipeline_version: String,
    /// When (ns since the epoch).
    pub at_ns: i64,
}

/// Which landing object an episode id belongs to: `claims/<episode>.json`, created once
/// by the first landing object to reach the canonical step with that id, so two
/// recordings under one id never share a canonical episode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Episode id.
    pub episode_id: String,
    /// Landing object that owns it.
    pub landing_key: String,
    /// xxh3-128 of the landing object's bytes (hex).
    pub landing_digest: String,
}

/// The state of runs in a store.
#[derive(Debug, Clone)]
pub struct StateStore {
    store: Store,
}

impl StateStore {
    /// State kept in `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Key of the completion record of `step` for `batch` at `pipeline_version`.
    pub fn commit_key(step: &str, batch: &str, pipeline_version: &str) -> String {
        format!("state/{step}/{batch}@{pipeline_version}.json")
    }

    /// Reads a completion record, if there is one.
    pub fn read_commit(
        &self,
        step: &str,
        batch: &str,
        pipeline_version: &str,
    ) -> Result<Option<CommitRecord>> {
        let key = Self::commit_key(step, batch, pipeline_version);
        self.read_json(&key)
    }

    /// Writes a completion record.
    pub fn write_commit(&self, record: &CommitRecord) -> Result<String> {
        let key = Self::commit_key(&record.step, &record.batch, &record.pipeline_version);
        self.write_json(&key, record)?;
        Ok(key)
    }

    /// Each completion record of `step`, read and handed over one at a time: a corpus's
    /// records (a summary of every episode) are never all in memory at once.
    pub fn for_each_commit(
        &self,
        step: &str,
        mut each: impl FnMut(CommitRecord) -> Result<()>,
    ) -> Result<()> {
        for key in self.store.list(&format!("state/{step}/"))? {
            let hidden = key.rsplit('/').next().unwrap_or("").starts_with('.');
            if key.ends_with(".json")
                && !hidden
                && let Some(record) = self.read_json(&key)?
            {
                each(record)?;
            }
        }
        Ok(())
    }

    /// Key of the quarantine record of `landing_key`: the landing key without `.mcap` (a
    /// rosbag2 recording's folder) under `quarantine/` (`quarantine/ep-7.json`,
    /// `quarantine/robot-b/ep-7.json`).
    pub fn quarantine_key(landing_key: &str) -> String {
        let stem = reel_landing::recording_stem(landing_key);
        format!("quarantine/{stem}.json")
    }

    /// Records a quarantined episode under [`quarantine_key`](Self::quarantine_key).
    pub fn quarantine(&self, record: &Quarantine) -> Result<String> {
        let key = Self::quarantine_key(&record.landing_key);
        self.write_json(&key, record)?;
        Ok(key)
    }

    /// Claims `claim.episode_id` for `claim.landing_key` (`claims/<episode>.json`,
    /// created once: of racing claimants exactly one wins), or returns the claim of
    /// the other landing object that already owns the id (`None`: the id is this
    /// landing object's, now or from an earlier run).
    pub fn claim(&self, claim: &Claim) -> Result<Option<Claim>> {
        let key = format!("claims/{}.json", claim.episode_id);
        if self.store.create_new(&key, to_json(&key, claim)?)? {
            return Ok(None);
        }
        let owner: Claim = self.read_json(&key)?.ok_or_else(|| {
            // Removed between our create and our read: someone is deleting state.
            Error::Io(reel_io::Error::NotFound {
                name: self.store.object_uri(&key),
            })
        })?;
        Ok((owner.landing_key != claim.landing_key).then_some(owner))
    }

    pub(crate) fn read_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let bytes = match self.store.read(key) {
            Ok(b) => b,
            Err(reel_io::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| Error::Json {
                name: format!("{}/{key}", self.store.uri()),
                source,
            })
    }

    pub(crate) fn write_json<T: Serialize>(&self, key: &str, value: &T) -> Result<()> {
        self.store.write_atomic(key, to_json(key, value)?)?;
        Ok(())
    }
}

fn to_json<T: Serialize>(key: &str, value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|source| Error::Json {
        name: key.to_owned(),
        source,
    })
}
