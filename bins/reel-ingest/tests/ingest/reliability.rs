//! Reliability of `reel-ingest` as a process: SIGKILLed at random points and resumed,
//! and several processes on disjoint and overlapping batches at once against one store,
//! on a local folder and on a real S3-compatible server on loopback.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{BIN, events, warehouse, write_plan};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use reel_io::{ByteSource, Store, StoreOptions};
use reel_pipeline::BatchTarget;
use reel_synth::{FaultRates, SynthConfig};

/// Writes `n` small landing episodes and one broken file into `dir`; returns the good ids.
fn landing(dir: &Path, n: u64, seconds: f64) -> Vec<String> {
    let synth = SynthConfig {
        seconds,
        cameras: 2,
        width: 96,
        height: 72,
        faults: FaultRates::uniform(3.0),
        ..SynthConfig::default()
    };
    let ids = (0..n)
        .map(|i| {
            reel_synth::write_episode(&synth, i, dir)
                .expect("synth")
                .report
                .episode_id
        })
        .collect();
    std::fs::write(dir.join("ep-zz-broken.mcap"), vec![0x89; 300]).expect("write");
    ids
}

fn ingest(
    plan: &str,
    batch: usize,
    store: &str,
    env: &[(String, String)],
    threads: usize,
) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "--plan",
        plan,
        "--batch",
        &batch.to_string(),
        "--store",
        store,
        "--threads",
        &threads.to_string(),
        "-q",
    ])
    .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// Every visible object is complete: canonical MCAPs open, JSON (records, table commits)
/// parses, Parquet reads.
/// Returns the number of hidden temporary files a killed writer left.
fn check_no_partial_objects(root: &Path) -> usize {
    let store = Store::open(root.to_str().expect("utf-8")).expect("store");
    let mut temps = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name.starts_with('.') {
                temps += 1;
                continue;
            }
            let key = path
                .strip_prefix(root)
                .expect("inside")
                .to_string_lossy()
                .into_owned();
            if name.ends_with(".mcap") {
                let source = store.source(&key);
                reel_mcap::EpisodeReader::open(&source as &dyn ByteSource)
                    .unwrap_or_else(|e| panic!("partial canonical {key}: {e}"));
            } else if name.ends_with(".json") || name == "_last_checkpoint" {
                // A record, or a table's commit: JSON values, one a line.
                let bytes = std::fs::read(&path).expect("read");
                for value in
                    serde_json::Deserializer::from_slice(&bytes).into_iter::<serde_json::Value>()
                {
                    value.unwrap_or_else(|e| panic!("partial record {key}: {e}"));
                }
            } else if name.ends_with(".parquet") {
                ParquetRecordBatchReaderBuilder::try_new(store.read(&key).expect("read"))
                    .unwrap_or_else(|e| panic!("partial part {key}: {e}"));
            } else {
                panic!("unexpected object {key}");
            }
        }
    }
    temps
}

#[test]
fn sigkill_at_random_points_then_resume_processes_each_episode_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let landing_dir = dir.path().join("landing");
    let ids = landing(&landing_dir, 10, 3.0);
    let landing_uri = landing_dir.to_string_lossy().into_owned();
    let landing_store = Store::open(&landing_uri).expect("landing");
    let (plan, _) = write_plan(
        &landing_uri,
        &landing_store,
        dir.path(),
        "plan.json",
        BatchTarget::Count(1),
    );
    let store_dir = dir.path().join("store");
    let store_uri = store_dir.to_string_lossy().into_owned();

    // Deterministic "random" kill points (xorshift), spread over a run's lifetime.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut all_events = Vec::new();
    let mut interrupted = 0;
    for _ in 0..10 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Kill after a random number (0–3) of freshly computed episodes plus a few random
        // milliseconds, so that kills land inside every step, mid-write included.
        let after_done = (state % 4) as usize;
        let extra = Duration::from_millis(state / 4 % 40);
        let mut child = ingest(&plan, 0, &store_uri, &[], 1)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut seen = String::new();
        let mut line = String::new();
        let mut done = 0;
        while done < after_done {
            line.clear();
            if stdout.read_line(&mut line).expect("read") == 0 {
                break;
            }
            done += usize::from(line.contains(r#""status":"done""#));
            seen.push_str(&line);
        }
        std::thread::sleep(if after_done == 0 {
            Duration::from_millis(300) + extra
        } else {
            extra
        });
        child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
        stdout.read_to_string(&mut seen).expect("read");
        child.wait().expect("wait");
        let finished = seen.contains("batch_report");
        interrupted += usize::from(!finished);
        eprintln!(
            "killed after {after_done} done + {extra:?}: {} episode lines, finished: {finished}",
            events(seen.as_bytes()).len()
        );
        all_events.extend(events(seen.as_bytes()));
    }
    assert!(
        interrupted >= 3,
        "only {interrupted} runs were cut short; kill earlier"
    );
    let out = ingest(&plan, 0, &store_uri, &[], 1)
        .output()
        .expect("final run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    all_events.extend(events(&out.stdout));

    // Each episode was computed at most once per step; a kill between writing an artifact
    // and reporting it shows up as a reuse later, never as a second computation.
    let mut done: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (step, id, status) in &all_events {
        if status == "done" {
            *done.entry((step.clone(), id.clone())).or_default() += 1;
        }
    }
    assert!(done.values().all(|&n| n == 1), "{done:?}");
    let store = Store::open(&store_uri).expect("store");
    for id in &ids {
        assert!(
            store.len_of(&format!("canonical/{id}.mcap")).is_ok(),
            "{id} missing"
        );
    }
    assert!(store.read("quarantine/ep-zz-broken.json").is_ok());
    let temps = check_no_partial_objects(&store_dir);
    eprintln!("{temps} temporary files left by killed writers");

    // One row per good episode, in each table: no ingestion twice, whatever was killed.
    let tables = warehouse(&store);
    for rows in [&tables.episodes, &tables.ingestions] {
        let ids_seen: Vec<&String> = rows.iter().map(|r| &r.0).collect();
        let unique: BTreeSet<&String> = ids_seen.iter().copied().collect();
        assert_eq!(ids_seen.len(), unique.len(), "duplicate rows: {tables:?}");
        assert_eq!(unique, ids.iter().collect());
    }
}

/// Starts several processes at once on two plans over the same landing data (batches of
/// one plan are disjoint, the other plan's overlap them) and checks the shared store.
fn concurrent_batches(
    landing_uri: &str,
    landing_store: &Store,
    store_uri: &str,
    env: &[(String, String)],
    ids: &[String],
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (plan_a, a) = write_plan(
        landing_uri,
        landing_store,
        dir.path(),
        "a.json",
        BatchTarget::Count(2),
    );
    let (plan_b, b) = write_plan(
        landing_uri,
        landing_store,
        dir.path(),
        "b.json",
        BatchTarget::Count(3),
    );
    let mut children = Vec::new();
    for (plan, batches) in [(&plan_a, a.batches.len()), (&plan_b, b.batches.len())] {
        for i in 0..batches {
            children.push(ingest(plan, i, store_uri, env, 2).spawn().expect("spawn"));
        }
    }
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let store = Store::open_with(
        store_uri,
        &StoreOptions {
            access_key_id: env
                .iter()
                .find(|e| e.0 == "AWS_ACCESS_KEY_ID")
                .map(|e| e.1.clone()),
            secret_access_key: env
                .iter()
                .find(|e| e.0 == "AWS_SECRET_ACCESS_KEY")
                .map(|e| e.1.clone()),
            retries: None,
        },
    )
    .expect("store");
    // Every batch of both plans committed every step.
    for plan in [&a, &b] {
        for i in 0..plan.batches.len() {
            for step in ["canonical", "enrich", "index"] {
                let key = format!(
                    "state/{step}/{}@{}.json",
                    plan.batch_key(i),
                    reel_pipeline::PIPELINE_VERSION
                );
                assert!(store.read(&key).is_ok(), "{key} missing");
            }
        }
    }
    for id in ids {
        let source = store.source(&format!("canonical/{id}.mcap"));
        reel_mcap::EpisodeReader::open(&source as &dyn ByteSource)
            .expect("complete canonical episode");
    }
    // Every episode was ingested once per plan (two plans), and `episodes` holds its
    // newest ingestion, once, whichever commit landed last.
    let tables = warehouse(&store);
    let mut ingested: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (id, at) in &tables.ingestions {
        ingested.entry(id).or_default().push(*at);
    }
    assert_eq!(ingested.len(), ids.len());
    assert_eq!(tables.episodes.len(), ids.len(), "one row per episode");
    for (id, at) in &tables.episodes {
        let ats = &ingested[id.as_str()];
        assert_eq!(ats.len(), 2, "{id}");
        assert_eq!(Some(at), ats.iter().max(), "{id}: not its newest ingestion");
    }
}

#[test]
fn concurrent_overlapping_batches_on_a_local_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let landing_dir = dir.path().join("landing");
    let mut ids = landing(&landing_dir, 6, 2.0);
    std::fs::remove_file(landing_dir.join("ep-zz-broken.mcap")).expect("rm");
    ids.sort();
    let landing_uri = landing_dir.to_string_lossy().into_owned();
    let landing_store = Store::open(&landing_uri).expect("landing");
    let store_dir = dir.path().join("store");
    concurrent_batches(
        &landing_uri,
        &landing_store,
        &store_dir.to_string_lossy(),
        &[],
        &ids,
    );
    check_no_partial_objects(&store_dir);
}

#[test]
fn concurrent_overlapping_batches_on_s3() {
    let server = reel_io::test_support::S3Server::start("reel").expect("s3s-fs");
    let dir = tempfile::tempdir().expect("tempdir");
    let local = dir.path().join("landing");
    let ids = landing(&local, 6, 2.0);
    std::fs::remove_file(local.join("ep-zz-broken.mcap")).expect("rm");
    let landing_store = server.store("reel", "landing").expect("landing");
    for entry in std::fs::read_dir(&local).expect("dir") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_owned();
        landing_store
            .write_atomic(&name, std::fs::read(&path).expect("read"))
            .expect("upload");
    }
    let options = server.options();
    let env = vec![
        (
            "AWS_ACCESS_KEY_ID".to_owned(),
            options.access_key_id.clone().unwrap_or_default(),
        ),
        (
            "AWS_SECRET_ACCESS_KEY".to_owned(),
            options.secret_access_key.clone().unwrap_or_default(),
        ),
    ];
    concurrent_batches(
        &server.uri("reel", "landing"),
        &landing_store,
        &server.uri("reel", "store"),
        &env,
        &ids,
    );
}
