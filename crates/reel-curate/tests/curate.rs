//! SQL curation against generated warehouses (their Delta tables written by Reel's own
//! commits): exact rows for each kind of filter, the latest ingestion of each episode,
//! compaction and vacuum, time travel, the migration of a warehouse of the earlier
//! layout, manifests readable by pyarrow and polars, the tables readable by Python
//! `deltalake` and Polars' `read_delta`, and the same result from an S3 warehouse.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reel_curate::synthetic::{Row, ingest, row};
use reel_curate::{
    AsOf, CompactOptions, CurateError, CurationOptions, QueryRefusal, Warehouse, compact,
    compact_with, curate_to_manifest, curate_to_manifest_with, migrate, vacuum,
};
use reel_io::{ErrorKind, Kinded};
use reel_manifest::{Manifest, SamplingRule};

const SEED: u64 = 17;
const EPISODES: u64 = 600;
/// Episodes 0..200 are re-ingested by a newer pipeline in a second commit.
const REINGESTED: u64 = 200;

/// The warehouse's tables at `dir` (a folder or an S3 URI).
fn tables(uri: &str) -> reel_warehouse::Warehouse {
    reel_warehouse::Warehouse::open(uri).expect("opens")
}

/// Ingests the test corpus into the warehouse at `dir`: every episode, then episodes
/// 0..200 again by a newer pipeline. Returns what `episodes` must hold: the latest
/// ingestion of each episode.
fn build_warehouse(dir: &Path) -> Vec<Row> {
    build_warehouse_at(dir.to_str().expect("utf-8"))
}

fn build_warehouse_at(uri: &str) -> Vec<Row> {
    let tables = tables(uri);
    ingest(&tables, "first", SEED, 0..EPISODES, 1, None, true).expect("ingests");
    ingest(&tables, "second", SEED, 0..REINGESTED, 2, None, false).expect("ingests");
    (0..EPISODES)
        .map(|i| row(SEED, i, if i < REINGESTED { 2 } else { 1 }))
        .collect()
}

fn ids(rows: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = rows.collect();
    v.sort();
    v
}

fn manifest_ids(path: &Path) -> Vec<String> {
    let m = Manifest::open(path).expect("opens");
    ids(m
        .episodes()
        .map(|e| e.episode_id().expect("utf-8").to_string()))
}

type Keep = Box<dyn Fn(&Row) -> bool>;

/// Queries covering each kind of filter, with the rows each must return.
fn cases() -> Vec<(&'static str, Keep)> {
    let march = 1_740_787_200_000_000_000i64; // 2025-03-01T00:00:00Z
    vec![
        ("SELECT * FROM episodes", Box::new(|_| true)),
        (
            "SELECT * FROM episodes WHERE task = 'fold_towel'",
            Box::new(|r| r.task == "fold_towel"),
        ),
        (
            "SELECT * FROM episodes WHERE robot_id IN ('aloha-01', 'ur5e-02') AND success",
            Box::new(|r| (r.robot_id == "aloha-01" || r.robot_id == "ur5e-02") && r.success),
        ),
        (
            "SELECT * FROM episodes WHERE NOT success",
            Box::new(|r| !r.success),
        ),
        (
            "SELECT * FROM episodes WHERE qc_pass",
            Box::new(|r| r.qc.pass()),
        ),
        (
            "SELECT * FROM episodes WHERE qc_camera_blackout OR qc_frozen_frames",
            Box::new(|r| r.qc.camera_blackout || r.qc.frozen_frames),
        ),
        (
            "SELECT * FROM episodes WHERE qc_flags LIKE '%choppy_joints%'",
            Box::new(|r| r.qc.choppy_joints),
        ),
        (
            "SELECT * FROM episodes WHERE pipeline_version = '1.1.0'",
            Box::new(|r| r.pipeline_version == "1.1.0"),
        ),
        (
            "SELECT * FROM episodes WHERE robot_software_version >= '2.3.1' AND robot_software_version < '3'",
            Box::new(|r| r.robot_software_version >= "2.3.1" && r.robot_software_version < "3"),
        ),
        (
            "SELECT * FROM episodes WHERE recorded_at >= '2025-03-01 00:00:00'",
            Box::new(move |r| r.recorded_at_ns >= march),
        ),
        (
            "SELECT * FROM episodes WHERE duration_s >= 60 AND task <> 'pick_cube' ORDER BY recorded_at",
            Box::new(|r| (r.end_ns - r.start_ns) >= 60_000_000_000 && r.task != "pick_cube"),
        ),
    ]
}

/// Runs every case against `warehouse` and checks its manifest against `latest`, the
/// rows the warehouse's `episodes` table must hold; by position, a selection where the
/// warehouse was `compacted` (its files have bases).
fn check_cases(warehouse: &Warehouse, latest: &[Row], dir: &Path, compacted: bool) {
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    for (i, (sql, keep)) in cases().iter().enumerate() {
        let out = dir.join(format!("m{i}.arrow"));
        let summary =
            curate_to_manifest(warehouse, sql, rule, &out).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let expected = ids(latest
            .iter()
            .filter(|r| keep(r))
            .map(|r| r.episode_id.clone()));
        assert!(
            !expected.is_empty() && expected.len() < latest.len() || i == 0,
            "{sql}: a filter that selects nothing or everything tests little"
        );
        assert_eq!(manifest_ids(&out), expected, "{sql}");
        assert_eq!(summary.rows, expected.len());
        let m = Manifest::open(&out).expect("opens");
        assert_eq!(m.meta().query, *sql);
        assert_eq!(m.meta().warehouse_snapshot, warehouse.snapshot_id());
        let samples: u64 = latest
            .iter()
            .filter(|r| keep(r))
            .map(|r| rule.num_samples(r.start_ns, r.end_ns))
            .sum();
        assert_eq!(m.num_samples(), samples, "{sql}");

        // By position: a selection of the compaction's bases wherever the warehouse was
        // compacted, reading exactly as the manifest of copied rows.
        let by_position = dir.join(format!("p{i}.arrow"));
        let options = CurationOptions::default().by_position();
        let summary = curate_to_manifest_with(warehouse, sql, rule, &by_position, options)
            .unwrap_or_else(|e| panic!("{sql} by position: {e}"));
        assert_eq!(
            summary.selection, compacted,
            "{sql}: {:?}",
            summary.declined
        );
        let selection = Manifest::open(&by_position).expect("opens");
        assert_eq!(selection.is_selection(), compacted);
        assert_eq!(
            summary.beside.len(),
            selection
                .bases()
                .filter(|b| !b.location.contains('/'))
                .count()
        );
        assert_same_episodes(&selection, &m, sql);
    }
}

/// `a` and `b` hold the same episodes in the same order, with the same samples.
fn assert_same_episodes(a: &Manifest, b: &Manifest, sql: &str) {
    assert_eq!(
        (a.len(), a.num_samples()),
        (b.len(), b.num_samples()),
        "{sql}"
    );
    for (x, y) in a.episodes().zip(b.episodes()) {
        assert_eq!(
            x.episode_id().expect("id"),
            y.episode_id().expect("id"),
            "{sql}"
        );
        assert_eq!(x.uri().expect("uri"), y.uri().expect("uri"), "{sql}");
        assert_eq!(
            (x.start_ns(), x.end_ns(), x.bytes(), x.digest()),
            (y.start_ns(), y.end_ns(), y.bytes(), y.digest()),
            "{sql}"
        );
        assert_eq!(
            (x.num_samples(), x.sample_offset()),
            (y.num_samples(), y.sample_offset()),
            "{sql}"
        );
    }
    for i in (0..a.num_samples()).step_by(97) {
        let (s, t) = (a.sample(i).expect("sample"), b.sample(i).expect("sample"));
        assert_eq!(
            (s.episode.row(), s.time_ns),
            (t.episode.row(), t.time_ns),
            "{sql}"
        );
    }
}

fn open(dir: &Path) -> Warehouse {
    Warehouse::open(dir.to_str().expect("utf-8")).expect("opens")
}

#[test]
fn filters_return_exactly_the_expected_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let latest = build_warehouse(dir.path());
    let warehouse = open(dir.path());
    assert_eq!(
        warehouse.files().len(),
        2,
        "the first commit's file, rewritten without the re-ingested rows, and the second's"
    );
    check_cases(&warehouse, &latest, dir.path(), false);
}

/// Rows of a compacted test file: the 600 episodes in six files, each one range of
/// recording time.
const FILE_ROWS: usize = 100;

/// Compacts into files of [`FILE_ROWS`].
fn compact_small(warehouse: &Warehouse) -> reel_curate::CompactionSummary {
    compact_with(
        warehouse,
        CompactOptions {
            file_rows: FILE_ROWS,
        },
    )
    .expect("compacts")
}

/// The episodes recorded within `days` of the corpus's first day: an ingest batch
/// re-ingested, as a batch holds episodes recorded together (its commit rewrites the
/// one or two compacted files of that time, and the others keep their bases).
fn recorded_within(days: std::ops::Range<i64>) -> Vec<u64> {
    const DAY_NS: i64 = 86_400_000_000_000;
    let start = 1_735_689_600_000_000_000;
    (0..EPISODES)
        .filter(|&i| {
            let at = reel_curate::synthetic::recorded_at_ns(SEED, i);
            at >= start + days.start * DAY_NS && at < start + days.end * DAY_NS
        })
        .collect()
}

/// Later than any generated ingestion (those end 761 days after 2025-01-01).
const AFTER_EVERYTHING: i64 = 1_735_689_600_000_000_000 + 800 * 86_400_000_000_000;

/// Rows `indices` of version 3, ingested at `at`, as `episodes` must then hold them.
fn reingested(latest: &mut [Row], indices: &[u64], at: i64) {
    for &i in indices {
        let mut r = row(SEED, i, 3);
        r.ingested_at_ns = at;
        latest[i as usize] = r;
    }
}

#[test]
fn a_compaction_answers_every_query_as_before_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = dir.path().to_str().expect("utf-8");
    let mut latest = build_warehouse(dir.path());
    let before = open(dir.path());
    let first = compact_small(&before);
    let version = first.episodes_version.expect("compacted");
    assert_eq!((first.rows, first.bases), (EPISODES, first.files));
    let warehouse = open(dir.path());
    assert_eq!(
        warehouse.snapshot_id(),
        format!(
            "episodes@{version} ingestions@{}",
            first.ingestions_version.expect("ingestions compacted")
        ),
        "the snapshot names the versions read"
    );
    assert_ne!(warehouse.snapshot_id(), before.snapshot_id());
    check_cases(&warehouse, &latest, dir.path(), true);
    // A selection of the first compaction, kept for a long run.
    let sql = "SELECT * FROM episodes WHERE success";
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    let (kept, kept_plain) = (
        dir.path().join("kept.arrow"),
        dir.path().join("kept-plain.arrow"),
    );
    let options = CurationOptions::default().by_position();
    assert!(
        curate_to_manifest_with(&warehouse, sql, rule, &kept, options)
            .expect("curates")
            .selection
    );
    curate_to_manifest(&warehouse, sql, rule, &kept_plain).expect("curates");
    let again = compact_small(&warehouse);
    assert_eq!(
        again.episodes_version, None,
        "already compact: nothing to write"
    );

    // A batch of episodes ingested again since: their compacted rows are replaced when
    // committed (their file rewritten, without a base), their new rows read from the
    // file written since; the other compacted files keep their bases.
    let batch = recorded_within(0..60);
    assert!(batch.len() > 20, "{} episodes", batch.len());
    let tables = tables(uri);
    ingest(
        &tables,
        "third",
        SEED,
        batch.iter().copied(),
        3,
        Some(AFTER_EVERYTHING),
        false,
    )
    .expect("ingests");
    reingested(&mut latest, &batch, AFTER_EVERYTHING);
    check_cases(&open(dir.path()), &latest, dir.path(), true);

    // A late upload of first ingestions: older than the rows there, they stay out of
    // `episodes` (and are in `ingestions`).
    let ingestions_before = open(dir.path())
        .query("SELECT * FROM ingestions")
        .expect("runs")
        .height();
    ingest(&tables, "late", SEED, 250..450, 0, None, false).expect("ingests");
    check_cases(&open(dir.path()), &latest, dir.path(), true);
    let ingestions_after = open(dir.path())
        .query("SELECT * FROM ingestions")
        .expect("runs")
        .height();
    assert_eq!(
        ingestions_after,
        ingestions_before + 200,
        "the full history"
    );

    // Compacting again folds the files in; the selection of the first compaction still
    // reads as it did (its bases are kept within the retention).
    let second = compact(&open(dir.path())).expect("compacts");
    assert!(second.episodes_version.expect("compacted") > version);
    check_cases(&open(dir.path()), &latest, dir.path(), true);
    let kept_selection = Manifest::open(&kept).expect("a selection of an old compaction opens");
    assert_same_episodes(
        &kept_selection,
        &Manifest::open(&kept_plain).expect("opens"),
        sql,
    );
    drop(kept_selection);
    let kept_within = vacuum(&open(dir.path()), Duration::from_secs(3600)).expect("vacuums");
    assert!(
        kept_within.tables.iter().all(|(_, v)| v.files.is_empty()),
        "{kept_within:?}"
    );
    assert!(Manifest::open(&kept).is_ok(), "within the retention");

    // Past the retention, its bases are gone with their files: it fails, naming one.
    std::thread::sleep(Duration::from_millis(20));
    let removed = vacuum(&open(dir.path()), Duration::ZERO).expect("vacuums");
    assert!(removed.tables.iter().any(|(_, v)| !v.files.is_empty()));
    let err = Manifest::open(&kept).expect_err("its bases are gone");
    assert!(
        matches!(err, reel_manifest::ManifestError::BaseGone { .. })
            && err.to_string().contains(".base.arrow")
            && err.to_string().contains("retention"),
        "{err}"
    );
    check_cases(&open(dir.path()), &latest, dir.path(), true);
}

#[test]
fn a_compaction_in_many_files_holds_each_episode_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let latest = build_warehouse(dir.path());
    let options = CompactOptions { file_rows: 40 };
    let summary = compact_with(&open(dir.path()), options).expect("compacts");
    assert!(summary.files > 10, "{} files", summary.files);
    assert_eq!(summary.rows, EPISODES);
    check_cases(&open(dir.path()), &latest, dir.path(), true);
}

/// A manifest's rows and schema metadata, but its creation time.
fn manifest_content(path: &Path) -> (Vec<EpisodeValues>, String, String, u64) {
    let m = Manifest::open(path).expect("opens");
    let meta = m.meta();
    let mut rows = episode_set(&m);
    rows.sort();
    (
        rows,
        meta.query.clone(),
        meta.warehouse_snapshot.clone(),
        m.num_samples(),
    )
}

#[test]
fn a_curation_runs_again_at_the_versions_its_manifest_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = dir.path().to_str().expect("utf-8");
    build_warehouse(dir.path());
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    let sql = "SELECT * FROM episodes WHERE success ORDER BY episode_id";
    let original = dir.path().join("original.arrow");
    curate_to_manifest(&open(dir.path()), sql, rule, &original).expect("curates");
    let as_of = AsOf::of_manifest(&Manifest::open(&original).expect("opens")).expect("versions");

    // Later ingests and compactions change what the query selects now, not then.
    ingest(
        &tables(uri),
        "later",
        SEED,
        0..300,
        3,
        Some(AFTER_EVERYTHING),
        false,
    )
    .expect("ingests");
    ingest(
        &tables(uri),
        "more",
        SEED,
        EPISODES..EPISODES + 50,
        1,
        None,
        true,
    )
    .expect("ingests");
    compact(&open(dir.path())).expect("compacts");
    let now = dir.path().join("now.arrow");
    curate_to_manifest(&open(dir.path()), sql, rule, &now).expect("curates");
    assert_ne!(manifest_content(&now).0, manifest_content(&original).0);

    let again = dir.path().join("again.arrow");
    let then = Warehouse::open_as_of(uri, &as_of).expect("the versions are kept");
    curate_to_manifest(&then, sql, rule, &again).expect("curates");
    assert_eq!(manifest_content(&again), manifest_content(&original));
    assert_eq!(
        AsOf::parse("episodes@1 ingestions@1")
            .expect("parses")
            .version_of("episodes"),
        Some(1)
    );
    assert!(
        AsOf::parse("wh-1234-2+c-ff").is_err(),
        "a snapshot of the earlier layout"
    );

    // Past the retention the versions' files are gone: an error naming the version.
    std::thread::sleep(Duration::from_millis(20));
    vacuum(&open(dir.path()), Duration::ZERO).expect("vacuums");
    let err = Warehouse::open_as_of(uri, &as_of).expect_err("not kept");
    let text = err.to_string();
    assert!(
        matches!(err, CurateError::AsOf { .. })
            && text.contains(&format!(
                "version {}",
                as_of.version_of("episodes").expect("v")
            ))
            && text.contains("retention"),
        "{text}"
    );
    assert_eq!(err.kind(), ErrorKind::Environment);
}

/// A copy of `testdata/legacy-warehouse` (made by Reel's earlier layout) in `dir`.
fn legacy_warehouse(dir: &Path) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/legacy-warehouse");
    for entry in walk(&fixture) {
        let relative = entry.strip_prefix(&fixture).expect("inside");
        let to = dir.join(relative);
        std::fs::create_dir_all(to.parent().expect("a folder")).expect("mkdir");
        std::fs::copy(&entry, &to).expect("copies");
    }
}

#[test]
fn a_warehouse_of_the_earlier_layout_migrates_losing_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    legacy_warehouse(dir.path());
    let uri = dir.path().to_str().expect("utf-8");
    let err = Warehouse::open(uri).expect_err("no tables yet");
    assert!(
        matches!(err, CurateError::EmptyWarehouse { legacy: true, .. })
            && err.to_string().contains("--migrate"),
        "{err}"
    );
    let summary = migrate(uri).expect("migrates");
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected.json")).expect("reads"))
            .expect("json");
    assert_eq!(summary.parts, 3);
    assert_eq!(
        summary.ingestions,
        expected["ingestions"].as_u64().expect("n")
    );
    assert_eq!(summary.episodes, 3);
    assert!(!dir.path().join("episodes").exists() && !dir.path().join("compacted").exists());

    // Each episode's latest ingestion, with its digest, as the earlier layout's readers
    // picked it; every ingestion kept.
    let warehouse = open(dir.path());
    let df = warehouse
        .query("SELECT episode_id, ingested_at_ns, canonical_digest, uri FROM episodes")
        .expect("runs");
    let want = expected["episodes"].as_object().expect("episodes");
    assert_eq!(df.height(), want.len());
    for i in 0..df.height() {
        let id = df
            .column("episode_id")
            .expect("id")
            .str()
            .expect("utf8")
            .get(i)
            .expect("id");
        let at = df
            .column("ingested_at_ns")
            .expect("at")
            .i64()
            .expect("i64")
            .get(i);
        let digest = df
            .column("canonical_digest")
            .expect("digest")
            .i64()
            .expect("i64")
            .get(i)
            .map(|d| d as u64);
        let uri = df.column("uri").expect("uri").str().expect("utf8").get(i);
        assert_eq!(at, want[id]["ingested_at_ns"].as_i64(), "{id}");
        assert_eq!(digest, want[id]["canonical_digest"].as_u64(), "{id}");
        assert_eq!(uri, want[id]["uri"].as_str(), "{id}");
    }
    let all = warehouse.query("SELECT * FROM ingestions").expect("runs");
    assert_eq!(
        all.height() as u64,
        expected["ingestions"].as_u64().expect("n")
    );
    // The captured tables read as PostgreSQL's own rows.
    let annotations = warehouse
        .query("SELECT episode_id, key, value, author FROM annotations ORDER BY episode_id, key")
        .expect("runs");
    let csv = std::fs::read_to_string(dir.path().join("annotations.csv")).expect("reads");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(annotations.height(), rows.len());
    for (i, line) in rows.iter().enumerate() {
        let cell = |name: &str| {
            annotations
                .column(name)
                .expect("column")
                .str()
                .expect("text")
                .get(i)
                .unwrap_or_default()
                .to_owned()
        };
        let got = [
            cell("episode_id"),
            cell("key"),
            cell("value"),
            cell("author"),
        ]
        .join(",");
        assert_eq!(got, *line);
    }
    // Run again: nothing of the earlier layout left, nothing done.
    assert_eq!(migrate(uri).expect("migrates").parts, 0);
    assert_eq!(open(dir.path()).snapshot_id(), warehouse.snapshot_id());
}

#[test]
fn the_latest_ingestion_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    build_warehouse(dir.path());
    let warehouse = Warehouse::open(dir.path().to_str().expect("utf-8")).expect("opens");
    let df = warehouse
        .query("SELECT episode_id, pipeline_version FROM episodes")
        .expect("runs");
    assert_eq!(df.height(), EPISODES as usize, "one row per episode");
    let versions = df
        .column("pipeline_version")
        .expect("column")
        .str()
        .expect("strings")
        .clone();
    let ids = df
        .column("episode_id")
        .expect("column")
        .str()
        .expect("strings")
        .clone();
    let by_id: BTreeMap<String, String> = ids
        .iter()
        .zip(versions.iter())
        .map(|(i, v)| (i.expect("id").to_string(), v.expect("version").to_string()))
        .collect();
    for i in 0..EPISODES {
        let r = row(SEED, i, 0);
        let want = if i < REINGESTED { "1.1.0" } else { "1.0.0" };
        assert_eq!(by_id[&r.episode_id], want);
    }
    let all = warehouse.query("SELECT * FROM ingestions").expect("runs");
    assert_eq!(
        all.height(),
        (EPISODES + REINGESTED) as usize,
        "ingestions keeps every version"
    );
}

#[test]
fn bad_queries_and_warehouses_give_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Warehouse::open(dir.path().to_str().expect("utf-8")).expect_err("empty");
    assert!(matches!(err, CurateError::EmptyWarehouse { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Environment, "{err}");
    build_warehouse(dir.path());
    let warehouse = Warehouse::open(dir.path().to_str().expect("utf-8")).expect("opens");
    let rule = SamplingRule::at_hz(10.0, 0.0, 0.0);
    let out = dir.path().join("m.arrow");
    let err = curate_to_manifest(&warehouse, "SELECT * FROM episodez", rule, &out)
        .expect_err("unknown table");
    assert!(
        matches!(err, CurateError::Refused(QueryRefusal::UnknownTable(..))),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    let err = curate_to_manifest(&warehouse, "SELECT episode_id FROM episodes", rule, &out)
        .expect_err("too few columns");
    assert!(err.to_string().contains("uri"), "{err}");
    assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    assert!(!out.exists(), "no manifest after a failed curation");
}

#[test]
fn a_query_reads_only_its_own_warehouse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mine, other) = (dir.path().join("mine"), dir.path().join("other"));
    build_warehouse(&mine);
    build_warehouse(&other);
    let warehouse = Warehouse::open(mine.to_str().expect("utf-8")).expect("opens");
    let out = dir.path().join("m.arrow");
    let rule = SamplingRule::at_hz(10.0, 0.0, 0.0);
    for sql in [
        format!(
            "SELECT * FROM read_parquet('{}/episodes/**/*.parquet')",
            other.display()
        ),
        format!(
            "SELECT * FROM episodes WHERE uri IN (SELECT uri FROM read_csv('{}'))",
            other.join("x.csv").display()
        ),
        "CREATE TABLE t AS SELECT * FROM episodes".to_string(),
    ] {
        let err = curate_to_manifest(&warehouse, &sql, rule, &out).expect_err("refused");
        assert!(matches!(err, CurateError::Refused(_)), "{sql}: {err}");
        assert!(!out.exists(), "{sql}: no manifest after a refused query");
    }
}

#[test]
fn an_empty_or_doubled_result_writes_no_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    build_warehouse(dir.path());
    let warehouse = Warehouse::open(dir.path().to_str().expect("utf-8")).expect("opens");
    let out = dir.path().join("m.arrow");
    let rule = SamplingRule::at_hz(10.0, 0.0, 0.0);
    let none = "SELECT * FROM episodes WHERE task = 'no such task'";
    let err = curate_to_manifest(&warehouse, none, rule, &out).expect_err("empty");
    assert!(matches!(err, CurateError::NoEpisodes), "{err}");
    assert!(!out.exists());
    let twice = "SELECT * FROM (SELECT * FROM episodes LIMIT 2) \
                 UNION ALL SELECT * FROM (SELECT * FROM episodes LIMIT 1)";
    let err = curate_to_manifest(&warehouse, twice, rule, &out).expect_err("doubled");
    assert!(
        matches!(
            &err,
            CurateError::DuplicateEpisode {
                row: 2,
                first_row: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(!out.exists());
    let summary = curate_to_manifest_with(
        &warehouse,
        none,
        rule,
        &out,
        CurationOptions::allowing_empty(),
    )
    .expect("an empty manifest when asked for");
    assert_eq!((summary.rows, summary.samples), (0, 0));
    let manifest = Manifest::open(&out).expect("opens");
    assert_eq!(manifest.len(), 0);
}

#[test]
fn by_position_refuses_or_declines_what_a_self_contained_curation_would_not_copy_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    build_warehouse(dir.path());
    compact(&open(dir.path())).expect("compacts");
    let warehouse = open(dir.path());
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    let by_position = CurationOptions::default().by_position();
    let (out, plain) = (dir.path().join("s.arrow"), dir.path().join("p.arrow"));

    // A query that gives a manifest column other values is written self-contained.
    for sql in [
        "SELECT * REPLACE (start_ns + 2000000000 AS start_ns) FROM episodes WHERE success",
        "SELECT *, end_ns - 1000000000 AS end_ns_early FROM episodes WHERE success",
    ] {
        let summary = curate_to_manifest_with(&warehouse, sql, rule, &out, by_position)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        curate_to_manifest(&warehouse, sql, rule, &plain).expect("curates");
        let replaced = sql.contains("REPLACE");
        assert_eq!(summary.selection, !replaced, "{sql}");
        assert_same_episodes(
            &Manifest::open(&out).expect("opens"),
            &Manifest::open(&plain).expect("opens"),
            sql,
        );
    }
    // One that drops a manifest column is refused alike.
    let sql = "SELECT * EXCLUDE (bytes) FROM episodes";
    for options in [CurationOptions::default(), by_position] {
        let err =
            curate_to_manifest_with(&warehouse, sql, rule, &out, options).expect_err("no bytes");
        assert!(
            matches!(err, CurateError::MissingColumn { column: "bytes" }),
            "{err}"
        );
    }

    // A query that selects an episode twice is refused alike.
    let sql = "SELECT * FROM episodes WHERE NOT success UNION ALL \
               SELECT * FROM episodes WHERE NOT success";
    for options in [CurationOptions::default(), by_position] {
        let err = curate_to_manifest_with(&warehouse, sql, rule, &out, options).expect_err("twice");
        assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".newer-"))
        .collect();
    assert!(leftovers.is_empty(), "nothing left beside: {leftovers:?}");
}

/// The test warehouse, compacted, then the episodes recorded within `days` ingested
/// again since.
fn compacted_then_reingested(dir: &Path, days: std::ops::Range<i64>) -> Warehouse {
    build_warehouse(dir);
    compact_small(&open(dir));
    let uri = dir.to_str().expect("utf-8");
    ingest(
        &tables(uri),
        "again",
        SEED,
        recorded_within(days),
        3,
        Some(AFTER_EVERYTHING),
        false,
    )
    .expect("ingests");
    open(dir)
}

/// Generated queries in the forms a manifest column can be rewritten or handed through
/// (aliases quoted and not, with and without `AS`, `REPLACE`, `EXCLUDE`, subqueries,
/// CTEs, joins, `DISTINCT`, window functions, `UNION ALL`, `GROUP BY`), each curated both
/// ways over a compaction with episodes ingested since: the selection reads exactly as
/// the self-contained manifest, or curation by position wrote a self-contained one and
/// said why, or both refuse the query.
#[test]
fn by_position_gives_the_self_contained_samples_for_every_generated_query() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = compacted_then_reingested(dir.path(), 0..60);
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);

    let projections = [
        "*",
        "* EXCLUDE (robot_id)",
        "* EXCLUDE (start_ns)",
        "* REPLACE (start_ns + 2000000000 AS start_ns)",
        "* REPLACE (start_ns AS start_ns)",
        "* REPLACE (bytes * 2 AS bytes)",
        "*, end_ns - 1000000000 AS end_ns_early",
        "*, row_number() OVER (PARTITION BY task ORDER BY start_ns) AS rn",
        "* EXCLUDE (start_ns), end_ns - 2000000000 AS start_ns",
        "* EXCLUDE (start_ns), end_ns - 2000000000 start_ns",
        "* EXCLUDE (start_ns), end_ns - 2000000000 AS \"start_ns\"",
        "* EXCLUDE (start_ns), \"end_ns\" - 2000000000 \"start_ns\"",
        "* EXCLUDE (start_ns), start_ns AS \"start_ns\"",
        "* EXCLUDE (uri), uri || '' AS uri",
        "* EXCLUDE (episode_id), upper(episode_id) episode_id",
        "* EXCLUDE (bytes), bytes + 0 AS bytes",
        "* EXCLUDE (end_ns, start_ns), start_ns AS end_ns, start_ns AS start_ns",
        "episode_id, uri, start_ns, end_ns, bytes, camera_frames, state_steps, action_steps",
    ];
    let filters = ["success", "task = 'fold_towel' OR NOT qc_pass"];
    let mut queries = Vec::new();
    for p in projections {
        for f in filters {
            queries.extend([
                format!("SELECT {p} FROM episodes WHERE {f}"),
                format!("SELECT {p} FROM (SELECT * FROM episodes WHERE {f}) AS sub"),
                format!("WITH chosen AS (SELECT {p} FROM episodes WHERE {f}) SELECT * FROM chosen"),
                format!("SELECT DISTINCT {p} FROM episodes WHERE {f}"),
                format!(
                    "SELECT {p} FROM episodes WHERE episode_id IN \
                     (SELECT episode_id FROM episodes WHERE {f})"
                ),
                format!("SELECT {p} FROM episodes WHERE {f} ORDER BY start_ns DESC LIMIT 50"),
                format!(
                    "SELECT {p} FROM episodes WHERE {f} UNION ALL \
                     SELECT {p} FROM episodes WHERE NOT ({f})"
                ),
            ]);
        }
    }
    for f in filters {
        queries.extend([
            format!(
                "SELECT e.* FROM episodes e JOIN (SELECT episode_id AS k FROM episodes \
                 WHERE {f}) ks ON e.episode_id = ks.k"
            ),
            format!(
                "SELECT f.* FROM episodes e JOIN episodes f ON e.episode_id = f.episode_id \
                 WHERE e.{f}"
            ),
            format!(
                "SELECT e.* EXCLUDE (start_ns), f.start_ns FROM episodes e JOIN episodes f \
                 ON e.episode_id = f.episode_id WHERE e.{f}"
            ),
            format!(
                "SELECT f.* FROM episodes e LEFT JOIN episodes f \
                 ON e.episode_id = f.episode_id AND f.{f}"
            ),
            format!(
                "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY task \
                 ORDER BY start_ns DESC) AS rn FROM episodes WHERE {f}) AS ranked WHERE rn <= 5"
            ),
            format!(
                "SELECT episode_id, min(uri) AS uri, min(start_ns) AS start_ns, \
                 max(end_ns) AS end_ns, max(bytes) AS bytes, max(camera_frames) AS \
                 camera_frames, max(state_steps) AS state_steps, max(action_steps) AS \
                 action_steps FROM episodes WHERE {f} GROUP BY episode_id"
            ),
        ]);
    }

    let (mut selections, mut declined, mut refused) = (0, 0, 0);
    for (i, sql) in queries.iter().enumerate() {
        let plain = dir.path().join(format!("plain-{i}.arrow"));
        let selection = dir.path().join(format!("selection-{i}.arrow"));
        let by_position = CurationOptions::default().by_position();
        let a = curate_to_manifest_with(&warehouse, sql, rule, &plain, CurationOptions::default());
        let b = curate_to_manifest_with(&warehouse, sql, rule, &selection, by_position);
        match (a, b) {
            (Ok(_), Ok(summary)) => {
                if summary.selection {
                    selections += 1;
                } else {
                    let reason = summary.declined.as_deref().unwrap_or_default();
                    assert!(!reason.is_empty(), "{sql}: fell back without saying why");
                    declined += 1;
                }
                // Same episodes with the same samples (a query without ORDER BY may give
                // them in another order on another run).
                let selection = Manifest::open(&selection).expect("opens");
                let plain = Manifest::open(&plain).expect("opens");
                assert_eq!(episode_set(&selection), episode_set(&plain), "{sql}");
                assert_eq!(selection.num_samples(), plain.num_samples(), "{sql}");
            }
            (Err(_), Err(_)) => refused += 1,
            (a, b) => panic!("{sql}: self-contained {a:?}, by position {b:?}"),
        }
    }
    // Each outcome is met, and every rewrite of a manifest column fell back.
    assert!(
        selections >= 40 && declined >= 40 && refused >= 1,
        "{selections} selections, {declined} declined, {refused} refused"
    );
}

/// An episode as a manifest gives it: (id, uri, start, end, bytes, digest, samples).
type EpisodeValues = (String, String, i64, i64, u64, Option<u64>, u64);

/// A manifest's episodes, sorted.
fn episode_set(m: &Manifest) -> Vec<EpisodeValues> {
    let mut set: Vec<_> = m
        .episodes()
        .map(|e| {
            (
                e.episode_id().expect("id").to_owned(),
                e.uri().expect("uri").into_owned(),
                e.start_ns(),
                e.end_ns(),
                e.bytes(),
                e.digest(),
                e.num_samples(),
            )
        })
        .collect();
    set.sort();
    set
}

/// Names in `dir` that contain `needle`, sorted.
fn names_with(dir: &Path, needle: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(needle))
        .collect();
    names.sort();
    names
}

/// A curation by position that fails after writing the episodes ingested since the
/// compaction leaves nothing beside its output (here: the selection cannot be written;
/// the guard that removes them is tested on every path in `by_position.rs`). A file of
/// that name already there (named by its content, another selection's) stays.
#[test]
fn a_failed_curation_by_position_leaves_nothing_beside() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = compacted_then_reingested(dir.path(), 0..40);
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    let by_position = CurationOptions::default().by_position();
    let sql = "SELECT * FROM episodes WHERE success";
    let out = dir.path().join("s.arrow");
    let summary =
        curate_to_manifest_with(&warehouse, sql, rule, &out, by_position).expect("curates");
    let [newer] = summary.beside.as_slice() else {
        panic!("one file beside: {:?}", summary.beside)
    };
    std::fs::remove_file(&out).expect("removes");
    std::fs::remove_file(newer).expect("removes");

    assert_eq!(names_with(dir.path(), "s."), Vec::<String>::new());

    // The selection itself cannot be written (its name is a folder).
    std::fs::create_dir(&out).expect("mkdir");
    curate_to_manifest_with(&warehouse, sql, rule, &out, by_position).expect_err("no output");
    assert_eq!(names_with(dir.path(), "s."), vec!["s.arrow".to_string()]);

    // Written before by a curation that succeeded, the file beside stays.
    let earlier = dir.path().join("t.arrow");
    let kept = curate_to_manifest_with(&warehouse, sql, rule, &earlier, by_position)
        .expect("curates")
        .beside;
    std::fs::remove_file(&earlier).expect("removes");
    std::fs::create_dir(&earlier).expect("mkdir");
    curate_to_manifest_with(&warehouse, sql, rule, &earlier, by_position).expect_err("no output");
    assert!(kept.iter().all(|f| f.is_file()), "{kept:?}");
    assert_eq!(names_with(dir.path(), "t.newer").len(), kept.len());
}

fn python() -> PathBuf {
    reel_io::test_support::python().expect("the test venv's Python")
}

#[test]
fn pyarrow_and_polars_read_the_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    build_warehouse(dir.path());
    let warehouse = Warehouse::open(dir.path().to_str().expect("utf-8")).expect("opens");
    let out = dir.path().join("m.arrow");
    let sql = "SELECT * FROM episodes WHERE success AND qc_pass";
    curate_to_manifest(&warehouse, sql, SamplingRule::at_hz(5.0, 0.5, 1.0), &out).expect("curates");
    let m = Manifest::open(&out).expect("opens");
    let script = r#"
import sys, pyarrow.ipc as ipc, polars as pl
path, rows, samples, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t = ipc.open_file(path).read_all()
assert t.num_rows == rows, (t.num_rows, rows)
meta = {k.decode(): v.decode() for k, v in t.schema.metadata.items()}
assert meta["reel.manifest.version"] == "2" and "qc_pass" in meta["reel.manifest.query"], meta
# Each row carries its canonical object's digest from the warehouse (synthetic rows have one).
assert t.column("digest").null_count == 0 and min(t.column("digest").to_pylist()) > 0
off, n = t.column("sample_offset").to_pylist(), t.column("num_samples").to_pylist()
assert all(off[i] + n[i] == off[i + 1] for i in range(rows - 1)) and off[-1] + n[-1] == samples
df = pl.read_ipc(path, memory_map=True)
assert df.height == rows and df["episode_id"][0] == first, (df.height, df["episode_id"][0])
print("ok", rows)
"#;
    let first = m
        .episode(0)
        .expect("row")
        .episode_id()
        .expect("utf-8")
        .to_string();
    let output = Command::new(python())
        .args(["-c", script, out.to_str().expect("utf-8")])
        .args([m.len().to_string(), m.num_samples().to_string(), first])
        .output()
        .expect("python runs (scripts/setup.sh installs it)");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn an_s3_warehouse_gives_the_same_manifest() {
    let server = reel_io::test_support::S3Server::start("warehouse").expect("s3s-fs starts");
    let dir = tempfile::tempdir().expect("tempdir");
    build_warehouse(dir.path());
    let remote_uri = server.uri("warehouse", "wh");
    // The same commits, through S3 (credentials from the server).
    with_credentials(&server, || build_warehouse_at(&remote_uri));
    let store = || server.store("warehouse", "wh").expect("store");
    let sql = "SELECT * FROM episodes WHERE task = 'stack_cups' AND success";
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    let local = Warehouse::open(dir.path().to_str().expect("utf-8")).expect("opens");
    let remote = Warehouse::from_store(store()).expect("opens s3");
    let (a, b) = (dir.path().join("a.arrow"), dir.path().join("b.arrow"));
    curate_to_manifest(&local, sql, rule, &a).expect("local");
    curate_to_manifest(&remote, sql, rule, &b).expect("s3");
    assert_eq!(manifest_ids(&a), manifest_ids(&b));
    assert_eq!(
        local.snapshot_id(),
        remote.snapshot_id(),
        "the same commits, the same versions"
    );

    // Compacted on S3 and locally: the same rows, in the same order.
    let summary = compact(&remote).expect("compacts on s3");
    assert_eq!(summary.rows, EPISODES);
    compact(&local).expect("compacts locally");
    let remote = Warehouse::from_store(store()).expect("opens s3");
    let local = open(dir.path());
    curate_to_manifest(&local, sql, rule, &a).expect("local");
    curate_to_manifest(&remote, sql, rule, &b).expect("s3");
    let in_order = |path: &Path| -> Vec<String> {
        let m = Manifest::open(path).expect("opens");
        m.episodes()
            .map(|e| e.episode_id().expect("utf-8").to_string())
            .collect()
    };
    assert_eq!(in_order(&a), in_order(&b));
    assert_eq!(manifest_ids(&a), manifest_ids(&b));

    // By position, the remote selection points at the bases in the store by their
    // object URIs, and reads as the local one.
    let options = CurationOptions::default().by_position();
    let c = dir.path().join("c.arrow");
    let summary = curate_to_manifest_with(&remote, sql, rule, &c, options).expect("s3");
    assert!(summary.selection, "{:?}", summary.declined);
    let node = tempfile::tempdir().expect("tempdir");
    let selection =
        reel_manifest::open_uri_with(c.to_str().expect("utf-8"), node.path(), &server.options())
            .expect("opens, fetching its bases");
    assert!(
        selection
            .bases()
            .all(|b| b.location.starts_with("s3://warehouse/wh/tables/episodes/")),
        "{:?}",
        selection
            .bases()
            .map(|b| b.location.clone())
            .collect::<Vec<_>>()
    );
    assert_same_episodes(&selection, &Manifest::open(&b).expect("opens"), sql);
}

/// Runs `f` with the S3 server's credentials in the environment, as a user's shell has
/// them (the tables' engine and the store both read them there).
fn with_credentials<T>(server: &reel_io::test_support::S3Server, f: impl FnOnce() -> T) -> T {
    let options = server.options();
    // SAFETY: the tests of this binary that read these variables all set them alike.
    unsafe {
        std::env::set_var(
            "AWS_ACCESS_KEY_ID",
            options.access_key_id.unwrap_or_default(),
        );
        std::env::set_var(
            "AWS_SECRET_ACCESS_KEY",
            options.secret_access_key.unwrap_or_default(),
        );
    }
    f()
}

/// What Python `deltalake` and Polars' `read_delta` read of the warehouse table at
/// `url`: `episode_id,ingested_at_ns` lines, sorted, from each.
fn independent_read(url: &str, storage: &serde_json::Value) -> (String, String) {
    let script = r#"
import json, sys
import deltalake, polars as pl
url, options = sys.argv[1], json.loads(sys.argv[2]) or None
rows = deltalake.DeltaTable(url, storage_options=options).to_pyarrow_table().to_pylist()
print(";".join(sorted(f"{r['episode_id']},{r['ingested_at_ns']}" for r in rows)))
frame = pl.read_delta(url, storage_options=options)
print(";".join(sorted(f"{r['episode_id']},{r['ingested_at_ns']}" for r in frame.to_dicts())))
"#;
    let out = Command::new(python())
        .args(["-c", script, url, &storage.to_string()])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines().map(str::to_owned);
    (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    )
}

/// What Reel's `SELECT episode_id, ingested_at_ns FROM <table>` sees, as those lines.
fn reel_reads(warehouse: &Warehouse, table: &str) -> String {
    let df = warehouse
        .query(&format!("SELECT episode_id, ingested_at_ns FROM {table}"))
        .expect("runs");
    let ids = df
        .column("episode_id")
        .expect("id")
        .str()
        .expect("utf8")
        .clone();
    let at = df
        .column("ingested_at_ns")
        .expect("at")
        .i64()
        .expect("i64")
        .clone();
    let mut lines: Vec<String> = ids
        .iter()
        .zip(at.iter())
        .map(|(id, at)| format!("{},{}", id.unwrap_or_default(), at.unwrap_or_default()))
        .collect();
    lines.sort();
    lines.join(";")
}

#[test]
fn deltalake_and_polars_read_the_tables_as_reel_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = dir.path().to_str().expect("utf-8");
    build_warehouse(dir.path());
    ingest(
        &tables(uri),
        "later",
        SEED,
        100..300,
        3,
        Some(AFTER_EVERYTHING),
        false,
    )
    .expect("ingests");
    let none = serde_json::Value::Null;
    for compacted in [false, true] {
        if compacted {
            compact(&open(dir.path())).expect("compacts");
        }
        let warehouse = open(dir.path());
        for table in ["episodes", "ingestions"] {
            let url = tables(uri).table(table).expect("table").url().to_string();
            let (deltalake, polars) = independent_read(&url, &none);
            let reel = reel_reads(&warehouse, table);
            assert_eq!(deltalake, reel, "{table}, compacted: {compacted}");
            assert_eq!(polars, reel, "{table}, compacted: {compacted}");
        }
    }
    // The same warehouse through S3.
    let server = reel_io::test_support::S3Server::start("warehouse").expect("s3s-fs starts");
    let remote = server.uri("warehouse", "wh");
    with_credentials(&server, || build_warehouse_at(&remote));
    let options = server.options();
    let storage = serde_json::json!({
        "AWS_ENDPOINT_URL": format!("http://127.0.0.1:{}", server.port()),
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": options.access_key_id.clone().unwrap_or_default(),
        "AWS_SECRET_ACCESS_KEY": options.secret_access_key.clone().unwrap_or_default(),
    });
    let warehouse =
        Warehouse::from_store(server.store("warehouse", "wh").expect("store")).expect("opens s3");
    let url = with_credentials(&server, || {
        tables(&remote)
            .table("episodes")
            .expect("table")
            .url()
            .to_string()
    });
    let (deltalake, polars) = independent_read(&url, &storage);
    let reel = reel_reads(&warehouse, "episodes");
    assert_eq!(
        (deltalake.as_str(), polars.as_str()),
        (reel.as_str(), reel.as_str())
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("lists") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            out.extend(walk(&path))
        } else {
            out.push(path)
        }
    }
    out
}
