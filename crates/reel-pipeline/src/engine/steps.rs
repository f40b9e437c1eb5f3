//! The bodies of the three steps — canonical, enrich, index — run by the executor's step
//! skeleton (run.rs), and the reads they share.

use std::collections::BTreeMap;
use std::time::Instant;

use rayon::prelude::*;
use reel_io::ByteSource;
use reel_mcap::EpisodeReader;

use crate::canonical::{EpisodeSummary, summary_of_metadata};
use crate::engine::dag::{BatchSpec, RunOptions, Step, stem_of};
use crate::engine::report::{EpisodeStatus, Event};
use crate::engine::run::{Pipeline, Sink, StepWork};
use crate::enrich::{Enricher, LabelSet};
use crate::index::episode_rows;
use crate::process::process_recording;
use crate::state::{Claim, CommitRecord, Quarantine, StateStore};
use crate::{Error, ErrorKind, Kinded, Result, now_ns};

/// Fingerprint of a landing recording's bytes (all its files, in order).
fn landing_digest(files: &reel_landing::LandingFiles) -> String {
    let mut hasher = twox_hash::XxHash3_128::new();
    for part in files.parts() {
        hasher.write(part);
    }
    format!("{:032x}", hasher.finish_128())
}

enum Outcome {
    Summary(Box<EpisodeSummary>, EpisodeStatus),
    Quarantined(Quarantine),
    Untouched,
}

impl Pipeline {
    /// Decode → resample → derive → quality checks → encode, per episode, in parallel.
    pub(super) fn canonical_step(
        &self,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
        prior: Option<CommitRecord>,
    ) -> Result<StepWork> {
        let step = Step::Canonical;
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
        let outcomes: Vec<Outcome> = batch
            .landing_keys
            .par_iter()
            .map(|landing_key| -> Result<Outcome> {
                let started = Instant::now();
                let id = stem_of(landing_key);
                let selected = Self::selected(options, landing_key);
                if !selected || !options.replay {
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
                let existing = if options.replay {
                    None
                } else {
                    self.existing_canonical(landing_key, id)?
                };
                let outcome = match existing {
                    Some(summary) => Outcome::Summary(Box::new(summary), EpisodeStatus::Reused),
                    None => self.ingest_episode(landing_key, id)?,
                };
                let mut event = self.event(step, batch, landing_key, id);
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

        let mut work = StepWork::default();
        for (landing_key, outcome) in batch.landing_keys.iter().zip(outcomes) {
            match outcome {
                Outcome::Summary(s, status) => {
                    if status == EpisodeStatus::Done {
                        work.counts.done += 1;
                    } else {
                        work.counts.reused += 1;
                    }
                    work.landing_keys.push(landing_key.clone());
                    work.artifacts.push(s.canonical_key.clone());
                    work.summaries.push(*s);
                }
                Outcome::Quarantined(q) => {
                    work.counts.quarantined += 1;
                    work.landing_keys.push(landing_key.clone());
                    work.quarantined.push(q);
                }
                Outcome::Untouched => {}
            }
        }
        Ok(work)
    }

    /// One landing episode through steps 1–5: its canonical episode written, or, when the
    /// episode itself is bad, a quarantine record. Failures of any other kind are
    /// returned, so the batch fails and nothing is recorded for this episode.
    fn ingest_episode(&self, landing_key: &str, id: &str) -> Result<Outcome> {
        let landing = match reel_landing::LandingFiles::fetch(&self.landing, landing_key) {
            Ok(landing) => landing,
            // A planned episode that vanished from landing is bad input too.
            Err(reel_mcap::Error::Io(reel_io::Error::NotFound { name })) => {
                return self.quarantine(
                    landing_key,
                    id,
                    Error::Landing {
                        name,
                        reason: "listed in the plan but not in the landing store".into(),
                    },
                );
            }
            Err(e) if e.kind() == reel_io::ErrorKind::BadInput => {
                return self.quarantine(landing_key, id, e.into());
            }
            Err(e) => return Err(e.into()),
        };
        let processed = match process_recording(landing_key, id, &landing, &self.config) {
            Ok(processed) => processed,
            Err(e) if e.kind() == ErrorKind::BadInput => {
                return self.quarantine(landing_key, id, e);
            }
            Err(e) => return Err(e),
        };
        let episode_id = &processed.summary.episode_id;
        let digest = landing_digest(&landing);
        let claim = Claim {
            episode_id: episode_id.clone(),
            landing_key: landing_key.to_owned(),
            landing_digest: digest.clone(),
        };
        if let Some(owner) = self.state.claim(&claim)? {
            let reason = if owner.landing_digest == digest {
                format!(
                    "a copy of `{}` (the same bytes), which is already ingested as episode `{episode_id}`",
                    owner.landing_key
                )
            } else {
                format!(
                    "episode id `{episode_id}` already belongs to another recording, `{}` \
                     (a reused id or a clock reset?); give this recording its own episode_id \
                     and ingest it again",
                    owner.landing_key
                )
            };
            let name = self.landing.object_uri(landing_key);
            return self.quarantine(landing_key, id, Error::Landing { name, reason });
        }
        self.store()
            .write_atomic(&processed.summary.canonical_key, processed.bytes)?;
        Ok(Outcome::Summary(
            Box::new(processed.summary),
            EpisodeStatus::Done,
        ))
    }

    /// Records `error` as the reason `landing_key` cannot be ingested.
    fn quarantine(&self, landing_key: &str, id: &str, error: Error) -> Result<Outcome> {
        let q = Quarantine {
            episode_id: id.to_owned(),
            landing_key: landing_key.to_owned(),
            reason: error.to_string(),
            pipeline_version: self.config.pipeline_version.clone(),
            at_ns: now_ns(),
        };
        self.state.quarantine(&q)?;
        Ok(Outcome::Quarantined(q))
    }

    /// The canonical summary of `id` if its canonical MCAP exists and was made by this
    /// version with these settings from this landing object.
    fn existing_canonical(&self, landing_key: &str, id: &str) -> Result<Option<EpisodeSummary>> {
        self.read_canonical_summary(id, |summary| {
            let p = &summary.provenance;
            p.pipeline_version == self.config.pipeline_version
                && p.config_digest == self.digest
                && summary.landing_key == landing_key
        })
    }

    /// The summary stored in `canonical/<id>.mcap` when `accept` takes it, with the
    /// object's size and digest (the object read whole, so only once accepted: this is
    /// the path of a lost completion record).
    fn read_canonical_summary(
        &self,
        id: &str,
        accept: impl Fn(&EpisodeSummary) -> bool,
    ) -> Result<Option<EpisodeSummary>> {
        self.read_canonical(&crate::canonical::canonical_key(id), |source| {
            let bytes = match source.len() {
                Ok(n) => n,
                Err(reel_io::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let reader = EpisodeReader::open(source as &dyn ByteSource)?;
            let Some(summary) = summary_of_metadata(source.name(), reader.metadata())? else {
                return Ok(None);
            };
            if !accept(&summary) {
                return Ok(None);
            }
            let canonical_digest = reel_manifest::object_digest(&source.read_range(0..bytes)?);
            Ok(Some(EpisodeSummary {
                bytes,
                canonical_digest,
                ..summary
            }))
        })
    }

    /// Canonical summaries of the batch: from this version's canonical record when there
    /// is one, else read back from the canonical episodes themselves (any version). The
    /// second list holds landing keys without a canonical episode of their own.
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
                // A canonical episode of that id made from another landing object is not
                // this one's (its id was taken, and it was quarantined).
                None => self.read_canonical_summary(stem_of(k), |s| s.landing_key == *k),
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
            match self.store().len_of(&StateStore::quarantine_key(key)) {
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

    /// Labels every canonical episode of the batch with every enricher.
    pub(super) fn enrich_step(
        &self,
        batch: &BatchSpec,
        options: &RunOptions,
        on_event: Sink<'_>,
    ) -> Result<StepWork> {
        let step = Step::Enrich;
        let pv = &self.config.pipeline_version;
        let mut work = StepWork::default();
        let (summaries, missing) = self.batch_summaries(batch)?;
        for landing_key in &missing {
            let mut event = self.event(step, batch, landing_key, stem_of(landing_key));
            event.status = EpisodeStatus::Missing;
            on_event(&Event::Episode(event));
        }
        work.counts.missing = missing.len();
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
        work.landing_keys = summaries.iter().map(|s| s.landing_key.clone()).collect();
        // Quarantined episodes are covered too: there will never be anything to label.
        // Episodes not ingested yet are not, so a later run labels them.
        work.landing_keys.extend(self.quarantined_of(&missing)?);
        for (keys, status) in results {
            if status == EpisodeStatus::Done {
                work.counts.done += 1;
            } else {
                work.counts.reused += 1;
            }
            work.artifacts.extend(keys);
        }
        Ok(work)
    }

    /// The writer name of a batch's commits to the warehouse: fixed by batch and version,
    /// so a rerun finds its commit made and adds nothing.
    pub fn warehouse_writer(
        batch: &str,
        pipeline_version: &str,
        summaries: &[EpisodeSummary],
    ) -> String {
        // The episodes it commits and their canonical contents: a rerun of the batch
        // commits the same rows and finds them committed; a run that adds an episode a
        // partial run lacked, or replaces one's canonical content, commits anew.
        let mut episodes: Vec<(&str, u64)> = summaries
            .iter()
            .map(|s| (s.episode_id.as_str(), s.canonical_digest))
            .collect();
        episodes.sort_unstable();
        let text: String = episodes
            .iter()
            .map(|(id, digest)| format!("{id}:{digest:016x};"))
            .collect();
        format!(
            "{batch}@{pipeline_version}#{:016x}",
            reel_manifest::fnv1a(text.bytes())
        )
    }

    /// One row per canonical episode of the batch, committed to the warehouse's episode
    /// tables: appended to `ingestions`, and each episode's row in `episodes` replaced.
    pub(super) fn index_step(&self, batch: &BatchSpec, on_event: Sink<'_>) -> Result<StepWork> {
        let step = Step::Index;
        let mut work = StepWork::default();
        let started = Instant::now();
        let (summaries, missing) = self.batch_summaries(batch)?;
        work.counts.missing = missing.len();
        // A run killed after committing but before its step record finds the commit made:
        // reused, like any other artifact.
        let mut status = EpisodeStatus::Done;
        if !summaries.is_empty() {
            let writer =
                Self::warehouse_writer(&batch.key, &self.config.pipeline_version, &summaries);
            let ingested = self.warehouse()?.commit_ingestion(
                &writer,
                &|at| episode_rows(&summaries, at),
                now_ns(),
            )?;
            if ingested.already {
                status = EpisodeStatus::Reused;
            }
            work.artifacts.push(format!(
                "{}@{} {}@{}",
                reel_warehouse::episodes::INGESTIONS,
                ingested.ingestions_version,
                reel_warehouse::episodes::EPISODES,
                ingested.episodes_version
            ));
        }
        let seconds = started.elapsed().as_secs_f64() / summaries.len().max(1) as f64;
        for s in &summaries {
            let mut event = self.event(step, batch, &s.landing_key, &s.episode_id);
            event.status = status;
            event.seconds = seconds;
            on_event(&Event::Episode(event));
        }
        for landing_key in &missing {
            let mut event = self.event(step, batch, landing_key, stem_of(landing_key));
            event.status = EpisodeStatus::Missing;
            on_event(&Event::Episode(event));
        }
        if status == EpisodeStatus::Done {
            work.counts.done = summaries.len();
        } else {
            work.counts.reused = summaries.len();
        }
        work.landing_keys = summaries.iter().map(|s| s.landing_key.clone()).collect();
        work.landing_keys.extend(self.quarantined_of(&missing)?);
        Ok(work)
    }
}
