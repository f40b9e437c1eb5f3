//! The Kubernetes recipe without a cluster: every manifest in docs/ validates against the
//! Kubernetes API schemas (`kubernetes-validate`, strict), every Reel command a container
//! runs is built into the image docs/ingest/Dockerfile makes, and the ingest Job's own
//! container command, taken from docs/ingest/indexed-job.yaml, ingests a plan read from
//! the bucket (an S3-compatible server on loopback) when run once per completion index
//! with `$JOB_COMPLETION_INDEX` as Kubernetes sets it: every episode once.

use std::path::Path;
use std::process::Command;

use crate::common::{BIN, events, warehouse};
use reel_pipeline::{BatchTarget, list_landing, make_plan};
use reel_synth::SynthConfig;

/// The ingest Job's container (command and args), after validating every manifest.
fn ingest_container() -> (Vec<String>, Vec<String>) {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ingest/python/kubernetes.py");
    let out = Command::new(reel_io::test_support::python().expect("python"))
        .arg(&script)
        .arg(&docs)
        .arg("1.31")
        .output()
        .expect("kubernetes.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let validated = report["validated"].as_array().expect("list");
    assert!(validated.len() >= 2, "{validated:?}");
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .expect("list")
            .iter()
            .map(|s| s.as_str().expect("string").to_owned())
            .collect()
    };
    assert_eq!(report["ingest"]["completion_mode"], "Indexed");
    (
        strings(&report["ingest"]["command"]),
        strings(&report["ingest"]["args"]),
    )
}

#[test]
fn the_indexed_job_ingests_a_plan_from_the_bucket_one_pod_per_index() {
    let (command, args) = ingest_container();
    assert_eq!(command, ["reel-ingest"]);

    let server = reel_io::test_support::S3Server::start("reel").expect("s3s-fs");
    let dir = tempfile::tempdir().expect("tempdir");
    let synth = SynthConfig {
        seconds: 2.0,
        cameras: 1,
        width: 96,
        height: 72,
        ..SynthConfig::default()
    };
    let landing = server.store("reel", "landing").expect("landing");
    let mut ids = Vec::new();
    for i in 0..6 {
        let episode = reel_synth::generate_episode(&synth, i).expect("synth");
        landing
            .write_atomic(&format!("{}.mcap", episode.name), episode.mcap)
            .expect("upload");
        ids.push(episode.name);
    }
    let plan = make_plan(
        &server.uri("reel", "landing"),
        list_landing(&landing, "").expect("list"),
        BatchTarget::Count(3),
    );
    server
        .store("reel", "plans")
        .expect("plans")
        .write_atomic("2026-11-29.json", plan.to_json())
        .expect("plan in the bucket");

    // The manifest's args, with its bucket and endpoint swapped for the loopback
    // server's and the start jitter off; every other flag as written.
    let args: Vec<String> = args
        .iter()
        .map(|arg| match arg.split_once('=') {
            Some(("--plan", _)) => {
                format!("--plan={}", server.uri("reel", "plans/2026-11-29.json"))
            }
            Some(("--store", _)) => format!("--store={}", server.uri("reel", "store")),
            Some(("--start-jitter-ms", _)) => "--start-jitter-ms=0".to_owned(),
            _ => arg.clone(),
        })
        .collect();
    let options = server.options();
    for index in 0..plan.batches.len() {
        let out = Command::new(BIN)
            .args(&args)
            .current_dir(dir.path())
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env(
                "AWS_ACCESS_KEY_ID",
                options.access_key_id.clone().unwrap_or_default(),
            )
            .env(
                "AWS_SECRET_ACCESS_KEY",
                options.secret_access_key.clone().unwrap_or_default(),
            )
            .output()
            .expect("reel-ingest");
        assert!(
            out.status.success(),
            "pod {index}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let done: Vec<_> = events(&out.stdout)
            .into_iter()
            .filter(|(step, _, status)| step == "canonical" && status == "done")
            .map(|(_, id, _)| id)
            .collect();
        assert_eq!(
            done.len(),
            plan.batches[index].episodes.len(),
            "pod {index}"
        );
    }
    let mut rows: Vec<String> = warehouse(&server.store("reel", "store").expect("store"))
        .episodes
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    rows.sort();
    ids.sort();
    assert_eq!(rows, ids);
}
