//! The warehouse's tables at scale: curation time for a realistic filter over generated
//! `episodes` tables of 10^6, 10^7 and 5·10^7 rows, as ingested (one commit of 10^6 rows
//! each) and after a compaction, self-contained and by position; the compaction's time and
//! memory; and what a commit costs on a table that size: an ingest batch of 64 new
//! episodes, 64 re-ingested episodes recorded together (as a batch holds them), 64
//! re-ingested episodes recorded at random times (the worst case), and 1 % of the
//! episodes (a week of recordings) re-ingested in one commit, with curation after it.
//!
//! `cargo bench -p reel-curate --bench curate [-- [--file-rows N] ROWS...]` (`--file-rows`:
//! the compaction's rows per file, default [`CompactOptions`]'s); each run generates its
//! warehouse afresh into `$REEL_BENCH_DIR` (default `~/.cache/reel/bench`). The
//! compaction's peak memory is its own (the process's peak is reset before it).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reel_curate::synthetic::{ingest, recorded_at_ns};
use reel_curate::{
    CompactOptions, CurationOptions, Warehouse, compact_with, curate_to_manifest,
    curate_to_manifest_with,
};
use reel_io::test_support::bench::peak_rss_mib;
use reel_manifest::SamplingRule;

const QUERY: &str = "SELECT * FROM episodes \
    WHERE task IN ('fold_towel', 'stack_cups', 'hang_mug') AND success AND qc_pass \
    AND robot_software_version >= '2.3.0' AND recorded_at >= '2025-03-01 00:00:00'";

const SEED: u64 = 7;
/// Rows of each generating commit.
const COMMIT_ROWS: u64 = 1_000_000;
/// Episodes of an ingest batch.
const BATCH: usize = 64;
/// When generated recordings start (2025-01-01) and how long they span.
const RECORDINGS_START_NS: i64 = 1_735_689_600_000_000_000;
const DAY_NS: i64 = 86_400_000_000_000;

fn bench_dir() -> PathBuf {
    std::env::var_os("REEL_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/reel/bench")
        })
}

/// This process's user + system CPU time.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_millis(ticks * 10)
}

/// A warehouse of `rows` generated episodes, committed 10^6 rows at a time by two writers
/// at once: the rows of version 1, as the earlier layout's benchmark wrote them (the
/// same query selects the same episodes).
fn build(rows: u64) -> PathBuf {
    let root = bench_dir().join(format!("tables-{rows}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("mkdir");
    let tables = reel_warehouse::Warehouse::open(root.to_str().expect("utf-8")).expect("opens");
    tables.episode_tables().expect("creates");
    let started = Instant::now();
    let commits = rows.div_ceil(COMMIT_ROWS);
    std::thread::scope(|s| {
        for worker in 0..2 {
            let tables = &tables;
            s.spawn(move || {
                for c in (worker..commits).step_by(2) {
                    let range = c * COMMIT_ROWS..((c + 1) * COMMIT_ROWS).min(rows);
                    ingest(tables, &format!("generate-{c}"), SEED, range, 1, None, true)
                        .expect("commits");
                }
            });
        }
    });
    eprintln!(
        "generated {rows} rows in {commits} commits in {:.0} s",
        started.elapsed().as_secs_f64()
    );
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

fn row_of(label: &str, rows: u64, selected: usize, times: [Duration; 3]) {
    println!(
        "| {rows} | {label} | {selected} | {:.2} s | {:.2} s | {:.2} s |",
        times[1].as_secs_f64(),
        times[0].as_secs_f64(),
        times[2].as_secs_f64()
    );
}

fn file_mb(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e6)
}

/// Generated episodes recorded in `window` (from the recordings' start), at most `limit`.
fn recorded_in(rows: u64, window: std::ops::Range<i64>, limit: usize) -> Vec<u64> {
    (0..rows)
        .filter(|&i| {
            let at = recorded_at_ns(SEED, i) - RECORDINGS_START_NS;
            window.contains(&at)
        })
        .take(limit)
        .collect()
}

/// What one commit of `indices` re-ingested (or new) cost: wall and CPU seconds, and the
/// files of `episodes` before and after.
struct CommitCost {
    wall: Duration,
    cpu: Duration,
    files_before: usize,
    files_after: usize,
}

fn commit_cost(uri: &str, writer: &str, indices: &[u64], version: usize, at_ns: i64) -> CommitCost {
    let tables = reel_warehouse::Warehouse::open(uri).expect("opens");
    let episodes = tables.table("episodes").expect("table");
    let files_before = episodes
        .version(None)
        .expect("opens")
        .files()
        .expect("lists")
        .len();
    let (cpu, started) = (cpu_time(), Instant::now());
    ingest(
        &tables,
        writer,
        SEED,
        indices.iter().copied(),
        version,
        Some(at_ns),
        false,
    )
    .expect("commits");
    let (wall, cpu) = (started.elapsed(), cpu_time() - cpu);
    let files_after = episodes
        .version(None)
        .expect("opens")
        .files()
        .expect("lists")
        .len();
    vacuum(&tables);
    CommitCost {
        wall,
        cpu,
        files_before,
        files_after,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file_rows: Option<usize> = args
        .iter()
        .position(|a| a == "--file-rows")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse().expect("--file-rows N"));
    let options = file_rows.map_or_else(CompactOptions::default, |file_rows| CompactOptions {
        file_rows,
    });
    let sizes: Vec<u64> = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || args[i - 1] != "--file-rows")
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
        "| warehouse rows | read from | selected episodes | curation (median of 3) | min | max |"
    );
    println!("|---|---|---|---|---|---|");
    let mut compactions = Vec::new();
    let mut commits = Vec::new();
    for rows in sizes {
        let root = build(rows);
        let uri = root.to_str().expect("utf-8").to_string();
        let out = bench_dir().join(format!("curated-{rows}.arrow"));
        let selection = bench_dir().join(format!("selected-{rows}.arrow"));
        let curate = || {
            let warehouse = Warehouse::open(&uri).expect("opens");
            curate_to_manifest(&warehouse, QUERY, rule, &out)
                .expect("curates")
                .rows
        };
        let curate_by_position = || {
            let warehouse = Warehouse::open(&uri).expect("opens");
            let options = CurationOptions::default().by_position();
            let summary = curate_to_manifest_with(&warehouse, QUERY, rule, &selection, options)
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

        let (times, selected) = three(curate);
        row_of("as committed", rows, selected, times);

        reset_peak_rss();
        let started = Instant::now();
        let summary =
            compact_with(&Warehouse::open(&uri).expect("opens"), options).expect("compacts");
        let compaction_s = started.elapsed().as_secs_f64();
        let compaction_peak_mib = peak_rss_mib();
        vacuum(&reel_warehouse::Warehouse::open(&uri).expect("opens"));
        let (times, selected) = three(curate);
        row_of("compacted", rows, selected, times);
        let (times, (by_position, _)) = three(curate_by_position);
        assert_eq!(by_position, selected);
        row_of("compacted, by position", rows, selected, times);
        eprintln!(
            "manifest {:.1} MB, selection {:.1} MB",
            file_mb(&out),
            file_mb(&selection)
        );
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
        let (times, _) = three(|| {
            Warehouse::open(&uri)
                .expect("opens")
                .query(QUERY)
                .expect("runs")
                .height()
        });
        row_of("compacted, query only", rows, selected, times);

        // A week of recordings (1 % of the 700 days) re-ingested in one commit, then
        // curated: the compaction's other files keep their bases. Ingestion times come
        // after every generated one.
        let later = RECORDINGS_START_NS + 800 * DAY_NS;
        let week = recorded_in(rows, 300 * DAY_NS..307 * DAY_NS, usize::MAX);
        let week_cost = commit_cost(&uri, "week", &week, 2, later + DAY_NS);
        let (times, selected) = three(curate);
        row_of("compacted + 1 % re-ingested since", rows, selected, times);
        let (times, (by_position, beside)) = three(curate_by_position);
        assert_eq!(by_position, selected);
        row_of(
            "compacted + 1 % re-ingested since, by position",
            rows,
            selected,
            times,
        );
        eprintln!(
            "with 1 % re-ingested: selection {:.1} MB + {:.1} MB beside",
            file_mb(&selection),
            beside as f64 / 1e6
        );
        // Commits on a table this size: new episodes and re-ingested ones recorded together
        // three times each, re-ingested ones recorded at random times (one file rewritten
        // per episode: the worst case) once.
        let mut costs = Vec::new();
        for round in 0..3u64 {
            let new: Vec<u64> =
                (rows + round * BATCH as u64..rows + (round + 1) * BATCH as u64).collect();
            costs.push((
                "64 new episodes",
                commit_cost(&uri, &format!("new-{round}"), &new, 0, later),
            ));
            // Episodes recorded in one hour of day 100 + round.
            let hour = (100 + round as i64) * DAY_NS;
            let together = recorded_in(rows, hour..hour + 3_600_000_000_000, BATCH);
            costs.push((
                "64 re-ingested, recorded within an hour",
                commit_cost(&uri, &format!("again-{round}"), &together, 2, later),
            ));
            if round == 0 {
                let random: Vec<u64> = (0..BATCH as u64)
                    .map(|i| (i * 7919 + round * 104_729) % rows)
                    .collect();
                costs.push((
                    "64 re-ingested, recorded at random times",
                    commit_cost(&uri, &format!("random-{round}"), &random, 2, later),
                ));
            }
        }
        compactions.push((rows, summary, compaction_s, compaction_peak_mib));
        commits.push((rows, costs, week.len(), week_cost));
    }
    println!();
    println!("| warehouse rows | files before | files after | seconds | peak RSS MiB |");
    println!("|---|---|---|---|---|");
    for (rows, summary, seconds, peak) in compactions {
        println!(
            "| {rows} | {} | {} | {seconds:.1} | {peak:.0} |",
            summary.files_before, summary.files
        );
    }
    println!();
    println!("| warehouse rows | commit | wall s | CPU s | episodes files before → after |");
    println!("|---|---|---|---|---|");
    for (rows, costs, week_rows, week) in commits {
        for (label, cost) in costs {
            println!(
                "| {rows} | {label} | {:.3} | {:.3} | {} → {} |",
                cost.wall.as_secs_f64(),
                cost.cpu.as_secs_f64(),
                cost.files_before,
                cost.files_after
            );
        }
        println!(
            "| {rows} | a week of recordings ({week_rows} episodes) re-ingested | {:.3} | {:.3} | {} → {} |",
            week.wall.as_secs_f64(),
            week.cpu.as_secs_f64(),
            week.files_before,
            week.files_after
        );
    }
}

/// Removes at once the files no version of the tables reads any longer (a commit's or a
/// compaction's replaced files), untimed: the machine's disk holds the tables at 5·10^7
/// rows once, not a copy per rewrite.
fn vacuum(tables: &reel_warehouse::Warehouse) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    for name in ["episodes", "ingestions"] {
        tables
            .table(name)
            .and_then(|t| t.vacuum(Duration::ZERO, now_ms))
            .expect("vacuums");
    }
}

/// Resets this process's peak resident memory (Linux: `5` into clear_refs), so the
/// next [`peak_rss_mib`] is the peak since.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
