//! The DAG engine on a local store: full runs, resume from artifacts, replay, profiles,
//! provenance and stale listing, quarantine.

use std::collections::BTreeSet;
use std::sync::Mutex;

use arrow_array::{Array, StringArray};
use reel_io::{ByteSource, Kinded, Store};
use reel_mcap::EpisodeReader;
use reel_pipeline::{
    BatchSpec, EpisodeStatus, Event, LabelSet, Pipeline, PipelineConfig, Profile, RunOptions, Step,
    stale_episodes,
};
use reel_synth::{FaultKind, FaultRates, SynthConfig};

struct Fixture {
    _dir: tempfile::TempDir,
    landing: Store,
    store: Store,
    keys: Vec<String>,
    ids: Vec<String>,
}

fn fixture(episodes: u64) -> Fixture {
    reel_video::quiet_ffmpeg_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let synth = SynthConfig {
        seconds: 2.0,
        cameras: 2,
        width: 96,
        height: 72,
        faults: FaultRates::none().with(FaultKind::CorruptFrame, 30.0),
        ..SynthConfig::default()
    };
    let landing_dir = dir.path().join("landing");
    let mut keys = Vec::new();
    let mut ids = Vec::new();
    for i in 0..episodes {
        let written = reel_synth::write_episode(&synth, i, &landing_dir).expect("synth");
        ids.push(written.report.episode_id.clone());
        keys.push(format!("{}.mcap", written.report.episode_id));
    }
    std::fs::create_dir_all(&landing_dir).expect("landing dir");
    // A landing file that is not an MCAP at all.
    std::fs::write(
        landing_dir.join("ep-broken.mcap"),
        b"\x89MCAP0\r\ntruncated",
    )
    .expect("write");
    keys.push("ep-broken.mcap".into());
    let landing = Store::open(landing_dir.to_str().expect("utf-8")).expect("landing");
    let store = Store::open(dir.path().join("store").to_str().expect("utf-8")).expect("store");
    Fixture {
        _dir: dir,
        landing,
        store,
        keys,
        ids,
    }
}

fn config(version: &str) -> PipelineConfig {
    PipelineConfig {
        pipeline_version: version.into(),
        ..PipelineConfig::default()
    }
}

/// Runs and collects the episode events of `step`.
fn run(
    pipeline: &Pipeline,
    batch: &BatchSpec,
    options: &RunOptions,
    step: Step,
) -> Vec<(String, EpisodeStatus)> {
    let events = Mutex::new(Vec::new());
    pipeline
        .run(batch, options, &|e| {
            if let Event::Episode(e) = e
                && e.step == step
            {
                events
                    .lock()
                    .expect("lock")
                    .push((e.landing_key.clone(), e.status));
            }
        })
        .expect("runs");
    let mut events = events.into_inner().expect("lock");
    events.sort_by(|a, b| a.0.cmp(&b.0));
    events
}

/// The episode ids of the current version of the warehouse table `table` in `store`,
/// sorted (an id twice stays twice).
fn table_ids(store: &Store, table: &str) -> Vec<String> {
    let warehouse = reel_warehouse::Warehouse::for_store(store).expect("warehouse");
    let table = warehouse.table(table).expect("table");
    if !table.exists().expect("lists") {
        return Vec::new();
    }
    let rows = table
        .version(None)
        .expect("version")
        .read(Some(&["episode_id"]))
        .expect("rows");
    let col = rows
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("utf8");
    let mut ids: Vec<String> = (0..col.len()).map(|i| col.value(i).to_owned()).collect();
    ids.sort();
    ids
}

fn episodes(store: &Store) -> Vec<String> {
    table_ids(store, reel_warehouse::episodes::EPISODES)
}

fn ingestions(store: &Store) -> Vec<String> {
    table_ids(store, reel_warehouse::episodes::INGESTIONS)
}

#[test]
fn full_run_then_resume_replay_profiles_and_stale() {
    let f = fixture(3);
    let batch = BatchSpec {
        key: "b0".into(),
        landing_keys: f.keys.clone(),
    };
    let pipeline =
        Pipeline::new(f.landing.clone(), f.store.clone(), config("1.0")).expect("pipeline");
    let full = RunOptions::default();

    // First run: every good episode done, the broken one quarantined with a reason.
    let events = run(&pipeline, &batch, &full, Step::Canonical);
    let done = events.iter().filter(|e| e.1 == EpisodeStatus::Done).count();
    assert_eq!(done, 3, "{events:?}");
    assert!(events.contains(&("ep-broken.mcap".into(), EpisodeStatus::Quarantined)));
    let quarantine: serde_json::Value =
        serde_json::from_slice(&f.store.read("quarantine/ep-broken.json").expect("record"))
            .expect("json");
    assert!(
        quarantine["reason"]
            .as_str()
            .expect("reason")
            .contains("ep-broken.mcap")
    );

    // Canonical episodes carry provenance and their summary; they read back.
    for id in &f.ids {
        let source = f.store.source(&format!("canonical/{id}.mcap"));
        let reader = EpisodeReader::open(&source as &dyn ByteSource).expect("canonical");
        let meta = &reader.metadata()["episode"];
        assert_eq!(meta["reel.pipeline_version"], "1.0");
        assert_eq!(
            meta["reel.schema_version"],
            reel_pipeline::SCHEMA_VERSION.to_string()
        );
        assert!(!meta["robot_software_version"].is_empty());
        let summary: serde_json::Value =
            serde_json::from_str(&meta["reel.summary"]).expect("summary");
        // Injected corrupt frames are found.
        let sidecar: reel_synth::FaultLog = serde_json::from_slice(
            &f.landing
                .read(&format!("{id}.faults.json"))
                .expect("sidecar"),
        )
        .expect("json");
        let findings = summary["qc"]["findings"].as_array().expect("findings");
        assert_eq!(
            findings
                .iter()
                .filter(|f| f["kind"] == "corrupt_frame")
                .count(),
            sidecar.faults.len()
        );
        assert!(reader.groups().contains_key("cameras") && reader.groups().contains_key("proprio"));
    }
    // One warehouse row per good episode, in both episode tables; labels for each.
    let mut want = f.ids.clone();
    want.sort();
    assert_eq!(episodes(&f.store), want);
    assert_eq!(ingestions(&f.store), want);
    for id in &f.ids {
        let labels: LabelSet = serde_json::from_slice(
            &f.store
                .read(&format!("labels/motion_segments/{id}.json"))
                .expect("labels"),
        )
        .expect("json");
        assert!(!labels.segments.is_empty());
        assert_eq!(labels.provenance.pipeline_version, "1.0");
    }

    // Second run: every step is recorded complete and skipped.
    let skipped = Mutex::new(Vec::new());
    let report = pipeline
        .run(&batch, &full, &|e| {
            if let Event::StepSkipped { step, .. } = e {
                skipped.lock().expect("lock").push(*step);
            }
        })
        .expect("reruns");
    assert_eq!(skipped.into_inner().expect("lock"), Step::ALL);
    assert_eq!(report.quarantined.len(), 1);

    // A lost completion record: artifacts are reused, nothing recomputed.
    std::fs::remove_file(
        f.store
            .local_root()
            .expect("local")
            .join("state/canonical/b0@1.0.json"),
    )
    .expect("rm");
    let events = run(&pipeline, &batch, &full, Step::Canonical);
    assert!(
        events.iter().all(|e| e.1 != EpisodeStatus::Done),
        "{events:?}"
    );
    // The same for the warehouse's commit: a run killed between committing and recording
    // it finds its commit made, and reports reuse, not a second ingestion.
    std::fs::remove_file(
        f.store
            .local_root()
            .expect("local")
            .join("state/index/b0@1.0.json"),
    )
    .expect("rm");
    let events = run(&pipeline, &batch, &full, Step::Index);
    let reused = events
        .iter()
        .filter(|e| e.1 == EpisodeStatus::Reused)
        .count();
    assert_eq!(reused, 3, "{events:?}");
    assert!(
        events.iter().all(|e| e.1 != EpisodeStatus::Done),
        "{events:?}"
    );
    assert_eq!(episodes(&f.store), want);
    assert_eq!(ingestions(&f.store), want, "nothing ingested twice");

    // Replay one episode: only it is recomputed.
    let only = RunOptions {
        profile: Profile::Full,
        replay: true,
        only: Some(BTreeSet::from([f.ids[1].clone()])),
    };
    let events = run(&pipeline, &batch, &only, Step::Canonical);
    let recomputed: Vec<&String> = events
        .iter()
        .filter(|e| e.1 == EpisodeStatus::Done)
        .map(|e| &e.0)
        .collect();
    assert_eq!(recomputed, [&f.keys[1]]);

    // Nothing is stale at 1.0; everything at 2.0.
    assert!(stale_episodes(&f.store, "1.0").expect("stale").is_empty());
    assert_eq!(stale_episodes(&f.store, "2.0").expect("stale").len(), 3);

    // Metadata profile at 2.0: rows re-indexed from the canonical episodes, no encoding.
    let v2 = Pipeline::new(f.landing.clone(), f.store.clone(), config("2.0")).expect("pipeline");
    let metadata = RunOptions {
        profile: Profile::Metadata,
        ..RunOptions::default()
    };
    let report = v2.run(&batch, &metadata, &|_| {}).expect("reindex");
    assert_eq!(report.steps.len(), 1);
    assert_eq!(report.steps[0].done, 3);
    assert_eq!(report.steps[0].missing, 1); // the quarantined one
    // Re-indexed: a second ingestion of each episode, which replaces its row.
    assert_eq!(episodes(&f.store), want);
    let twice: Vec<String> = want
        .iter()
        .flat_map(|id| [id.clone(), id.clone()])
        .collect();
    assert_eq!(ingestions(&f.store), twice);
    // Rows keep the provenance of the canonical data: still stale at 2.0.
    assert_eq!(stale_episodes(&f.store, "2.0").expect("stale").len(), 3);

    // A full 2.0 run of two episodes leaves exactly the third stale.
    let part = BatchSpec {
        key: "b1".into(),
        landing_keys: f.keys[..2].to_vec(),
    };
    let events = run(&v2, &part, &full, Step::Canonical);
    assert_eq!(
        events.iter().filter(|e| e.1 == EpisodeStatus::Done).count(),
        2
    );
    let stale = stale_episodes(&f.store, "2.0").expect("stale");
    assert_eq!(stale.len(), 1);
    assert_eq!(stale[0].episode_id, f.ids[2]);
    assert_eq!(stale[0].pipeline_version, "1.0");

    // Relabel: labels only; a label set of another pipeline version is redone.
    let relabel = RunOptions {
        profile: Profile::Relabel,
        ..RunOptions::default()
    };
    let events = run(&v2, &batch, &relabel, Step::Enrich);
    let statuses: Vec<EpisodeStatus> = events.iter().map(|e| e.1).collect();
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == EpisodeStatus::Missing)
            .count(),
        1
    );
    // The two 2.0 episodes got 2.0 labels in their full run: reused; the 1.0 one is redone.
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == EpisodeStatus::Reused)
            .count(),
        2,
        "{events:?}"
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == EpisodeStatus::Done)
            .count(),
        1,
        "{events:?}"
    );
}

#[test]
fn one_episode_trigger_runs_the_same_steps() {
    let f = fixture(1);
    let pipeline =
        Pipeline::new(f.landing.clone(), f.store.clone(), config("1.0")).expect("pipeline");
    let batch = BatchSpec::single(&f.keys[0]);
    let report = pipeline
        .run(&batch, &RunOptions::default(), &|_| {})
        .expect("runs");
    assert_eq!(report.steps.len(), 3);
    assert_eq!(report.steps[0].done, 1);
    assert!(report.warehouse_commit.is_some());
    assert_eq!(episodes(&f.store), [f.ids[0].clone()]);
}

#[test]
fn a_partial_run_leaves_later_steps_open_for_the_rest() {
    let f = fixture(2);
    let pipeline =
        Pipeline::new(f.landing.clone(), f.store.clone(), config("1.0")).expect("pipeline");
    let batch = BatchSpec {
        key: "b0".into(),
        landing_keys: f.keys.clone(),
    };
    // First only one episode (and the broken one, which is quarantined).
    let first = RunOptions {
        only: Some(BTreeSet::from([f.ids[0].clone(), "ep-broken".to_owned()])),
        ..RunOptions::default()
    };
    let report = pipeline.run(&batch, &first, &|_| {}).expect("runs");
    assert_eq!(report.steps[0].done, 1);
    assert_eq!(report.steps[2].missing, 2);
    assert_eq!(episodes(&f.store), [f.ids[0].clone()]);
    // Then everything: no step counts as complete until the second episode is in.
    let report = pipeline
        .run(&batch, &RunOptions::default(), &|_| {})
        .expect("runs");
    assert!(report.steps.iter().all(|s| !s.skipped), "{report:?}");
    assert_eq!(report.steps[0].done, 1);
    assert_eq!(report.steps[0].reused, 1);
    let mut want = f.ids.clone();
    want.sort();
    assert_eq!(episodes(&f.store), want);
    // And now all three steps are complete.
    let report = pipeline
        .run(&batch, &RunOptions::default(), &|_| {})
        .expect("runs");
    assert!(report.steps.iter().all(|s| s.skipped), "{report:?}");
}

#[test]
fn a_planned_episode_missing_from_landing_is_quarantined() {
    let f = fixture(0);
    let pipeline =
        Pipeline::new(f.landing.clone(), f.store.clone(), config("1.0")).expect("pipeline");
    let report = pipeline
        .run(
            &BatchSpec::single("ep-gone.mcap"),
            &RunOptions::default(),
            &|_| {},
        )
        .expect("runs");
    assert_eq!(report.quarantined.len(), 1);
    assert!(
        report.quarantined[0].reason.contains("ep-gone.mcap"),
        "{:?}",
        report.quarantined
    );
    assert!(
        report.quarantined[0]
            .reason
            .contains("not in the landing store")
    );
    assert!(report.warehouse_commit.is_none());
}

/// Objects under `prefix`, recursively.
fn objects(store: &Store, prefix: &str) -> Vec<String> {
    store.list_recursive(prefix).expect("list")
}

#[test]
fn a_worker_without_the_h264_encoder_fails_the_batch_and_quarantines_nothing() {
    let f = fixture(2);
    let batch = BatchSpec {
        key: "b0".into(),
        landing_keys: f.keys[..2].to_vec(),
    };
    // A worker whose FFmpeg has no encoder of that name, as one built without libx264.
    let mut lacking = config("1.0");
    lacking.encode.encoder = "libx264_not_in_this_build".into();
    let pipeline = Pipeline::new(f.landing.clone(), f.store.clone(), lacking).expect("pipeline");
    let err = pipeline
        .run(&batch, &RunOptions::default(), &|_| {})
        .expect_err("no encoder, no ingest");
    assert_eq!(err.kind(), reel_pipeline::ErrorKind::Environment, "{err}");
    assert!(
        err.to_string().contains("libx264_not_in_this_build"),
        "{err}"
    );
    assert!(
        objects(&f.store, "quarantine/").is_empty(),
        "nothing quarantined"
    );
    assert!(
        objects(&f.store, "state/").is_empty(),
        "nothing recorded as done"
    );
    assert!(
        objects(&f.store, "episodes/").is_empty(),
        "no warehouse rows"
    );

    // The same batch on a good worker ingests everything.
    let good = Pipeline::new(f.landing.clone(), f.store.clone(), config("1.0")).expect("pipeline");
    let events = run(&good, &batch, &RunOptions::default(), Step::Canonical);
    assert_eq!(
        events,
        f.keys[..2]
            .iter()
            .map(|k| (k.clone(), EpisodeStatus::Done))
            .collect::<Vec<_>>()
    );
    let mut want = f.ids[..2].to_vec();
    want.sort();
    assert_eq!(episodes(&f.store), want);
}

#[test]
fn two_recordings_under_one_episode_id_never_become_one() {
    reel_video::quiet_ffmpeg_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let synth = |seconds| SynthConfig {
        seconds,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    // Two robots' recorders (or one after a clock reset) reuse an episode id: same index,
    // different content, in two landing folders. A third folder holds a byte copy of
    // the first.
    let first = reel_synth::generate_episode(&synth(1.0), 0).expect("synth");
    let second = reel_synth::generate_episode(&synth(1.2), 0).expect("synth");
    assert_eq!(first.name, second.name);
    assert_ne!(first.mcap, second.mcap);
    let landing_dir = dir.path().join("landing");
    let id = first.name.clone();
    let key = |folder: &str| format!("{folder}/{id}.mcap");
    for (folder, bytes) in [
        ("robot-a", &first.mcap),
        ("robot-b", &second.mcap),
        ("copy", &first.mcap),
    ] {
        std::fs::create_dir_all(landing_dir.join(folder)).expect("dir");
        std::fs::write(landing_dir.join(key(folder)), bytes).expect("write");
    }
    let landing = Store::open(landing_dir.to_str().expect("utf-8")).expect("landing");
    let store = Store::open(dir.path().join("store").to_str().expect("utf-8")).expect("store");
    let pipeline = Pipeline::new(landing, store.clone(), config("1.0")).expect("pipeline");

    // Separate batches, as two workers would run them; the first claims the id.
    let mut reports = Vec::new();
    for (batch, folder) in [("b0", "robot-a"), ("b1", "robot-b"), ("b2", "copy")] {
        let spec = BatchSpec {
            key: batch.into(),
            landing_keys: vec![key(folder)],
        };
        reports.push(
            pipeline
                .run(&spec, &RunOptions::default(), &|_| {})
                .expect("runs"),
        );
    }
    assert!(reports[0].quarantined.is_empty());
    let collided = &reports[1].quarantined;
    assert_eq!(collided.len(), 1, "{collided:?}");
    assert!(
        collided[0].reason.contains(&key("robot-a"))
            && collided[0].reason.contains("another recording"),
        "{}",
        collided[0].reason
    );
    let copied = &reports[2].quarantined;
    assert_eq!(copied.len(), 1, "{copied:?}");
    assert!(
        copied[0].reason.contains("same bytes"),
        "{}",
        copied[0].reason
    );

    // One canonical episode, made from the first recording, and one warehouse row for it.
    let canonical = store.source(&format!("canonical/{id}.mcap"));
    let reader = EpisodeReader::open(&canonical as &dyn ByteSource).expect("canonical");
    let summary = &reader.metadata()["episode"]["reel.summary"];
    assert!(
        summary.contains(&format!("\"landing_key\":\"{}\"", key("robot-a"))),
        "{summary}"
    );
    assert_eq!(episodes(&store), std::slice::from_ref(&id));
    assert_eq!(
        ingestions(&store),
        std::slice::from_ref(&id),
        "batches b1 and b2 write no row for a recording they did not ingest"
    );
    // Running the second batch again changes nothing.
    let again = pipeline
        .run(
            &BatchSpec {
                key: "b1".into(),
                landing_keys: vec![key("robot-b")],
            },
            &RunOptions::default(),
            &|_| {},
        )
        .expect("runs");
    assert_eq!(again.quarantined.len(), 1);
}

#[test]
fn a_run_removes_the_stale_temporaries_of_killed_runs_and_only_those() {
    let f = fixture(1);
    let root = f._dir.path().join("store");
    let long_ago = std::time::SystemTime::now() - reel_io::STALE_ANYWAY * 2;
    let plant = |key: &str, modified: std::time::SystemTime| {
        let path = root.join(key);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        let file = std::fs::File::create(&path).expect("create");
        file.set_modified(modified).expect("mtime");
        path
    };
    // What killed writers of each kind of output leave, a day old, in the store's one
    // folder of temporaries.
    let stale: Vec<_> = [
        ".ep-x.mcap.tmp-4000001-1-0",
        ".ep-x.json.tmp-4000001-1-0",
        ".part-b-1.0.parquet.tmp-4000001-1-0",
        ".ep-x.json.tmp-4000002-1-0",
        ".b@1.0.json.tmp-4000001-1-0",
    ]
    .into_iter()
    .map(|name| plant(&format!("{}/{name}", reel_io::TEMPORARIES), long_ago))
    .collect();
    // A write in flight: this process is its writer, and it is fresh.
    let live = plant(
        &format!(
            "{}/.ep-y.mcap.tmp-{}-1-0",
            reel_io::TEMPORARIES,
            std::process::id()
        ),
        std::time::SystemTime::now(),
    );
    let pipeline =
        Pipeline::new(f.landing.clone(), f.store.clone(), config("1.0")).expect("pipeline");
    pipeline
        .run(
            &BatchSpec::single(&f.keys[0]),
            &RunOptions::default(),
            &|_| {},
        )
        .expect("runs");
    for path in &stale {
        assert!(!path.exists(), "{} was left", path.display());
    }
    assert!(live.exists(), "a live writer's temporary was removed");
}
