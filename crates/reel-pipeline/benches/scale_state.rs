//! Ingest bookkeeping as the corpus grows: finding the stale episodes of N ingested
//! episodes (`reel-ingest stale`, what selective reprocessing starts from) reads the
//! canonical step's completion records, one per batch of 100 episodes, on a local store.
//! Each size is measured in a process of its own (its peak memory is its own).
//!
//! `cargo bench -p reel-pipeline --bench scale_state -- [--episodes 10000,100000,1000000]
//!  [--dir DIR]`
//!
//! Every record holds 100 copies of one real episode summary (a synthesised episode
//! ingested once), each under its own id. One JSON line per measurement on stdout, a
//! Markdown table on stderr.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use reel_io::Store;
use reel_pipeline::{CommitRecord, PipelineConfig, StateStore, process_episode, stale_episodes};
use reel_synth::{SynthConfig, generate_episode};

use reel_io::test_support::bench::{arg, peak_rss_mib, sizes};

type Error = Box<dyn std::error::Error>;

const PER_BATCH: u64 = 100;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(dir) = arg(&args, "--measure") {
        return measure(&dir);
    }
    let sizes = sizes(&args, "--episodes", "1000,10000")?;
    let temp = tempfile::tempdir()?;
    let root = arg(&args, "--dir").map_or_else(|| temp.path().to_path_buf(), Into::into);
    eprintln!("| episodes | records | stale scan s | per episode µs | peak RSS MiB | record MB |");
    eprintln!("|---|---|---|---|---|---|");
    for n in sizes {
        let dir = root.join(format!("state-{n}"));
        let bytes = fill(&dir, n)?;
        let out = Command::new(std::env::current_exe()?)
            .args(["--measure", &dir.to_string_lossy()])
            .output()?;
        if !out.status.success() {
            return Err(format!("{n}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let line = String::from_utf8(out.stdout)?;
        let m: serde_json::Value = serde_json::from_str(line.trim())?;
        let s = m["seconds"].as_f64().unwrap_or(f64::NAN);
        eprintln!(
            "| {n} | {} | {s:.2} | {:.1} | {:.0} | {:.0} |",
            n.div_ceil(PER_BATCH),
            s * 1e6 / n as f64,
            m["peak_rss_mib"].as_f64().unwrap_or(f64::NAN),
            bytes as f64 / 1e6
        );
        println!("{}", line.trim());
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// The canonical step's records of `n` episodes in a store at `dir`; their bytes.
fn fill(dir: &Path, n: u64) -> Result<u64, Error> {
    std::fs::create_dir_all(dir)?;
    let synth = SynthConfig {
        seconds: 2.0,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let landing = generate_episode(&synth, 0)?;
    let config = PipelineConfig::default();
    let summary = process_episode(&landing.name, &landing.name, &landing.mcap, &config)?.summary;
    let state = StateStore::new(Store::open(&dir.to_string_lossy())?);
    let mut bytes = 0;
    for b in 0..n.div_ceil(PER_BATCH) {
        let episodes = (b * PER_BATCH)..((b + 1) * PER_BATCH).min(n);
        let summaries: Vec<_> = episodes
            .map(|i| {
                let mut s = summary.clone();
                s.episode_id = format!("ep-{i:012}");
                s.landing_key = format!("landing/ep-{i:012}.mcap");
                s.canonical_key = format!("canonical/ep-{i:012}.mcap");
                s
            })
            .collect();
        let record = CommitRecord {
            step: "canonical".into(),
            batch: format!("batch-{b:08}"),
            pipeline_version: config.pipeline_version.clone(),
            config_digest: "bench".into(),
            committed_at_ns: b as i64,
            landing_keys: summaries.iter().map(|s| s.landing_key.clone()).collect(),
            summaries,
            artifacts: Vec::new(),
            quarantined: Vec::new(),
        };
        let key = state.write_commit(&record)?;
        bytes += std::fs::metadata(dir.join(key))?.len();
    }
    Ok(bytes)
}

fn measure(dir: &str) -> Result<(), Error> {
    let started = Instant::now();
    let store = Store::open(dir)?;
    // Every episode is of the current version: "stale for another version" lists them all.
    let stale = stale_episodes(&store, "a-newer-version")?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "stage": "stale",
            "order": "local",
            "rows": stale.len(),
            "seconds": seconds,
            "peak_rss_mib": peak_rss_mib(),
        })
    );
    Ok(())
}
