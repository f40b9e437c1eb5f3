//! reel-supervise end to end with the toy trainer: crashes, hangs, damaged checkpoints,
//! failed node checks and signals, each ending in exactly the state an uninterrupted run
//! reaches (or in the right refusal).

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const SUPERVISE: &str = env!("CARGO_BIN_EXE_reel-supervise");
const TRAINER: &str = env!("CARGO_BIN_EXE_reel-toy-trainer");
const STEPS: &str = "120";

/// The final state of an uninterrupted run of the toy trainer with `seed`.
fn reference_state(dir: &Path, seed: &str) -> Value {
    let result = dir.join("reference.json");
    let status = Command::new(TRAINER)
        .args([
            "--steps",
            STEPS,
            "--checkpoint-every",
            "10",
            "--seed",
            seed,
            "--result",
        ])
        .arg(&result)
        .arg("--checkpoints")
        .arg(dir.join("reference-checkpoints"))
        .env_remove("REEL_RESUME_STEP")
        .env_remove("REEL_RESTART_COUNT")
        .env_remove("REEL_HEARTBEAT_FILE")
        .status()
        .unwrap();
    assert!(status.success());
    read_json(&result)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// reel-supervise's events (its stdout, one JSON object per line).
fn events(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect()
}

struct Run {
    dir: tempfile::TempDir,
}

impl Run {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `reel-supervise <supervisor args> -- reel-toy-trainer <trainer args>` with the
    /// checkpoint folder and the result file set.
    fn supervise(&self, supervisor: &[&str], trainer: &[&str]) -> Output {
        let output = Command::new(SUPERVISE)
            .args([
                "--backoff-ms",
                "5",
                "--kill-grace-ms",
                "500",
                "--checkpoints",
            ])
            .arg(self.path("checkpoints"))
            .args(supervisor)
            .arg("--")
            .arg(TRAINER)
            .args(["--steps", STEPS, "--checkpoint-every", "10", "--result"])
            .arg(self.path("result.json"))
            .args(trainer)
            .output()
            .unwrap();
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        output
    }
}

#[test]
fn a_crashing_trainer_finishes_with_the_uninterrupted_state() {
    let run = Run::new();
    let output = run.supervise(&["--max-restarts", "5"], &["--crashes", "4", "--seed", "7"]);
    assert!(output.status.success());
    let events = events(&output);
    assert_eq!(
        kinds(&events).iter().filter(|k| **k == "restart").count(),
        4
    );
    assert_eq!(kinds(&events).last(), Some(&"done"));
    // Both kinds of crash happened: an error exit and a signal.
    let exits: Vec<&Value> = events.iter().filter(|e| e["event"] == "exit").collect();
    assert!(exits.iter().any(|e| e["code"] == 17));
    assert!(exits.iter().any(|e| e["signal"] == 6));
    // Every start resumes from the newest checkpoint there was, and the first is fresh.
    let starts: Vec<&Value> = events.iter().filter(|e| e["event"] == "start").collect();
    assert_eq!(starts.len(), 5);
    assert!(starts[0]["resume_step"].is_null());
    for (i, start) in starts.iter().enumerate() {
        assert_eq!(start["restart_count"], i);
    }
    assert_eq!(
        read_json(&run.path("result.json")),
        reference_state(run.dir.path(), "7")
    );
}

#[test]
fn a_hanging_trainer_is_killed_and_resumed() {
    let run = Run::new();
    let heartbeat = run.path("heartbeat");
    let output = run.supervise(
        &[
            "--heartbeat",
            heartbeat.to_str().unwrap(),
            "--hang-after",
            "1.5",
        ],
        &["--hang-at", "35", "--step-ms", "2"],
    );
    assert!(output.status.success());
    let events = events(&output);
    assert_eq!(
        kinds(&events),
        ["start", "hang", "restart", "start", "exit", "done"]
    );
    // It hung at step 35, so it resumed from the checkpoint of step 30.
    assert_eq!(events[3]["resume_step"], 30);
    assert_eq!(
        read_json(&run.path("result.json")),
        reference_state(run.dir.path(), "1")
    );
}

#[test]
fn a_damaged_newest_checkpoint_and_a_partial_one_are_passed_over() {
    let run = Run::new();
    let checkpoints = run.path("checkpoints");
    // A first run that dies part-way, leaving checkpoints behind.
    let status = Command::new(TRAINER)
        .args(["--steps", STEPS, "--checkpoint-every", "10", "--keep", "10"])
        .args(["--crashes", "1", "--seed", "3", "--checkpoints"])
        .arg(&checkpoints)
        .env_remove("REEL_RESUME_STEP")
        .env_remove("REEL_RESTART_COUNT")
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(17));
    let mut steps: Vec<u64> = std::fs::read_dir(&checkpoints)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_prefix("step-").map(|s| s.parse().unwrap())
        })
        .collect();
    steps.sort();
    assert!(steps.len() >= 2, "the crash came too early: {steps:?}");
    let (previous, newest) = (steps[steps.len() - 2], steps[steps.len() - 1]);
    // Flip a byte of the newest one's state, and leave a save that never finished.
    let state = checkpoints.join(format!("step-{newest:010}")).join("state");
    let mut bytes = std::fs::read(&state).unwrap();
    bytes[0] ^= 0x80;
    std::fs::write(&state, bytes).unwrap();
    let partial = checkpoints.join(format!(".step-{:010}.tmp-1-1", newest + 10));
    std::fs::create_dir(&partial).unwrap();
    std::fs::write(partial.join("state"), b"half a state").unwrap();

    let output = run.supervise(&[], &["--seed", "3"]);
    assert!(output.status.success());
    let events = events(&output);
    let skipped: Vec<(Option<u64>, &str)> = events
        .iter()
        .filter(|e| e["event"] == "checkpoint_skipped")
        .map(|e| (e["step"].as_u64(), e["problem"]["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        skipped,
        [
            (Some(newest + 10), "partial"),
            (Some(newest), "checksum_mismatch")
        ]
    );
    let start = events.iter().find(|e| e["event"] == "start").unwrap();
    assert_eq!(start["resume_step"], previous);
    assert_eq!(
        read_json(&run.path("result.json")),
        reference_state(run.dir.path(), "3")
    );
}

#[test]
fn too_many_crashes_give_up() {
    let run = Run::new();
    let output = run.supervise(&["--max-restarts", "2"], &["--crashes", "5"]);
    assert_eq!(output.status.code(), Some(1));
    let events = events(&output);
    assert_eq!(kinds(&events).iter().filter(|k| **k == "start").count(), 3);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "give_up");
    assert_eq!(last["restarts"], 2);
    assert!(!run.path("result.json").exists());
}

#[test]
fn a_failed_node_check_stops_the_launch() {
    let run = Run::new();
    let missing = run.path("no-such-cache");
    let output = run.supervise(&["--preflight-cache", missing.to_str().unwrap()], &[]);
    assert_eq!(output.status.code(), Some(3));
    let events = events(&output);
    assert_eq!(kinds(&events), ["preflight"]);
    assert_eq!(events[0]["passed"], false);
    let failed = events[0]["failed"][0].as_str().unwrap();
    assert!(failed.starts_with("cache_writable: "), "{failed}");
    assert!(!run.path("result.json").exists());
}

#[test]
fn sigterm_is_forwarded_and_the_supervisor_exits() {
    let run = Run::new();
    let heartbeat = run.path("heartbeat");
    let mut child = Command::new(SUPERVISE)
        .arg("--checkpoints")
        .arg(run.path("checkpoints"))
        .arg("--heartbeat")
        .arg(&heartbeat)
        .args(["--hang-after", "600", "--kill-grace-ms", "5000", "--"])
        .arg(TRAINER)
        .args([
            "--steps",
            "1000000",
            "--step-ms",
            "1",
            "--checkpoint-every",
            "100",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let start: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(start["event"], "start");
    let trainer = start["pid"].as_u64().unwrap();
    // Wait until the trainer is demonstrably running (its first heartbeat).
    while !heartbeat.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    let rest: Vec<Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["event"], "signal");
    assert_eq!(rest[0]["signal"], 15);
    // The trainer was stopped and reaped with it.
    assert!(!Path::new(&format!("/proc/{trainer}")).exists());
}

/// Whether `pid` is gone (or a zombie: dead, not yet reaped by its new parent).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_child_that_left_the_trainers_group_is_ended_too() {
    let run = Run::new();
    let pid_file = run.path("escaped.pid");
    // A trainer that starts a child in a session of its own (out of its process group),
    // then crashes; the supervisor gives up after that first crash.
    let script = format!(
        "setsid sh -c 'echo $$ > {}; exec sleep 300' & sleep 0.5; exit 3",
        pid_file.display()
    );
    let output = Command::new(SUPERVISE)
        .args([
            "--backoff-ms",
            "5",
            "--kill-grace-ms",
            "200",
            "--max-restarts",
            "0",
        ])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let escaped: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !gone(escaped) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let still_there = !gone(escaped);
    if still_there {
        let _ = Command::new("kill")
            .args(["-9", &escaped.to_string()])
            .status();
    }
    assert!(
        !still_there,
        "the setsid child {escaped} outlived the supervisor"
    );
}
