//! Curation time for a realistic filter over generated warehouses of 1M,
//! 10M and 50M rows: the query (latest-version dedup, filter, projection)
//! plus writing the manifest.
//!
//! `cargo bench -p reel-curate --bench curate [-- ROWS...]`; warehouses are
//! generated once into `$REEL_BENCH_DIR` (default `~/.cache/reel/bench`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reel_curate::synthetic::parquet_file;
use reel_curate::{Warehouse, curate_to_manifest};
use reel_manifest::SamplingRule;

const QUERY: &str = "SELECT * FROM episodes \
    WHERE task IN ('fold_towel', 'stack_cups', 'hang_mug') AND success AND qc_pass \
    AND robot_software_version >= '2.3.0' AND recorded_at >= '2025-03-01 00:00:00'";

const FILE_ROWS: u64 = 1_000_000;

fn bench_dir() -> PathBuf {
    std::env::var_os("REEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/reel/bench")
        })
}

fn build(rows: u64) -> PathBuf {
    let root = bench_dir().join(format!("warehouse-{rows}"));
    let episodes = root.join("episodes");
    std::fs::create_dir_all(&episodes).expect("mkdir");
    let started = Instant::now();
    let files = rows.div_ceil(FILE_ROWS);
    let todo: Vec<u64> = (0..files)
        .filter(|f| !episodes.join(format!("part-{f:05}.parquet")).exists())
        .collect();
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (todo, episodes) = (&todo, &episodes);
            s.spawn(move || {
                for f in todo.iter().skip(worker).step_by(2) {
                    let range = f * FILE_ROWS..((f + 1) * FILE_ROWS).min(rows);
                    let bytes = parquet_file(7, range, 1).expect("encodes");
                    let path = episodes.join(format!("part-{f:05}.parquet"));
                    let tmp = path.with_extension("tmp");
                    std::fs::write(&tmp, bytes).expect("writes");
                    std::fs::rename(&tmp, &path).expect("renames");
                }
            });
        }
    });
    if !todo.is_empty() {
        eprintln!(
            "generated {} files for {rows} rows in {:.0} s",
            todo.len(),
            started.elapsed().as_secs_f64()
        );
    }
    root
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if args.is_empty() {
        vec![1_000_000, 10_000_000, 50_000_000]
    } else {
        args
    };
    println!("query: {QUERY}");
    println!(
        "| warehouse rows | Parquet MB | selected episodes | curation (median of 3) | min | max |"
    );
    println!("|---|---|---|---|---|---|");
    for rows in sizes {
        let root = build(rows);
        let uri = root.to_str().expect("utf-8").to_string();
        let out = bench_dir().join(format!("curated-{rows}.arrow"));
        let mut times: Vec<Duration> = Vec::new();
        let mut selected = 0;
        let mut bytes = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let warehouse = Warehouse::open(&uri).expect("opens");
            let summary =
                curate_to_manifest(&warehouse, QUERY, SamplingRule::at_hz(10.0, 1.0, 1.0), &out)
                    .expect("curates");
            times.push(t.elapsed());
            selected = summary.rows;
            bytes = warehouse.files().iter().map(|(_, b)| b).sum::<u64>();
        }
        times.sort();
        println!(
            "| {rows} | {:.0} | {selected} | {:.2} s | {:.2} s | {:.2} s |",
            bytes as f64 / 1e6,
            times[1].as_secs_f64(),
            times[0].as_secs_f64(),
            times[2].as_secs_f64()
        );
    }
}
