//! `reel._reel.Loader`: Reel's loader ([`reel_loader::Loader`]) for one rank, driven from
//! Python. `reel.Loader` (python/reel/_loader.py) wraps it with epochs, state dicts and
//! layouts; this half opens the inputs and hands over batches, building them with the GIL
//! released.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use reel_cache::{BlockCache, CacheConfig};
use reel_loader::{
    Batches, LoadStats, LoaderOptions, LoaderState, MixtureEntry, ResumeCheck, SavedState, Shuffle,
    Skipped, Span, open_loader,
};

use crate::errors::{OrRaise, bad_input};

/// The loader and the epoch being iterated, if any.
#[pyclass(module = "reel._reel", name = "Loader", frozen)]
#[derive(Debug)]
pub struct NativeLoader {
    loader: reel_loader::Loader,
    cache: Option<Arc<BlockCache>>,
    /// `Batches` is not `Sync`: the lock makes the loader shareable between threads, and
    /// only one of them iterates at a time.
    current: Mutex<Option<Batches>>,
    /// What the last iteration did, once it ended or was stopped.
    finished: Mutex<Finished>,
}

/// What an iteration left behind when it ended or was stopped.
#[derive(Debug, Default)]
struct Finished {
    stats: LoadStats,
    /// Skipped samples no delivered batch reports ([`Batches::skipped_after_last_batch`]).
    unreported: Vec<Skipped>,
}

impl Finished {
    fn of(batches: &Batches) -> Self {
        Self {
            stats: batches.stats(),
            unreported: batches.skipped_after_last_batch().to_vec(),
        }
    }
}

/// Stops an iteration's workers and waits for them off the caller's thread: a worker
/// waiting on a store that stopped answering finishes only when it answers, and Python
/// (Ctrl-C, a new iteration) must not wait with it. The workers build nothing more once
/// stopped, and the next iteration has workers of its own.
fn retire(batches: Batches) {
    // Without a thread to spare, the failed spawn drops `batches` here: the wait happens
    // on the caller's thread rather than not at all.
    let _ = std::thread::Builder::new()
        .name("reel-retire".into())
        .spawn(move || drop(batches));
}

/// How often a wait for a batch looks at Python's signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[pymethods]
impl NativeLoader {
    #[new]
    #[pyo3(signature = (sources, spec, store=None, cache=None, *, cache_capacity=64 << 30,
        batch_size=8, workers=2, shuffle="locality", run=10, seed=0, rank=0, world=1,
        prefetch=4, pin_memory=None, drop_last=false, channels_first=false, max_skipped=0.01))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        sources: Vec<(String, f64, Option<String>)>,
        spec: &Bound<'_, PyAny>,
        store: Option<String>,
        cache: Option<String>,
        cache_capacity: u64,
        batch_size: usize,
        workers: usize,
        shuffle: &str,
        run: u64,
        seed: u64,
        rank: usize,
        world: usize,
        prefetch: usize,
        pin_memory: Option<usize>,
        drop_last: bool,
        channels_first: bool,
        max_skipped: f64,
    ) -> PyResult<Self> {
        let mut spec = crate::spec::sample_spec(spec)?;
        if channels_first {
            // LeRobot's [C, H, W] frames, built so by the workers instead of transposed.
            for camera in &mut spec.cameras {
                camera.layout = reel_loader::Layout::Chw;
            }
        }
        let shuffle = match shuffle {
            "global" => Shuffle::Global,
            "locality" => Shuffle::Locality { run },
            other => {
                return Err(bad_input(format!(
                    "shuffle must be \"global\" or \"locality\", not {other:?}"
                )));
            }
        };
        if batch_size == 0 {
            return Err(bad_input("batch_size must be at least 1"));
        }
        let options = LoaderOptions {
            batch_size,
            workers: workers.max(1),
            prefetch: prefetch.max(1),
            seed,
            rank,
            world,
            shuffle,
            drop_last,
            pin_memory,
            max_skipped,
            ..LoaderOptions::default()
        };
        // Opening maps the manifest and reads the first episode's summary: I/O, so
        // without the GIL.
        py.detach(move || {
            reel_video::quiet_ffmpeg_logs();
            let entries: Vec<MixtureEntry> = sources
                .into_iter()
                .map(|(manifest, weight, own_store)| MixtureEntry {
                    manifest,
                    weight,
                    store: own_store.or_else(|| store.clone()),
                })
                .collect();
            // With a cache, a store folder that is gone still serves what the cache holds.
            let cache = cache.map(|dir| CacheConfig::new(dir, cache_capacity));
            let loader = open_loader(&entries, &spec, cache, options).or_raise()?;
            let cache = loader.cache().cloned();
            Ok(Self {
                loader,
                cache,
                current: Mutex::new(None),
                finished: Mutex::new(Finished::default()),
            })
        })
    }

    /// Starts iterating at `(epoch, batch)` (of `spans`, a JSON list, when the epoch was
    /// resumed on another world size): the batches an uninterrupted run delivers from
    /// there. Stops any iteration in progress.
    #[pyo3(signature = (epoch, batch, spans=None))]
    fn start(&self, py: Python<'_>, epoch: u64, batch: u64, spans: Option<&str>) -> PyResult<()> {
        let position = position(epoch, batch, spans)?;
        py.detach(|| {
            let mut current = lock(&self.current);
            if let Some(old) = current.take() {
                retire(old);
            }
            *current = Some(self.loader.resume(position).or_raise()?);
            Ok(())
        })
    }

    /// The state this rank saves at `(epoch, batch)` (and `spans`), as JSON: what the run
    /// is (manifest content hash, spec, seed, shuffle, batch size), rank, world, position.
    /// A manifest written before its footer named its hash is hashed whole on the first
    /// call: without the GIL.
    #[pyo3(signature = (epoch, batch, spans=None))]
    fn saved_state(
        &self,
        py: Python<'_>,
        epoch: u64,
        batch: u64,
        spans: Option<&str>,
    ) -> PyResult<String> {
        let position = position(epoch, batch, spans)?;
        let saved = py.detach(|| self.loader.saved_state(position));
        serde_json::to_string(&saved).map_err(|e| bad_input(e.to_string()))
    }

    /// Where this rank resumes from `states` (a JSON list of saved states: one, or every
    /// rank's), as JSON `{epoch, batch, spans?}`. `keep_position` continues a changed run.
    fn restore(&self, py: Python<'_>, states: &str, keep_position: bool) -> PyResult<String> {
        let saved: Vec<SavedState> = serde_json::from_str(states)
            .map_err(|e| bad_input(format!("loader state is not one Reel saved: {e}")))?;
        let check = if keep_position {
            ResumeCheck::KeepPosition
        } else {
            ResumeCheck::SameRun
        };
        let position = py
            .detach(|| self.loader.restore(&saved, check))
            .or_raise()?;
        serde_json::to_string(&position).map_err(|e| bad_input(e.to_string()))
    }

    /// Stops the iteration in progress (its workers end).
    fn stop(&self, py: Python<'_>) {
        py.detach(|| {
            if let Some(batches) = lock(&self.current).take() {
                *lock(&self.finished) = Finished::of(&batches);
                retire(batches);
            }
        });
    }

    /// The next batch as `(tensors, epoch, index, skipped)`, or None at the end of the
    /// epoch (or when nothing was started). Reel's threads build it without the GIL; the
    /// wait looks at Python's signals every tenth of a second, so Ctrl-C raises
    /// `KeyboardInterrupt` while a batch is being built.
    fn next_batch<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        loop {
            let next = py.detach(|| {
                let mut current = lock(&self.current);
                match current.as_mut() {
                    None => Some(None),
                    Some(batches) => {
                        let next = batches.next_within(SIGNAL_CHECK);
                        if matches!(next, Some(None)) {
                            // What the epoch did stays readable in stats() once it ends.
                            *lock(&self.finished) = Finished::of(batches);
                        }
                        next
                    }
                }
            });
            match next {
                None => py.check_signals()?,
                Some(None) => return Ok(None),
                Some(Some(batch)) => {
                    py.check_signals()?;
                    return Ok(Some(crate::batch::to_python(py, batch.or_raise()?)?));
                }
            }
        }
    }

    /// `(samples, batches)` of `epoch` on this rank (of `spans`, when resumed on another
    /// world size).
    #[pyo3(signature = (epoch, spans=None))]
    fn epoch_size(&self, py: Python<'_>, epoch: u64, spans: Option<&str>) -> PyResult<(u64, u64)> {
        let position = position(epoch, 0, spans)?;
        py.detach(|| {
            let size = self.loader.epoch_size_at(&position).or_raise()?;
            Ok((size.samples, size.batches))
        })
    }

    /// Samples of the whole manifest under the spec (every rank).
    #[getter]
    fn total_samples(&self) -> u64 {
        self.loader.total_samples()
    }

    /// Whether batch buffers are page-locked (pin_memory asked for and CUDA present).
    #[getter]
    fn pinned(&self) -> bool {
        self.loader.host_memory().is_pinned()
    }

    /// Whether the store's folder was missing at opening, so only what the cache holds
    /// can be served.
    #[getter]
    fn store_missing(&self) -> bool {
        self.cache.as_ref().is_some_and(|c| c.store_missing())
    }

    /// The episode id of row `row` of source `source`'s manifest.
    #[pyo3(signature = (row, source=0))]
    fn episode_id(&self, row: usize, source: usize) -> PyResult<String> {
        Ok(self
            .manifest(source)?
            .episode(row)
            .or_raise()?
            .episode_id()
            .or_raise()?
            .to_owned())
    }

    /// The start time (ns) of the episode of row `row` of source `source`'s manifest.
    #[pyo3(signature = (row, source=0))]
    fn episode_start_ns(&self, row: usize, source: usize) -> PyResult<i64> {
        Ok(self.manifest(source)?.episode(row).or_raise()?.start_ns())
    }

    /// Sources the loader mixes (1 for one manifest).
    #[getter]
    fn num_sources(&self) -> usize {
        self.loader.num_sources()
    }

    /// Samples source `source` fills in each epoch (all ranks), and samples it holds.
    fn source_share(&self, source: usize) -> PyResult<(u64, u64)> {
        self.loader
            .source_share(source)
            .ok_or_else(|| bad_input(format!("no source {source}")))
    }

    /// The metadata records of the episode of row `row` of source `source`'s manifest
    /// (record name → key → value), read from the loader's store or cache.
    #[pyo3(signature = (row, source=0))]
    fn episode_metadata<'py>(
        &self,
        py: Python<'py>,
        row: usize,
        source: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let metadata = py.detach(|| {
            self.loader
                .open_episode(source, row)
                .map(|e| e.metadata().clone())
                .or_raise()
        })?;
        let dict = PyDict::new(py);
        for (name, record) in metadata {
            dict.set_item(name, record.into_pyobject(py)?)?;
        }
        Ok(dict)
    }

    /// The skipped samples of the last iteration that no batch reported (its last batches
    /// came out empty), as dicts like `batch.skipped`'s: read once it ended.
    fn skipped_after_last_batch<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        crate::batch::skipped_to_python(py, &lock(&self.finished).unreported)
    }

    /// What the epoch in progress (the last one, once it ended) delivered and did:
    /// batches, samples, skipped, frames_decoded, chunks_read, frames_wanted and
    /// frames_cached (found decoded in the GOP cache Reel's threads share), and the block
    /// cache's hit rate when there is one.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = lock(&self.current)
            .as_ref()
            .map(|b| b.stats())
            .unwrap_or_else(|| lock(&self.finished).stats);
        let dict = PyDict::new(py);
        dict.set_item("batches", stats.batches)?;
        dict.set_item("samples", stats.samples)?;
        dict.set_item("skipped", stats.skipped)?;
        dict.set_item("frames_decoded", stats.frames_decoded)?;
        dict.set_item("chunks_read", stats.chunks_read)?;
        dict.set_item("frames_wanted", stats.frames_wanted)?;
        dict.set_item("frames_cached", stats.frames_cached)?;
        if let Some(cache) = &self.cache {
            dict.set_item("cache_hit_rate", cache.metrics().hit_rate())?;
        }
        Ok(dict)
    }
}

impl NativeLoader {
    fn manifest(&self, source: usize) -> PyResult<&reel_manifest::Manifest> {
        self.loader.source_manifest(source).ok_or_else(|| {
            bad_input(format!(
                "no source {source}: the loader has {}",
                self.loader.num_sources()
            ))
        })
    }
}

/// A position from its parts as Python keeps them.
fn position(epoch: u64, batch: u64, spans: Option<&str>) -> PyResult<LoaderState> {
    let spans: Vec<Span> = match spans {
        None => Vec::new(),
        Some(json) => serde_json::from_str(json)
            .map_err(|e| bad_input(format!("loader state spans are not Reel's: {e}")))?,
    };
    Ok(LoaderState {
        epoch,
        batch,
        spans,
    })
}
