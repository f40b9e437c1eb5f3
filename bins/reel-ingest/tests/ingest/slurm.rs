//! `docs/ingest/slurm-array.sh` run for real on the one-node Slurm cluster of
//! `scripts/slurm.sh` (started here when it is not running; a machine without Slurm fails
//! this test, it does not skip it): four array tasks, two at a time, each finding its
//! batch through `$SLURM_ARRAY_TASK_ID`; one task cancelled mid-run (`scancel`) and
//! requeued (`scontrol requeue`), its rerun resuming from the batch's completion records;
//! every landing episode in the warehouse exactly once; every task's JSON lines read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{BIN, events, warehouse, write_plan};
use reel_io::Store;
use reel_pipeline::BatchTarget;
use reel_synth::SynthConfig;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The cluster's `SLURM_CONF`, the cluster started if it is not running.
fn slurm() -> String {
    let script = repo().join("scripts/slurm.sh");
    let out = Command::new(&script)
        .arg("start")
        .output()
        .expect("slurm.sh");
    assert!(
        out.status.success(),
        "scripts/slurm.sh start failed (run scripts/setup.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = Command::new(&script)
        .arg("env")
        .output()
        .expect("slurm.sh env");
    String::from_utf8_lossy(&env.stdout)
        .trim()
        .trim_start_matches("export SLURM_CONF=")
        .to_owned()
}

/// Runs a Slurm client command against the cluster; its stdout.
fn client(conf: &str, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .env("SLURM_CONF", conf)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `scontrol show job` of one array task, as key=value pairs.
fn job(conf: &str, id: &str) -> BTreeMap<String, String> {
    client(conf, "scontrol", &["show", "job", "-o", id])
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_slurm_array_ingests_every_episode_once_through_a_cancelled_and_requeued_task() {
    let conf = slurm();
    let dir = tempfile::tempdir().expect("tempdir");
    let landing_dir = dir.path().join("landing");
    let synth = SynthConfig {
        seconds: 4.0,
        cameras: 2,
        width: 320,
        height: 240,
        ..SynthConfig::default()
    };
    let ids: Vec<String> = (0..16)
        .map(|i| {
            reel_synth::write_episode(&synth, i, &landing_dir)
                .expect("synth")
                .report
                .episode_id
        })
        .collect();
    let landing_uri = landing_dir.to_string_lossy().into_owned();
    let (plan, planned) = write_plan(
        &landing_uri,
        &Store::open(&landing_uri).expect("landing"),
        dir.path(),
        "plan.json",
        BatchTarget::Count(4),
    );
    assert_eq!(planned.batches.len(), 4);
    let store_dir = dir.path().join("store");
    let bin_dir = Path::new(BIN).parent().expect("bin dir");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // The recipe as documented, its sizes overridden on the command line to fit 2 cores.
    let job_id = client(
        &conf,
        "sbatch",
        &[
            "--parsable",
            "--array=0-3%2",
            "--cpus-per-task=1",
            "--mem=1G",
            "--time=10",
            &format!("--chdir={}", dir.path().display()),
            &format!("--output={}/reel-ingest-%A_%a.log", dir.path().display()),
            &format!("--export=ALL,PATH={path},REEL_START_JITTER_MS=0"),
            repo()
                .join("docs/ingest/slurm-array.sh")
                .to_str()
                .expect("utf-8"),
            &plan,
            store_dir.to_str().expect("utf-8"),
        ],
    )
    .trim()
    .to_owned();

    // Cancel task 3 once the first of its episodes is written, before its batch commits.
    let victim = format!("{job_id}_3");
    let victim_episodes: Vec<PathBuf> = planned.batches[3]
        .episodes
        .iter()
        .map(|e| store_dir.join("canonical").join(&e.key))
        .collect();
    wait_for("task 3's first episode", Duration::from_secs(300), || {
        victim_episodes.iter().any(|p| p.exists())
    });
    client(&conf, "scancel", &[&victim]);
    wait_for("task 3 to end", Duration::from_secs(60), || {
        job(&conf, &victim)["JobState"] == "CANCELLED"
    });
    let written = victim_episodes.iter().filter(|p| p.exists()).count();
    assert!(
        written < victim_episodes.len(),
        "task 3 finished its batch before it was cancelled"
    );
    let batch_key = planned.batch_key(3);
    let committed = |step: &str| {
        std::fs::read_dir(store_dir.join("state").join(step))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .any(|e| e.file_name().to_string_lossy().starts_with(&batch_key))
            })
            .unwrap_or(false)
    };
    assert!(
        !committed("canonical"),
        "the cancelled batch committed nothing"
    );

    // The other tasks finish; then task 3 is requeued and resumes.
    wait_for("tasks 0-2", Duration::from_secs(300), || {
        (0..3).all(|t| job(&conf, &format!("{job_id}_{t}"))["JobState"] == "COMPLETED")
    });
    client(&conf, "scontrol", &["requeue", &victim]);
    // A requeued job waits two minutes before it is eligible again; the test need not.
    client(
        &conf,
        "scontrol",
        &["update", &format!("JobId={victim}"), "StartTime=now"],
    );
    wait_for("the requeued task 3", Duration::from_secs(300), || {
        job(&conf, &victim)["JobState"] == "COMPLETED"
    });
    assert_eq!(job(&conf, &victim)["Restarts"], "1");
    assert!(committed("canonical") && committed("index"));

    // Every episode in the warehouse exactly once.
    let store = Store::open(store_dir.to_str().expect("utf-8")).expect("store");
    let mut rows: Vec<String> = warehouse(&store)
        .episodes
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    rows.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(rows, want, "each landing episode once");

    // Every task's JSON lines: its batch's episodes, done (or reused by the rerun).
    for task in 0..4 {
        let lines = std::fs::read(
            dir.path()
                .join(format!("reel-ingest-{job_id}_{task}.jsonl")),
        )
        .expect("the task's JSON lines");
        let canonical: Vec<(String, String)> = events(&lines)
            .into_iter()
            .filter(|(step, ..)| step == "canonical")
            .map(|(_, id, status)| (id, status))
            .collect();
        assert_eq!(
            canonical.len(),
            planned.batches[task].episodes.len(),
            "task {task}: {canonical:?}"
        );
        let reused = canonical.iter().filter(|(_, s)| s == "reused").count();
        if task == 3 {
            // The rerun found the episodes the cancelled run had written.
            assert_eq!(reused, written, "{canonical:?}");
        } else {
            assert_eq!(reused, 0, "task {task}: {canonical:?}");
        }
        assert!(
            canonical.iter().all(|(_, s)| s == "done" || s == "reused"),
            "task {task}: {canonical:?}"
        );
    }
}
