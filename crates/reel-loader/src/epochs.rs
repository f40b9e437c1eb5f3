//! Batches across epochs: the next epoch starts where the last one ended, for runs
//! counted in steps rather than epochs.

use std::collections::BTreeMap;

use crate::batch::{Batch, Skipped};
use crate::error::{LoaderError, Result};
use crate::loader::{Batches, LoadStats, Loader};
use crate::order::LoaderState;
use crate::skipped::{SkippedEpisode, tally_skipped};

impl Loader {
    /// Batches from `state` on, rolling over into epoch after epoch: endless, so take
    /// as many as the run needs. It ends early only after an error that ends an epoch
    /// ([`LoaderError::WorkerLost`], or a rank without a batch).
    pub fn epochs(&self, state: LoaderState) -> Epochs {
        Epochs {
            loader: self.clone(),
            state,
            current: None,
            finished: LoadStats::default(),
            finished_skipped: BTreeMap::new(),
            carried: Vec::new(),
            ended: false,
        }
    }
}

/// The batches of [`Loader::epochs`].
#[derive(Debug)]
pub struct Epochs {
    loader: Loader,
    /// Where the epoch in progress started, or where the next one starts.
    state: LoaderState,
    current: Option<Batches>,
    /// What the epochs already done delivered and did.
    finished: LoadStats,
    /// Skipped episodes of the finished epochs, by URI.
    finished_skipped: BTreeMap<String, SkippedEpisode>,
    /// Skipped samples of a finished epoch's last batches, which came out empty: reported
    /// with the next batch delivered.
    carried: Vec<Skipped>,
    ended: bool,
}

impl Epochs {
    /// Where the run stands after the batches delivered so far: after an epoch's last
    /// batch, the start of the next epoch. What a checkpoint keeps.
    pub fn state(&self) -> LoaderState {
        match &self.current {
            Some(batches) => next_epoch_if_done(batches),
            None => self.state.clone(),
        }
    }

    /// The episodes whose samples were skipped since the first epoch started, each once,
    /// with the samples skipped over every epoch and the first reason.
    pub fn skipped_episodes(&self) -> Vec<SkippedEpisode> {
        let mut all = self.finished_skipped.clone();
        if let Some(batches) = &self.current {
            merge_skipped(&mut all, batches.skipped_episodes());
        }
        all.into_values().collect()
    }

    /// The skipped samples that no delivered batch reports yet (an epoch's last batches
    /// came out empty, and no batch followed): read when the run stops. With the batches'
    /// own `skipped`, every skipped sample is reported exactly once.
    pub fn skipped_after_last_batch(&self) -> Vec<Skipped> {
        let mut unreported = self.carried.clone();
        if let Some(batches) = &self.current {
            unreported.extend_from_slice(batches.skipped_after_last_batch());
        }
        unreported
    }

    /// What was delivered and done since the first epoch started (decode and read counts
    /// include prefetched work).
    pub fn stats(&self) -> LoadStats {
        match &self.current {
            Some(batches) => add(self.finished, batches.stats()),
            None => self.finished,
        }
    }
}

impl Iterator for Epochs {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            let batches = match &mut self.current {
                Some(batches) => batches,
                None => match self.loader.resume(self.state.clone()) {
                    // A rank resumed on a larger world may have no batch of the rest of
                    // an epoch: it goes on with the next one.
                    Ok(batches) if batches.total_batches() == 0 && !self.state.spans.is_empty() => {
                        self.state = LoaderState::at(self.state.epoch + 1, 0);
                        continue;
                    }
                    // An empty epoch would roll over into the next empty one for ever.
                    Ok(batches) if batches.total_batches() == 0 => {
                        self.ended = true;
                        return Some(Err(LoaderError::NoBatches {
                            epoch: self.state.epoch,
                            rank: self.loader.options().rank,
                        }));
                    }
                    Ok(batches) => self.current.insert(batches),
                    Err(e) => {
                        self.ended = true;
                        return Some(Err(e));
                    }
                },
            };
            if let Some(item) = batches.next() {
                return Some(item.map(|mut batch| {
                    if !self.carried.is_empty() {
                        self.carried.append(&mut batch.skipped);
                        batch.skipped = std::mem::take(&mut self.carried);
                    }
                    batch
                }));
            }
            let done = batches.state();
            // Every sample of a whole epoch skipped (max_skipped allowing it): the next
            // epoch would deliver nothing either, for ever.
            if self.state.batch == 0 && batches.stats().batches == 0 {
                self.ended = true;
                return Some(Err(LoaderError::NoBatches {
                    epoch: self.state.epoch,
                    rank: self.loader.options().rank,
                }));
            }
            self.finished = add(self.finished, batches.stats());
            merge_skipped(&mut self.finished_skipped, batches.skipped_episodes());
            self.carried
                .extend_from_slice(batches.skipped_after_last_batch());
            self.state = next_epoch_if_done(batches);
            // An epoch that stopped short lost a worker: starting it again would repeat
            // the failure.
            self.ended = done == self.state;
            self.current = None;
        }
        None
    }
}

/// `batches`' state, or the start of the next epoch once it has delivered its last batch.
fn next_epoch_if_done(batches: &Batches) -> LoaderState {
    let state = batches.state();
    if state.batch == batches.total_batches() {
        LoaderState::at(state.epoch + 1, 0)
    } else {
        state
    }
}

fn add(a: LoadStats, b: LoadStats) -> LoadStats {
    LoadStats {
        batches: a.batches + b.batches,
        samples: a.samples + b.samples,
        skipped: a.skipped + b.skipped,
        frames_decoded: a.frames_decoded + b.frames_decoded,
        chunks_read: a.chunks_read + b.chunks_read,
        frames_wanted: a.frames_wanted + b.frames_wanted,
        frames_cached: a.frames_cached + b.frames_cached,
    }
}

/// Adds one epoch's skipped episodes to a tally by URI (samples summed, first reason kept).
fn merge_skipped(tally: &mut BTreeMap<String, SkippedEpisode>, epoch: Vec<SkippedEpisode>) {
    for episode in epoch {
        let (uri, samples) = (episode.uri.clone(), episode.samples);
        tally_skipped(tally, &uri, samples, || episode);
    }
}

#[cfg(test)]
mod tests {
    use crate::test_fixture::fixture;
    use crate::{LoaderOptions, LoaderState, Shuffle};

    fn indices(items: impl Iterator<Item = crate::Result<crate::Batch>>) -> Vec<(u64, u64)> {
        items
            .map(|b| b.expect("batch"))
            .map(|b| (b.epoch, b.index))
            .collect()
    }

    #[test]
    fn epochs_roll_over_and_resume_where_they_stopped() {
        let f = fixture(1, 3.0);
        let loader = f.loader(LoaderOptions {
            batch_size: 4,
            shuffle: Shuffle::Global,
            ..LoaderOptions::default()
        });
        let per_epoch = loader.epoch(0).expect("epoch").total_batches();
        assert!(per_epoch >= 2, "{per_epoch}");

        // From the middle of epoch 2 into epoch 4.
        let start = LoaderState::at(2, 1);
        let wanted = 2 * per_epoch;
        let mut epochs = loader.epochs(start);
        let run = indices(epochs.by_ref().take(wanted as usize));
        let expected: Vec<(u64, u64)> = (2..5)
            .flat_map(|e| (0..per_epoch).map(move |b| (e, b)))
            .skip(1)
            .take(wanted as usize)
            .collect();
        assert_eq!(run, expected);
        assert_eq!(epochs.state(), LoaderState::at(4, 1));
        let stats = epochs.stats();
        assert_eq!(stats.batches, wanted);
        assert!(stats.samples > 0 && stats.frames_decoded > 0);

        // Batches equal those of a run resumed from the state it gave.
        let mut resumed = loader.epochs(epochs.state());
        let next = resumed.next().expect("a batch").expect("batch");
        assert_eq!((next.epoch, next.index), (4, 1));
        let direct = loader
            .resume(LoaderState::at(4, 1))
            .expect("resume")
            .next()
            .expect("a batch")
            .expect("batch");
        assert_eq!(next, direct);
    }

    #[test]
    fn the_last_batch_of_an_epoch_leaves_the_state_at_the_next() {
        let f = fixture(1, 3.0);
        let loader = f.loader(LoaderOptions {
            batch_size: 4,
            ..LoaderOptions::default()
        });
        let per_epoch = loader.epoch(0).expect("epoch").total_batches();
        let mut epochs = loader.epochs(LoaderState::default());
        assert_eq!(
            epochs.by_ref().take(per_epoch as usize).count() as u64,
            per_epoch
        );
        assert_eq!(epochs.state(), LoaderState::at(1, 0));
    }

    #[test]
    fn a_lost_worker_ends_the_run_instead_of_restarting_its_epoch() {
        let f = fixture(1, 3.0);
        let loader = f.loader(LoaderOptions {
            batch_size: 4,
            ..LoaderOptions::default()
        });
        loader.panic_on_batch(1);
        let items: Vec<_> = loader.epochs(LoaderState::default()).take(100).collect();
        let errors: Vec<_> = items.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(
            matches!(
                errors[..],
                [crate::LoaderError::WorkerLost { batch: 1, .. }]
            ),
            "{errors:?}"
        );
        assert!(items.len() <= 2, "{} items", items.len());
    }
}
