//! Which samples exist (anchors of every manifest episode under the spec) and the order a
//! rank visits them in an epoch: deterministic for (seed, epoch), disjoint across ranks,
//! and addressed by position in O(1) time and memory, whatever the manifest's size, so a
//! run starts, rolls over into the next epoch and resumes anywhere without listing the
//! corpus.

use reel_manifest::{Manifest, SamplingRule};
use serde::{Deserialize, Serialize};

use crate::error::{LoaderError, Result};

/// How an epoch is shuffled: the throughput-versus-randomness knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Shuffle {
    /// Every sample of the manifest in one uniform random order.
    Global,
    /// Blocks of `run` consecutive samples of the manifest (consecutive anchors of one
    /// episode, a window one GOP read and one decode serve; a block at an episode's end
    /// takes the next episode's first anchors) are shuffled, then the samples inside each
    /// block.
    Locality { run: u64 },
}

/// Rows a spec whose sampling rule differs from the manifest's may index: the offsets of
/// 2^20 rows are 8 MiB on each rank. A larger manifest is curated with the spec's rule.
pub(crate) const MAX_RESAMPLED_ROWS: usize = 1 << 20;

/// Anchors of every episode: global sample `g` is anchor `k` of episode row `r`.
#[derive(Debug)]
pub(crate) struct AnchorIndex {
    rule: SamplingRule,
    /// The manifest's own sample offsets serve when its rule is the spec's; otherwise the
    /// offsets under the spec's rule, for at most [`MAX_RESAMPLED_ROWS`] rows.
    own_offsets: Option<Vec<u64>>,
    total: u64,
}

impl AnchorIndex {
    pub(crate) fn new(manifest: &Manifest, rule: SamplingRule) -> Result<Self> {
        let curated = manifest.meta().sampling;
        if curated == rule {
            return Ok(Self {
                rule,
                own_offsets: None,
                total: manifest.num_samples(),
            });
        }
        if manifest.len() > MAX_RESAMPLED_ROWS {
            return Err(LoaderError::ResampledManifest {
                path: manifest.path().to_path_buf(),
                rows: manifest.len(),
                limit: MAX_RESAMPLED_ROWS,
                spec: rule_text(rule),
                curated: rule_text(curated),
            });
        }
        let mut offsets = Vec::with_capacity(manifest.len() + 1);
        let mut total = 0u64;
        for episode in manifest.episodes() {
            offsets.push(total);
            total += rule.num_samples(episode.start_ns(), episode.end_ns());
        }
        offsets.push(total);
        Ok(Self {
            rule,
            own_offsets: Some(offsets),
            total,
        })
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

/// A sampling rule as `reel-curate` takes it.
fn rule_text(rule: SamplingRule) -> String {
    format!(
        "--anchor-hz {} --before {} --after {}",
        1e9 / rule.period_ns.max(1) as f64,
        rule.before_ns as f64 / 1e9,
        rule.after_ns as f64 / 1e9
    )
}

/// A rank's samples for one epoch, by position: nothing is listed, each position is
/// computed when it is asked for.
#[derive(Debug)]
pub(crate) enum EpochOrder {
    /// Position `i` of the rank is `permute(rank + i * world)`.
    Global {
        permutation: Permutation,
        rank: u64,
        world: u64,
        len: u64,
    },
    /// The manifest's samples in blocks of `run`: block `b` holds samples
    /// `b * run .. min((b + 1) * run, total)`. Block position `p` of the epoch holds
    /// block `blocks.apply(p)`, and the rank takes positions `rank, rank + world, …`;
    /// inside a block the samples are permuted too. Only the last block of the manifest
    /// may be short (`tail` samples): the rank that takes it skips its empty slots.
    Locality {
        blocks: Permutation,
        key: u64,
        run: u64,
        total: u64,
        rank: u64,
        world: u64,
        /// Where the short block sits in the rank's positions: (first position, its
        /// length), when this rank takes it.
        short: Option<(u64, u64)>,
        len: u64,
    },
}

impl EpochOrder {
    /// The order of `total` samples (the [`AnchorIndex`]'s).
    pub(crate) fn new(
        total: u64,
        shuffle: Shuffle,
        seed: u64,
        epoch: u64,
        rank: usize,
        world: usize,
    ) -> Self {
        let (rank, world) = (rank as u64, world as u64);
        let key = mix(mix(seed) ^ epoch);
        match shuffle {
            Shuffle::Global => Self::Global {
                permutation: Permutation::new(total, key),
                rank,
                world,
                len: share(total, rank, world),
            },
            Shuffle::Locality { run } => {
                let run = run.max(1);
                let num_blocks = total.div_ceil(run);
                let blocks = Permutation::new(num_blocks, key);
                let mine = share(num_blocks, rank, world);
                let tail = total % run;
                let short = (tail > 0)
                    .then(|| blocks.invert(num_blocks - 1))
                    .filter(|p| p % world == rank)
                    .map(|p| ((p / world) * run, tail));
                let len = mine * run - short.map_or(0, |(_, tail)| run - tail);
                Self::Locality {
                    blocks,
                    key,
                    run,
                    total,
                    rank,
                    world,
                    short,
                    len,
                }
            }
        }
    }

    pub(crate) fn len(&self) -> u64 {
        match self {
            Self::Global { len, .. } | Self::Locality { len, .. } => *len,
        }
    }

    /// Global sample at the rank's position `i` (`i < len()`).
    pub(crate) fn at(&self, i: u64) -> u64 {
        match *self {
            Self::Global {
                permutation,
                rank,
                world,
                ..
            } => permutation.apply(rank + i * world),
            Self::Locality {
                blocks,
                key,
                run,
                total,
                rank,
                world,
                short,
                ..
            } => {
                // Positions past the short block skip its empty slots.
                let i = match short {
                    Some((first, tail)) if i >= first + tail => i + (run - tail),
                    _ => i,
                };
                let block = blocks.apply(rank + (i / run) * world);
                let first = block * run;
                let members = Permutation::new(run.min(total - first), mix(key ^ mix(block)));
                first + members.apply(i % run)
            }
        }
    }
}

/// Where a rank stands: kept in checkpoints, and with [`Loader::resume`](crate::Loader::resume) all it takes to
/// go on exactly where it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    pub epoch: u64,
    /// Batches of the epoch already delivered.
    pub batch: u64,
    /// The rank's samples of this epoch when the run resumed on another world size in
    /// the middle of it ([`Loader::restore`](crate::Loader::restore)); empty for the rank's own share.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<Span>,
}

impl LoaderState {
    /// Batch `batch` of `epoch` on the rank's own share.
    pub fn at(epoch: u64, batch: u64) -> Self {
        Self {
            epoch,
            batch,
            spans: Vec::new(),
        }
    }
}

/// Positions `start..end` of one rank's order in an epoch: the order of rank `rank` of a
/// world of `world` ranks (the world the epoch started on). A rank resumed on another
/// world size mid-epoch delivers a list of these, the rest of the old ranks' orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub rank: u64,
    pub world: u64,
    pub start: u64,
    pub end: u64,
}

impl Span {
    fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// Items `from..to` of the concatenation of `spans`, as spans.
pub(crate) fn slice_spans(spans: &[Span], from: u64, to: u64) -> Vec<Span> {
    let mut out = Vec::new();
    let mut first = 0u64;
    for span in spans {
        let (lo, hi) = (from.max(first), to.min(first + span.len()));
        if lo < hi {
            out.push(Span {
                start: span.start + (lo - first),
                end: span.start + (hi - first),
                ..*span
            });
        }
        first += span.len();
    }
    out
}

/// The samples one rank delivers in an epoch: its own share ([`EpochOrder`]), or the
/// spans of other ranks' orders it took over when the run resumed on another world size.
/// Memory grows with the spans (at most the old and new world sizes), never the corpus.
#[derive(Debug)]
pub(crate) struct RankOrder {
    spans: Vec<Span>,
    /// Each span's order.
    orders: Vec<EpochOrder>,
    /// Each span's first position in this rank's order.
    firsts: Vec<u64>,
    len: u64,
}

impl RankOrder {
    /// Rank `rank` of `world` in `epoch`: its own share, or `spans` when given.
    pub(crate) fn new(
        total: u64,
        shuffle: Shuffle,
        (seed, epoch): (u64, u64),
        (rank, world): (usize, usize),
        spans: &[Span],
    ) -> Result<Self, String> {
        // The rank's own share is the one span of its own order.
        let own;
        let spans = if spans.is_empty() {
            let len = EpochOrder::new(total, shuffle, seed, epoch, rank, world).len();
            own = [Span {
                rank: rank as u64,
                world: world as u64,
                start: 0,
                end: len,
            }];
            &own[..]
        } else {
            spans
        };
        let mut this = Self {
            spans: Vec::with_capacity(spans.len()),
            orders: Vec::with_capacity(spans.len()),
            firsts: Vec::with_capacity(spans.len()),
            len: 0,
        };
        for span in spans.iter().filter(|s| s.len() > 0) {
            if span.world == 0 || span.rank >= span.world {
                return Err(format!("span {span:?} names no rank of its world"));
            }
            let order = EpochOrder::new(
                total,
                shuffle,
                seed,
                epoch,
                span.rank as usize,
                span.world as usize,
            );
            if span.end > order.len() {
                return Err(format!(
                    "span {span:?} passes the {} samples of rank {} of {} in epoch {epoch}",
                    order.len(),
                    span.rank,
                    span.world
                ));
            }
            this.spans.push(*span);
            this.orders.push(order);
            this.firsts.push(this.len);
            this.len += span.len();
        }
        Ok(this)
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The spans of positions `from..to` of this order.
    pub(crate) fn spans(&self, from: u64, to: u64) -> Vec<Span> {
        slice_spans(&self.spans, from, to)
    }

    /// Global sample at position `i` (`i < len()`).
    pub(crate) fn at(&self, i: u64) -> u64 {
        // The span holding `i`: the last one starting at or before it.
        let k = self.firsts.partition_point(|&first| first <= i) - 1;
        self.orders[k].at(self.spans[k].start + (i - self.firsts[k]))
    }
}

/// Items of `0..n` a rank takes when ranks take every `world`-th from `rank` on.
fn share(n: u64, rank: u64, world: u64) -> u64 {
    if rank < n {
        (n - rank).div_ceil(world)
    } else {
        0
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

    /// The `x` whose [`Permutation::apply`] is `y`: walking the network backwards passes
    /// through the same out-of-range values the forward walk did.
    pub(crate) fn invert(&self, mut y: u64) -> u64 {
        debug_assert!(y < self.n);
        loop {
            y = self.decrypt(y);
            if y < self.n {
                return y;
            }
        }
    }

    fn round(&self, round: u64, half: u64) -> u64 {
        mix(self.key ^ mix(half ^ (round << 58))) & self.mask()
    }

    fn mask(&self) -> u64 {
        (1u64 << self.half_bits) - 1
    }

    fn encrypt(&self, x: u64) -> u64 {
        let (mut left, mut right) = (x >> self.half_bits, x & self.mask());
        for round in 0..ROUNDS {
            (left, right) = (right, left ^ self.round(round, right));
        }
        (left << self.half_bits) | right
    }

    fn decrypt(&self, y: u64) -> u64 {
        let (mut left, mut right) = (y >> self.half_bits, y & self.mask());
        for round in (0..ROUNDS).rev() {
            (left, right) = (right ^ self.round(round, left), left);
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
                    assert_eq!(p.invert(j), i, "n={n}: invert({j})");
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

    const ORDERS: [Shuffle; 4] = [
        Shuffle::Global,
        Shuffle::Locality { run: 1 },
        Shuffle::Locality { run: 7 },
        Shuffle::Locality { run: 32 },
    ];

    /// Every rank's order of one epoch, listed.
    fn ranks(total: u64, shuffle: Shuffle, seed: u64, epoch: u64, world: usize) -> Vec<Vec<u64>> {
        (0..world)
            .map(|rank| {
                let order = EpochOrder::new(total, shuffle, seed, epoch, rank, world);
                (0..order.len()).map(|i| order.at(i)).collect()
            })
            .collect()
    }

    #[test]
    fn shards_are_disjoint_and_cover_every_sample_exhaustively_at_small_sizes() {
        for total in [1u64, 2, 6, 7, 31, 32, 33, 100, 1000, 1031] {
            for shuffle in ORDERS {
                for world in [1, 2, 3, 8] {
                    let mut seen = vec![0u32; total as usize];
                    for order in ranks(total, shuffle, 5, 2, world) {
                        for g in order {
                            seen[g as usize] += 1;
                        }
                    }
                    assert!(
                        seen.iter().all(|&n| n == 1),
                        "{shuffle:?}, {total} samples, world {world}: {:?}",
                        seen.iter()
                            .enumerate()
                            .filter(|(_, n)| **n != 1)
                            .take(5)
                            .collect::<Vec<_>>()
                    );
                }
            }
        }
    }

    #[test]
    fn shards_differ_by_less_than_two_blocks() {
        for shuffle in ORDERS {
            let run = match shuffle {
                Shuffle::Global => 1,
                Shuffle::Locality { run } => run,
            };
            let lens: Vec<u64> = (0..8)
                .map(|rank| EpochOrder::new(10_007, shuffle, 1, 0, rank, 8).len())
                .collect();
            let (min, max) = (lens.iter().min(), lens.iter().max());
            // One block more, and the short last block's missing samples.
            assert!(
                max.zip(min).is_some_and(|(a, b)| a - b < 2 * run),
                "{shuffle:?}: {lens:?}"
            );
            assert_eq!(lens.iter().sum::<u64>(), 10_007, "{shuffle:?}");
        }
    }

    #[test]
    fn locality_keeps_blocks_together_and_shuffles_inside_them() {
        let order = EpochOrder::new(100_000, Shuffle::Locality { run: 16 }, 9, 0, 0, 1);
        let samples: Vec<u64> = (0..order.len()).map(|i| order.at(i)).collect();
        for chunk in samples.chunks(16) {
            let block = chunk[0] / 16;
            assert!(chunk.iter().all(|g| g / 16 == block), "{chunk:?}");
        }
        let in_order = samples.chunks(16).filter(|c| c.is_sorted()).count();
        assert!(in_order < 10, "{in_order} of 6250 blocks unshuffled");
        let ascending = samples.chunks(16).map(|c| c[0] / 16).collect::<Vec<_>>();
        assert!(!ascending.is_sorted(), "blocks not shuffled");
    }

    #[test]
    fn orders_depend_on_seed_and_epoch_only() {
        for shuffle in ORDERS {
            let a = ranks(5000, shuffle, 1, 0, 2);
            assert_eq!(a, ranks(5000, shuffle, 1, 0, 2), "{shuffle:?}");
            assert_ne!(a, ranks(5000, shuffle, 1, 1, 2), "{shuffle:?}: epochs");
            assert_ne!(a, ranks(5000, shuffle, 2, 0, 2), "{shuffle:?}: seeds");
        }
    }

    /// The (rank, position) that holds global sample `g`: the order run backwards.
    fn owner(order: &EpochOrder, total: u64, world: u64, g: u64) -> (u64, u64) {
        match *order {
            EpochOrder::Global { permutation, .. } => {
                let p = permutation.invert(g);
                (p % world, p / world)
            }
            EpochOrder::Locality {
                blocks, key, run, ..
            } => {
                let block = g / run;
                let members = Permutation::new(run.min(total - block * run), mix(key ^ mix(block)));
                let p = blocks.invert(block);
                let (rank, mut i) = (p % world, (p / world) * run + members.invert(g % run));
                // Past the short block, the rank's positions close its empty slots.
                let tail = total % run;
                let last = blocks.invert(total.div_ceil(run) - 1);
                if tail > 0 && last % world == rank && p / world > last / world {
                    i -= run - tail;
                }
                (rank, i)
            }
        }
    }

    #[test]
    fn a_hundred_million_samples_are_a_bijection_at_sampled_positions() {
        let total = 100_000_037u64;
        let world = 24u64;
        let mut rng = 0x1234_5678u64;
        let mut next = || {
            rng = mix(rng);
            rng
        };
        for shuffle in ORDERS {
            let orders: Vec<EpochOrder> = (0..world)
                .map(|rank| EpochOrder::new(total, shuffle, 3, 7, rank as usize, world as usize))
                .collect();
            assert_eq!(
                orders.iter().map(EpochOrder::len).sum::<u64>(),
                total,
                "{shuffle:?}"
            );
            for _ in 0..20_000 {
                // Every sample belongs to one position of one rank, which yields it...
                let g = next() % total;
                let (rank, i) = owner(&orders[0], total, world, g);
                let order = &orders[rank as usize];
                assert!(
                    i < order.len(),
                    "{shuffle:?}: {g} at {i} of {}",
                    order.len()
                );
                assert_eq!(order.at(i), g, "{shuffle:?}: sample {g}");
                // ...and every position of every rank yields a sample only it holds.
                let rank = next() % world;
                let order = &orders[rank as usize];
                let i = next() % order.len();
                let g = order.at(i);
                assert!(g < total);
                assert_eq!(owner(&orders[0], total, world, g), (rank, i), "{shuffle:?}");
            }
        }
    }

    #[test]
    fn a_resumed_order_equals_the_uninterrupted_one() {
        // Positions are computed, not listed: an order made afresh at any position (a
        // resumed run) yields what the first one yields there.
        for shuffle in ORDERS {
            let first = EpochOrder::new(1_000_003, shuffle, 4, 1, 1, 3);
            let whole: Vec<u64> = (0..first.len()).map(|i| first.at(i)).collect();
            for from in [0, 1, 15, 16, 17, first.len() / 2, first.len() - 1] {
                let resumed = EpochOrder::new(1_000_003, shuffle, 4, 1, 1, 3);
                let rest: Vec<u64> = (from..resumed.len()).map(|i| resumed.at(i)).collect();
                assert_eq!(rest, whole[from as usize..], "{shuffle:?} from {from}");
            }
        }
    }

    /// A manifest of `rows` rows of 10 s each, curated at 10 Hz without margins.
    fn manifest_of(dir: &std::path::Path, rows: usize) -> Manifest {
        let rule = SamplingRule::at_hz(10.0, 0.0, 0.0);
        crate::test_fixture::rows_manifest(dir, &format!("m{rows}"), rows, 10.0, rule)
    }

    #[test]
    fn another_rule_is_indexed_for_small_manifests_and_refused_for_large_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rule = SamplingRule::at_hz(5.0, 1.0, 0.0);
        let small = manifest_of(dir.path(), 3);
        let index = AnchorIndex::new(&small, rule).expect("small manifests are re-indexed");
        assert_eq!(index.total(), 3 * 46);
        assert_eq!(
            index.locate(&small, 47).expect("sample"),
            (1, 1_200_000_000)
        );
        let large = manifest_of(dir.path(), MAX_RESAMPLED_ROWS + 1);
        let error = AnchorIndex::new(&large, rule).expect_err("refused");
        let message = error.to_string();
        assert!(
            message.contains("curate it with --anchor-hz 5 --before 1 --after 0")
                && message.contains("curated with --anchor-hz 10 --before 0 --after 0"),
            "{message}"
        );
        // The manifest's own rule needs no index, whatever its size.
        let own = AnchorIndex::new(&large, SamplingRule::at_hz(10.0, 0.0, 0.0)).expect("own rule");
        assert_eq!(own.total(), (MAX_RESAMPLED_ROWS as u64 + 1) * 101);
    }
}
