//! The episodes whose samples a run skipped, tallied by URI across batches and epochs.

use std::collections::BTreeMap;

use serde::Serialize;

/// An episode whose samples the loader skipped, and why: for run reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedEpisode {
    /// Episode id.
    pub episode_id: String,
    /// Its object in the store.
    pub uri: String,
    /// Samples of it skipped so far.
    pub samples: u64,
    /// Why the first of them was skipped.
    pub reason: String,
}

/// Adds `samples` skipped samples of the episode at `uri` to a tally by URI; `episode`
/// describes it (with the first reason) when the tally does not know it yet.
pub(crate) fn tally_skipped(
    tally: &mut BTreeMap<String, SkippedEpisode>,
    uri: &str,
    samples: u64,
    episode: impl FnOnce() -> SkippedEpisode,
) {
    match tally.get_mut(uri) {
        Some(seen) => seen.samples += samples,
        None => {
            let mut first = episode();
            first.samples = samples;
            tally.insert(uri.to_owned(), first);
        }
    }
}
