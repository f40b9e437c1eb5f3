//! Which samples exist (anchors of every manifest episode under the spec) and the order a
//! rank visits them in an epoch: deterministic for (seed, epoch), disjoint across ranks,
//! and addressable by position so a run can resume anywhere.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use reel_manifest::{Manifest, SamplingRule};
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// How an epoch is shuffled: the throughput-versus-randomness knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Shuffle {
    /// Every sample of the manifest in one uniform random order.
    Global,
    /// Runs of `run` consecutive anchors of one episode (a window one GOP read and one
    /// decode serve) are shuffled, then the samples inside each run.
    Locality { run: u64 },
}

/// Anchors of every episode: global sample `g` is anchor `k` of episode row `r`.
#[derive(Debug)]
pub(crate) struct AnchorIndex {
    rule: SamplingRule,
    /// The manifest's own sample offsets serve when its rule is the spec's.
    own_offsets: Option<Vec<u64>>,
    total: u64,
}

impl AnchorIndex {
    pub(crate) fn new(manifest: &Manifest, rule: SamplingRule) -> Self {
        if manifest.meta().sampling == rule {
            return Self {
                rule,
                own_offsets: None,
                total: manifest.num_samples(),
            };
        }
        let mut offsets = Vec::with_capacity(manifest.len() + 1);
        let mut total = 0u64;
        for episode in manifest.episodes() {
            offsets.push(total);
            total += rule.num_samples(episode.start_ns(), episode.end_ns());
        }
        offsets.push(total);
        Self {
            rule,
            own_offsets: Some(offsets),
            total,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Samples of episode `row`.
    pub(crate) fn count(&self, manifest: &Manifest, row: usize) -> Result<u64> {
        Ok(match &self.own_offsets {
            Some(o) => o[row + 1] - o[row],
            None => manifest.episode(row)?.num_samples(),
        })
    }

    /// First global sample of episode `row`.
    pub(crate) fn first(&self, manifest: &Manifest, row: usize) -> Result<u64> {
        Ok(match &self.own_offsets {
            Some(o) => o[row],
            None => manifest.episode(row)?.sample_offset(),
        })
    }

    /// Episode row and anchor time of global sample `g`.
    pub(crate) fn locate(&self, manifest: &Manifest, g: u64) -> Result<(usize, i64)> {
        match &self.own_offsets {
            None => {
                let s = manifest.sample(g)?;
                Ok((s.episode.row(), s.time_ns))
            }
            Some(o) => {
                // The last row starting at or before g (rows without samples share offsets).
                let row = o.partition_point(|&x| x <= g) - 1;
                let k = g - o[row];
                let start = manifest.episode(row)?.start_ns();
                Ok((row, self.rule.anchor_ns(start, k)))
            }
        }
    }
}

/// A rank's samples for one epoch, by position.
#[derive(Debug)]
pub(crate) enum EpochOrder {
    /// Position `i` of the rank is `permute(rank + i * world)`.
    Global {
        permutation: Permutation,
        rank: u64,
        world: u64,
        len: u64,
    },
    /// The rank's samples, listed (runs of one episode, runs and members shuffled).
    Listed(Vec<u64>),
}

impl EpochOrder {
    pub(crate) fn new(
        manifest: &Manifest,
        index: &AnchorIndex,
        shuffle: Shuffle,
        seed: u64,
        epoch: u64,
        rank: usize,
        world: usize,
    ) -> Result<Self> {
        let (rank, world) = (rank as u64, world as u64);
        let key = mix(mix(seed) ^ epoch);
        match shuffle {
            Shuffle::Global => {
                let total = index.total();
                let len = if rank < total {
                    (total - rank).div_ceil(world)
                } else {
                    0
                };
                Ok(Self::Global {
                    permutation: Permutation::new(total, key),
                    rank,
                    world,
                    len,
                })
            }
            Shuffle::Locality { run } => {
                let run = run.max(1);
                // Runs of every episode, as (first global sample, length).
                let mut runs: Vec<(u64, u64)> = Vec::new();
                for row in 0..manifest.len() {
                    let (first, count) = (index.first(manifest, row)?, index.count(manifest, row)?);
                    let mut k = 0;
                    while k < count {
                        runs.push((first + k, run.min(count - k)));
                        k += run;
                    }
                }
                let permutation = Permutation::new(runs.len() as u64, key);
                let mut samples = Vec::new();
                let mut position = rank;
                while position < runs.len() as u64 {
                    let r = permutation.apply(position);
                    let (first, len) = runs[r as usize];
                    let start = samples.len();
                    samples.extend(first..first + len);
                    let mut rng = ChaCha8Rng::seed_from_u64(mix(key ^ mix(r)));
                    samples[start..].shuffle(&mut rng);
                    position += world;
                }
                Ok(Self::Listed(samples))
            }
        }
    }

    pub(crate) fn len(&self) -> u64 {
        match self {
            Self::Global { len, .. } => *len,
            Self::Listed(v) => v.len() as u64,
        }
    }

    /// Global sample at the rank's position `i` (`i < len()`).
    pub(crate) fn at(&self, i: u64) -> u64 {
        match self {
            Self::Global {
                permutation,
                rank,
                world,
                ..
            } => permutation.apply(rank + i * world),
            Self::Listed(v) => v[i as usize],
        }
    }
}

/// A pseudo-random bijection of `0..n`, computed per element in O(1) memory: a balanced
/// Feistel network over the next even power of two, cycle-walking back into range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Permutation {
    n: u64,
    half_bits: u32,
    key: u64,
}

const ROUNDS: u64 = 6;

impl Permutation {
    pub(crate) fn new(n: u64, key: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        Self {
            n,
            half_bits: bits.div_ceil(2).max(1),
            key,
        }
    }

    pub(crate) fn apply(&self, mut x: u64) -> u64 {
        debug_assert!(x < self.n);
        // The domain is at most 4n, so the walk ends after a few steps on average.
        loop {
            x = self.encrypt(x);
            if x < self.n {
                return x;
            }
        }
    }

    fn encrypt(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for round in 0..ROUNDS {
            let f = mix(self.key ^ mix(right ^ (round << 58))) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << self.half_bits) | right
    }
}

/// SplitMix64's finaliser: a fast, well-distributed 64-bit mix.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_bijections_for_awkward_sizes() {
        for n in [1u64, 2, 3, 7, 64, 65, 1000, 4097] {
            for key in [0, 1, 0xdead_beef] {
                let p = Permutation::new(n, key);
                let mut seen = vec![false; n as usize];
                for i in 0..n {
                    let j = p.apply(i);
                    assert!(!seen[j as usize], "n={n}: {j} twice");
                    seen[j as usize] = true;
                }
            }
        }
    }

    #[test]
    fn different_keys_give_different_orders() {
        let (a, b) = (Permutation::new(1000, 1), Permutation::new(1000, 2));
        let same = (0..1000).filter(|&i| a.apply(i) == b.apply(i)).count();
        assert!(same < 20, "{same} fixed points shared");
        let moved = (0..1000).filter(|&i| a.apply(i) != i).count();
        assert!(moved > 980, "only {moved} of 1000 moved");
    }
}
