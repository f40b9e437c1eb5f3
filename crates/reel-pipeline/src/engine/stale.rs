//! Which episodes a newer pipeline version must ingest again, from the canonical
//! step's completion records (one read per batch record, not per episode, each record
//! dropped once read: memory holds an id, a landing key and a version per episode).

use std::collections::{BTreeMap, BTreeSet};

use reel_io::Store;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::engine::dag::Step;
use crate::state::StateStore;

/// An episode whose newest canonical record is of another pipeline version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleEpisode {
    /// Episode id.
    pub episode_id: String,
    /// Landing object.
    pub landing_key: String,
    /// Version that made its canonical episode.
    pub pipeline_version: String,
}

/// The newest canonical record of each episode in `store`.
fn newest_canonical(store: &Store) -> Result<Vec<StaleEpisode>> {
    let state = StateStore::new(store.clone());
    let mut newest: BTreeMap<String, (i64, StaleEpisode)> = BTreeMap::new();
    // One record at a time: what is kept per episode is its id, landing key and version.
    state.for_each_commit(Step::Canonical.name(), |record| {
        for s in record.summaries {
            if newest
                .get(&s.episode_id)
                .is_some_and(|(at, _)| *at >= record.committed_at_ns)
            {
                continue;
            }
            let entry = StaleEpisode {
                episode_id: s.episode_id.clone(),
                landing_key: s.landing_key,
                pipeline_version: s.provenance.pipeline_version,
            };
            newest.insert(s.episode_id, (record.committed_at_ns, entry));
        }
        Ok(())
    })?;
    Ok(newest.into_values().map(|(_, e)| e).collect())
}

/// Episodes of `store` whose newest canonical completion record is not of
/// `pipeline_version` (one read per batch record, not per episode).
pub fn stale_episodes(store: &Store, pipeline_version: &str) -> Result<Vec<StaleEpisode>> {
    Ok(newest_canonical(store)?
        .into_iter()
        .filter(|e| e.pipeline_version != pipeline_version)
        .collect())
}

/// Landing keys whose newest canonical episode in `store` is of `pipeline_version`:
/// what a plan for that version can leave out.
pub fn current_landing_keys(store: &Store, pipeline_version: &str) -> Result<BTreeSet<String>> {
    Ok(newest_canonical(store)?
        .into_iter()
        .filter(|e| e.pipeline_version == pipeline_version)
        .map(|e| e.landing_key)
        .collect())
}
