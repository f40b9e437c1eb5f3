//! Runs the `reel-synth` binary and checks its files with an independent
//! reader: the Python `mcap` package (with its ROS 2 and protobuf decoders).

use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> PathBuf {
    reel_io::test_support::python().expect("the test venv's Python")
}

fn synth(out: &Path, extra: &[&str]) -> String {
    synth_to(out.to_str().expect("utf-8 path"), extra, &[])
}

/// Runs reel-synth writing to `out` (a folder or store URI) with `env` set; its stdout.
fn synth_to(out: &str, extra: &[&str], env: &[(&str, String)]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_reel-synth"))
        .args([
            "--out",
            out,
            "--width",
            "96",
            "--height",
            "72",
            "--threads",
            "2",
        ])
        .args(extra)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("reel-synth runs");
    assert!(
        output.status.success(),
        "reel-synth failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 stdout")
}

/// Asserts that folder `b` holds the files of folder `a` (two episodes and their
/// sidecars), byte for byte.
fn assert_same_files(a: &Path, b: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(a)
        .expect("lists")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "two episodes and two sidecars: {names:?}");
    for name in names {
        let (x, y) = (
            std::fs::read(a.join(&name)).expect("reads"),
            std::fs::read(b.join(&name)).expect("the file exists in both"),
        );
        assert!(
            x == y,
            "{name:?} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

#[test]
fn python_mcap_reads_every_file_of_both_flavours() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lines = synth(
        dir.path(),
        &[
            "--episodes",
            "3",
            "--seconds",
            "8",
            "--fault-rate",
            "6",
            "--seed",
            "5",
        ],
    );
    lines += &synth(
        dir.path(),
        &[
            "--episodes",
            "2",
            "--first",
            "3",
            "--seconds",
            "3",
            "--flavor",
            "foxglove",
        ],
    );
    assert_eq!(lines.lines().count(), 5, "one JSON line per episode");
    let reports = dir.path().join("reports.jsonl");
    std::fs::write(&reports, &lines).expect("writes");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crates/reel-synth/tests/python/check_landing.py"
    );
    let output = Command::new(python())
        .arg(script)
        .arg(&reports)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "python check failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("checked 5 episodes"), "{stdout}");
}

/// Two 2-second episodes with faults, from `seed`.
fn small_run(seed: &str) -> [&str; 8] {
    [
        "--episodes",
        "2",
        "--seconds",
        "2",
        "--fault-rate",
        "10",
        "--seed",
        seed,
    ]
}

#[test]
fn same_seed_same_bytes_from_the_cli() {
    let (a, b) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let args = small_run("9");
    synth(a.path(), &args);
    synth(b.path(), &args);
    assert_same_files(a.path(), b.path());
}

#[test]
fn writes_to_s3_the_same_bytes_as_to_a_folder() {
    let server = reel_io::test_support::S3Server::start("robots").expect("s3s-fs");
    let args = small_run("4");
    let local = tempfile::tempdir().expect("tempdir");
    let local_lines = synth(local.path(), &args);
    let uri = format!(
        "s3://robots/landing?endpoint=http://127.0.0.1:{}&region=us-east-1",
        server.port()
    );
    let options = server.options();
    let stdout = synth_to(
        &uri,
        &args,
        &[
            ("AWS_ACCESS_KEY_ID", options.access_key_id.expect("key")),
            (
                "AWS_SECRET_ACCESS_KEY",
                options.secret_access_key.expect("secret"),
            ),
        ],
    );
    let mut reported = 0;
    for line in stdout.lines() {
        let line: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        let path = line["path"].as_str().expect("path");
        assert!(
            path.starts_with("s3://robots/landing/") && path.contains("?endpoint="),
            "{path}"
        );
        reported += 1;
    }
    assert_eq!(reported, 2);
    assert_eq!(local_lines.lines().count(), 2);
    assert_same_files(local.path(), &server.root().join("robots/landing"));
}

#[test]
fn bad_arguments_fail_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_reel-synth"))
        .args([
            "--out",
            dir.path().to_str().expect("utf-8"),
            "--fault",
            "lens_flare=3",
        ])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown fault kind"));
    let output = Command::new(env!("CARGO_BIN_EXE_reel-synth"))
        .args([
            "--out",
            dir.path().to_str().expect("utf-8"),
            "--cameras",
            "0",
            "--episodes",
            "1",
        ])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("cameras must be between 1 and 6"));
}
