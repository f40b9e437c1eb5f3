//! Where a run stands, as a checkpoint keeps it: the position of one rank in an epoch
//! ([`LoaderState`]), what the position belongs to ([`RunIdentity`]), and resuming from
//! the saved states of a world of any size ([`Loader::restore`]).
//!
//! Rank `r` of a world of `W` delivers positions `0..` of its own order
//! ([`EpochOrder`](crate::order::EpochOrder)); its state says how many batches of it
//! were delivered. The orders of all ranks of a world together hold every sample of the
//! epoch once, so the states of all `W` ranks say exactly which samples are left: the
//! rest of each rank's order. Resumed on `W′` ranks, those rests are concatenated in
//! rank order and cut into `W′` contiguous slices that differ by at most one sample
//! (contiguous, so the locality order's runs stay together); each new rank delivers its
//! slice as [`Span`]s of the old orders, then the next epochs on its own share of `W′`.

use serde::{Deserialize, Serialize};

use crate::error::{LoaderError, Result};
use crate::loader::{EpochSize, Loader};
use crate::order::{LoaderState, RankOrder, Shuffle, Span, slice_spans};
use crate::sources::Sources;

/// How [`RunIdentity::manifest`] begins for a mixture: `mixture(<hash>*<weight>, …)`.
const MIXTURE_PREFIX: &str = "mixture(";

/// What a state belongs to: the same position under another manifest, spec, seed, order
/// or batch size names other samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunIdentity {
    /// [`reel_manifest::Manifest::content_hash`]: the manifest's content, not its path.
    /// Of a mixture, every source's hash and weight: `mixture(<hash>*<weight>, …)`.
    pub manifest: String,
    /// A hash of the sample spec.
    pub spec: String,
    pub seed: u64,
    pub shuffle: Shuffle,
    pub batch_size: u64,
    pub drop_last: bool,
}

impl RunIdentity {
    /// The content hash of each source's manifest, in order (one for a single manifest).
    pub fn manifest_hashes(&self) -> Vec<&str> {
        match self
            .manifest
            .strip_prefix(MIXTURE_PREFIX)
            .and_then(|m| m.strip_suffix(')'))
        {
            Some(parts) => parts
                .split(", ")
                .map(|part| part.rsplit_once('*').map_or(part, |(hash, _)| hash))
                .collect(),
            None => vec![self.manifest.as_str()],
        }
    }

    /// The first field that differs from `other`, with both values.
    fn difference(&self, other: &Self) -> Option<(&'static str, String, String)> {
        let text = |v: &dyn std::fmt::Debug| format!("{v:?}");
        [
            ("manifest", text(&self.manifest), text(&other.manifest)),
            ("spec", text(&self.spec), text(&other.spec)),
            ("seed", text(&self.seed), text(&other.seed)),
            ("shuffle", text(&self.shuffle), text(&other.shuffle)),
            (
                "batch size",
                text(&self.batch_size),
                text(&other.batch_size),
            ),
            ("drop_last", text(&self.drop_last), text(&other.drop_last)),
        ]
        .into_iter()
        .find(|(_, a, b)| a != b)
    }
}

/// One rank's state as a checkpoint stores it: what it belongs to, which rank of which
/// world saved it, and its position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedState {
    pub run: RunIdentity,
    pub rank: u64,
    pub world: u64,
    #[serde(flatten)]
    pub position: LoaderState,
    /// Where each source's manifest was opened from (a path or store URI), for a
    /// checkpoint's lineage; not part of the run's identity (a copy elsewhere is the
    /// same run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<String>,
    /// The store each source's episodes were read from (its URI, no credentials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<String>,
}

/// The checkpoint file holding every rank's [`SavedState`] (a JSON list; one state alone
/// is read too): what `train-policy` and `examples/train_torch.py` write, and what
/// `reel inspect lineage` reads.
pub const LOADER_CHECKPOINT_FILE: &str = "loader.json";

impl SavedState {
    /// The states in a [`LOADER_CHECKPOINT_FILE`]: a JSON list of states, or one.
    pub fn from_checkpoint_json(bytes: &[u8]) -> Result<Vec<Self>> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            Many(Vec<SavedState>),
            One(Box<SavedState>),
        }
        match serde_json::from_slice(bytes) {
            Ok(OneOrMany::Many(states)) => Ok(states),
            Ok(OneOrMany::One(state)) => Ok(vec![*state]),
            Err(e) => Err(LoaderError::BadResume {
                reason: format!("{LOADER_CHECKPOINT_FILE} is not a list of loader states: {e}"),
            }),
        }
    }

    /// `states` as a [`LOADER_CHECKPOINT_FILE`] holds them.
    pub fn to_checkpoint_json(states: &[Self]) -> Vec<u8> {
        // Plain data: serialising it cannot fail.
        serde_json::to_vec(states).unwrap_or_default()
    }
}

/// How [`Loader::restore`] treats a state saved by another run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResumeCheck {
    /// Refuse it, naming what changed.
    #[default]
    SameRun,
    /// Deliberately continue a changed run (a new curation, spec or batch size): keep
    /// the saved epoch and batch number and go on in this loader's order. The rest of
    /// that epoch is this order's, so samples of it may repeat or be missed; later
    /// epochs are exact. A state saved mid-epoch on another world size keeps its epoch
    /// only (its positions mean nothing in another order).
    KeepPosition,
}

impl Loader {
    /// What this loader's states belong to.
    pub fn identity(&self) -> RunIdentity {
        let o = self.options();
        RunIdentity {
            manifest: self.content_identity(),
            spec: self.spec_hash().to_string(),
            seed: o.seed,
            shuffle: o.shuffle,
            batch_size: o.batch_size.max(1) as u64,
            drop_last: o.drop_last,
        }
    }

    /// The manifest's content hash; of a mixture, each source's hash and weight in order
    /// (`mixture(<hash>*<weight>, …)`): other weights draw other samples.
    fn content_identity(&self) -> String {
        if self.num_sources() == 1 {
            return self.manifest().content_hash().to_string();
        }
        let parts: Vec<String> = (0..self.num_sources())
            .filter_map(|k| {
                let manifest = self.source_manifest(k)?;
                Some(format!(
                    "{}*{}",
                    manifest.content_hash(),
                    self.source_weight(k)?
                ))
            })
            .collect();
        format!("{MIXTURE_PREFIX}{})", parts.join(", "))
    }

    /// `position` as this rank saves it in a checkpoint.
    pub fn saved_state(&self, position: LoaderState) -> SavedState {
        let o = self.options();
        SavedState {
            run: self.identity(),
            rank: o.rank as u64,
            world: o.world as u64,
            position,
            manifests: (0..self.num_sources())
                .filter_map(|k| self.source_location(k).map(str::to_owned))
                .collect(),
            stores: (0..self.num_sources())
                .filter_map(|k| self.shared_sources(k).map(Sources::store_uri))
                .collect(),
        }
    }

    /// Where this rank resumes from `saved`, for [`Loader::resume`] or
    /// [`Loader::epochs`]: either one state of a world of this loader's size (its own,
    /// or, at an epoch's start or on its own share, any rank's: ranks step together), or
    /// the states of every rank of a world of any size, after which the ranks of this
    /// world together deliver exactly the rest of the epoch, every sample once.
    ///
    /// A state from another run (manifest content, spec, seed, shuffle, batch size or
    /// `drop_last`) is refused naming what changed, unless `check` is
    /// [`ResumeCheck::KeepPosition`].
    pub fn restore(&self, saved: &[SavedState], check: ResumeCheck) -> Result<LoaderState> {
        let refused = |reason: String| LoaderError::BadResume { reason };
        let Some(first) = saved.first() else {
            return Err(refused("no state to resume from".into()));
        };
        let o = self.options();
        let (rank, world) = (o.rank as u64, o.world as u64);
        if check == ResumeCheck::KeepPosition {
            let own = saved.iter().find(|s| s.rank == rank).unwrap_or(first);
            let batch = if own.world == world {
                own.position.batch
            } else {
                0
            };
            let batches = self.epoch_size(own.position.epoch)?.batches;
            return Ok(LoaderState::at(own.position.epoch, batch.min(batches)));
        }
        let mine = self.identity();
        for state in saved {
            if let Some((what, was, is)) = state.run.difference(&mine) {
                return Err(LoaderError::OtherRun { what, was, is });
            }
        }
        if let [state] = saved {
            let p = &state.position;
            let own_share = p.spans.is_empty() || state.rank == rank;
            if (state.world == world && own_share) || (p.batch == 0 && p.spans.is_empty()) {
                self.check_position(p)?;
                return Ok(p.clone());
            }
            return Err(refused(format!(
                "the state of rank {} of a world of {} in the middle of epoch {} resumes on \
                 a world of {world} only with the states of all {} ranks",
                state.rank, state.world, p.epoch, state.world
            )));
        }
        let old_world = first.world;
        let mut ranks: Vec<&SavedState> = saved.iter().collect();
        ranks.sort_by_key(|s| s.rank);
        let complete = ranks.len() as u64 == old_world
            && ranks
                .iter()
                .enumerate()
                .all(|(i, s)| s.rank == i as u64 && s.world == old_world);
        if !complete {
            let have: Vec<String> = ranks
                .iter()
                .map(|s| format!("{}/{}", s.rank, s.world))
                .collect();
            return Err(refused(format!(
                "the states given are ranks {} (rank/world): one state from each rank of one \
                 world is needed",
                have.join(", ")
            )));
        }
        // Ranks step together, so their states differ at most by one epoch's end.
        let epoch = ranks.iter().map(|s| s.position.epoch).min().unwrap_or(0);
        let ended = |s: &SavedState| s.position.epoch == epoch + 1 && s.position.batch == 0;
        if let Some(odd) = ranks
            .iter()
            .find(|s| s.position.epoch != epoch && !(ended(s) && s.position.spans.is_empty()))
        {
            return Err(refused(format!(
                "rank {} is at epoch {} batch {} while another is at epoch {epoch}: the states \
                 are not from one checkpoint",
                odd.rank, odd.position.epoch, odd.position.batch
            )));
        }
        if old_world == world {
            let own = ranks[rank as usize];
            self.check_position(&own.position)?;
            return Ok(own.position.clone());
        }
        let positions: Vec<(u64, u64, &LoaderState)> = ranks
            .iter()
            .map(|s| (s.rank, s.world, &s.position))
            .collect();
        self.orders()
            .rest_of_epoch(epoch, &positions, rank, world)
            .map_err(|reason| LoaderError::BadResume { reason })
    }

    fn orders(&self) -> Orders {
        let o = self.options();
        Orders {
            total: self.total_samples(),
            shuffle: o.shuffle,
            seed: o.seed,
            batch_size: o.batch_size.max(1) as u64,
            drop_last: o.drop_last,
        }
    }

    /// The order of rank `rank` of `world` in `epoch`, or its `spans`.
    pub(crate) fn rank_order(
        &self,
        epoch: u64,
        (rank, world): (u64, u64),
        spans: &[Span],
    ) -> Result<RankOrder> {
        self.orders()
            .rank_order(epoch, (rank, world), spans)
            .map_err(|reason| LoaderError::BadResume { reason })
    }

    /// Samples and batches on this rank of the epoch `position` is in: of its spans, when
    /// it resumed on another world size.
    pub fn epoch_size_at(&self, position: &LoaderState) -> Result<EpochSize> {
        let o = self.options();
        let order = self.rank_order(
            position.epoch,
            (o.rank as u64, o.world as u64),
            &position.spans,
        )?;
        Ok(EpochSize::of(
            order.len(),
            o.batch_size.max(1) as u64,
            o.drop_last,
        ))
    }

    /// Refuses a position past its epoch's end.
    fn check_position(&self, p: &LoaderState) -> Result<()> {
        let batches = self.epoch_size_at(p)?.batches;
        if p.batch > batches {
            return Err(LoaderError::BadState {
                epoch: p.epoch,
                batch: p.batch,
                batches,
            });
        }
        Ok(())
    }
}

/// What the ranks' orders depend on.
#[derive(Debug, Clone, Copy)]
struct Orders {
    total: u64,
    shuffle: Shuffle,
    seed: u64,
    batch_size: u64,
    drop_last: bool,
}

impl Orders {
    fn rank_order(
        &self,
        epoch: u64,
        (rank, world): (u64, u64),
        spans: &[Span],
    ) -> std::result::Result<RankOrder, String> {
        RankOrder::new(
            self.total,
            self.shuffle,
            (self.seed, epoch),
            (rank as usize, world as usize),
            spans,
        )
    }

    /// Rank `rank` of a world of `world`'s part of the rest of `epoch`, given where every
    /// rank of the old world stands (`(rank, world, position)`, ranks in order; a rank
    /// past the epoch has nothing left of it).
    fn rest_of_epoch(
        &self,
        epoch: u64,
        old: &[(u64, u64, &LoaderState)],
        rank: u64,
        world: u64,
    ) -> std::result::Result<LoaderState, String> {
        let mut rest = Vec::new();
        for &(old_rank, old_world, position) in old.iter().filter(|(_, _, p)| p.epoch == epoch) {
            let order = self.rank_order(epoch, (old_rank, old_world), &position.spans)?;
            let whole = if self.drop_last {
                order.len() / self.batch_size * self.batch_size
            } else {
                order.len()
            };
            let done = position.batch.saturating_mul(self.batch_size).min(whole);
            rest.extend(order.spans(done, whole));
        }
        let left: u64 = rest.iter().map(|s| s.end - s.start).sum();
        let cut = |r: u64| (left as u128 * r as u128 / world as u128) as u64;
        let spans = slice_spans(&rest, cut(rank), cut(rank + 1));
        if spans.is_empty() {
            // Nothing of this epoch is left for this rank: it starts the next one.
            return Ok(LoaderState::at(epoch + 1, 0));
        }
        Ok(LoaderState {
            epoch,
            batch: 0,
            spans,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The samples rank `rank` of `world` delivers from `position` to the epoch's end, in
    /// order, and those it delivered before it.
    fn deliveries(
        orders: &Orders,
        rank: u64,
        world: u64,
        position: &LoaderState,
    ) -> (Vec<u64>, Vec<u64>) {
        let order = orders
            .rank_order(position.epoch, (rank, world), &position.spans)
            .expect("a resumed position");
        let whole = if orders.drop_last {
            order.len() / orders.batch_size * orders.batch_size
        } else {
            order.len()
        };
        let done = (position.batch * orders.batch_size).min(whole);
        (
            (done..whole).map(|i| order.at(i)).collect(),
            (0..done).map(|i| order.at(i)).collect(),
        )
    }

    /// Saves every rank of `world` at its batch in `batches`, resumes on each new world
    /// size, and checks that what was delivered before plus what the new ranks deliver is
    /// every sample of the epoch once (with `drop_last`, every sample the ranks' whole
    /// batches hold, once).
    fn check_elastic(orders: Orders, world: u64, batches: &[u64], new_worlds: &[u64]) {
        let epoch = 3;
        let old: Vec<LoaderState> = batches.iter().map(|&b| LoaderState::at(epoch, b)).collect();
        let before: Vec<u64> = (0..world)
            .flat_map(|r| deliveries(&orders, r, world, &old[r as usize]).1)
            .collect();
        let uninterrupted: usize = (0..world)
            .map(|r| {
                let (rest, done) = deliveries(&orders, r, world, &LoaderState::at(epoch, 0));
                rest.len() + done.len()
            })
            .sum::<usize>();
        for &new_world in new_worlds {
            let positions: Vec<(u64, u64, &LoaderState)> = old
                .iter()
                .enumerate()
                .map(|(r, p)| (r as u64, world, p))
                .collect();
            let mut seen = vec![0u8; orders.total as usize];
            for &g in &before {
                seen[g as usize] += 1;
            }
            let mut sizes = Vec::new();
            for rank in 0..new_world {
                let resumed = orders
                    .rest_of_epoch(epoch, &positions, rank, new_world)
                    .expect("a resumed position");
                let mine = if resumed.epoch == epoch {
                    deliveries(&orders, rank, new_world, &resumed).0
                } else {
                    Vec::new()
                };
                sizes.push(mine.len());
                for g in mine {
                    seen[g as usize] += 1;
                }
            }
            assert!(
                seen.iter().all(|&n| n <= 1),
                "a sample delivered twice ({new_world} ranks)"
            );
            if !orders.drop_last {
                assert!(
                    seen.iter().all(|&n| n == 1),
                    "a sample lost ({new_world} ranks)"
                );
            }
            let delivered: usize = seen.iter().map(|&n| n as usize).sum();
            if !orders.drop_last {
                assert_eq!(delivered, uninterrupted);
            }
            let (lo, hi) = (
                sizes.iter().min().expect("a resumed position"),
                sizes.iter().max().expect("a resumed position"),
            );
            assert!(hi - lo <= 1, "uneven split {sizes:?}");
        }
    }

    #[test]
    fn every_rank_s_rest_is_delivered_once_on_any_new_world_size() {
        for shuffle in [Shuffle::Global, Shuffle::Locality { run: 7 }] {
            for drop_last in [false, true] {
                let orders = Orders {
                    total: 10_007,
                    shuffle,
                    seed: 5,
                    batch_size: 8,
                    drop_last,
                };
                // Ranks a batch apart, as a checkpoint taken while they step together.
                check_elastic(orders, 4, &[100, 100, 99, 100], &[1, 2, 3, 5, 8, 13]);
                check_elastic(orders, 3, &[0, 0, 0], &[2, 7]);
                check_elastic(orders, 1, &[1000], &[4]);
            }
        }
    }

    #[test]
    fn a_resumed_world_resumes_again_on_a_third_size() {
        let orders = Orders {
            total: 5_003,
            shuffle: Shuffle::Locality { run: 10 },
            seed: 1,
            batch_size: 4,
            drop_last: false,
        };
        let epoch = 0;
        // 4 ranks at batch 50, resumed on 3; those at batch 20 of their parts, on 6.
        let first: Vec<LoaderState> = (0..4).map(|_| LoaderState::at(epoch, 50)).collect();
        let mut seen = vec![0u8; orders.total as usize];
        for (r, p) in first.iter().enumerate() {
            for g in deliveries(&orders, r as u64, 4, p).1 {
                seen[g as usize] += 1;
            }
        }
        let positions: Vec<_> = first
            .iter()
            .enumerate()
            .map(|(r, p)| (r as u64, 4, p))
            .collect();
        let second: Vec<LoaderState> = (0..3)
            .map(|r| {
                let mut p = orders
                    .rest_of_epoch(epoch, &positions, r, 3)
                    .expect("a resumed position");
                p.batch = 20;
                p
            })
            .collect();
        for (r, p) in second.iter().enumerate() {
            for g in deliveries(&orders, r as u64, 3, p).1 {
                seen[g as usize] += 1;
            }
        }
        let positions: Vec<_> = second
            .iter()
            .enumerate()
            .map(|(r, p)| (r as u64, 3, p))
            .collect();
        for r in 0..6 {
            let p = orders
                .rest_of_epoch(epoch, &positions, r, 6)
                .expect("a resumed position");
            for g in deliveries(&orders, r, 6, &p).0 {
                seen[g as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn a_rank_with_nothing_left_starts_the_next_epoch() {
        let orders = Orders {
            total: 20,
            shuffle: Shuffle::Global,
            seed: 0,
            batch_size: 4,
            drop_last: false,
        };
        // Two ranks of 10 samples each, 8 of each delivered: 4 left for 8 new ranks.
        let at = [LoaderState::at(0, 2), LoaderState::at(0, 2)];
        let positions: Vec<_> = at
            .iter()
            .enumerate()
            .map(|(r, p)| (r as u64, 2, p))
            .collect();
        let resumed: Vec<_> = (0..8)
            .map(|r| {
                orders
                    .rest_of_epoch(0, &positions, r, 8)
                    .expect("a resumed position")
            })
            .collect();
        assert_eq!(resumed.iter().filter(|p| p.epoch == 0).count(), 4);
        assert!(
            resumed
                .iter()
                .filter(|p| p.epoch == 1)
                .all(|p| p.batch == 0 && p.spans.is_empty())
        );
    }
}
