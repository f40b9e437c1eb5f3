//! Change capture under a sustained writer: lag from commit to visible in the warehouse
//! (p50, p99), changes per CPU-second of the capture, and the WAL the slot retains.
//!
//! `cargo bench -p reel-cdc --bench lag -- [--rate 1000] [--seconds 30] [--flush-ms 200]`
//!
//! A throwaway PostgreSQL (`test_support::PgServer`) and pgbench, PostgreSQL's own load
//! generator, as the writer: `--rate` transactions per second, each one upsert into
//! `annotations` (one change). The capture runs in this process; its CPU is this
//! process's (pgbench is another). Visible means the progress record naming the change
//! is written: the next `reel-curate` sees it.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reel_cdc::test_support::PgServer;
use reel_cdc::{CaptureOptions, Database};

/// User plus system CPU seconds of this process, from /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let rate = arg("--rate", 1000);
    let seconds = arg("--seconds", 30);
    let flush_ms = arg("--flush-ms", 200);

    let pg = PgServer::start().expect("PostgreSQL");
    let url = pg.metadata_database("metadata").expect("database");
    let warehouse = tempfile::tempdir().expect("tempdir");
    let store = reel_io::Store::open(&warehouse.path().to_string_lossy()).expect("store");

    let stop = Arc::new(AtomicBool::new(false));
    let lags_ms = Arc::new(Mutex::new(Vec::new()));
    let changes = Arc::new(Mutex::new(0usize));
    let capture = {
        let options = CaptureOptions {
            stop: Some(stop.clone()),
            flush_interval: Duration::from_millis(flush_ms),
            ..CaptureOptions::new(&url)
        };
        let (lags_ms, changes) = (lags_ms.clone(), changes.clone());
        std::thread::spawn(move || {
            reel_cdc::capture(&options, store, &mut |flush| {
                let mut lags = lags_ms.lock().expect("lags");
                lags.extend(
                    flush
                        .commits_ns
                        .iter()
                        .map(|c| (flush.visible_ns - c) as f64 / 1e6),
                );
                *changes.lock().expect("changes") += flush.changes.values().sum::<usize>();
            })
        })
    };
    // Wait for the snapshot (empty tables: the slot and an empty flush).
    let mut db = Database::connect(&url).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !warehouse
        .path()
        .join("tables/db_annotations/_delta_log")
        .is_dir()
    {
        assert!(Instant::now() < deadline, "no snapshot after 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }

    let script = warehouse.path().join("upsert.sql");
    std::fs::write(
        &script,
        "\\set id random(1, 100000)\n\
         INSERT INTO annotations (episode_id, key, value, author) VALUES ('b-' || :id, 'k', :id, 'bench') \
         ON CONFLICT (episode_id, key) DO UPDATE SET value = excluded.value, updated_at = now();\n",
    )
    .expect("script");
    let pgbench = reel_cdc::test_support::pg_bin()
        .expect("PostgreSQL")
        .join("pgbench");
    let cpu_before = cpu_seconds();
    let started = Instant::now();
    let mut writer = Command::new(&pgbench)
        .args([
            "-n",
            "-c",
            "2",
            "-j",
            "2",
            "-T",
            &seconds.to_string(),
            "-R",
            &rate.to_string(),
            "-f",
        ])
        .arg(&script)
        .arg(&url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pgbench");
    let mut retained = Vec::new();
    while writer.try_wait().expect("pgbench").is_none() {
        std::thread::sleep(Duration::from_millis(500));
        if let Some(bytes) = db.retained_wal_bytes("reel").expect("slot") {
            retained.push(bytes);
        }
    }
    let out = writer.wait_with_output().expect("pgbench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Let the last commits through, then stop.
    let written_lsn = db.current_wal_lsn().expect("lsn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.confirmed_flush_lsn("reel").expect("slot").unwrap_or(0) < written_lsn
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    stop.store(true, Ordering::Relaxed);
    capture.join().expect("capture").expect("capture ran");
    let final_retained = db.retained_wal_bytes("reel").expect("slot").unwrap_or(0);

    let mut lags = lags_ms.lock().expect("lags").clone();
    lags.sort_by(f64::total_cmp);
    let changes = *changes.lock().expect("changes");
    // What the capture left in the captured table: its commits, the data files its
    // current version reads, and every data and log file in its folder (removed files
    // stay until a vacuum).
    let table_name = reel_manifest::changes::captured_table_name("annotations");
    let tables =
        reel_warehouse::Warehouse::open(&warehouse.path().to_string_lossy()).expect("tables");
    let table = tables.table(&table_name).expect("table");
    let latest = table.version(None).expect("latest");
    let files_read = latest.files().expect("files").len();
    let folder = warehouse.path().join("tables").join(&table_name);
    let count = |dir: &std::path::Path, suffix: &str| {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
                    .count()
            })
            .unwrap_or(0)
    };
    let data_files = count(&folder, ".parquet");
    let log_entries = count(&folder.join("_delta_log"), ".json");
    let checkpoints = count(&folder.join("_delta_log"), ".checkpoint.parquet");
    let tps = String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("tps"))
        .unwrap_or("")
        .to_owned();
    println!(
        "{}",
        serde_json::json!({
            "rate_target_per_s": rate,
            "seconds": seconds,
            "flush_ms": flush_ms,
            "commits": lags.len(),
            "changes": changes,
            "changes_per_s": changes as f64 / wall,
            "lag_ms_p50": quantile(&lags, 0.5),
            "lag_ms_p99": quantile(&lags, 0.99),
            "lag_ms_max": lags.last(),
            "capture_cpu_s": cpu,
            "changes_per_cpu_s": changes as f64 / cpu,
            "retained_wal_bytes_max": retained.iter().max(),
            "retained_wal_bytes_final": final_retained,
            "table_versions": latest.number() + 1,
            "table_files_read": files_read,
            "table_data_files_on_disk": data_files,
            "table_log_entries": log_entries,
            "table_checkpoints": checkpoints,
            "pgbench": tps,
        })
    );
}
