//! Walking the chain from a checkpoint (or a manifest) down to the landing recordings.

use std::path::Path;

use reel_io::{ByteSource, Kinded, MemorySource, Store, split_object_uri};
use reel_loader::{LOADER_CHECKPOINT_FILE, SavedState};
use reel_manifest::{Manifest, digest_text, node_manifest_dir, object_digest, open_uri};
use reel_mcap::EpisodeReader;
use reel_pipeline::EpisodeSummary;
use reel_resilience::checkpoint::{CheckpointDir, MARKER, step_of_dir_name};

use crate::error::LineageError;
use crate::records::{EpisodeLineage, ManifestLineage, Record, Status};

/// How far a walk goes.
#[derive(Debug, Clone)]
pub struct LineageOptions {
    /// Read every canonical object whole to check its digest against the manifest's
    /// (otherwise only its metadata is read, and its status is `unchecked`).
    pub verify: bool,
    /// At most this many episodes of each manifest (all by default).
    pub limit: Option<usize>,
    /// The store the manifests' episode paths are relative to (default: the one each
    /// loader state recorded, else each manifest's own folder or prefix).
    pub store: Option<String>,
}

impl Default for LineageOptions {
    fn default() -> Self {
        Self {
            verify: true,
            limit: None,
            store: None,
        }
    }
}

/// A lineage walk.
#[derive(Debug, Clone)]
pub struct Lineage {
    options: LineageOptions,
}

type Emit<'a> = dyn FnMut(Record) -> Result<(), LineageError> + 'a;

impl Lineage {
    pub fn new(options: LineageOptions) -> Self {
        Self { options }
    }

    /// Walks `path`: a checkpoint folder (`step-…`, with its completion marker), a
    /// folder of checkpoints (its newest complete one), or a manifest. Each link is
    /// handed to `emit` as soon as it is known.
    pub fn walk(&self, path: &Path, emit: &mut Emit<'_>) -> Result<(), LineageError> {
        if path.is_dir() {
            self.checkpoint(path, emit)
        } else {
            let manifest = Manifest::open(path)?;
            let location = path.display().to_string();
            self.manifest(0, (&location, None), None, Ok(manifest), emit)
        }
    }

    fn checkpoint(&self, path: &Path, emit: &mut Emit<'_>) -> Result<(), LineageError> {
        let not_lineage = |reason: String| LineageError::NotLineage {
            path: path.to_path_buf(),
            reason,
        };
        // One checkpoint (`<root>/step-N`), or a root whose newest complete one is taken.
        let (dir, step) = if path.join(MARKER).is_file() {
            let step = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(step_of_dir_name)
                .ok_or_else(|| not_lineage("a checkpoint folder is named step-<N>".into()))?;
            let root = path.parent().unwrap_or(Path::new("."));
            (CheckpointDir::open(root)?, step)
        } else {
            let dir = CheckpointDir::open(path)?;
            let latest = dir.latest()?.checkpoint.ok_or_else(|| {
                not_lineage("holds no complete checkpoint (nor is it one)".into())
            })?;
            (dir, latest.step)
        };
        let checkpoint = dir.load(step)?;
        emit(Record::Checkpoint {
            path: dir.step_path(step).display().to_string(),
            step,
            files: checkpoint.files.iter().map(|(n, _)| n.clone()).collect(),
        })?;
        let bytes = checkpoint.file(LOADER_CHECKPOINT_FILE).ok_or_else(|| {
            not_lineage(format!(
                "checkpoint {step} has no {LOADER_CHECKPOINT_FILE} (the loader states a \
                 trainer saves with it)"
            ))
        })?;
        let states = SavedState::from_checkpoint_json(bytes)?;
        for s in &states {
            emit(Record::LoaderState {
                rank: s.rank,
                world: s.world,
                epoch: s.position.epoch,
                batch: s.position.batch,
                run: s.run.clone(),
            })?;
        }
        let Some(first) = states.first() else {
            return Err(not_lineage(format!(
                "{LOADER_CHECKPOINT_FILE} holds no state"
            )));
        };
        if first.manifests.is_empty() {
            return Err(not_lineage(
                "its loader states do not say where their manifests are (saved before Reel \
                 recorded it): inspect the manifest itself"
                    .into(),
            ));
        }
        let hashes = first.run.manifest_hashes();
        for (source, location) in first.manifests.iter().enumerate() {
            let manifest = open_uri(location, &node_manifest_dir());
            let recorded = hashes.get(source).map(|h| h.to_string());
            let store = first.stores.get(source).map(String::as_str);
            self.manifest(source, (location, store), recorded, manifest, emit)?;
        }
        Ok(())
    }

    /// Manifest `source` at `location`, its episodes in `store` (when its loader state
    /// recorded one).
    fn manifest(
        &self,
        source: usize,
        (location, store): (&str, Option<&str>),
        recorded_hash: Option<String>,
        opened: Result<Manifest, reel_manifest::ManifestError>,
        emit: &mut Emit<'_>,
    ) -> Result<(), LineageError> {
        let manifest = match opened {
            Ok(m) => m,
            Err(e) => {
                return emit(Record::Manifest(ManifestLineage {
                    source,
                    location: location.to_string(),
                    recorded_hash,
                    content_hash: None,
                    status: Status::Missing,
                    query: String::new(),
                    warehouse_snapshot: String::new(),
                    cdc_position: None,
                    created_at: String::new(),
                    rows: 0,
                    samples: 0,
                    problem: Some(e.to_string()),
                }));
            }
        };
        let content_hash = manifest.content_hash().to_string();
        let status = match &recorded_hash {
            None => Status::Unchecked,
            Some(h) if *h == content_hash => Status::Same,
            Some(_) => Status::Changed,
        };
        let meta = manifest.meta();
        emit(Record::Manifest(ManifestLineage {
            source,
            location: location.to_string(),
            recorded_hash,
            content_hash: Some(content_hash),
            status,
            query: meta.query.clone(),
            warehouse_snapshot: meta.warehouse_snapshot.clone(),
            cdc_position: meta.cdc_position().map(str::to_owned),
            created_at: meta.created_at.clone(),
            rows: manifest.len(),
            samples: manifest.num_samples(),
            problem: None,
        }))?;
        let store_uri = match (&self.options.store, store) {
            (Some(uri), _) => uri.clone(),
            (None, Some(uri)) => uri.to_string(),
            (None, None) => split_object_uri(location)?.0,
        };
        let store = Store::open_existing(&store_uri)?;
        let limit = self.options.limit.unwrap_or(usize::MAX);
        for row in manifest.episodes().take(limit) {
            emit(Record::Episode(self.episode(&store, source, &row)?))?;
        }
        Ok(())
    }

    /// One manifest row's episode: its canonical object checked against the recorded
    /// digest, then what its own metadata says it was made of. Only an outage is an error;
    /// a missing or unreadable object is reported in the record.
    fn episode(
        &self,
        store: &Store,
        source: usize,
        row: &reel_manifest::EpisodeRef<'_>,
    ) -> Result<EpisodeLineage, LineageError> {
        let uri = row.uri()?.to_string();
        let mut out = EpisodeLineage {
            source,
            row: row.row(),
            episode_id: row.episode_id()?.to_string(),
            uri: uri.clone(),
            recorded_digest: row.digest().map(digest_text),
            ..EpisodeLineage::default()
        };
        // Nothing there is reported; an outage (the store unreachable) stops the walk.
        let missing = |out: &mut EpisodeLineage, problem: String| {
            out.status = Status::Missing;
            out.problem = Some(problem);
        };
        let source: Box<dyn ByteSource> = if self.options.verify {
            match store.read(&uri) {
                Err(e) if is_missing(&e) => {
                    missing(&mut out, e.to_string());
                    return Ok(out);
                }
                Err(e) => return Err(e.into()),
                Ok(bytes) => {
                    let digest = object_digest(&bytes);
                    out.digest = Some(digest_text(digest));
                    out.status = match row.digest() {
                        None => Status::Unchecked,
                        Some(d) if d == digest => Status::Same,
                        Some(_) => Status::Changed,
                    };
                    Box::new(MemorySource::new(uri.clone(), bytes))
                }
            }
        } else {
            let source = store.source(&uri);
            match source.len() {
                Err(e) if is_missing(&e) => {
                    missing(&mut out, e.to_string());
                    return Ok(out);
                }
                Err(e) => return Err(e.into()),
                Ok(_) => Box::new(source),
            }
        };
        let reader = match EpisodeReader::open(source) {
            Ok(reader) => reader,
            // Bytes that are not an episode: unreadable, as good as gone.
            Err(e) if e.kind() == reel_io::ErrorKind::BadInput => {
                missing(&mut out, e.to_string());
                return Ok(out);
            }
            Err(e) => return Err(e.into()),
        };
        match EpisodeSummary::from_metadata(&uri, reader.metadata()) {
            Ok(Some(summary)) => {
                let p = &summary.provenance;
                out.pipeline_version = Some(p.pipeline_version.clone());
                out.schema_version = Some(p.schema_version);
                out.robot_software_version = Some(p.robot_software_version.clone());
                out.config_digest = Some(p.config_digest.clone());
                out.landing_key = Some(summary.landing_key.clone());
                out.landing_digest = Some(summary.landing_digest)
                    .filter(|&d| d != 0)
                    .map(digest_text);
            }
            Ok(None) => out.problem = Some("no Reel summary in its metadata".into()),
            Err(e) => out.problem = Some(e.to_string()),
        }
        Ok(out)
    }
}

fn is_missing(e: &reel_io::Error) -> bool {
    matches!(e, reel_io::Error::NotFound { .. })
}

#[cfg(test)]
mod tests {
    use reel_loader::{Loader, LoaderOptions, LoaderState, MixtureSource, SampleSpec, Sources};
    use reel_manifest::{ManifestMeta, ManifestWriter};
    use reel_pipeline::PipelineConfig;
    use reel_pipeline::test_support::SynthCorpus;
    use reel_synth::SynthConfig;

    use super::*;

    const SPEC: &str = r#"
anchor_hz = 10.0
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 5
hz = 50.0
"#;

    /// Two ingested episodes in a store, a manifest over them, and a checkpoint holding a
    /// loader's state over that manifest. Returns (store dir, manifest path, checkpoint
    /// root, the episodes' canonical keys and landing digests).
    fn fixture(dir: &Path) -> (std::path::PathBuf, Vec<(String, u64)>) {
        let spec = SampleSpec::from_toml_str(SPEC).expect("spec");
        let manifest = dir.join("train.arrow");
        let meta = ManifestMeta::new(
            "SELECT * FROM episodes",
            "wh-1+db-0/16B6C50",
            spec.sampling_rule(),
        );
        let synth = SynthConfig {
            seed: 2,
            seconds: 2.0,
            cameras: 1,
            width: 32,
            height: 24,
            ..SynthConfig::default()
        };
        let corpus = SynthCorpus::ingest(&synth, 2, dir).expect("ingests");
        corpus.write_manifest(&manifest, &meta).expect("manifest");
        let mut episodes = Vec::new();
        for e in &corpus.episodes {
            let s = &e.summary;
            assert_eq!(s.landing_digest, object_digest(&e.landing.mcap));
            episodes.push((s.canonical_key.clone(), s.landing_digest));
        }
        let store = Store::open(dir.to_str().expect("utf-8")).expect("store");
        let loader = Loader::mixture(
            vec![MixtureSource {
                manifest: Manifest::open(&manifest).expect("opens"),
                sources: Sources::Store(store),
                weight: 1.0,
                location: Some(manifest.display().to_string()),
            }],
            &spec,
            LoaderOptions::default(),
        )
        .expect("loader");
        let states = [loader.saved_state(LoaderState::at(1, 2))];
        let root = dir.join("checkpoints");
        CheckpointDir::open(&root)
            .expect("root")
            .save(
                40,
                &[
                    ("model.bin", b"weights".as_slice()),
                    (
                        LOADER_CHECKPOINT_FILE,
                        &SavedState::to_checkpoint_json(&states),
                    ),
                ],
            )
            .expect("saves");
        (root, episodes)
    }

    fn walk(path: &Path, options: LineageOptions) -> Vec<Record> {
        let mut records = Vec::new();
        Lineage::new(options)
            .walk(path, &mut |r| {
                records.push(r);
                Ok(())
            })
            .expect("walks");
        records
    }

    fn episodes(records: &[Record]) -> Vec<&EpisodeLineage> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::Episode(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    fn manifest_of(records: &[Record]) -> &ManifestLineage {
        records
            .iter()
            .find_map(|r| match r {
                Record::Manifest(m) => Some(m),
                _ => None,
            })
            .expect("a manifest record")
    }

    #[test]
    fn a_checkpoint_leads_to_its_manifest_episodes_and_landing_recordings() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (root, made) = fixture(dir.path());
        let records = walk(&root, LineageOptions::default());
        assert!(
            matches!(&records[0], Record::Checkpoint { step: 40, files, .. } if files.contains(&LOADER_CHECKPOINT_FILE.to_string()))
        );
        assert!(matches!(
            &records[1],
            Record::LoaderState {
                epoch: 1,
                batch: 2,
                rank: 0,
                world: 1,
                ..
            }
        ));
        let m = manifest_of(&records);
        assert_eq!(m.status, Status::Same);
        assert_eq!(m.query, "SELECT * FROM episodes");
        assert_eq!(m.cdc_position.as_deref(), Some("0/16B6C50"));
        assert_eq!(m.rows, 2);
        let eps = episodes(&records);
        assert_eq!(eps.len(), 2);
        for (e, (key, landing_digest)) in eps.iter().zip(&made) {
            assert_eq!(e.status, Status::Same, "{e:?}");
            assert_eq!(&e.uri, key);
            assert_eq!(e.digest, e.recorded_digest);
            assert_eq!(e.landing_digest, Some(digest_text(*landing_digest)));
            assert_eq!(
                e.pipeline_version.as_deref(),
                Some(PipelineConfig::default().pipeline_version.as_str())
            );
            assert_eq!(e.schema_version, Some(reel_pipeline::SCHEMA_VERSION));
            assert!(e.landing_key.as_deref().is_some_and(|k| !k.is_empty()));
            assert!(e.problem.is_none());
        }
        // Every record reads as one line and one JSON object.
        for r in &records {
            assert!(!r.text().contains('\n'));
            let json = serde_json::to_value(r).expect("json");
            assert!(json["kind"].is_string());
        }
    }

    #[test]
    fn what_was_replaced_or_removed_since_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (root, made) = fixture(dir.path());
        // Episode 0's object replaced by episode 1's bytes; episode 1's removed.
        let (first, second) = (dir.path().join(&made[0].0), dir.path().join(&made[1].0));
        std::fs::copy(&second, &first).expect("replaces");
        std::fs::remove_file(&second).expect("removes");
        let records = walk(&root, LineageOptions::default());
        let eps = episodes(&records);
        assert_eq!(eps[0].status, Status::Changed);
        assert_ne!(eps[0].digest, eps[0].recorded_digest);
        assert_eq!(eps[1].status, Status::Missing);
        assert!(eps[1].problem.is_some());
        // Without reading whole objects nothing is checked, the metadata is still read.
        let quick = walk(
            &root,
            LineageOptions {
                verify: false,
                limit: Some(1),
                store: None,
            },
        );
        let eps = episodes(&quick);
        assert_eq!(eps.len(), 1);
        assert_eq!(eps[0].status, Status::Unchecked);
        assert!(eps[0].pipeline_version.is_some());
        // A manifest rewritten under the same name is another manifest.
        let manifest = dir.path().join("train.arrow");
        let other = Manifest::open(&manifest).expect("opens");
        let row = other.episode(0).expect("row");
        let meta = ManifestMeta::new("SELECT 1", "wh-2", other.meta().sampling);
        let (id, uri) = (
            row.episode_id().expect("id").to_string(),
            row.uri().expect("uri").to_string(),
        );
        let (start, end) = (row.start_ns(), row.end_ns());
        drop(other);
        let mut writer = ManifestWriter::create(&manifest, &meta).expect("manifest");
        writer
            .push(&reel_manifest::ManifestRow {
                episode_id: &id,
                uri: &uri,
                start_ns: start,
                end_ns: end,
                ..Default::default()
            })
            .expect("row");
        writer.finish().expect("finishes");
        let records = walk(&root, LineageOptions::default());
        assert_eq!(manifest_of(&records).status, Status::Changed);
        // A folder that is neither is refused by name.
        let err = Lineage::new(LineageOptions::default())
            .walk(&dir.path().join("canonical"), &mut |_| Ok(()))
            .expect_err("no checkpoint");
        assert_eq!(err.kind(), reel_io::ErrorKind::BadInput);
    }
}
