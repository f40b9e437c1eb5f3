//! The loader: worker threads build batches ahead of the consumer, within a bounded
//! prefetch window, and the consumer receives them in order.

use std::any::Any;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use reel_cache::BlockCache;
use reel_io::ByteSource;
use reel_manifest::Manifest;
use reel_mcap::EpisodeReader;
use serde::Serialize;

use crate::assemble::Worker;
use crate::batch::{Batch, Skipped};
use crate::batch_tensors::BatchTensors;
use crate::error::{LoaderError, Result};
use crate::gop_cache::GopCache;
use crate::host::{BufferPool, HostMemory};
use crate::mixture::{Catalog, MixtureSource};
use crate::options::LoaderOptions;
use crate::order::LoaderState;
use crate::order::{RankOrder, Shuffle, Span};
use crate::resolve::Plans;
use crate::shared::{Shared, WorkerCounts};
use crate::skipped::{SkippedEpisode, tally_skipped};
use crate::sources::Sources;
use crate::spec::SampleSpec;

/// How much one epoch holds on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EpochSize {
    pub samples: u64,
    pub batches: u64,
}

impl EpochSize {
    pub(crate) fn of(samples: u64, batch_size: u64, drop_last: bool) -> Self {
        let batches = if drop_last {
            samples / batch_size
        } else {
            samples.div_ceil(batch_size)
        };
        Self { samples, batches }
    }
}

/// What the loader's workers did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LoadStats {
    pub batches: u64,
    pub samples: u64,
    pub skipped: u64,
    pub frames_decoded: u64,
    pub chunks_read: u64,
    /// Frames the samples asked for, and those of them found already decoded in the GOP
    /// cache every worker shares (its hit rate is the ratio).
    pub frames_wanted: u64,
    pub frames_cached: u64,
}

/// A time-aligned multi-rate loader over one manifest or a weighted mixture of several,
/// for one rank.
#[derive(Debug, Clone)]
pub struct Loader {
    shared: Arc<Shared>,
}

impl Loader {
    /// Builds a loader over one manifest: indexes the anchors of every episode under
    /// `spec` and resolves frame sizes and value counts from the first episode with
    /// samples.
    pub fn new(
        manifest: Manifest,
        spec: &SampleSpec,
        sources: Sources,
        options: LoaderOptions,
    ) -> Result<Self> {
        let only = MixtureSource {
            manifest,
            sources,
            weight: 1.0,
            location: None,
        };
        Self::mixture(vec![only], spec, options)
    }

    /// Builds a loader over a weighted mixture of manifests ([`crate::mixture`]: each
    /// source fills its weight's share of every epoch). The spec is resolved against
    /// each source's first readable episode; sources whose streams differ in size are
    /// refused.
    pub fn mixture(
        sources: Vec<MixtureSource>,
        spec: &SampleSpec,
        options: LoaderOptions,
    ) -> Result<Self> {
        spec.validate().map_err(|reason| LoaderError::Spec {
            path: "<spec>".into(),
            reason,
        })?;
        if options.world == 0 || options.rank >= options.world {
            return Err(LoaderError::BadShard {
                rank: options.rank,
                world: options.world,
            });
        }
        // Serialising a spec cannot fail (plain data); its fields in declaration order.
        let spec_json = serde_json::to_vec(spec).unwrap_or_default();
        let spec_hash = format!("fnv1a:{:016x}", reel_manifest::fnv1a(spec_json));
        let catalog = Catalog::new(sources, spec.sampling_rule(), options.seed, options.shuffle)?;
        let plans = Plans::resolve(spec, &catalog)?;
        let whole_gops = matches!(options.shuffle, Shuffle::Locality { .. });
        let tensors_per_batch = BatchTensors::count(&plans);
        let Plans {
            cameras,
            depths,
            proprio,
            proprio_topics,
        } = plans;
        Ok(Self {
            shared: Arc::new(Shared {
                catalog,
                spec_hash,
                cameras,
                depths,
                proprio,
                proprio_topics,
                whole_gops,
                gops: Arc::new(GopCache::new(options.gop_cache * options.workers.max(1))),
                buffers: BufferPool::new(
                    options
                        .pin_memory
                        .map_or(HostMemory::Pageable, HostMemory::pinned_if_available),
                    spare_buffers(&options, tensors_per_batch),
                ),
                signal_widen_ns: if whole_gops { 1_000_000_000 } else { 0 },
                options,
                counts: Mutex::new(WorkerCounts::default()),
                #[cfg(test)]
                panic_on_batch: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Where batch buffers live: page-locked when [`LoaderOptions::pin_memory`] asked for
    /// it and CUDA is present.
    pub fn host_memory(&self) -> &HostMemory {
        self.shared.buffers.memory()
    }

    /// Samples of each epoch under the spec, all ranks together (one manifest: all its
    /// samples; a mixture: its sources' together).
    pub fn total_samples(&self) -> u64 {
        self.shared.catalog.epoch_len()
    }

    /// The manifest (of a mixture, the first source's).
    pub fn manifest(&self) -> &Manifest {
        self.shared
            .catalog
            .manifest(0)
            .expect("a loader has at least one source")
    }

    /// The block cache reads go through, if any (one for every source).
    pub fn cache(&self) -> Option<&Arc<BlockCache>> {
        self.shared.catalog.sources(0).and_then(Sources::cache)
    }

    /// Sources the loader mixes (1 for one manifest).
    pub fn num_sources(&self) -> usize {
        self.shared.catalog.len()
    }

    /// The manifest of source `source` (a batch's `source` tensor names it).
    pub fn source_manifest(&self, source: usize) -> Option<&Manifest> {
        self.shared.catalog.manifest(source)
    }

    /// Where source `source`'s episodes are read from.
    pub(crate) fn shared_sources(&self, source: usize) -> Option<&Sources> {
        self.shared.catalog.sources(source)
    }

    /// Where source `source`'s manifest was opened from (a path or store URI).
    pub fn source_location(&self, source: usize) -> Option<&str> {
        self.shared.catalog.location(source)
    }

    /// The weight of source `source` as given.
    pub fn source_weight(&self, source: usize) -> Option<f64> {
        self.shared.catalog.weight(source)
    }

    /// Samples source `source` fills in each epoch (all ranks together), and the samples
    /// it holds under the spec: a share above its size cycles it, one below draws a
    /// different part of it each epoch.
    pub fn source_share(&self, source: usize) -> Option<(u64, u64)> {
        let c = &self.shared.catalog;
        (source < c.len()).then(|| (c.share(source), c.source_samples(source)))
    }

    /// The options.
    pub fn options(&self) -> &LoaderOptions {
        &self.shared.options
    }

    /// A hash of the spec the loader was built with.
    pub(crate) fn spec_hash(&self) -> &str {
        &self.shared.spec_hash
    }

    /// Makes the worker that takes `batch` panic, to test how a lost worker surfaces.
    #[cfg(test)]
    pub(crate) fn panic_on_batch(&self, batch: u64) {
        self.shared
            .panic_on_batch
            .set(batch)
            .expect("the fault is set once per loader");
    }

    /// Samples and batches of `epoch` on this rank, without starting any worker.
    pub fn epoch_size(&self, epoch: u64) -> Result<EpochSize> {
        self.epoch_size_at(&LoaderState::at(epoch, 0))
    }

    /// The episode of row `row` of source `source`'s manifest (a batch's `source` and
    /// `episode_row`), opened from its store or cache: its metadata, topics and streams,
    /// beside the batches.
    pub fn open_episode(
        &self,
        source: usize,
        row: usize,
    ) -> Result<EpisodeReader<Box<dyn ByteSource>>> {
        let catalog = &self.shared.catalog;
        let row = catalog.row(source, row)?;
        let uri = catalog.episode(row)?.uri()?.to_string();
        let source = catalog.open(row, &uri)?;
        EpisodeReader::open(source).map_err(|source| LoaderError::Episode {
            uri,
            source: Box::new(source),
        })
    }

    /// Batches of `epoch` from its start.
    pub fn epoch(&self, epoch: u64) -> Result<Batches> {
        self.resume(LoaderState::at(epoch, 0))
    }

    /// Batches from `state` on: exactly those an uninterrupted run delivers next. A
    /// state saved by another run or world size goes through [`Loader::restore`] first.
    pub fn resume(&self, state: LoaderState) -> Result<Batches> {
        let shared = &self.shared;
        let o = &shared.options;
        let order = Arc::new(self.rank_order(
            state.epoch,
            (o.rank as u64, o.world as u64),
            &state.spans,
        )?);
        let batch_size = o.batch_size.max(1) as u64;
        let total = EpochSize::of(order.len(), batch_size, o.drop_last).batches;
        if state.batch > total {
            return Err(LoaderError::BadState {
                epoch: state.epoch,
                batch: state.batch,
                batches: total,
            });
        }
        let control = Arc::new(Control {
            next: AtomicU64::new(state.batch),
            delivered: Mutex::new(state.batch),
            room: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let counts_at_start = shared.counts();
        let (tx, rx) = channel();
        let workers = (0..o.workers.max(1))
            .map(|_| {
                let job = Job {
                    shared: Arc::clone(shared),
                    order: Arc::clone(&order),
                    control: Arc::clone(&control),
                    tx: tx.clone(),
                    epoch: state.epoch,
                    total,
                    batch_size,
                };
                std::thread::spawn(move || job.run())
            })
            .collect();
        Ok(Batches {
            shared: Arc::clone(shared),
            epoch: state.epoch,
            spans: state.spans,
            next: state.batch,
            total,
            samples_in_epoch: order.len(),
            max_skipped_samples: (shared.options.max_skipped.max(0.0) * order.len() as f64).floor()
                as u64,
            rx,
            pending: BTreeMap::new(),
            control,
            workers,
            stats: LoadStats::default(),
            counts_at_start,
            skipped: BTreeMap::new(),
            carried: Vec::new(),
            ended: false,
        })
    }
}

struct Control {
    /// Next batch index a worker takes.
    next: AtomicU64,
    /// Batches handed to the consumer: workers stay within `prefetch` of it.
    delivered: Mutex<u64>,
    room: Condvar,
    stop: AtomicBool,
}

impl Control {
    /// Tells every worker to take no further batch, and wakes those waiting for room.
    fn stop_all(&self) {
        {
            // Under the lock, so no worker misses the wake-up between its check and its wait.
            let _delivered = self.delivered.lock();
            self.stop.store(true, Ordering::SeqCst);
        }
        self.room.notify_all();
    }
}

struct Job {
    shared: Arc<Shared>,
    order: Arc<RankOrder>,
    control: Arc<Control>,
    tx: Sender<(u64, Result<Batch>)>,
    epoch: u64,
    total: u64,
    batch_size: u64,
}

impl Job {
    /// Builds batches until the epoch or the consumer ends. A panic is caught and sent as
    /// [`LoaderError::WorkerLost`] for the batch this worker held: the consumer waits
    /// for that batch, and the other workers wait for the consumer, so without it the
    /// run would stall for ever.
    fn run(self) {
        let mut held = None;
        let outcome = catch_unwind(AssertUnwindSafe(|| self.build_batches(&mut held)));
        if let Err(payload) = outcome {
            // A panic before the first batch still reports against one, so the consumer
            // hears of it at once rather than when every other worker has ended.
            let batch = held.unwrap_or_else(|| self.control.next.fetch_add(1, Ordering::SeqCst));
            self.control.stop_all();
            let reason = panic_message(payload.as_ref());
            let _ = self
                .tx
                .send((batch, Err(LoaderError::WorkerLost { batch, reason })));
        }
    }

    /// The worker's loop; `held` is the batch it is on, for [`Job::run`] to report.
    fn build_batches(&self, held: &mut Option<u64>) {
        let mut worker = match Worker::new(Arc::clone(&self.shared)) {
            Ok(w) => w,
            Err(e) => {
                let b = self.control.next.fetch_add(1, Ordering::SeqCst);
                let _ = self.tx.send((b, Err(e)));
                return;
            }
        };
        let prefetch = self.shared.options.prefetch.max(1) as u64;
        let mut reported = WorkerCounts::default();
        loop {
            let b = self.control.next.fetch_add(1, Ordering::SeqCst);
            if b >= self.total {
                break;
            }
            *held = Some(b);
            {
                let mut delivered = match self.control.delivered.lock() {
                    Ok(d) => d,
                    Err(_) => return,
                };
                while b >= *delivered + prefetch && !self.control.stop.load(Ordering::SeqCst) {
                    delivered = match self.control.room.wait(delivered) {
                        Ok(d) => d,
                        Err(_) => return,
                    };
                }
            }
            if self.control.stop.load(Ordering::SeqCst) {
                break;
            }
            let end = ((b + 1) * self.batch_size).min(self.order.len());
            let samples: Vec<u64> = (b * self.batch_size..end)
                .map(|i| self.order.at(i))
                .collect();
            #[cfg(test)]
            if self.shared.panic_on_batch.get() == Some(&b) {
                panic!("injected fault in batch {b}");
            }
            let result = worker.build(self.epoch, b, &samples);
            let counts = worker.counts();
            self.shared.add_counts(counts.since(&reported));
            reported = counts;
            if self.tx.send((b, result)).is_err() {
                break;
            }
            *held = None;
        }
    }
}

/// Batch buffers worth keeping: those of every batch that can be alive at once (built
/// ahead, being built, and the two the consumer may hold while asking for the next).
fn spare_buffers(options: &LoaderOptions, tensors_per_batch: usize) -> usize {
    tensors_per_batch * (options.prefetch + options.workers.max(1) + 2)
}

/// The text a panic was raised with (`panic!` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panicked with a value that is not text".to_string()
    }
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

mod batches;
#[cfg(test)]
mod tests;

pub use batches::Batches;
