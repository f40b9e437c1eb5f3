//! Decoded GOPs shared by a loader's workers, and the protocol that keeps two workers
//! from decoding the same GOP: the next samples of a run often go to another worker,
//! which waits for a decode in flight instead of repeating it.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use reel_mcap::{DecodedGop, PlannedGop};

/// A GOP's place in the cache: (episode row, camera index).
pub(crate) type GopKey = (usize, usize);

/// The decoded GOPs every worker shares, most recently used first, up to a capacity.
#[derive(Debug)]
pub(crate) struct GopCache {
    gops: Mutex<Gops>,
    /// Signalled whenever a GOP decode finishes (or fails).
    done: Condvar,
    capacity: usize,
}

#[derive(Debug, Default)]
struct Gops {
    decoded: VecDeque<(GopKey, Arc<DecodedGop>)>,
    /// (episode row, camera index, keyframe time) of the GOPs a worker is decoding.
    in_flight: HashSet<(usize, usize, u64)>,
}

/// What [`GopCache::claim`] found.
pub(crate) enum Claim {
    /// Decode it: no other worker has or is doing so.
    Decode(GopClaim),
    /// Already decoded: the cached GOPs holding its frames.
    Decoded(Vec<Arc<DecodedGop>>),
}

/// A GOP this worker is decoding; dropping it (after the decode, or on an error) lets
/// waiting workers look again.
pub(crate) struct GopClaim {
    cache: Arc<GopCache>,
    id: (usize, usize, u64),
}

impl Drop for GopClaim {
    fn drop(&mut self) {
        self.cache.lock().in_flight.remove(&self.id);
        self.cache.done.notify_all();
    }
}

impl GopCache {
    /// A cache of at most `capacity` GOPs (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            gops: Mutex::default(),
            done: Condvar::new(),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Gops> {
        self.gops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A decoded GOP of `key` showing time `t`, made the most recently used.
    pub(crate) fn showing(&self, key: GopKey, t: u64) -> Option<Arc<DecodedGop>> {
        let mut gops = self.lock();
        let i = gops
            .decoded
            .iter()
            .position(|(k, g)| *k == key && g.shown_at(t).is_some())?;
        let entry = gops.decoded.remove(i)?;
        let gop = Arc::clone(&entry.1);
        gops.decoded.push_front(entry);
        Some(gop)
    }

    /// Claims the decode of `gop` for the caller, or, once another worker has decoded
    /// every frame it would keep (waiting while one is decoding it), the cached GOPs
    /// holding them.
    pub(crate) fn claim(self: &Arc<Self>, key: GopKey, gop: &PlannedGop) -> Claim {
        let id = (key.0, key.1, gop.start_ns());
        let kept = gop.kept();
        let mut gops = self.lock();
        loop {
            let covering: Option<Vec<Arc<DecodedGop>>> = kept
                .iter()
                .map(|&t| {
                    gops.decoded
                        .iter()
                        .find(|(k, g)| *k == key && g.shown_at(t) == Some(t))
                        .map(|(_, g)| Arc::clone(g))
                })
                .collect();
            if let Some(covering) = covering {
                return Claim::Decoded(covering);
            }
            if gops.in_flight.insert(id) {
                return Claim::Decode(GopClaim {
                    cache: Arc::clone(self),
                    id,
                });
            }
            gops = self.done.wait(gops).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Keeps a GOP decoded under `claim`, dropping the least recently used past the
    /// capacity, then lets waiting workers look again.
    pub(crate) fn insert(&self, key: GopKey, gop: Arc<DecodedGop>, claim: GopClaim) {
        let mut gops = self.lock();
        gops.decoded.push_front((key, gop));
        gops.decoded.truncate(self.capacity);
        drop(gops);
        drop(claim);
    }

    /// Forgets every GOP of the episode at `row` (a damaged one).
    pub(crate) fn forget_episode(&self, row: usize) {
        self.lock().decoded.retain(|((r, _), _)| *r != row);
    }
}
