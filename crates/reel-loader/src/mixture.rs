//! Where the samples come from: one manifest, or a weighted mixture of several, each with
//! its own store. An epoch's positions `0..len` are laid out source after source, each
//! source holding its weight's share of them; the rank orders ([`RankOrder`](crate::order::RankOrder))
//! shuffle and shard those positions exactly as they do a single manifest's samples, so
//! a mixture is deterministic, sharded and resumable (on any world size) the same way.
//!
//! - An epoch holds as many samples as its sources together (`len = Σ Nₖ`); source `k`
//!   fills `round(len · wₖ / Σ w)` of them (largest remainders, so the shares add up).
//! - Each source is drawn in an order of its own, a stream that goes on from epoch to
//!   epoch: every sample of a source comes once before any comes again. A source drawn
//!   more than its size in an epoch is cycled, each pass in a fresh order; one drawn less
//!   continues in the next epoch where this one stopped.
//! - With one source the positions are its samples themselves: the order is the same as
//!   a loader over that manifest alone.

use reel_io::ByteSource;
use reel_manifest::{EpisodeRef, Manifest, SamplingRule};
use serde::Deserialize;

use crate::error::{LoaderError, Result};
use crate::order::{AnchorIndex, EpochOrder, Shuffle, mix};
use crate::sources::Sources;

/// One manifest of a mixture, with its weight and where its episodes are read from.
#[derive(Debug)]
pub struct MixtureSource {
    pub manifest: Manifest,
    /// Where its episodes are read from (its store, or the block cache in front of it).
    pub sources: Sources,
    /// Its share of each epoch's samples, relative to the other sources' weights.
    pub weight: f64,
    /// Where the manifest was opened from (a path or store URI), kept in saved states
    /// so that a checkpoint's lineage finds it again; `None`: its path.
    pub location: Option<String>,
}

/// A mixture file's entry, as `reel-load --mixture` and [`open_loader`](crate::open_loader)
/// take it: a manifest (path or store URI), its weight, and optionally the store its
/// episodes live in (by default the one the manifest lives in).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixtureEntry {
    pub manifest: String,
    pub weight: f64,
    #[serde(default)]
    pub store: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MixtureFile {
    source: Vec<MixtureEntry>,
}

impl MixtureEntry {
    /// The `[[source]]` tables of a mixture file:
    ///
    /// ```toml
    /// [[source]]
    /// manifest = "s3://bucket/manifests/teleop.arrow"
    /// weight = 0.7
    ///
    /// [[source]]
    /// manifest = "manifests/sim.arrow"
    /// weight = 0.3
    /// store = "/data/sim"          # optional: where its episodes are
    /// ```
    pub fn from_toml_str(text: &str) -> std::result::Result<Vec<Self>, String> {
        let file: MixtureFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.source.is_empty() {
            return Err("a mixture needs at least one [[source]]".into());
        }
        for (k, entry) in file.source.iter().enumerate() {
            check_weight(k, entry.weight)?;
        }
        Ok(file.source)
    }
}

fn check_weight(k: usize, weight: f64) -> std::result::Result<(), String> {
    if weight.is_finite() && weight > 0.0 {
        Ok(())
    } else {
        Err(format!(
            "source {k}: weight {weight} is not a positive number"
        ))
    }
}

/// A source of the loader, resolved: its anchors under the spec and where it sits among
/// the catalog's rows and the epoch's positions.
#[derive(Debug)]
struct Part {
    manifest: Manifest,
    location: String,
    sources: Sources,
    index: AnchorIndex,
    weight: f64,
    /// Catalog row of its manifest's row 0: rows of all sources are one space, so that
    /// what workers keep per episode never mixes two sources' episodes.
    first_row: usize,
    /// Its first position in each epoch, and how many positions it fills.
    first_position: u64,
    share: u64,
}

/// A sample, found: its catalog row, the source and row within that source's manifest,
/// and its anchor time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Located {
    pub row: usize,
    pub source: usize,
    pub source_row: usize,
    pub anchor_ns: i64,
}

/// The loader's sources and how an epoch's positions map onto their samples.
#[derive(Debug)]
pub(crate) struct Catalog {
    parts: Vec<Part>,
    /// Positions of each epoch.
    epoch_len: u64,
    seed: u64,
    shuffle: Shuffle,
}

impl Catalog {
    pub(crate) fn new(
        sources: Vec<MixtureSource>,
        rule: SamplingRule,
        seed: u64,
        shuffle: Shuffle,
    ) -> Result<Self> {
        if sources.is_empty() {
            return Err(LoaderError::Mixture {
                reason: "no source to load from".into(),
            });
        }
        let mut parts = Vec::with_capacity(sources.len());
        let mut first_row = 0;
        for (k, source) in sources.into_iter().enumerate() {
            check_weight(k, source.weight).map_err(|reason| LoaderError::Mixture { reason })?;
            let index = AnchorIndex::new(&source.manifest, rule)?;
            if index.total() == 0 {
                return Err(LoaderError::NoSamples {
                    path: source.manifest.path().to_path_buf(),
                });
            }
            let rows = source.manifest.len();
            let location = source
                .location
                .unwrap_or_else(|| source.manifest.path().display().to_string());
            parts.push(Part {
                location,
                manifest: source.manifest,
                sources: source.sources,
                index,
                weight: source.weight,
                first_row,
                first_position: 0,
                share: 0,
            });
            first_row += rows;
        }
        let epoch_len = parts.iter().map(|p| p.index.total()).sum::<u64>();
        let weights: Vec<f64> = parts.iter().map(|p| p.weight).collect();
        let mut first = 0;
        for (part, share) in parts.iter_mut().zip(shares(epoch_len, &weights)) {
            part.first_position = first;
            part.share = share;
            first += share;
        }
        // A weight so small that its share rounds to nothing would be opened and checked
        // and never drawn: that is a mistake in the weights, not a mixture.
        if let Some((k, part)) = parts.iter().enumerate().find(|(_, p)| p.share == 0) {
            return Err(LoaderError::Mixture {
                reason: format!(
                    "source {k}: weight {} draws no sample of an epoch of {epoch_len}",
                    part.weight
                ),
            });
        }
        Ok(Self {
            parts,
            epoch_len,
            seed,
            shuffle,
        })
    }

    /// Samples of each epoch, all ranks together.
    pub(crate) fn epoch_len(&self) -> u64 {
        self.epoch_len
    }

    pub(crate) fn len(&self) -> usize {
        self.parts.len()
    }

    pub(crate) fn manifest(&self, source: usize) -> Option<&Manifest> {
        self.parts.get(source).map(|p| &p.manifest)
    }

    /// Where source `source`'s manifest was opened from.
    pub(crate) fn location(&self, source: usize) -> Option<&str> {
        self.parts.get(source).map(|p| p.location.as_str())
    }

    pub(crate) fn sources(&self, source: usize) -> Option<&Sources> {
        self.parts.get(source).map(|p| &p.sources)
    }

    pub(crate) fn weight(&self, source: usize) -> Option<f64> {
        self.parts.get(source).map(|p| p.weight)
    }

    /// Samples of source `source` under the spec.
    pub(crate) fn source_samples(&self, source: usize) -> u64 {
        self.parts.get(source).map_or(0, |p| p.index.total())
    }

    /// Positions source `source` fills in each epoch.
    pub(crate) fn share(&self, source: usize) -> u64 {
        self.parts.get(source).map_or(0, |p| p.share)
    }

    /// Source and row within its manifest of catalog row `row`.
    pub(crate) fn source_of(&self, row: usize) -> (usize, usize) {
        let k = self.parts.partition_point(|p| p.first_row <= row) - 1;
        (k, row - self.parts[k].first_row)
    }

    /// Catalog row of row `source_row` of source `source`'s manifest.
    pub(crate) fn row(&self, source: usize, source_row: usize) -> Result<usize> {
        match self.parts.get(source) {
            Some(p) if source_row < p.manifest.len() => Ok(p.first_row + source_row),
            _ => Err(LoaderError::Mixture {
                reason: format!(
                    "no row {source_row} in source {source} (the loader has {} sources)",
                    self.parts.len()
                ),
            }),
        }
    }

    /// The manifest row of catalog row `row`.
    pub(crate) fn episode(&self, row: usize) -> Result<EpisodeRef<'_>> {
        let (k, r) = self.source_of(row);
        Ok(self.parts[k].manifest.episode(r)?)
    }

    /// The episode object of catalog row `row`, from its source's store or cache.
    pub(crate) fn open(&self, row: usize, uri: &str) -> Result<Box<dyn ByteSource>> {
        let (k, _) = self.source_of(row);
        self.parts[k].sources.open(uri)
    }

    /// Samples of catalog row `row` under the spec.
    pub(crate) fn count(&self, row: usize) -> Result<u64> {
        let (k, r) = self.source_of(row);
        let part = &self.parts[k];
        part.index.count(&part.manifest, r)
    }

    /// The sample at position `p` of `epoch` (`p < epoch_len()`).
    pub(crate) fn locate(&self, epoch: u64, p: u64) -> Result<Located> {
        let (k, sample) = if self.parts.len() == 1 {
            (0, p)
        } else {
            // The last source starting at or before `p`: a source filling no position
            // starts where the next one does, so this one fills `p`.
            let k = self.parts.partition_point(|part| part.first_position <= p) - 1;
            (k, self.drawn(k, epoch, p - self.parts[k].first_position))
        };
        let part = &self.parts[k];
        let (source_row, anchor_ns) = part.index.locate(&part.manifest, sample)?;
        Ok(Located {
            row: part.first_row + source_row,
            source: k,
            source_row,
            anchor_ns,
        })
    }

    /// Sample of source `k` drawn at its `j`-th position of `epoch`: item `epoch·share + j`
    /// of the source's endless stream, pass after pass, each pass in its own order.
    fn drawn(&self, k: usize, epoch: u64, j: u64) -> u64 {
        let part = &self.parts[k];
        let n = part.index.total();
        let item = u128::from(epoch) * u128::from(part.share) + u128::from(j);
        let (pass, at) = ((item / u128::from(n)) as u64, (item % u128::from(n)) as u64);
        let seed = mix(self.seed ^ mix(0x6d69_7874_7572_6500 ^ k as u64));
        EpochOrder::new(n, self.shuffle, seed, pass, 0, 1).at(at)
    }
}

/// `total` split by `weights` (positive): each share is `total · w / Σ w` rounded by
/// largest remainders, so the shares add up to `total` exactly.
pub(crate) fn shares(total: u64, weights: &[f64]) -> Vec<u64> {
    // Relative to the largest, so that no sum of huge weights overflows to infinity.
    let largest = weights.iter().cloned().fold(0.0f64, f64::max);
    let weights: Vec<f64> = weights.iter().map(|w| w / largest).collect();
    let sum: f64 = weights.iter().sum();
    let exact: Vec<f64> = weights.iter().map(|w| total as f64 * w / sum).collect();
    let mut out: Vec<u64> = exact.iter().map(|x| x.floor() as u64).collect();
    let given: u64 = out.iter().sum();
    let mut left = total.saturating_sub(given);
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    by_remainder.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &k in by_remainder.iter().cycle() {
        if left == 0 {
            break;
        }
        out[k] += 1;
        left -= 1;
    }
    // Floating point may overshoot by a sample on huge totals: take it back from the largest.
    while out.iter().sum::<u64>() > total {
        if let Some(max) = out.iter_mut().max() {
            *max -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::order::{RankOrder, Span};

    /// A manifest of `rows` episodes of 100 samples each (9.9 s at 10 Hz).
    fn manifest_of(dir: &std::path::Path, name: &str, rows: usize) -> Manifest {
        crate::test_fixture::rows_manifest(dir, name, rows, 9.9, rule())
    }

    fn rule() -> SamplingRule {
        SamplingRule::at_hz(10.0, 0.0, 0.0)
    }

    const ORDERS: [Shuffle; 2] = [Shuffle::Global, Shuffle::Locality { run: 7 }];

    /// A catalog of sources of `rows` episodes each, with `weights`.
    fn catalog(
        dir: &std::path::Path,
        rows: &[usize],
        weights: &[f64],
        shuffle: Shuffle,
    ) -> Catalog {
        let store = reel_io::Store::open(dir.to_str().expect("utf-8")).expect("store");
        let sources = rows
            .iter()
            .zip(weights)
            .enumerate()
            .map(|(k, (&rows, &weight))| MixtureSource {
                manifest: manifest_of(dir, &format!("s{k}-"), rows),
                sources: Sources::Store(store.clone()),
                weight,
                location: None,
            })
            .collect();
        Catalog::new(sources, rule(), 5, shuffle).expect("catalog")
    }

    /// The samples rank `rank` of `world` delivers in `epoch`, as (source, row, anchor).
    fn delivered(c: &Catalog, epoch: u64, rank: usize, world: usize) -> Vec<(usize, usize, i64)> {
        let order = RankOrder::new(
            c.epoch_len(),
            c.shuffle,
            (c.seed, epoch),
            (rank, world),
            &[],
        )
        .expect("order");
        (0..order.len())
            .map(|i| {
                let at = c.locate(epoch, order.at(i)).expect("sample");
                assert_eq!(c.source_of(at.row), (at.source, at.source_row));
                (at.source, at.source_row, at.anchor_ns)
            })
            .collect()
    }

    #[test]
    fn shares_follow_the_weights_and_add_up() {
        assert_eq!(shares(10, &[0.7, 0.3]), [7, 3]);
        assert_eq!(shares(7, &[1.0, 1.0, 1.0]), [3, 2, 2]);
        assert_eq!(shares(1100, &[3.0, 1.0]), [825, 275]);
        let big = shares(u64::MAX / 4, &[0.1, 0.2, 0.7]);
        assert_eq!(big.iter().sum::<u64>(), u64::MAX / 4);
        assert_eq!(
            MixtureEntry::from_toml_str("[[source]]\nmanifest = \"a\"\nweight = 0.0")
                .err()
                .map(|e| e.contains("weight 0")),
            Some(true)
        );
        let two = MixtureEntry::from_toml_str(
            "[[source]]\nmanifest = \"a.arrow\"\nweight = 0.7\n[[source]]\nmanifest = \"s3://b/m.arrow\"\nweight = 0.3\nstore = \"/data\"",
        )
        .expect("mixture");
        assert_eq!(two[1].store.as_deref(), Some("/data"));
        assert!(MixtureEntry::from_toml_str("[[source]]\nmanifest = \"a\"\nwieght = 1.0").is_err());
    }

    #[test]
    fn each_source_fills_its_share_cycling_a_small_one_and_drawing_a_large_one_across_epochs() {
        let dir = tempfile::tempdir().expect("tempdir");
        for shuffle in ORDERS {
            // 100 samples at half the epoch, 1000 at the other half: 1100 per epoch.
            let c = catalog(dir.path(), &[1, 10], &[0.5, 0.5], shuffle);
            assert_eq!((c.epoch_len(), c.share(0), c.share(1)), (1100, 550, 550));
            let (e0, e1) = (delivered(&c, 0, 0, 1), delivered(&c, 1, 0, 1));
            for epoch in [&e0, &e1] {
                assert_eq!(
                    epoch.iter().filter(|s| s.0 == 0).count(),
                    550,
                    "{shuffle:?}"
                );
            }
            // Each source in the order it is drawn: its stream goes on from epoch to epoch.
            let drawn = |k: usize| -> Vec<(usize, i64)> {
                (0..2)
                    .flat_map(|epoch| (0..c.share(k)).map(move |j| (epoch, j)))
                    .map(|(epoch, j)| {
                        let at = c
                            .locate(epoch, c.parts[k].first_position + j)
                            .expect("sample");
                        (at.source_row, at.anchor_ns)
                    })
                    .collect()
            };
            // The small source, cycled 11 times in two epochs: every pass holds each of its
            // 100 samples once, and passes differ in order.
            let small = drawn(0);
            for pass in small.chunks(100) {
                let mut sorted = pass.to_vec();
                sorted.sort();
                sorted.dedup();
                assert_eq!(sorted.len(), 100, "{shuffle:?}");
            }
            assert_ne!(small[..100], small[100..200], "{shuffle:?}");
            // The large one: 550 in epoch 0, 550 in epoch 1; its first 1000 draws are its
            // 1000 samples, each once, and the next pass begins after them.
            let large = drawn(1);
            let mut first = large[..1000].to_vec();
            first.sort();
            first.dedup();
            assert_eq!(first.len(), 1000, "{shuffle:?}");
            // Deterministic: the same catalog gives the same epochs.
            let again = catalog(dir.path(), &[1, 10], &[0.5, 0.5], shuffle);
            assert_eq!(delivered(&again, 1, 0, 1), e1);
        }
    }

    #[test]
    fn ranks_share_a_mixture_s_epoch_without_overlap_and_resume_on_another_world() {
        let dir = tempfile::tempdir().expect("tempdir");
        for shuffle in ORDERS {
            let c = catalog(dir.path(), &[2, 3, 1], &[0.2, 0.5, 0.3], shuffle);
            let count = |samples: &[(usize, usize, i64)]| {
                let mut n: HashMap<(usize, usize, i64), usize> = HashMap::new();
                for &s in samples {
                    *n.entry(s).or_default() += 1;
                }
                n
            };
            let whole = delivered(&c, 2, 0, 1);
            let ranks: Vec<_> = (0..3).flat_map(|r| delivered(&c, 2, r, 3)).collect();
            assert_eq!(
                count(&ranks),
                count(&whole),
                "{shuffle:?}: the ranks deliver the epoch"
            );
            let positions: Vec<u64> = (0..3)
                .flat_map(|r| {
                    let o = RankOrder::new(c.epoch_len(), shuffle, (c.seed, 2), (r, 3), &[])
                        .expect("order");
                    (0..o.len()).map(move |i| o.at(i)).collect::<Vec<_>>()
                })
                .collect();
            let mut sorted = positions.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                sorted.len() as u64,
                c.epoch_len(),
                "{shuffle:?}: disjoint positions"
            );
            // Rank 1's rest of the epoch, taken over as spans by a rank of a new world,
            // is the same samples.
            let own =
                RankOrder::new(c.epoch_len(), shuffle, (c.seed, 2), (1, 3), &[]).expect("order");
            let span = Span {
                rank: 1,
                world: 3,
                start: 17,
                end: own.len(),
            };
            let taken = RankOrder::new(c.epoch_len(), shuffle, (c.seed, 2), (0, 2), &[span])
                .expect("spans");
            let rest: Vec<u64> = (0..taken.len()).map(|i| taken.at(i)).collect();
            let want: Vec<u64> = (17..own.len()).map(|i| own.at(i)).collect();
            assert_eq!(rest, want);
        }
    }

    #[test]
    fn one_source_keeps_the_manifest_s_own_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = catalog(dir.path(), &[4], &[3.0], Shuffle::Global);
        let manifest = manifest_of(dir.path(), "again", 4);
        let index = AnchorIndex::new(&manifest, rule()).expect("index");
        for p in [0, 1, 99, 100, 399] {
            let at = c.locate(7, p).expect("sample");
            assert_eq!(
                (at.source_row, at.anchor_ns),
                index.locate(&manifest, p).expect("sample")
            );
        }
    }

    #[test]
    fn a_bad_weight_or_an_empty_source_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = reel_io::Store::open(dir.path().to_str().expect("utf-8")).expect("store");
        let source = |weight: f64, rows: usize| MixtureSource {
            manifest: manifest_of(dir.path(), &format!("w{rows}-"), rows),
            sources: Sources::Store(store.clone()),
            weight,
            location: None,
        };
        let nan = Catalog::new(
            vec![source(1.0, 1), source(f64::NAN, 2)],
            rule(),
            0,
            Shuffle::Global,
        );
        assert!(
            nan.expect_err("refused")
                .to_string()
                .contains("source 1: weight NaN")
        );
        let empty = Catalog::new(
            vec![source(1.0, 1), source(1.0, 0)],
            rule(),
            0,
            Shuffle::Global,
        );
        assert!(matches!(empty, Err(LoaderError::NoSamples { .. })));
        assert!(Catalog::new(Vec::new(), rule(), 0, Shuffle::Global).is_err());
    }
}
