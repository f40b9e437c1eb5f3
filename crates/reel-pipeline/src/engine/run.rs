//! The executor: a [`Pipeline`] runs a profile's steps over a batch, each through one
//! skeleton — read the step's completion record, skip the step if the record covers the
//! batch, else run its body and write the new record — so the steps' bodies hold only
//! their own work (steps.rs).

use std::collections::BTreeSet;

use reel_io::{ByteSource, ObjectSource, Store};

use crate::canonical::EpisodeSummary;
use crate::config::PipelineConfig;
use crate::engine::dag::{BatchSpec, RunOptions, Step, stem_of};
use crate::engine::report::{BatchReport, EpisodeEvent, EpisodeStatus, Event, StepReport};
use crate::enrich::{Enricher, MotionSegments};
use crate::segment::check_segment;
use crate::state::{CommitRecord, Quarantine, StateStore};
use crate::{ErrorKind, Kinded, Result, now_ns};

/// The ingest pipeline over a landing store and an output store.
#[derive(Debug)]
pub struct Pipeline {
    pub(super) landing: Store,
    pub(super) state: StateStore,
    pub(super) config: PipelineConfig,
    /// The settings' digest, computed once: every record and artifact carries it.
    pub(super) digest: String,
    pub(super) enrichers: Vec<Box<dyn Enricher>>,
    /// The output store's warehouse, opened at its first use.
    warehouse: std::sync::OnceLock<reel_warehouse::Warehouse>,
}

/// Where a run's events go.
pub(super) type Sink<'a> = &'a (dyn Fn(&Event) + Sync);

/// What a step's body did, to be written as its completion record.
#[derive(Debug, Default)]
pub(super) struct StepWork {
    /// Counts for the report.
    pub counts: StepReport,
    /// Landing keys the record covers (done or quarantined).
    pub landing_keys: Vec<String>,
    /// Canonical summaries (canonical step).
    pub summaries: Vec<EpisodeSummary>,
    /// Artifacts written or confirmed.
    pub artifacts: Vec<String>,
    /// Episodes quarantined.
    pub quarantined: Vec<Quarantine>,
}

impl Pipeline {
    /// A pipeline reading `landing` and writing canonical episodes, labels, warehouse rows
    /// and state to `store`, with the built-in enricher.
    pub fn new(landing: Store, store: Store, config: PipelineConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            landing,
            state: StateStore::new(store),
            digest: config.digest()?,
            config,
            enrichers: vec![Box::new(MotionSegments::default())],
            warehouse: std::sync::OnceLock::new(),
        })
    }

    /// Replaces the enrichers.
    pub fn with_enrichers(mut self, enrichers: Vec<Box<dyn Enricher>>) -> Self {
        self.enrichers = enrichers;
        self
    }

    /// The settings.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The output store's state.
    pub fn state(&self) -> &StateStore {
        &self.state
    }

    pub(super) fn store(&self) -> &Store {
        self.state.store()
    }

    /// The output store's warehouse, where the index step commits the batch's rows.
    pub fn warehouse(&self) -> Result<&reel_warehouse::Warehouse> {
        if let Some(warehouse) = self.warehouse.get() {
            return Ok(warehouse);
        }
        let warehouse = reel_warehouse::Warehouse::for_store(self.store())?;
        Ok(self.warehouse.get_or_init(|| warehouse))
    }

    /// Runs the profile's steps over `batch`. Episodes run in parallel on the current rayon
    /// pool; `on_event` hears of every episode and commit. Bad landing episodes are
    /// quarantined and the run goes on; any other failure (the store, the environment)
    /// stops it before the step is recorded, so a rerun resumes it.
    pub fn run(
        &self,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
    ) -> Result<BatchReport> {
        check_segment("batch key", &batch.key)?;
        for enricher in &self.enrichers {
            // Enricher names become label keys: `labels/<enricher>/<episode>.json`.
            check_segment("enricher name", enricher.name())?;
        }
        // A run killed mid-write left temporaries behind: this run, the next of the same
        // writer, removes the stale ones (one read of the store's temporaries folder,
        // whatever the corpus holds; S3 writes leave none).
        self.state.store().remove_stale_temporaries()?;
        let mut report = BatchReport {
            batch: batch.key.clone(),
            ..BatchReport::default()
        };
        for &step in options.profile.steps() {
            let step_report = self.run_step(step, batch, options, on_event, &mut report)?;
            report.steps.push(step_report);
        }
        Ok(report)
    }

    /// The step skeleton: skip a step its record already covers, else run its body and
    /// record what it did.
    fn run_step(
        &self,
        step: Step,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
        report: &mut BatchReport,
    ) -> Result<StepReport> {
        let pv = &self.config.pipeline_version;
        let prior = self.state.read_commit(step.name(), &batch.key, pv)?;
        if let Some(record) = prior.as_ref().filter(|r| self.covers(r, batch, options)) {
            on_event(&Event::StepSkipped {
                step,
                episodes: record.landing_keys.len(),
            });
            report.absorb(step, record);
            return Ok(StepReport {
                step: Some(step),
                skipped: true,
                ..StepReport::default()
            });
        }
        on_event(&Event::StepStarted {
            step,
            episodes: batch.landing_keys.len(),
        });
        // Work recorded under other settings is not reused.
        let prior = prior.filter(|r| r.config_digest == self.digest);
        let work = match step {
            Step::Canonical => self.canonical_step(batch, options, on_event, prior)?,
            Step::Enrich => self.enrich_step(batch, options, on_event)?,
            Step::Index => self.index_step(batch, on_event)?,
        };
        let record = CommitRecord {
            step: step.name().into(),
            batch: batch.key.clone(),
            pipeline_version: pv.clone(),
            config_digest: self.digest.clone(),
            committed_at_ns: now_ns(),
            landing_keys: work.landing_keys,
            summaries: work.summaries,
            artifacts: work.artifacts,
            quarantined: work.quarantined,
        };
        let key = self.state.write_commit(&record)?;
        on_event(&Event::StepCommitted { step, key });
        report.absorb(step, &record);
        Ok(StepReport {
            step: Some(step),
            ..work.counts
        })
    }

    /// Whether a recorded completion covers every episode of the batch, with these
    /// settings, and nothing is to be replayed.
    fn covers(&self, record: &CommitRecord, batch: &BatchSpec, options: &RunOptions) -> bool {
        if options.replay || record.config_digest != self.digest {
            return false;
        }
        let covered: BTreeSet<&str> = record.landing_keys.iter().map(String::as_str).collect();
        batch
            .landing_keys
            .iter()
            .all(|k| covered.contains(k.as_str()))
    }

    /// Whether `landing_key` is among the episodes a run with `options` works on.
    pub(super) fn selected(options: &RunOptions, landing_key: &str) -> bool {
        options
            .only
            .as_ref()
            .is_none_or(|only| only.contains(landing_key) || only.contains(stem_of(landing_key)))
    }

    /// The event of one episode in one step, status `Done` until told otherwise.
    pub(super) fn event(
        &self,
        step: Step,
        batch: &BatchSpec,
        landing_key: &str,
        episode_id: &str,
    ) -> EpisodeEvent {
        EpisodeEvent {
            step,
            batch: batch.key.clone(),
            episode_id: episode_id.to_owned(),
            landing_key: landing_key.to_owned(),
            status: EpisodeStatus::Done,
            seconds: 0.0,
            qc_flags: None,
            duration_s: None,
            reason: None,
        }
    }

    /// Runs `read` over the canonical object `key`; when it fails because another
    /// process replaced the object meanwhile (two batches ingesting the same episode),
    /// runs it again over the new version, a few times at most. A store that cannot say
    /// whether the object changed (an outage) fails the read with that outage.
    pub(super) fn read_canonical<T>(
        &self,
        key: &str,
        read: impl Fn(&ObjectSource) -> Result<T>,
    ) -> Result<T> {
        const ATTEMPTS: usize = 4;
        let mut attempt = 1;
        loop {
            let source = self.store().source(key);
            match read(&source) {
                Err(e)
                    if attempt < ATTEMPTS
                        && (e.kind() == ErrorKind::Changed || source.has_changed()?) =>
                {
                    attempt += 1;
                }
                result => return result,
            }
        }
    }
}
