//! Warming: fetch a working set into the cache before training starts.
//!
//! Warming is planned, then run. The plan opens every object, checks that the set fits
//! beside the other pinned sets (failing before any byte is fetched if it does not), and
//! looks at which blocks are already on disk, which is what makes a warm resumable: after
//! a crash, the next run fetches only what is still missing.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cache::{BlockCache, CachedObject};
use crate::{Error, Result};

/// One object of a working set: all of it, or only some byte ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmItem {
    /// Path in the remote store.
    pub path: String,
    /// Byte ranges to warm; `None` means the whole object.
    pub ranges: Option<Vec<Range<u64>>>,
}

impl WarmItem {
    /// The whole object at `path`.
    pub fn whole(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            ranges: None,
        }
    }
}

/// How to warm.
#[derive(Debug, Clone)]
pub struct WarmOptions {
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Check every page checksum of blocks already cached (and refetch bad ones), not
    /// just their headers.
    pub verify: bool,
    /// Pin list to write before fetching, so that eviction never touches the set.
    pub pin: Option<String>,
}

impl Default for WarmOptions {
    fn default() -> Self {
        Self {
            concurrency: 32,
            verify: false,
            pin: None,
        }
    }
}

/// What [`BlockCache::plan_warm`] found.
#[derive(Debug)]
pub struct WarmPlan {
    objects: Vec<CachedObject>,
    /// Per object, the missing blocks.
    missing: Vec<Vec<u64>>,
    /// Bytes of the working set (whole blocks).
    pub total_bytes: u64,
    /// Bytes already cached.
    pub cached_bytes: u64,
    /// Bytes to fetch.
    pub missing_bytes: u64,
    /// Blocks in the working set.
    pub blocks: u64,
    /// Disk bytes the set needs, headers included.
    pub disk_bytes: u64,
    /// Disk bytes held by other pin lists.
    pub pinned_by_others: u64,
}

impl WarmPlan {
    /// Objects of the working set.
    pub fn objects(&self) -> &[CachedObject] {
        &self.objects
    }
}

/// Progress of a running warm.
#[derive(Debug, Clone, Copy)]
pub struct WarmProgress {
    /// Bytes fetched so far.
    pub fetched_bytes: u64,
    /// Bytes to fetch in all.
    pub missing_bytes: u64,
}

/// The outcome of a warm.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WarmReport {
    /// Objects in the working set.
    pub objects: u64,
    /// Blocks in the working set.
    pub blocks: u64,
    /// Bytes of the working set.
    pub total_bytes: u64,
    /// Bytes that were cached before this run.
    pub cached_bytes: u64,
    /// Bytes fetched by this run.
    pub fetched_bytes: u64,
    /// Ranged GETs this run sent.
    pub requests: u64,
    /// Wall-clock seconds of the fetch phase.
    pub seconds: f64,
}

impl WarmReport {
    /// Fetch rate in bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.fetched_bytes as f64 / self.seconds
        } else {
            0.0
        }
    }
}

impl BlockCache {
    /// Opens every object of `items`, checks that the set fits, and finds the blocks still
    /// missing. Fails with [`Error::WontFit`] before anything is fetched if the set and
    /// the other pinned sets together exceed the capacity.
    pub fn plan_warm(&self, items: &[WarmItem], options: &WarmOptions) -> Result<WarmPlan> {
        let paths: Vec<String> = items.iter().map(|i| i.path.clone()).collect();
        let objects = self
            .objects(&paths)
            .into_iter()
            .collect::<Result<Vec<_>>>()?;

        let mut others: HashMap<String, u64> = HashMap::new();
        for list in self.pins()? {
            if options.pin.as_deref() != Some(list.name.as_str()) {
                others.extend(list.objects.into_iter().map(|o| (o.dir, o.disk_bytes)));
            }
        }
        let pinned_by_others: u64 = others.values().sum();

        let mut wanted_per_object = Vec::with_capacity(objects.len());
        let mut disk_bytes = 0;
        let mut counted = BTreeSet::new();
        for (object, item) in objects.iter().zip(items) {
            let wanted: BTreeSet<u64> = match &item.ranges {
                None => (0..object.num_blocks()).collect(),
                Some(ranges) => ranges
                    .iter()
                    .filter(|r| r.start < r.end)
                    .flat_map(|r| {
                        let bs = self.config().block_size;
                        let end = r.end.min(object.meta.len);
                        (r.start / bs)..end.div_ceil(bs)
                    })
                    .collect(),
            };
            // Pins cover whole objects, so count whole objects once each.
            let dir = object.dir_name();
            if !others.contains_key(&dir) && counted.insert(dir) {
                disk_bytes += self.disk_bytes(object);
            }
            wanted_per_object.push(wanted);
        }
        let capacity = self.config().capacity;
        if disk_bytes + pinned_by_others > capacity {
            return Err(Error::WontFit {
                needed: disk_bytes,
                pinned_by_others,
                capacity,
            });
        }

        let mut plan = WarmPlan {
            objects: Vec::new(),
            missing: Vec::new(),
            total_bytes: 0,
            cached_bytes: 0,
            missing_bytes: 0,
            blocks: 0,
            disk_bytes,
            pinned_by_others,
        };
        for (object, wanted) in objects.into_iter().zip(wanted_per_object) {
            let mut missing = Vec::new();
            for index in wanted {
                let r = object.block_range(index);
                plan.blocks += 1;
                plan.total_bytes += r.end - r.start;
                if object.is_cached(index, options.verify) {
                    plan.cached_bytes += r.end - r.start;
                } else {
                    plan.missing_bytes += r.end - r.start;
                    missing.push(index);
                }
            }
            plan.objects.push(object);
            plan.missing.push(missing);
        }
        Ok(plan)
    }

    /// Writes the pin list (if asked) and fetches the plan's missing blocks with
    /// `options.concurrency` requests in flight, calling `progress` as requests complete.
    /// Stops at the first request that fails after its retries; what was fetched stays.
    pub fn warm(
        &self,
        plan: WarmPlan,
        options: &WarmOptions,
        mut progress: impl FnMut(&WarmProgress),
    ) -> Result<WarmReport> {
        if let Some(name) = &options.pin {
            self.pin(name, &plan.objects)?;
        }
        let max_run = (self.config().max_request_bytes / self.config().block_size).max(1) as usize;
        let mut runs = Vec::new();
        for (object, missing) in plan.objects.iter().zip(&plan.missing) {
            for run in missing.chunk_by(|a, b| b == &(a + 1)) {
                for part in run.chunks(max_run) {
                    runs.push((object.clone(), part.to_vec()));
                }
            }
        }
        let before = self.metrics();
        let start = Instant::now();
        let mut state = WarmProgress {
            fetched_bytes: 0,
            missing_bytes: plan.missing_bytes,
        };
        progress(&state);
        let concurrency = options.concurrency.max(1);
        let result: Result<()> = self.runtime.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            let mut pending = runs.into_iter();
            loop {
                while tasks.len() < concurrency
                    && let Some((object, blocks)) = pending.next()
                {
                    tasks.spawn(async move {
                        let fetched = object.fetch_blocks(&blocks).await?;
                        Ok::<u64, reel_io::Error>(fetched.values().map(|b| b.len() as u64).sum())
                    });
                }
                match tasks.join_next().await {
                    Some(Ok(Ok(bytes))) => {
                        state.fetched_bytes += bytes;
                        progress(&state);
                    }
                    Some(Ok(Err(e))) => {
                        // Wait for the other requests to stop before returning, so no task
                        // outlives the call.
                        tasks.shutdown().await;
                        return Err(e.into());
                    }
                    Some(Err(join)) => std::panic::resume_unwind(join.into_panic()),
                    None => return Ok(()),
                }
            }
        });
        result?;
        let seconds = start.elapsed().max(Duration::from_nanos(1)).as_secs_f64();
        let after = self.metrics();
        Ok(WarmReport {
            objects: plan.objects.len() as u64,
            blocks: plan.blocks,
            total_bytes: plan.total_bytes,
            cached_bytes: plan.cached_bytes,
            fetched_bytes: state.fetched_bytes,
            requests: after.remote_requests - before.remote_requests,
            seconds,
        })
    }
}
