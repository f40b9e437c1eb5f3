//! The `reel` umbrella: every subcommand's help, completions, man pages, and the one-line
//! error report.

use std::process::{Command, Output};

const SUBCOMMANDS: [&str; 15] = [
    "synth",
    "pack",
    "plan",
    "ingest",
    "compact",
    "curate",
    "cdc",
    "inspect",
    "warm",
    "load",
    "preflight",
    "supervise",
    "muon-plan",
    "completions",
    "man",
];

fn reel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn every_subcommand_has_help_with_examples() {
    let top = reel(&["--help"]);
    assert!(top.status.success());
    let top = String::from_utf8(top.stdout).unwrap();
    for sub in SUBCOMMANDS {
        assert!(
            top.contains(sub),
            "`reel --help` does not list {sub}:\n{top}"
        );
        let help = reel(&[sub, "--help"]);
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(
            help.status.success(),
            "reel {sub} --help: {}",
            String::from_utf8_lossy(&help.stderr)
        );
        assert!(text.contains("Usage: reel"), "reel {sub} --help:\n{text}");
        assert!(
            text.contains("Examples:"),
            "reel {sub} --help has no examples:\n{text}"
        );
    }
    for nested in [
        ["inspect", "doctor"],
        ["inspect", "cat"],
        ["ingest", "stale"],
    ] {
        let help = reel(&[nested[0], nested[1], "--help"]);
        assert!(help.status.success(), "reel {nested:?} --help");
    }
}

#[test]
fn completions_and_man_pages_come_from_the_same_definitions() {
    let bash = reel(&["completions", "bash"]);
    assert!(bash.status.success());
    let script = String::from_utf8(bash.stdout).unwrap();
    assert!(
        script.contains("complete ") && script.contains("_reel"),
        "{script}"
    );
    assert!(script.contains("muon-plan") && script.contains("doctor"));

    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let man = reel(&["man", pages.to_str().unwrap()]);
    assert!(
        man.status.success(),
        "{}",
        String::from_utf8_lossy(&man.stderr)
    );
    for page in [
        "reel.1",
        "reel-pack.1",
        "reel-inspect.1",
        "reel-inspect-doctor.1",
        "reel-muon-plan.1",
    ] {
        let text =
            std::fs::read_to_string(pages.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}:\n{text}"
        );
    }
}

#[test]
fn an_error_is_one_line_without_a_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.mcap");
    let plan = dir.path().join("plan.json");
    let store = dir.path().join("store");
    for (binary, args) in [
        (
            env!("CARGO_BIN_EXE_reel"),
            vec!["inspect", "cat", missing.to_str().unwrap()],
        ),
        (
            env!("CARGO_BIN_EXE_reel"),
            vec![
                "ingest",
                "--plan",
                plan.to_str().unwrap(),
                "--batch",
                "0",
                "--store",
                store.to_str().unwrap(),
            ],
        ),
        (
            env!("CARGO_BIN_EXE_reel"),
            vec![
                "plan",
                missing.to_str().unwrap(),
                "-o",
                plan.to_str().unwrap(),
                "--batch-bytes",
                "12 parsecs",
            ],
        ),
    ] {
        let run = Command::new(binary)
            .args(&args)
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8(run.stderr).unwrap();
        assert!(!run.status.success(), "{args:?} succeeded");
        assert!(
            !stderr.to_lowercase().contains("backtrace"),
            "{args:?}:\n{stderr}"
        );
        if args[0] == "plan" {
            // A bad flag value is clap's usage error, which names the unit.
            assert!(stderr.contains("unknown size unit `parsecs`"), "{stderr}");
            continue;
        }
        assert_eq!(stderr.lines().count(), 1, "{args:?}:\n{stderr}");
        assert!(stderr.starts_with("reel: error: "), "{stderr}");
        assert!(
            stderr.contains(if args[0] == "ingest" {
                "plan.json"
            } else {
                "missing.mcap"
            }),
            "{stderr}"
        );
    }
}
