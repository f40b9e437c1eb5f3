//! reel-inspect's integration tests, one binary: the layout report and lineage, and
//! `doctor` and `cat`, on canonical episodes and landing logs.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

mod cli;
mod doctor;

/// The JSON lines a run that succeeded wrote on stdout (its stderr shown if it failed).
fn json_lines(run: std::process::Output) -> Vec<serde_json::Value> {
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
