//! reel-preflight end to end: a healthy folder passes with every check reported; a
//! missing or unwritable cache, a corrupt manifest or an impossible threshold fails the
//! node with the reason.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use std::path::Path;
use std::process::{Command, Output};

use reel_manifest::{ManifestMeta, ManifestRow, SamplingRule, write_manifest};
use serde_json::Value;

const PREFLIGHT: &str = env!("CARGO_BIN_EXE_reel-preflight");

/// Thresholds any working machine meets, and a small I/O test, so the test is fast.
const EASY: &str = r#"
[io]
test_mib = 4
min_write_mib_s = 0.001
min_read_mib_s = 0.001
[space]
headroom_mib = 1
[memory]
min_available_mib = 1
"#;

const ALL_CHECKS: [&str; 13] = [
    "cache_writable",
    "cache_write_throughput",
    "cache_read_throughput",
    "manifest",
    "cache_coverage",
    "cache_free_space",
    "memory_available",
    "clock_wall",
    "clock_monotonic",
    "clock_skew",
    "gpu_count",
    "gpu_ecc_uncorrected",
    "gpu_remapped_rows",
];

fn preflight(dir: &Path, config: &str, extra: &[&str]) -> (Output, Value) {
    let config_path = dir.join("thresholds.toml");
    std::fs::write(&config_path, config).unwrap();
    let output = Command::new(PREFLIGHT)
        .arg("--config")
        .arg(&config_path)
        .args(extra)
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, report)
}

fn check<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}"))
}

fn manifest(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("manifest.arrow");
    let rows = [
        ManifestRow {
            episode_id: "ep-a",
            uri: "canonical/ep-a.mcap",
            end_ns: 1_000_000_000,
            bytes: 3 << 20,
            ..Default::default()
        },
        ManifestRow {
            episode_id: "ep-b",
            uri: "canonical/ep-b.mcap",
            end_ns: 1_000_000_000,
            bytes: 1 << 20,
            ..Default::default()
        },
    ];
    let rule = SamplingRule::at_hz(10.0, 0.0, 0.0);
    write_manifest(&path, &rows, &ManifestMeta::new("q", "s", rule)).unwrap();
    path
}

#[test]
fn a_healthy_node_passes_and_reports_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let manifest = manifest(dir.path());
    let (output, report) = preflight(
        dir.path(),
        EASY,
        &[
            "--cache",
            cache.to_str().unwrap(),
            "--manifest",
            manifest.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(report["passed"], true);
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in ALL_CHECKS {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    for c in report["checks"].as_array().unwrap() {
        assert!(c["reason"].as_str().is_some_and(|r| !r.is_empty()), "{c}");
    }
    assert!(
        check(&report, "cache_write_throughput")["value"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(check(&report, "manifest")["value"], 2.0);
    // Nothing of the working set is cached yet: a warning, not a failure.
    let coverage = check(&report, "cache_coverage");
    assert_eq!(coverage["status"], "warn");
    assert_eq!(coverage["value"], 0.0);
    // The free-space need includes the 4 MiB of working set not cached yet.
    assert_eq!(check(&report, "cache_free_space")["threshold"], 5.0);
    // The test files are gone.
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
}

#[test]
fn a_missing_or_unwritable_cache_fails() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let (output, report) = preflight(dir.path(), EASY, &["--cache", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(report["passed"], false);
    let writable = check(&report, "cache_writable");
    assert_eq!(writable["status"], "fail");
    assert_eq!(writable["reason"], "not an existing folder");
    assert_eq!(
        check(&report, "cache_write_throughput")["status"],
        "skipped"
    );
    assert!(!missing.exists());

    // /proc exists but takes no files, even from root.
    let (output, report) = preflight(dir.path(), EASY, &["--cache", "/proc"]);
    assert_eq!(output.status.code(), Some(1));
    let writable = check(&report, "cache_writable");
    assert_eq!(writable["status"], "fail");
    assert!(
        writable["reason"]
            .as_str()
            .unwrap()
            .starts_with("cannot write a file")
    );
}

#[test]
fn a_corrupt_manifest_fails() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest(dir.path());
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&manifest, bytes).unwrap();
    let (output, report) = preflight(
        dir.path(),
        EASY,
        &[
            "--cache",
            dir.path().to_str().unwrap(),
            "--manifest",
            manifest.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    let check = check(&report, "manifest");
    assert_eq!(check["status"], "fail");
    assert!(
        check["reason"]
            .as_str()
            .unwrap()
            .starts_with("cannot map the manifest")
    );
}

#[test]
fn an_impossible_threshold_fails_with_the_measured_value() {
    let dir = tempfile::tempdir().unwrap();
    let config = EASY.replace("min_write_mib_s = 0.001", "min_write_mib_s = 1e12");
    let (output, report) = preflight(
        dir.path(),
        &config,
        &["--cache", dir.path().to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    let write = check(&report, "cache_write_throughput");
    assert_eq!(write["status"], "fail");
    assert_eq!(write["threshold"], 1e12);
    assert!(write["value"].as_f64().unwrap() > 0.0);
    assert_eq!(check(&report, "cache_read_throughput")["status"], "pass");
}

#[test]
fn an_unknown_threshold_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let (output, _) = preflight(
        dir.path(),
        "[io]\nmin_write = 3\n",
        &["--cache", dir.path().to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("min_write"));
}
