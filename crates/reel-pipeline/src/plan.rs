//! Scale-out plans: a landing listing bin-packed by bytes into balanced batches, one per
//! worker of a Kubernetes Indexed Job or a Slurm array.

use std::time::Duration;

use reel_io::Store;
use reel_manifest::fnv1a;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Version of the plan file format.
pub const PLAN_FORMAT: u32 = 1;

/// How many batches to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchTarget {
    /// Exactly this many batches (fewer if there are fewer episodes), balanced by bytes.
    Count(usize),
    /// Batches of at most this many bytes (an episode larger than that gets its own).
    Bytes(u64),
}

/// One landing episode in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanEpisode {
    /// Object key in the landing store.
    pub key: String,
    /// Its size.
    pub bytes: u64,
}

/// One batch: the unit one worker processes and commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanBatch {
    /// Index (the worker's array index).
    pub index: usize,
    /// Sum of its episodes' bytes.
    pub bytes: u64,
    /// Episodes, largest first.
    pub episodes: Vec<PlanEpisode>,
}

/// A plan: the landing listing cut into batches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Format version.
    pub format: u32,
    /// Stable id of the plan (hash of landing, listing and batching).
    pub plan_id: String,
    /// Landing store URI the keys are relative to.
    pub landing: String,
    /// Bytes of all episodes.
    pub total_bytes: u64,
    /// Largest batch over the mean batch (1.0 is perfect balance).
    pub imbalance: f64,
    /// Batches.
    pub batches: Vec<PlanBatch>,
}

impl Plan {
    /// The state key of batch `index`: unique per plan and batch.
    pub fn batch_key(&self, index: usize) -> String {
        format!("{}-b{index:05}", self.plan_id)
    }

    /// Parses a plan file; `name` is used in errors.
    pub fn from_json(name: &str, text: &[u8]) -> Result<Self> {
        let plan: Self = serde_json::from_slice(text).map_err(|source| Error::Json {
            name: name.to_owned(),
            source,
        })?;
        if plan.format != PLAN_FORMAT {
            return Err(Error::Plan {
                name: name.to_owned(),
                reason: format!("format {} (this Reel reads {PLAN_FORMAT})", plan.format),
            });
        }
        if let Some((i, b)) = plan.batches.iter().enumerate().find(|(i, b)| b.index != *i) {
            return Err(Error::Plan {
                name: name.to_owned(),
                reason: format!("batch at position {i} says it is batch {}", b.index),
            });
        }
        Ok(plan)
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> Vec<u8> {
        // A plan is plain data: serialising it cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

/// The TFRecord shards of an RLDS build (a TensorFlow Datasets version folder), with
/// their sizes, sorted by key: a plan of shards, so that each worker of an array imports
/// its batch's shards (`reel-import rlds --plan`).
pub fn list_rlds_shards(store: &Store) -> Result<Vec<PlanEpisode>> {
    let mut shards: Vec<PlanEpisode> = store
        .list_recursive_sized("")?
        .into_iter()
        .filter(|(k, _)| !k.contains('/') && k.contains(".tfrecord-"))
        .map(|(key, bytes)| PlanEpisode { key, bytes })
        .collect();
    shards.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(shards)
}

/// Landing episodes under `prefix` of `store`, with their sizes, sorted by key: the
/// `*.mcap` objects directly under it, and the rosbag2 recordings in its folders (keyed by
/// their `metadata.yaml`, sized by their `.db3` or `.mcap` files). One listing of the
/// prefix gives keys and sizes: no request per object, and time and memory linear in the
/// objects listed.
pub fn list_landing(store: &Store, prefix: &str) -> Result<Vec<PlanEpisode>> {
    let hidden = |k: &str| k.rsplit('/').next().unwrap_or(k).starts_with('.');
    let depth = |k: &str| {
        k[prefix.len().min(k.len())..]
            .trim_start_matches('/')
            .matches('/')
            .count()
    };
    // Sorted by key, so a bag's files are one run of keys after its folder.
    let all = store.list_recursive_sized(prefix)?;
    let mut episodes: Vec<PlanEpisode> = all
        .iter()
        .filter(|(k, _)| k.ends_with(".mcap") && depth(k) == 0 && !hidden(k))
        .map(|(key, bytes)| PlanEpisode {
            key: key.clone(),
            bytes: *bytes,
        })
        .collect();
    for (bag, _) in all
        .iter()
        .filter(|(k, _)| reel_landing::is_rosbag2(k) && depth(k) == 1)
    {
        let folder = bag.strip_suffix("metadata.yaml").unwrap_or(bag);
        let first = all.partition_point(|(k, _)| k.as_str() < folder);
        let bytes = all[first..]
            .iter()
            .take_while(|(k, _)| k.starts_with(folder))
            .filter(|(k, _)| (k.ends_with(".db3") || k.ends_with(".mcap")) && !hidden(k))
            .map(|(_, bytes)| bytes)
            .sum();
        episodes.push(PlanEpisode {
            key: bag.clone(),
            bytes,
        });
    }
    episodes.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(episodes)
}

/// Bin-packs episodes by bytes. [`BatchTarget::Count`]: largest first into the lightest
/// batch (greedy decreasing, within 4/3 of the optimum makespan). [`BatchTarget::Bytes`]:
/// first-fit decreasing into batches of the given capacity. Ties break by key, so the
/// result is deterministic.
pub fn bin_pack(mut episodes: Vec<PlanEpisode>, target: BatchTarget) -> Vec<PlanBatch> {
    episodes.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
    let mut batches: Vec<PlanBatch> = Vec::new();
    match target {
        BatchTarget::Count(n) => {
            let n = n.max(1).min(episodes.len().max(1));
            batches = (0..n)
                .map(|index| PlanBatch {
                    index,
                    bytes: 0,
                    episodes: Vec::new(),
                })
                .collect();
            // Lightest batch next, lowest index on ties.
            let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
                (0..n).map(|i| std::cmp::Reverse((0, i))).collect();
            for episode in episodes {
                let Some(std::cmp::Reverse((bytes, i))) = heap.pop() else {
                    break;
                };
                let batch = &mut batches[i];
                batch.bytes = bytes + episode.bytes;
                batch.episodes.push(episode);
                heap.push(std::cmp::Reverse((batch.bytes, i)));
            }
        }
        BatchTarget::Bytes(capacity) => {
            let mut rooms = FirstFit::new(episodes.len(), capacity);
            for episode in episodes {
                let i = rooms.first_with(episode.bytes).unwrap_or(batches.len());
                if i == batches.len() {
                    batches.push(PlanBatch {
                        index: i,
                        bytes: 0,
                        episodes: Vec::new(),
                    });
                }
                let batch = &mut batches[i];
                batch.bytes += episode.bytes;
                batch.episodes.push(episode);
                rooms.set(i, capacity.saturating_sub(batch.bytes));
            }
        }
    }
    batches.retain(|b| !b.episodes.is_empty());
    for (i, batch) in batches.iter_mut().enumerate() {
        batch.index = i;
    }
    batches
}

/// The room left in each batch, for first-fit in O(log batches) per episode instead of
/// a walk over every batch (quadratic at millions of episodes): a tree whose nodes hold
/// the largest room below them. Batches not opened yet have the whole capacity.
struct FirstFit {
    leaves: usize,
    room: Vec<u64>,
}

impl FirstFit {
    fn new(batches: usize, capacity: u64) -> Self {
        let leaves = batches.max(1).next_power_of_two();
        Self {
            leaves,
            room: vec![capacity; 2 * leaves],
        }
    }

    /// The lowest batch with at least `bytes` of room.
    fn first_with(&self, bytes: u64) -> Option<usize> {
        if self.room[1] < bytes {
            return None;
        }
        let mut node = 1;
        while node < self.leaves {
            node = if self.room[2 * node] >= bytes {
                2 * node
            } else {
                2 * node + 1
            };
        }
        Some(node - self.leaves)
    }

    fn set(&mut self, batch: usize, room: u64) {
        let mut node = batch + self.leaves;
        self.room[node] = room;
        while node > 1 {
            node /= 2;
            self.room[node] = self.room[2 * node].max(self.room[2 * node + 1]);
        }
    }
}

/// Largest batch over the mean (1.0 when empty).
fn imbalance(batches: &[PlanBatch]) -> f64 {
    let total: u64 = batches.iter().map(|b| b.bytes).sum();
    let max = batches.iter().map(|b| b.bytes).max().unwrap_or(0);
    if total == 0 {
        return 1.0;
    }
    max as f64 / (total as f64 / batches.len() as f64)
}

/// A plan for `episodes` of the landing store `landing`.
pub fn make_plan(landing: &str, episodes: Vec<PlanEpisode>, target: BatchTarget) -> Plan {
    let total_bytes = episodes.iter().map(|e| e.bytes).sum();
    let batches = bin_pack(episodes, target);
    let mut id_input = format!("{landing}\n{target:?}\n").into_bytes();
    for b in &batches {
        for e in &b.episodes {
            id_input.extend(format!("{}\t{}\t{}\n", b.index, e.key, e.bytes).bytes());
        }
    }
    Plan {
        format: PLAN_FORMAT,
        plan_id: format!("p{:012x}", fnv1a(id_input) >> 16),
        landing: landing.to_owned(),
        total_bytes,
        imbalance: imbalance(&batches),
        batches,
    }
}

/// A deterministic start delay in `[0, max)` for batch `batch` of plan `plan_id`, so that
/// thousands of workers launched together reach the store spread out, and a restarted
/// worker waits as long as it did the first time.
pub fn start_jitter(plan_id: &str, batch: usize, max: Duration) -> Duration {
    let max_ns = max.as_nanos() as u64;
    if max_ns == 0 {
        return Duration::ZERO;
    }
    let h = fnv1a(plan_id.bytes().chain(batch.to_le_bytes()));
    // Finish the hash (splitmix64) so that neighbouring batches land far apart.
    let mut z = h;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    Duration::from_nanos(z % max_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn episodes(sizes: &[u64]) -> Vec<PlanEpisode> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &bytes)| PlanEpisode {
                key: format!("ep-{i:03}.mcap"),
                bytes,
            })
            .collect()
    }

    fn check_partition(input: &[PlanEpisode], batches: &[PlanBatch]) {
        let mut keys: Vec<&str> = batches
            .iter()
            .flat_map(|b| b.episodes.iter().map(|e| e.key.as_str()))
            .collect();
        keys.sort_unstable();
        let mut want: Vec<&str> = input.iter().map(|e| e.key.as_str()).collect();
        want.sort_unstable();
        assert_eq!(keys, want, "every episode exactly once");
        for b in batches {
            assert_eq!(b.bytes, b.episodes.iter().map(|e| e.bytes).sum::<u64>());
        }
    }

    #[test]
    fn count_target_balances_skewed_sizes() {
        // Sizes spanning two orders of magnitude, like real logs.
        let sizes: Vec<u64> = (0..200u64)
            .map(|i| 1_000 + (i * 7919 % 997) * (1 + i % 5) * 100)
            .collect();
        let input = episodes(&sizes);
        let batches = bin_pack(input.clone(), BatchTarget::Count(8));
        assert_eq!(batches.len(), 8);
        check_partition(&input, &batches);
        let imbalance = imbalance(&batches);
        // Greedy decreasing is within the largest item of the mean.
        let total: u64 = sizes.iter().sum();
        let largest = *sizes.iter().max().expect("sizes");
        let max = batches.iter().map(|b| b.bytes).max().expect("batches");
        assert!(max <= total / 8 + largest, "{max}");
        assert!(imbalance < 1.02, "{imbalance}");
        // Round-robin in listing order is much worse on the same input.
        let mut rr = [0u64; 8];
        for (i, s) in sizes.iter().enumerate() {
            rr[i % 8] += s;
        }
        let rr_imbalance = *rr.iter().max().expect("rr") as f64 / (total as f64 / 8.0);
        assert!(rr_imbalance > imbalance, "{rr_imbalance} vs {imbalance}");
    }

    #[test]
    fn byte_target_is_first_fit_decreasing() {
        let input = episodes(&[5, 9, 3, 7, 4, 2, 12]);
        let batches = bin_pack(input.clone(), BatchTarget::Bytes(10));
        check_partition(&input, &batches);
        let contents: Vec<Vec<u64>> = batches
            .iter()
            .map(|b| b.episodes.iter().map(|e| e.bytes).collect())
            .collect();
        // 12 alone (too big); 2 fits in no open batch, so it opens a fifth.
        assert_eq!(
            contents,
            vec![vec![12], vec![9], vec![7, 3], vec![5, 4], vec![2]]
        );
    }

    #[test]
    fn byte_target_packs_as_a_walk_over_every_batch_does() {
        // The tree finds the batch the plain first-fit walk finds, for every episode.
        let mut state = 7u64;
        for capacity in [1u64, 50, 100, 1000] {
            let sizes: Vec<u64> = (0..3000)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    1 + (state >> 33) % 120
                })
                .collect();
            let mut input = episodes(&sizes);
            let packed = bin_pack(input.clone(), BatchTarget::Bytes(capacity));
            input.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
            let mut walked: Vec<Vec<PlanEpisode>> = Vec::new();
            let mut bytes: Vec<u64> = Vec::new();
            for e in input {
                match bytes.iter().position(|b| b + e.bytes <= capacity) {
                    Some(i) => {
                        bytes[i] += e.bytes;
                        walked[i].push(e);
                    }
                    None => {
                        bytes.push(e.bytes);
                        walked.push(vec![e]);
                    }
                }
            }
            let packed: Vec<Vec<PlanEpisode>> = packed.into_iter().map(|b| b.episodes).collect();
            assert_eq!(packed, walked, "capacity {capacity}");
        }
    }

    #[test]
    fn plans_are_deterministic_and_round_trip() {
        let input = episodes(&[10, 20, 30, 40, 50]);
        let a = make_plan("/landing", input.clone(), BatchTarget::Count(2));
        let mut shuffled = input.clone();
        shuffled.reverse();
        let b = make_plan("/landing", shuffled, BatchTarget::Count(2));
        assert_eq!(a, b);
        assert_eq!(a.total_bytes, 150);
        let parsed = Plan::from_json("plan.json", &a.to_json()).expect("parses");
        assert_eq!((&parsed.plan_id, &parsed.batches), (&a.plan_id, &a.batches));
        assert!((parsed.imbalance - 80.0 / 75.0).abs() < 1e-9);
        assert_ne!(a.batch_key(0), a.batch_key(1));
        let err = Plan::from_json("plan.json", b"{").expect_err("rejects");
        assert!(err.to_string().contains("plan.json"));
    }

    #[test]
    fn jitter_is_deterministic_bounded_and_spread() {
        let max = Duration::from_secs(60);
        let delays: Vec<Duration> = (0..100).map(|i| start_jitter("p1", i, max)).collect();
        assert!(delays.iter().all(|d| *d < max));
        assert_eq!(delays[7], start_jitter("p1", 7, max));
        let early = delays.iter().filter(|d| d.as_secs() < 30).count();
        assert!((30..=70).contains(&early), "{early}");
        assert_eq!(start_jitter("p1", 3, Duration::ZERO), Duration::ZERO);
    }
}
