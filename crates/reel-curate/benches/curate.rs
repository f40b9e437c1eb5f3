//! Curation time for a realistic filter over generated warehouses of 1M,
//! 10M and 50M rows: the query plus writing the manifest, read from the
//! ingest log (latest-version dedup at query time), from a compaction, and
//! from a compaction with 1% of the episodes re-ingested since.
//!
//! Each curation is also run by position (a selection of the compaction's bases), side
//! by side with the self-contained manifest.
//!
//! `cargo bench -p reel-curate --bench curate [-- [--skip-log] [--no-recompaction] [--parts N] ROWS...]`;
//! warehouses are generated once into `$REEL_BENCH_DIR` (default
//! `~/.cache/reel/bench`), in files of 10^6 rows, or in `N` parts (one per ingest
//! batch, as a long ingest leaves them before a compaction). The compaction's peak
//! memory is its own (the process's peak is reset before it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use reel_curate::synthetic::{parquet_file, parquet_file_ingested_at};
use reel_curate::{
    CurationOptions, Warehouse, compact, curate_to_manifest, curate_to_manifest_with,
};
use reel_io::test_support::bench::peak_rss_mib;
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

fn build(rows: u64, parts: Option<u64>) -> PathBuf {
    let root = match parts {
        None => bench_dir().join(format!("warehouse-{rows}")),
        Some(parts) => bench_dir().join(format!("warehouse-{rows}-in-{parts}")),
    };
    let episodes = root.join("episodes");
    std::fs::create_dir_all(&episodes).expect("mkdir");
    let started = Instant::now();
    let (files, file_rows) = match parts {
        None => (rows.div_ceil(FILE_ROWS), FILE_ROWS),
        Some(parts) => (parts, rows.div_ceil(parts)),
    };
    let todo: Vec<u64> = (0..files)
        .filter(|f| !episodes.join(format!("part-{f:05}.parquet")).exists())
        .collect();
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (todo, episodes) = (&todo, &episodes);
            s.spawn(move || {
                for f in todo.iter().skip(worker).step_by(2) {
                    let range = f * file_rows..((f + 1) * file_rows).min(rows);
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

/// Median, min and max of three runs of `f`, and `f`'s last result.
fn three<T>(mut f: impl FnMut() -> T) -> ([Duration; 3], T) {
    let mut times = [Duration::ZERO; 3];
    let mut last = None;
    for t in &mut times {
        let started = Instant::now();
        last = Some(f());
        *t = started.elapsed();
    }
    times.sort();
    (times, last.expect("ran"))
}

fn row(label: &str, rows: u64, mb: f64, selected: usize, times: [Duration; 3]) {
    println!(
        "| {rows} | {label} | {mb:.0} | {selected} | {:.2} s | {:.2} s | {:.2} s |",
        times[1].as_secs_f64(),
        times[0].as_secs_f64(),
        times[2].as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let skip_log = args.iter().any(|a| a == "--skip-log");
    // The recompaction writes a second compaction beside the first: twice the disk.
    let recompaction = !args.iter().any(|a| a == "--no-recompaction");
    let parts: Option<u64> = args
        .iter()
        .position(|a| a == "--parts")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse().expect("--parts N"));
    let sizes: Vec<u64> = args
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            parts.is_none() || args.get(i.wrapping_sub(1)).map(String::as_str) != Some("--parts")
        })
        .filter_map(|(_, a)| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000_000, 10_000_000, 50_000_000]
    } else {
        sizes
    };
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    println!("query: {QUERY}");
    println!(
        "| warehouse rows | read from | Parquet MB read | selected episodes | curation (median of 3) | min | max |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut compactions = Vec::new();
    for rows in sizes {
        let root = build(rows, parts);
        let uri = root.to_str().expect("utf-8").to_string();
        // Start from the log alone: no compaction, no files ingested since.
        let delta = root.join("episodes/part-delta.parquet");
        let _ = std::fs::remove_file(&delta);
        let _ = std::fs::remove_dir_all(root.join("compacted"));
        let out = bench_dir().join(format!("curated-{rows}.arrow"));
        let curate = |warehouse: &Warehouse| {
            curate_to_manifest(warehouse, QUERY, rule, &out)
                .expect("curates")
                .rows
        };
        let selection = bench_dir().join(format!("selected-{rows}.arrow"));
        let curate_by_position = |warehouse: &Warehouse| {
            let options = CurationOptions::default().by_position();
            let summary = curate_to_manifest_with(warehouse, QUERY, rule, &selection, options)
                .expect("curates by position");
            assert!(summary.selection, "a selection of the compaction's bases");
            let beside: u64 = summary
                .beside
                .iter()
                .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
                .sum();
            for file in &summary.beside {
                let _ = std::fs::remove_file(file);
            }
            (summary.rows, beside)
        };
        let file_mb =
            |path: &std::path::Path| std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e6);
        let log_mb = |w: &Warehouse| w.files().iter().map(|(_, b)| b).sum::<u64>() as f64 / 1e6;

        if !skip_log {
            let (times, selected) = three(|| curate(&Warehouse::open(&uri).expect("opens")));
            let w = Warehouse::open(&uri).expect("opens");
            row(
                "log (dedup at query time)",
                rows,
                log_mb(&w),
                selected,
                times,
            );
        }

        reset_peak_rss();
        let started = Instant::now();
        let summary = compact(&Warehouse::open(&uri).expect("opens")).expect("compacts");
        let compaction_s = started.elapsed().as_secs_f64();
        let compaction_peak_mib = peak_rss_mib();
        let (times, selected) = three(|| curate(&Warehouse::open(&uri).expect("opens")));
        let compacted_mb = summary.bytes as f64 / 1e6;
        row("compaction", rows, compacted_mb, selected, times);
        let manifest_mb = file_mb(&out);
        let (times, (by_position, _)) =
            three(|| curate_by_position(&Warehouse::open(&uri).expect("opens")));
        assert_eq!(by_position, selected);
        row(
            "compaction, by position",
            rows,
            compacted_mb,
            selected,
            times,
        );
        eprintln!(
            "manifest {manifest_mb:.1} MB, selection {:.1} MB",
            file_mb(&selection)
        );
        // What every rank pays to open each (page cache warm): the selection opens its
        // bases and reads its positions once.
        for (label, path) in [("manifest", &out), ("selection", &selection)] {
            let (times, samples) = three(|| {
                reel_manifest::Manifest::open(path)
                    .expect("opens")
                    .num_samples()
            });
            eprintln!(
                "open the {label}: {:.1} ms (median of 3), {samples} samples",
                times[1].as_secs_f64() * 1e3
            );
        }
        // The same curation writing every row's path (format 1's layout), side by side.
        let (times, _) = three(|| {
            let w = Warehouse::open(&uri).expect("opens");
            curate_to_manifest_with(
                &w,
                QUERY,
                rule,
                &out,
                CurationOptions::default().with_uri_column(),
            )
            .expect("curates")
            .rows
        });
        row(
            "compaction, with the uri column",
            rows,
            compacted_mb,
            selected,
            times,
        );
        let (times, _) = three(|| {
            Warehouse::open(&uri)
                .expect("opens")
                .query(QUERY)
                .expect("runs")
                .height()
        });
        row(
            "compaction, query only",
            rows,
            compacted_mb,
            selected,
            times,
        );

        // 1% of the episodes re-ingested after the compaction.
        let reingested = rows / 100;
        // Generated ingestions end 761 days after 2025-01-01 (recordings span
        // 700 days, version 2 is ingested 61 days after recording): this one
        // comes after all of them, as a re-ingestion after a compaction does.
        let later = 1_735_689_600_000_000_000 + 800 * 86_400_000_000_000;
        let bytes = parquet_file_ingested_at(7, 0..reingested, 2, Some(later)).expect("encodes");
        let delta_mb = bytes.len() as f64 / 1e6;
        std::fs::write(&delta, bytes).expect("writes");
        let (times, selected) = three(|| curate(&Warehouse::open(&uri).expect("opens")));
        row(
            "compaction + 1% re-ingested since",
            rows,
            compacted_mb + delta_mb,
            selected,
            times,
        );
        let (times, (by_position, beside)) =
            three(|| curate_by_position(&Warehouse::open(&uri).expect("opens")));
        assert_eq!(by_position, selected);
        row(
            "compaction + 1% re-ingested since, by position",
            rows,
            compacted_mb + delta_mb,
            selected,
            times,
        );
        eprintln!(
            "with 1% re-ingested: manifest {:.1} MB, selection {:.1} MB + {:.1} MB beside",
            file_mb(&out),
            file_mb(&selection),
            beside as f64 / 1e6
        );
        let again = recompaction.then(|| {
            let started = Instant::now();
            let again = compact(&Warehouse::open(&uri).expect("opens")).expect("compacts");
            (again.id, started.elapsed().as_secs_f64())
        });
        compactions.push((rows, summary, compaction_s, compaction_peak_mib, again));
    }
    println!();
    println!(
        "| warehouse rows | compaction | parts | compacted MB | seconds | peak RSS MiB | recompaction with 1% re-ingested | seconds |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (rows, first, first_s, peak, again) in compactions {
        let (again_id, again_s) = match again {
            Some((id, s)) => (id, format!("{s:.1}")),
            None => ("not run".into(), "-".into()),
        };
        println!(
            "| {rows} | {} | {} | {:.0} | {first_s:.1} | {peak:.0} | {again_id} | {again_s} |",
            first.id,
            first.parts,
            first.bytes as f64 / 1e6,
        );
    }
}

/// Resets this process's peak resident memory (Linux: `5` into clear_refs), so the
/// next [`peak_rss_mib`] is the peak since.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
