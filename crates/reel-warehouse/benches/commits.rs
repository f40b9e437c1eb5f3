//! Commit and open time as a table's commits add up: ingest batches of 64 episodes
//! committed to the episode tables one after another (each batch one commit to
//! `ingestions` and one to `episodes`), measured at 10, 100, 1,000 and 10,000 batches.
//! Each figure is a mean over the 100 batches before the mark (whole checkpoint cycles):
//! a commit's cost rises with the commits since the last checkpoint and falls at the
//! next, so one batch's time says where in that cycle it fell, not how the cost grows.
//! Checkpoints keep opening flat; small-file merges keep the files a commit probes and a
//! reader opens few.
//!
//! `cargo bench -p reel-warehouse --bench commits [-- BATCHES]` (default 10,000), in a
//! fresh folder under `$REEL_BENCH_DIR` (default `~/.cache/reel/bench`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reel_warehouse::Warehouse;
use reel_warehouse::episodes::{
    EPISODE_TABLE_PROPERTIES, EPISODES, EpisodeRow, EpisodeRows, INGESTIONS, QcSummary,
};

const BATCH: u64 = 64;

fn bench_dir() -> PathBuf {
    std::env::var_os("REEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/reel/bench")
        })
}

/// Batches a mark's figures are the mean of: whole checkpoint cycles of the episode
/// tables, at least 100 batches.
fn window_batches() -> u64 {
    let interval = EPISODE_TABLE_PROPERTIES
        .iter()
        .find(|(key, _)| *key == "delta.checkpointInterval")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(reel_warehouse::CHECKPOINT_INTERVAL);
    100u64.div_ceil(interval) * interval
}

/// Times of the batches before a mark.
#[derive(Default)]
struct Window {
    commits: Vec<Duration>,
    opens_episodes: Vec<Duration>,
    opens_ingestions: Vec<Duration>,
}

fn mean_ms(times: &[Duration]) -> f64 {
    times.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / times.len().max(1) as f64
}

fn main() {
    let batches: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let root = bench_dir().join("commits");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("mkdir");
    let warehouse = Warehouse::open(root.to_str().expect("utf-8")).expect("opens");
    warehouse.episode_tables().expect("creates");
    let marks: Vec<u64> = [10, 100, 1_000, 10_000, 100_000]
        .into_iter()
        .filter(|&m| m <= batches)
        .collect();
    println!(
        "| batches committed | commit of a batch, mean (ms) | open `episodes`, mean (ms) | open `ingestions`, mean (ms) | `episodes` files | `ingestions` files | `episodes` log entries | `episodes` checkpoint (KiB) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut window = Window::default();
    let started = Instant::now();
    for batch in 0..batches {
        let ids: Vec<String> = (0..BATCH)
            .map(|i| format!("ep-{batch:08}-{i:02}"))
            .collect();
        let rows_at = |ingested_at_ns: i64| {
            let mut rows = EpisodeRows::new();
            for (i, id) in ids.iter().enumerate() {
                let n = batch * BATCH + i as u64;
                let recorded = 1_735_689_600_000_000_000 + n as i64 * 60_000_000_000;
                rows.push(&EpisodeRow {
                    episode_id: id,
                    pipeline_version: "1.0.0",
                    robot_id: "arm-1",
                    robot_software_version: "2.3.0",
                    task: "fold_towel",
                    operator: "op-ada",
                    success: true,
                    recorded_at_ns: recorded,
                    start_ns: recorded,
                    end_ns: recorded + 30_000_000_000,
                    cameras: 3,
                    camera_frames: 2700,
                    state_steps: 6000,
                    action_steps: 1500,
                    hand_steps: 900,
                    bytes: 81_000_000,
                    qc: QcSummary::default(),
                    uri: id,
                    ingested_at_ns,
                    source: None,
                    canonical_digest: Some(n),
                });
            }
            rows.finish()
        };
        let t = Instant::now();
        warehouse
            .commit_ingestion(&format!("batch-{batch}"), &rows_at, batch as i64 + 1)
            .expect("commits");
        let commit = t.elapsed();
        let Some(&mark) = marks.iter().find(|&&m| m > batch) else {
            continue;
        };
        // Only the batches of the window before a mark are measured (opening costs).
        if batch + window_batches().min(mark) < mark {
            continue;
        }
        let open = |name: &str| {
            let table = warehouse.table(name).expect("table");
            let t = Instant::now();
            table.version(None).expect("opens");
            t.elapsed()
        };
        window.commits.push(commit);
        window.opens_episodes.push(open(EPISODES));
        window.opens_ingestions.push(open(INGESTIONS));
        if batch + 1 != mark {
            continue;
        }
        let files = |name: &str| {
            warehouse
                .table(name)
                .and_then(|t| t.version(None))
                .and_then(|v| v.files())
                .map_or(0, |f| f.len())
        };
        let log_folder = root.join("tables/episodes/_delta_log");
        let log = std::fs::read_dir(&log_folder).map_or(0, |d| d.count());
        let checkpoint_kib = std::fs::read_to_string(log_folder.join("_last_checkpoint"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v.get("sizeInBytes")?.as_u64())
            .map_or(0.0, |bytes| bytes as f64 / 1024.0);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {} | {} | {log} | {checkpoint_kib:.0} |",
            batch + 1,
            mean_ms(&window.commits),
            mean_ms(&window.opens_episodes),
            mean_ms(&window.opens_ingestions),
            files(EPISODES),
            files(INGESTIONS),
        );
        window = Window::default();
    }
    eprintln!(
        "{batches} batches in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
