//! The DAG engine: steps with declared inputs and outputs, run over a batch, with each
//! step's completion recorded durably per batch.
//!
//! Resume works at two levels. A step whose completion record covers the whole batch is
//! skipped. Inside an unfinished step, an episode whose artifact already exists with the
//! same pipeline version and settings is reused instead of recomputed: the canonical MCAP
//! carries its own summary, a label set its provenance. Artifacts are keyed by episode,
//! not by run, so every run (and every batch that overlaps another) shares them; objects
//! are written whole, so a killed process leaves at most temporary files.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use rayon::prelude::*;
use reel_io::{ByteSource, ObjectSource, Store};
use reel_mcap::EpisodeReader;
use serde::{Deserialize, Serialize};

use crate::camera::EncodeConfig;
use crate::canonical::{EpisodeSummary, canonical_key, process_episode, summary_of_metadata};
use crate::enrich::{Enricher, LabelSet, MotionSegments};
use crate::index::encode_warehouse;
use crate::plan::Plan;
use crate::qc::QcConfig;
use crate::resample::ResampleConfig;
use crate::state::{CommitRecord, Quarantine, StateStore, check_segment};
use crate::{Error, PIPELINE_VERSION, Result, fnv1a, now_ns};

/// Everything that decides what ingest produces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineConfig {
    /// Stamped on every output; artifacts of another version are stale.
    pub pipeline_version: String,
    /// Grid rates and gap bound.
    pub resample: ResampleConfig,
    /// Quality-check thresholds.
    pub qc: QcConfig,
    /// Video and chunking.
    pub encode: EncodeConfig,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            pipeline_version: PIPELINE_VERSION.into(),
            resample: ResampleConfig::default(),
            qc: QcConfig::default(),
            encode: EncodeConfig::default(),
        }
    }
}

impl PipelineConfig {
    /// Digest of the settings that shape the outputs (not the version): artifacts made
    /// with other settings are not reused.
    pub fn digest(&self) -> String {
        let text =
            serde_json::to_string(&(&self.resample, &self.qc, &self.encode)).unwrap_or_default();
        format!("{:016x}", fnv1a(text.bytes()))
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<()> {
        check_segment("pipeline version", &self.pipeline_version)?;
        self.resample.validate()?;
        self.qc.validate()?;
        self.encode.validate()
    }

    /// Parses a JSON config (`pipeline_version` and `resample`, `qc`, `encode` objects,
    /// each optional); `name` is used in errors.
    pub fn from_json(name: &str, text: &str) -> Result<Self> {
        let config: Self = serde_json::from_str(text).map_err(|source| Error::Json {
            name: name.to_owned(),
            source,
        })?;
        config.validate()?;
        Ok(config)
    }
}

/// A step of the ingest DAG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Decode → resample → derive → quality checks → encode the canonical MCAP.
    Canonical,
    /// Label canonical episodes with every enricher.
    Enrich,
    /// One warehouse row per episode, one Parquet file per batch.
    Index,
}

impl Step {
    /// Every step in dependency order.
    pub const ALL: [Step; 3] = [Step::Canonical, Step::Enrich, Step::Index];

    /// Name used in state keys and events.
    pub fn name(self) -> &'static str {
        match self {
            Self::Canonical => "canonical",
            Self::Enrich => "enrich",
            Self::Index => "index",
        }
    }

    /// What the step reads (object key patterns).
    pub fn inputs(self) -> &'static [&'static str] {
        match self {
            Self::Canonical => &["<landing>/<key>"],
            Self::Enrich | Self::Index => &["canonical/<episode>.mcap"],
        }
    }

    /// What the step writes (object key patterns), besides its completion record.
    pub fn outputs(self) -> &'static [&'static str] {
        match self {
            Self::Canonical => &["canonical/<episode>.mcap", "quarantine/<episode>.json"],
            Self::Enrich => &["labels/<enricher>/<episode>.json"],
            Self::Index => &["episodes/part-<batch>-<pipeline version>.parquet"],
        }
    }

    /// Steps whose outputs this one reads.
    pub fn depends_on(self) -> &'static [Step] {
        match self {
            Self::Canonical => &[],
            Self::Enrich | Self::Index => &[Step::Canonical],
        }
    }
}

/// Which steps a run performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Every step.
    #[default]
    Full,
    /// Re-index only: warehouse rows from existing canonical episodes.
    Metadata,
    /// Enrichment only: new labels for existing canonical episodes.
    Relabel,
}

impl Profile {
    /// The steps, in dependency order.
    pub fn steps(self) -> &'static [Step] {
        match self {
            Self::Full => &Step::ALL,
            Self::Metadata => &[Step::Index],
            Self::Relabel => &[Step::Enrich],
        }
    }

    /// Parses `full`, `metadata` or `relabel`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "full" => Some(Self::Full),
            "metadata" => Some(Self::Metadata),
            "relabel" => Some(Self::Relabel),
            _ => None,
        }
    }
}

/// The episodes one run processes, under a key that names its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// Batch key (state and warehouse part names).
    pub key: String,
    /// Landing object keys.
    pub landing_keys: Vec<String>,
}

impl BatchSpec {
    /// Batch `index` of `plan`.
    pub fn from_plan(plan: &Plan, index: usize) -> Result<Self> {
        let batch = plan.batches.get(index).ok_or_else(|| Error::Plan {
            name: plan.plan_id.clone(),
            reason: format!("no batch {index} (the plan has {})", plan.batches.len()),
        })?;
        Ok(Self {
            key: plan.batch_key(index),
            landing_keys: batch.episodes.iter().map(|e| e.key.clone()).collect(),
        })
    }

    /// One episode, as a collection trigger sends it: the same steps as a batch.
    pub fn single(landing_key: &str) -> Self {
        let stem: String = stem_of(landing_key)
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Self {
            key: format!("one-{stem}"),
            landing_keys: vec![landing_key.to_owned()],
        }
    }
}

/// The episode id a landing key stands for: its file name without `.mcap`.
pub(crate) fn stem_of(landing_key: &str) -> &str {
    let name = landing_key.rsplit('/').next().unwrap_or(landing_key);
    name.strip_suffix(".mcap").unwrap_or(name)
}

/// What happened to one episode in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeStatus {
    /// Computed and written now.
    Done,
    /// Its artifact already existed (an earlier or concurrent run made it).
    Reused,
    /// The landing episode cannot be ingested; see the quarantine record.
    Quarantined,
    /// No canonical episode to work from (never ingested or quarantined).
    Missing,
}

/// One JSON line per episode and step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeEvent {
    /// Step.
    pub step: Step,
    /// Batch key.
    pub batch: String,
    /// Episode id.
    pub episode_id: String,
    /// Landing object.
    pub landing_key: String,
    /// Outcome.
    pub status: EpisodeStatus,
    /// Wall time spent on it, seconds.
    pub seconds: f64,
    /// Raised quality flags (canonical step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qc_flags: Option<String>,
    /// Canonical duration, seconds (canonical step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Why it was quarantined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Progress of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A step starts on a batch of `episodes`.
    StepStarted {
        /// Step.
        step: Step,
        /// Episodes it will look at.
        episodes: usize,
    },
    /// An episode went through a step.
    Episode(EpisodeEvent),
    /// A step was already complete for the batch.
    StepSkipped {
        /// Step.
        step: Step,
        /// Episodes its record covers.
        episodes: usize,
    },
    /// A step's completion record was written.
    StepCommitted {
        /// Step.
        step: Step,
        /// Record key.
        key: String,
    },
}

/// Counts of one step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct StepReport {
    /// Step.
    pub step: Option<Step>,
    /// The completion record already covered the batch.
    pub skipped: bool,
    /// Episodes computed now.
    pub done: usize,
    /// Episodes whose artifacts existed.
    pub reused: usize,
    /// Episodes quarantined.
    pub quarantined: usize,
    /// Episodes without a canonical episode.
    pub missing: usize,
}

/// What a run did to a batch.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct BatchReport {
    /// Batch key.
    pub batch: String,
    /// Per step, in order.
    pub steps: Vec<StepReport>,
    /// Quarantined episodes of the batch.
    pub quarantined: Vec<Quarantine>,
    /// Warehouse part written (index step).
    pub warehouse_part: Option<String>,
}

/// How a run treats existing state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunOptions {
    /// Steps to run.
    pub profile: Profile,
    /// Recompute even what is recorded done (for the selected episodes).
    pub replay: bool,
    /// Only these episodes (ids or landing keys); the others keep their recorded state.
    pub only: Option<BTreeSet<String>>,
}

/// The ingest pipeline over a landing store and an output store.
#[derive(Debug)]
pub struct Pipeline {
    landing: Store,
    state: StateStore,
    config: PipelineConfig,
    enrichers: Vec<Box<dyn Enricher>>,
}

type Sink<'a> = &'a (dyn Fn(&Event) + Sync);

impl Pipeline {
    /// A pipeline reading `landing` and writing canonical episodes, labels, warehouse rows
    /// and state to `store`, with the built-in enricher.
    pub fn new(landing: Store, store: Store, config: PipelineConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            landing,
            state: StateStore::new(store),
            config,
            enrichers: vec![Box::new(MotionSegments::default())],
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

    fn store(&self) -> &Store {
        self.state.store()
    }

    /// Runs the profile's steps over `batch`. Episodes run in parallel on the current rayon
    /// pool; `on_event` hears of every episode and commit. Bad landing episodes are
    /// quarantined and the run goes on; store errors stop it (rerun to resume).
    pub fn run(
        &self,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
    ) -> Result<BatchReport> {
        check_segment("batch key", &batch.key)?;
        let mut report = BatchReport {
            batch: batch.key.clone(),
            ..BatchReport::default()
        };
        for &step in options.profile.steps() {
            let step_report = match step {
                Step::Canonical => self.run_canonical(batch, options, on_event, &mut report)?,
                Step::Enrich => self.run_enrich(batch, options, on_event)?,
                Step::Index => self.run_index(batch, options, on_event, &mut report)?,
            };
            report.steps.push(step_report);
        }
        Ok(report)
    }

    fn selected(options: &RunOptions, landing_key: &str) -> bool {
        options
            .only
            .as_ref()
            .is_none_or(|only| only.contains(landing_key) || only.contains(stem_of(landing_key)))
    }

    /// A recorded completion that covers every episode of the batch, and nothing is to
    /// be replayed.
    fn complete(
        &self,
        record: &Option<CommitRecord>,
        batch: &BatchSpec,
        options: &RunOptions,
    ) -> bool {
        let Some(record) = record else { return false };
        if options.replay || record.config_digest != self.config.digest() {
            return false;
        }
        let covered: BTreeSet<&str> = record.landing_keys.iter().map(String::as_str).collect();
        batch
            .landing_keys
            .iter()
            .all(|k| covered.contains(k.as_str()))
    }

    fn event(
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

    /// The canonical summary of `id` if its canonical MCAP exists and was made by this
    /// version with these settings from this landing object.
    fn existing_canonical(&self, landing_key: &str, id: &str) -> Result<Option<EpisodeSummary>> {
        let Some(summary) = self.read_canonical_summary(id)? else {
            return Ok(None);
        };
        let p = &summary.provenance;
        let current = p.pipeline_version == self.config.pipeline_version
            && p.config_digest == self.config.digest()
            && summary.landing_key == landing_key;
        Ok(current.then_some(summary))
    }

    /// The summary stored in `canonical/<id>.mcap` (any version), with its size.
    fn read_canonical_summary(&self, id: &str) -> Result<Option<EpisodeSummary>> {
        self.read_canonical(&canonical_key(id), |source| {
            let bytes = match source.len() {
                Ok(n) => n,
                Err(reel_io::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let reader = EpisodeReader::open(source as &dyn ByteSource)?;
            let Some(summary) = summary_of_metadata(source.name(), reader.metadata())? else {
                return Ok(None);
            };
            Ok(Some(EpisodeSummary { bytes, ..summary }))
        })
    }

    /// Runs `read` over the canonical object `key`; when it fails because another
    /// process replaced the object meanwhile (two batches ingesting the same episode),
    /// runs it again over the new version, a few times at most.
    fn read_canonical<T>(&self, key: &str, read: impl Fn(&ObjectSource) -> Result<T>) -> Result<T> {
        const ATTEMPTS: usize = 4;
        let mut attempt = 1;
        loop {
            let source = self.store().source(key);
            match read(&source) {
                Err(e)
                    if attempt < ATTEMPTS
                        && (e.is_object_changed() || source.has_changed().unwrap_or(false)) =>
                {
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn run_canonical(
        &self,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
        report: &mut BatchReport,
    ) -> Result<StepReport> {
        let step = Step::Canonical;
        let pv = &self.config.pipeline_version;
        let prior = self.state.read_commit(step.name(), &batch.key, pv)?;
        if self.complete(&prior, batch, options) {
            let prior = prior.unwrap_or_else(|| unreachable!("complete() saw a record"));
            on_event(&Event::StepSkipped {
                step,
                episodes: prior.landing_keys.len(),
            });
            report.quarantined = prior.quarantined.clone();
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
        let digest = self.config.digest();
        let prior = prior.filter(|r| r.config_digest == digest);
        let prior_summaries: BTreeMap<&str, &EpisodeSummary> = prior
            .iter()
            .flat_map(|r| &r.summaries)
            .map(|s| (s.landing_key.as_str(), s))
            .collect();
        let prior_quarantine: BTreeMap<&str, &Quarantine> = prior
            .iter()
            .flat_map(|r| &r.quarantined)
            .map(|q| (q.landing_key.as_str(), q))
            .collect();

        enum Outcome {
            Summary(Box<EpisodeSummary>, EpisodeStatus),
            Quarantined(Quarantine),
            Untouched,
        }
        let outcomes: Vec<Outcome> = batch
            .landing_keys
            .par_iter()
            .map(|landing_key| -> Result<Outcome> {
                let started = Instant::now();
                let id = stem_of(landing_key);
                let selected = Self::selected(options, landing_key);
                let keep = !selected || !options.replay;
                if keep {
                    if let Some(s) = prior_summaries.get(landing_key.as_str()) {
                        return Ok(Outcome::Summary(
                            Box::new((*s).clone()),
                            EpisodeStatus::Reused,
                        ));
                    }
                    if let Some(q) = prior_quarantine.get(landing_key.as_str()) {
                        return Ok(Outcome::Quarantined((*q).clone()));
                    }
                }
                if !selected {
                    return Ok(Outcome::Untouched);
                }
                let mut event = self.event(step, batch, landing_key, id);
                let existing = if options.replay {
                    None
                } else {
                    self.existing_canonical(landing_key, id)?
                };
                let outcome = match existing {
                    Some(summary) => {
                        event.status = EpisodeStatus::Reused;
                        Outcome::Summary(Box::new(summary), EpisodeStatus::Reused)
                    }
                    None => {
                        // A planned episode that vanished from landing is bad input too.
                        let processed = match self.landing.read(landing_key) {
                            Ok(landing) => process_episode(landing_key, id, &landing, &self.config),
                            Err(reel_io::Error::NotFound { name }) => Err(Error::Landing {
                                name,
                                reason: "listed in the plan but not in the landing store".into(),
                            }),
                            Err(e) => return Err(e.into()),
                        };
                        match processed {
                            Ok(processed) => {
                                self.store().write_atomic(
                                    &processed.summary.canonical_key,
                                    processed.bytes,
                                )?;
                                Outcome::Summary(Box::new(processed.summary), EpisodeStatus::Done)
                            }
                            Err(e) if e.is_bad_input() => {
                                let q = Quarantine {
                                    episode_id: id.to_owned(),
                                    landing_key: landing_key.clone(),
                                    reason: e.to_string(),
                                    pipeline_version: pv.clone(),
                                    at_ns: now_ns(),
                                };
                                self.state.quarantine(&q)?;
                                Outcome::Quarantined(q)
                            }
                            Err(e) => return Err(e),
                        }
                    }
                };
                event.seconds = started.elapsed().as_secs_f64();
                match &outcome {
                    Outcome::Summary(s, status) => {
                        event.status = *status;
                        event.episode_id = s.episode_id.clone();
                        event.qc_flags = Some(s.qc.summary().flags());
                        event.duration_s = Some((s.end_ns - s.start_ns) as f64 / 1e9);
                    }
                    Outcome::Quarantined(q) => {
                        event.status = EpisodeStatus::Quarantined;
                        event.reason = Some(q.reason.clone());
                    }
                    Outcome::Untouched => {}
                }
                on_event(&Event::Episode(event));
                Ok(outcome)
            })
            .collect::<Result<_>>()?;

        let mut record = CommitRecord {
            step: step.name().into(),
            batch: batch.key.clone(),
            pipeline_version: pv.clone(),
            config_digest: digest,
            committed_at_ns: now_ns(),
            landing_keys: Vec::new(),
            summaries: Vec::new(),
            artifacts: Vec::new(),
            quarantined: Vec::new(),
        };
        let mut counts = StepReport {
            step: Some(step),
            ..StepReport::default()
        };
        for (landing_key, outcome) in batch.landing_keys.iter().zip(outcomes) {
            match outcome {
                Outcome::Summary(s, status) => {
                    if status == EpisodeStatus::Done {
                        counts.done += 1;
                    } else {
                        counts.reused += 1;
                    }
                    record.landing_keys.push(landing_key.clone());
                    record.artifacts.push(s.canonical_key.clone());
                    record.summaries.push(*s);
                }
                Outcome::Quarantined(q) => {
                    counts.quarantined += 1;
                    record.landing_keys.push(landing_key.clone());
                    record.quarantined.push(q);
                }
                Outcome::Untouched => {}
            }
        }
        let key = self.state.write_commit(&record)?;
        on_event(&Event::StepCommitted { step, key });
        report.quarantined = record.quarantined;
        Ok(counts)
    }

    /// Canonical summaries of the batch: from this version's canonical record when there
    /// is one, else read back from the canonical episodes themselves (any version). The
    /// second list holds landing keys without a canonical episode.
    fn batch_summaries(&self, batch: &BatchSpec) -> Result<(Vec<EpisodeSummary>, Vec<String>)> {
        let record = self.state.read_commit(
            Step::Canonical.name(),
            &batch.key,
            &self.config.pipeline_version,
        )?;
        let recorded: BTreeMap<String, EpisodeSummary> = record
            .into_iter()
            .flat_map(|r| r.summaries)
            .map(|s| (s.landing_key.clone(), s))
            .collect();
        let found: Vec<Result<Option<EpisodeSummary>>> = batch
            .landing_keys
            .par_iter()
            .map(|k| match recorded.get(k) {
                Some(s) => Ok(Some(s.clone())),
                None => self.read_canonical_summary(stem_of(k)),
            })
            .collect();
        let mut summaries = Vec::new();
        let mut missing = Vec::new();
        for (k, s) in batch.landing_keys.iter().zip(found) {
            match s? {
                Some(s) => summaries.push(s),
                None => missing.push(k.clone()),
            }
        }
        Ok((summaries, missing))
    }

    /// The landing keys among `keys` that were quarantined (one stat each; only episodes
    /// without a canonical episode are asked about).
    fn quarantined_of(&self, keys: &[String]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for key in keys {
            match self
                .store()
                .len_of(&format!("quarantine/{}.json", stem_of(key)))
            {
                Ok(_) => out.push(key.clone()),
                Err(reel_io::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    fn label_key(enricher: &dyn Enricher, episode_id: &str) -> String {
        format!("labels/{}/{episode_id}.json", enricher.name())
    }

    fn run_enrich(
        &self,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
    ) -> Result<StepReport> {
        let step = Step::Enrich;
        let pv = &self.config.pipeline_version;
        let prior = self.state.read_commit(step.name(), &batch.key, pv)?;
        let mut counts = StepReport {
            step: Some(step),
            ..StepReport::default()
        };
        if self.complete(&prior, batch, options) {
            let n = prior.map_or(0, |r| r.landing_keys.len());
            on_event(&Event::StepSkipped { step, episodes: n });
            counts.skipped = true;
            return Ok(counts);
        }
        on_event(&Event::StepStarted {
            step,
            episodes: batch.landing_keys.len(),
        });
        let (summaries, missing) = self.batch_summaries(batch)?;
        for landing_key in &missing {
            let mut event = self.event(step, batch, landing_key, stem_of(landing_key));
            event.status = EpisodeStatus::Missing;
            on_event(&Event::Episode(event));
        }
        counts.missing = missing.len();
        let results: Vec<(Vec<String>, EpisodeStatus)> = summaries
            .par_iter()
            .map(|summary| -> Result<(Vec<String>, EpisodeStatus)> {
                let started = Instant::now();
                let replay = options.replay && Self::selected(options, &summary.landing_key);
                let (keys, status) = self.read_canonical(&summary.canonical_key, |source| {
                    let mut keys = Vec::new();
                    let mut status = EpisodeStatus::Reused;
                    let mut reader: Option<EpisodeReader<&dyn ByteSource>> = None;
                    for enricher in &self.enrichers {
                        let key = Self::label_key(enricher.as_ref(), &summary.episode_id);
                        let current = if replay {
                            false
                        } else {
                            self.state.read_json::<LabelSet>(&key)?.is_some_and(|l| {
                                l.enricher_version == enricher.version()
                                    && l.provenance.pipeline_version == *pv
                                    && l.provenance.config_digest
                                        == summary.provenance.config_digest
                            })
                        };
                        if !current {
                            let reader = match &mut reader {
                                Some(r) => r,
                                None => {
                                    reader.insert(EpisodeReader::open(source as &dyn ByteSource)?)
                                }
                            };
                            let mut labels = enricher.label(reader, summary)?;
                            labels.provenance.pipeline_version = pv.clone();
                            self.state.write_json(&key, &labels)?;
                            status = EpisodeStatus::Done;
                        }
                        keys.push(key);
                    }
                    Ok((keys, status))
                })?;
                let mut event = self.event(step, batch, &summary.landing_key, &summary.episode_id);
                event.status = status;
                event.seconds = started.elapsed().as_secs_f64();
                on_event(&Event::Episode(event));
                Ok((keys, status))
            })
            .collect::<Result<_>>()?;
        let mut record = CommitRecord {
            step: step.name().into(),
            batch: batch.key.clone(),
            pipeline_version: pv.clone(),
            config_digest: self.config.digest(),
            committed_at_ns: now_ns(),
            landing_keys: summaries.iter().map(|s| s.landing_key.clone()).collect(),
            summaries: Vec::new(),
            artifacts: Vec::new(),
            quarantined: Vec::new(),
        };
        // Quarantined episodes are covered too: there will never be anything to label.
        // Episodes not ingested yet are not, so a later run labels them.
        record.landing_keys.extend(self.quarantined_of(&missing)?);
        for (keys, status) in results {
            if status == EpisodeStatus::Done {
                counts.done += 1;
            } else {
                counts.reused += 1;
            }
            record.artifacts.extend(keys);
        }
        let key = self.state.write_commit(&record)?;
        on_event(&Event::StepCommitted { step, key });
        Ok(counts)
    }

    /// Key of the warehouse part of a batch: fixed by batch and version, so a rerun
    /// replaces the file instead of adding a second copy of its rows.
    pub fn warehouse_part_key(batch: &str, pipeline_version: &str) -> String {
        format!(
            "{}part-{batch}-{pipeline_version}.parquet",
            reel_manifest::warehouse::EPISODES_PREFIX
        )
    }

    fn run_index(
        &self,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
        report: &mut BatchReport,
    ) -> Result<StepReport> {
        let step = Step::Index;
        let pv = &self.config.pipeline_version;
        let prior = self.state.read_commit(step.name(), &batch.key, pv)?;
        let mut counts = StepReport {
            step: Some(step),
            ..StepReport::default()
        };
        if self.complete(&prior, batch, options) {
            let prior = prior.unwrap_or_else(|| unreachable!("complete() saw a record"));
            on_event(&Event::StepSkipped {
                step,
                episodes: prior.landing_keys.len(),
            });
            report.warehouse_part = prior.artifacts.first().cloned();
            counts.skipped = true;
            return Ok(counts);
        }
        on_event(&Event::StepStarted {
            step,
            episodes: batch.landing_keys.len(),
        });
        let started = Instant::now();
        let (summaries, missing) = self.batch_summaries(batch)?;
        counts.missing = missing.len();
        let part = Self::warehouse_part_key(&batch.key, pv);
        let mut artifacts = Vec::new();
        if !summaries.is_empty() {
            let bytes = encode_warehouse(&part, &summaries, now_ns())?;
            self.store().write_atomic(&part, bytes)?;
            artifacts.push(part.clone());
            report.warehouse_part = Some(part);
        }
        let seconds = started.elapsed().as_secs_f64() / summaries.len().max(1) as f64;
        for s in &summaries {
            let mut event = self.event(step, batch, &s.landing_key, &s.episode_id);
            event.seconds = seconds;
            on_event(&Event::Episode(event));
        }
        for landing_key in &missing {
            let mut event = self.event(step, batch, landing_key, stem_of(landing_key));
            event.status = EpisodeStatus::Missing;
            on_event(&Event::Episode(event));
        }
        counts.done = summaries.len();
        let mut landing_keys: Vec<String> =
            summaries.iter().map(|s| s.landing_key.clone()).collect();
        landing_keys.extend(self.quarantined_of(&missing)?);
        let record = CommitRecord {
            step: step.name().into(),
            batch: batch.key.clone(),
            pipeline_version: pv.clone(),
            config_digest: self.config.digest(),
            committed_at_ns: now_ns(),
            landing_keys,
            summaries: Vec::new(),
            artifacts,
            quarantined: Vec::new(),
        };
        let key = self.state.write_commit(&record)?;
        on_event(&Event::StepCommitted { step, key });
        Ok(counts)
    }
}

/// An episode whose newest canonical record is of another pipeline version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleEpisode {
    /// Episode id.
    pub episode_id: String,
    /// Landing object.
    pub landing_key: String,
    /// Version that made its canonical episode.
    pub pipeline_version: String,
}

/// The newest canonical record of each episode in `store`.
fn newest_canonical(store: &Store) -> Result<Vec<StaleEpisode>> {
    let state = StateStore::new(store.clone());
    let mut newest: BTreeMap<String, (i64, StaleEpisode)> = BTreeMap::new();
    for record in state.commits(Step::Canonical.name())? {
        for s in &record.summaries {
            if newest
                .get(&s.episode_id)
                .is_some_and(|(at, _)| *at >= record.committed_at_ns)
            {
                continue;
            }
            let entry = StaleEpisode {
                episode_id: s.episode_id.clone(),
                landing_key: s.landing_key.clone(),
                pipeline_version: s.provenance.pipeline_version.clone(),
            };
            newest.insert(s.episode_id.clone(), (record.committed_at_ns, entry));
        }
    }
    Ok(newest.into_values().map(|(_, e)| e).collect())
}

/// Episodes of `store` whose newest canonical completion record is not of
/// `pipeline_version` (one read per batch record, not per episode).
pub fn stale_episodes(store: &Store, pipeline_version: &str) -> Result<Vec<StaleEpisode>> {
    Ok(newest_canonical(store)?
        .into_iter()
        .filter(|e| e.pipeline_version != pipeline_version)
        .collect())
}

/// Landing keys whose newest canonical episode in `store` is of `pipeline_version`:
/// what a plan for that version can leave out.
pub fn current_landing_keys(store: &Store, pipeline_version: &str) -> Result<BTreeSet<String>> {
    Ok(newest_canonical(store)?
        .into_iter()
        .filter(|e| e.pipeline_version == pipeline_version)
        .map(|e| e.landing_key)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_partially_and_reject_bad_values() {
        let config = PipelineConfig::from_json(
            "ingest.json",
            r#"{"pipeline_version": "2.1", "resample": {"state_hz": 100}, "qc": {"min_frozen_s": 2}}"#,
        )
        .expect("parses");
        assert_eq!(config.resample.state_hz, 100.0);
        assert_eq!(config.resample.camera_hz, 30.0);
        assert_eq!(config.qc.min_frozen_s, 2.0);
        assert_ne!(config.digest(), PipelineConfig::default().digest());
        for bad in [
            r#"{"resample": {"state_hz": 0}}"#,
            r#"{"qc": {"choppy_ratio": 3}}"#,
            r#"{"encode": {"gop": 0}}"#,
            r#"{"pipeline_version": "../x"}"#,
            r#"{"resample": {"typo": 1}}"#,
        ] {
            let err = PipelineConfig::from_json("ingest.json", bad).expect_err(bad);
            assert!(
                matches!(err, Error::Config(_) | Error::Json { .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn steps_declare_a_dag_that_profiles_respect() {
        for step in Step::ALL {
            assert!(!step.outputs().is_empty() && !step.inputs().is_empty());
            let position = |s: Step| Step::ALL.iter().position(|x| *x == s);
            for dep in step.depends_on() {
                assert!(
                    position(*dep) < position(step),
                    "{step:?} runs before {dep:?}"
                );
            }
        }
        assert_eq!(
            Profile::from_name("metadata").map(Profile::steps),
            Some(&[Step::Index][..])
        );
        assert_eq!(
            Profile::from_name("relabel").map(Profile::steps),
            Some(&[Step::Enrich][..])
        );
        assert_eq!(
            Profile::from_name("full").map(Profile::steps),
            Some(&Step::ALL[..])
        );
        assert!(Profile::from_name("fast").is_none());
    }
}
