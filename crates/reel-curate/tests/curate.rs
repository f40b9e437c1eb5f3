//! SQL curation against generated warehouses: exact rows for each kind of
//! filter, latest-version deduplication (from the log, from a compaction, and
//! from a compaction with files ingested since), manifests readable by pyarrow
//! and polars, and the same result from an S3 warehouse.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use reel_curate::synthetic::{Row, parquet_file, parquet_file_ingested_at, row};
use reel_curate::{
    CompactOptions, CompactionState, CurateError, CurationOptions, QueryRefusal, Warehouse,
    compact, compact_with, curate_to_manifest, curate_to_manifest_with,
};
use reel_io::{ErrorKind, Kinded};
use reel_manifest::{Manifest, SamplingRule};

const SEED: u64 = 17;
const EPISODES: u64 = 600;
/// Episodes 0..200 are re-ingested by a newer pipeline in a second file.
const REINGESTED: u64 = 200;

fn build_warehouse(dir: &Path) -> Vec<Row> {
    let episodes = dir.join("episodes/ingest_date=2026-11-01");
    std::fs::create_dir_all(&episodes).expect("mkdir");
    std::fs::write(
        episodes.join("part-0000.parquet"),
        parquet_file(SEED, 0..EPISODES, 1).expect("encodes"),
    )
    .expect("writes");
    let later = dir.join("episodes/ingest_date=2026-11-20");
    std::fs::create_dir_all(&later).expect("mkdir");
    std::fs::write(
        later.join("part-0000.parquet"),
        parquet_file(SEED, 0..REINGESTED, 2).expect("encodes"),
    )
    .expect("writes");
    // What a query must see: the latest ingestion of each episode.
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

/// Runs every case against `warehouse` and checks its manifest against `latest`,
/// the rows the warehouse's `episodes` table must hold.
fn check_cases(warehouse: &Warehouse, latest: &[Row], dir: &Path) {
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

        // By position: a selection of the compaction's bases wherever there is a
        // current compaction, reading exactly as the manifest of copied rows.
        let by_position = dir.join(format!("p{i}.arrow"));
        let options = CurationOptions::default().by_position();
        let summary = curate_to_manifest_with(warehouse, sql, rule, &by_position, options)
            .unwrap_or_else(|e| panic!("{sql} by position: {e}"));
        let compacted = matches!(
            warehouse.compaction_state(),
            CompactionState::Current { .. }
        );
        assert_eq!(summary.selection, compacted, "{sql}");
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
    assert_eq!(warehouse.files().len(), 2);
    assert_eq!(warehouse.compaction_state(), &CompactionState::None);
    check_cases(&warehouse, &latest, dir.path());
}

/// Later than any generated ingestion (those end 761 days after 2025-01-01).
const AFTER_EVERYTHING: i64 = 1_735_689_600_000_000_000 + 800 * 86_400_000_000_000;

#[test]
fn a_compaction_answers_every_query_like_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut latest = build_warehouse(dir.path());
    let first = compact(&open(dir.path())).expect("compacts");
    assert!(first.written);
    assert_eq!((first.rows, first.covered), (EPISODES, 2));
    let warehouse = open(dir.path());
    let log_snapshot = format!("wh-{}", first.id.trim_start_matches("c-"));
    assert_eq!(
        warehouse.snapshot_id(),
        format!("{log_snapshot}+{}", first.id),
        "the snapshot names the compaction it read"
    );
    assert_eq!(
        warehouse.compaction_state(),
        &CompactionState::Current {
            id: first.id.clone(),
            covered: 2,
            delta: 0
        }
    );
    check_cases(&warehouse, &latest, dir.path());
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
    let again = compact(&warehouse).expect("compacts");
    assert!(!again.written, "same files: nothing to write");
    assert_eq!(again.id, first.id);

    // Episodes 100..300 re-ingested after the compaction: the cheap merge.
    let later = dir.path().join("episodes/ingest_date=2026-12-01");
    std::fs::create_dir_all(&later).expect("mkdir");
    std::fs::write(
        later.join("part-0000.parquet"),
        parquet_file_ingested_at(SEED, 100..300, 3, Some(AFTER_EVERYTHING)).expect("encodes"),
    )
    .expect("writes");
    for i in 100..300 {
        let mut r = row(SEED, i, 3);
        r.ingested_at_ns = AFTER_EVERYTHING;
        latest[i as usize] = r;
    }
    let warehouse = open(dir.path());
    assert!(matches!(
        warehouse.compaction_state(),
        CompactionState::Current { delta: 1, .. }
    ));
    check_cases(&warehouse, &latest, dir.path());

    // A file whose rows predate the compaction's newest (a late upload of
    // first ingestions): they must lose to the versions already compacted.
    std::fs::write(
        later.join("part-0001.parquet"),
        parquet_file(SEED, 250..450, 0).expect("encodes"),
    )
    .expect("writes");
    let warehouse = open(dir.path());
    assert!(matches!(
        warehouse.compaction_state(),
        CompactionState::Current { delta: 2, .. }
    ));
    check_cases(&warehouse, &latest, dir.path());

    // Compacting again folds both files in; the previous compaction stays for
    // curations still reading it, older ones go.
    let second = compact(&warehouse).expect("compacts");
    assert!(second.written && second.id != first.id);
    assert_eq!((second.rows, second.covered), (EPISODES, 4));
    let warehouse = open(dir.path());
    check_cases(&warehouse, &latest, dir.path());
    std::fs::write(
        later.join("part-0002.parquet"),
        parquet_file_ingested_at(SEED, 590..600, 3, Some(AFTER_EVERYTHING + 1)).expect("encodes"),
    )
    .expect("writes");
    for i in 590..600 {
        let mut r = row(SEED, i, 3);
        r.ingested_at_ns = AFTER_EVERYTHING + 1;
        latest[i as usize] = r;
    }
    // Built from the previous compaction's parts plus the new file.
    let third = compact(&open(dir.path())).expect("compacts");
    check_cases(&open(dir.path()), &latest, dir.path());
    let mut folders: Vec<String> = std::fs::read_dir(dir.path().join("compacted"))
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("c-"))
        .collect();
    folders.sort();
    let mut want = vec![first.id.clone(), second.id.clone(), third.id.clone()];
    want.sort();
    assert_eq!(folders, want);
    let files = |id: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("compacted").join(id))
            .expect("lists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        files(&first.id),
        ["part-00000.episodes.arrow"],
        "the parts of compactions before the previous one go, their bases stay"
    );
    assert!(files(&second.id).iter().any(|n| n.ends_with(".parquet")));
    // The selection of the first compaction still reads as it did.
    assert_same_episodes(
        &Manifest::open(&kept).expect("a selection of an old compaction opens"),
        &Manifest::open(&kept_plain).expect("opens"),
        sql,
    );
}

#[test]
fn a_compaction_in_many_parts_holds_each_episode_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let latest = build_warehouse(dir.path());
    // About 4 KB of input per part: dozens of parts, some possibly empty.
    let options = CompactOptions {
        part_input_bytes: 4096,
    };
    let summary = compact_with(&open(dir.path()), options).expect("compacts");
    assert!(summary.parts > 10, "{} parts", summary.parts);
    assert_eq!(summary.rows, EPISODES);
    check_cases(&open(dir.path()), &latest, dir.path());
}

#[test]
fn a_stale_or_damaged_compaction_is_never_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    build_warehouse(dir.path());
    let summary = compact(&open(dir.path())).expect("compacts");
    // A covered file is rewritten with fewer rows: the compaction holds rows
    // the log no longer has.
    std::fs::write(
        dir.path()
            .join("episodes/ingest_date=2026-11-20/part-0000.parquet"),
        parquet_file(SEED, 0..150, 2).expect("encodes"),
    )
    .expect("writes");
    let warehouse = open(dir.path());
    match warehouse.compaction_state() {
        CompactionState::Stale { id, reason } => {
            assert_eq!(id, &summary.id);
            assert!(reason.contains("ingest_date=2026-11-20"), "{reason}");
        }
        other => panic!("expected a stale compaction, got {other:?}"),
    }
    let latest: Vec<Row> = (0..EPISODES)
        .map(|i| row(SEED, i, if i < 150 { 2 } else { 1 }))
        .collect();
    check_cases(&warehouse, &latest, dir.path());

    std::fs::write(
        dir.path().join("compacted/CURRENT.json"),
        b"{\"version\": 1, \"id\"",
    )
    .expect("writes");
    let err = Warehouse::open(dir.path().to_str().expect("utf-8")).expect_err("damaged pointer");
    assert!(matches!(err, CurateError::BadCompaction { .. }), "{err}");
    assert!(err.to_string().contains("CURRENT.json"), "{err}");
}

/// Rows `range` as a part of warehouse schema version 1 (before the `source_*` columns),
/// written by arrow-rs as ingest wrote it then.
fn version_1_part(range: std::ops::Range<u64>) -> Vec<u8> {
    use reel_manifest::warehouse::{WarehouseBatch, warehouse_schema};
    let mut batch = WarehouseBatch::new();
    for i in range {
        batch.push(&row(SEED, i, 0).as_warehouse_row());
    }
    let batch = batch.finish().expect("batch");
    let schema = warehouse_schema();
    let first_source = schema.index_of("source_format").expect("a source column");
    let batch = batch
        .project(&(0..first_source).collect::<Vec<_>>())
        .expect("projects");
    let mut out = Vec::new();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(&mut out, batch.schema(), None).expect("writer");
    writer.write(&batch).expect("writes");
    writer.close().expect("closes");
    out
}

#[test]
fn parts_of_schema_version_1_read_with_null_source_columns() {
    use reel_manifest::warehouse::{SourceDataset, WarehouseBatch, encode_parquet};
    let dir = tempfile::tempdir().expect("tempdir");
    let episodes = dir.path().join("episodes");
    std::fs::create_dir_all(&episodes).expect("mkdir");
    // Version 1 parts before and after a version 2 part: the scan's columns must not
    // depend on which part it lists first.
    std::fs::write(episodes.join("a-part.parquet"), version_1_part(0..40)).expect("writes");
    std::fs::write(episodes.join("c-part.parquet"), version_1_part(40..80)).expect("writes");
    let imported = SourceDataset {
        format: "lerobot".into(),
        dataset: "lerobot/pusht".into(),
        revision: "v3.0".into(),
        episode_index: None,
        fps: Some(10.0),
    };
    let mut batch = WarehouseBatch::new();
    let rows: Vec<Row> = (80..100).map(|i| row(SEED, i, 0)).collect();
    let sources: Vec<SourceDataset> = (0..20)
        .map(|index| SourceDataset {
            episode_index: Some(index),
            ..imported.clone()
        })
        .collect();
    for (row, source) in rows.iter().zip(&sources) {
        batch.push(&reel_manifest::warehouse::WarehouseRow {
            source: Some(source),
            ..row.as_warehouse_row()
        });
    }
    let part = encode_parquet(&[batch.finish().expect("batch")]).expect("encodes");
    std::fs::write(episodes.join("b-part.parquet"), part).expect("writes");

    let sql = "SELECT episode_id, source_format, source_episode_index, source_fps \
               FROM episodes ORDER BY episode_id";
    let check = |warehouse: &Warehouse, read: &str| {
        let df = warehouse.query(sql).expect("runs");
        assert_eq!(df.height(), 100, "{read}: every episode once");
        let ids = df
            .column("episode_id")
            .expect("ids")
            .str()
            .expect("utf8")
            .clone();
        let format = df
            .column("source_format")
            .expect("format")
            .str()
            .expect("utf8")
            .clone();
        let index = df
            .column("source_episode_index")
            .expect("index")
            .i64()
            .expect("i64")
            .clone();
        let fps = df
            .column("source_fps")
            .expect("fps")
            .f64()
            .expect("f64")
            .clone();
        let imported_ids: BTreeMap<String, i64> = rows
            .iter()
            .zip(0..)
            .map(|(row, index)| (row.episode_id.clone(), index))
            .collect();
        for i in 0..df.height() {
            let id = ids.get(i).expect("an id");
            match imported_ids.get(id) {
                Some(want) => {
                    assert_eq!(format.get(i), Some("lerobot"), "{read}: {id}");
                    assert_eq!(index.get(i), Some(*want), "{read}: {id}");
                    assert_eq!(fps.get(i), Some(10.0), "{read}: {id}");
                }
                None => {
                    assert_eq!(format.get(i), None, "{read}: {id} of version 1");
                    assert_eq!((index.get(i), fps.get(i)), (None, None), "{read}: {id}");
                }
            }
        }
    };
    check(&open(dir.path()), "the log");
    let summary = compact(&open(dir.path())).expect("compacts");
    assert_eq!(summary.rows, 100);
    check(&open(dir.path()), "the compaction");
    // A version 1 part written after the compaction (an older ingest still running),
    // merged at query time.
    std::fs::write(episodes.join("d-part.parquet"), version_1_part(100..110)).expect("writes");
    let df = open(dir.path()).query(sql).expect("runs");
    assert_eq!(df.height(), 110);
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
    let all = warehouse
        .scan_all()
        .expect("scans")
        .collect()
        .expect("collects");
    assert_eq!(
        all.height(),
        (EPISODES + REINGESTED) as usize,
        "the raw table keeps every version"
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

    // The same ingestions uploaded twice, after the compaction: every episode of the
    // file twice at one ingestion time. Both layouts refuse the query's doubled episode.
    let again = dir.path().join("episodes/ingest_date=2026-12-02");
    std::fs::create_dir_all(&again).expect("mkdir");
    std::fs::copy(
        dir.path()
            .join("episodes/ingest_date=2026-11-01/part-0000.parquet"),
        again.join("part-0000.parquet"),
    )
    .expect("copies");
    let warehouse = open(dir.path());
    let sql = "SELECT * FROM episodes WHERE NOT success";
    for options in [CurationOptions::default(), by_position] {
        let err = curate_to_manifest_with(&warehouse, sql, rule, &out, options).expect_err("twice");
        assert!(matches!(err, CurateError::DuplicateEpisode { .. }), "{err}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".newer-"))
        .collect();
    assert!(leftovers.is_empty(), "nothing left beside: {leftovers:?}");

    // Compacting those rows still succeeds; a manifest would refuse them, so the
    // compaction writes no bases and curation by position is self-contained.
    let summary = compact(&warehouse).expect("compacts despite rows a manifest refuses");
    let folder = dir.path().join("compacted").join(&summary.id);
    let names: Vec<String> = std::fs::read_dir(&folder)
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".episodes.arrow")),
        "{names:?}"
    );
    let err = curate_to_manifest_with(&open(dir.path()), sql, rule, &out, by_position)
        .expect_err("still twice");
    assert!(matches!(err, CurateError::DuplicateEpisode { .. }), "{err}");
}

/// The test warehouse, compacted, then episodes `range` ingested again since.
fn compacted_then_reingested(dir: &Path, range: std::ops::Range<u64>) -> Warehouse {
    build_warehouse(dir);
    compact(&open(dir)).expect("compacts");
    let later = dir.join("episodes/ingest_date=2026-12-01");
    std::fs::create_dir_all(&later).expect("mkdir");
    std::fs::write(
        later.join("part-0000.parquet"),
        parquet_file(SEED, range, 3).expect("encodes"),
    )
    .expect("writes");
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
    let warehouse = compacted_then_reingested(dir.path(), 100..160);
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
    let warehouse = compacted_then_reingested(dir.path(), 0..50);
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
    let store = server.store("warehouse", "wh").expect("store");
    for entry in walk(&dir.path().join("episodes")) {
        let key = entry
            .strip_prefix(dir.path())
            .expect("inside")
            .to_string_lossy()
            .into_owned();
        store
            .write_atomic(&key, std::fs::read(&entry).expect("reads"))
            .expect("uploads");
    }
    let sql = "SELECT * FROM episodes WHERE task = 'stack_cups' AND success";
    let rule = SamplingRule::at_hz(10.0, 1.0, 1.0);
    let local = Warehouse::open(dir.path().to_str().expect("utf-8")).expect("opens");
    let remote = Warehouse::from_store(store).expect("opens s3");
    let (a, b) = (dir.path().join("a.arrow"), dir.path().join("b.arrow"));
    curate_to_manifest(&local, sql, rule, &a).expect("local");
    curate_to_manifest(&remote, sql, rule, &b).expect("s3");
    assert_eq!(manifest_ids(&a), manifest_ids(&b));
    assert_eq!(
        local.snapshot_id(),
        remote.snapshot_id(),
        "same files, same snapshot"
    );

    // Compacted on S3 and locally: the same rows, in the same order.
    let summary = compact(&remote).expect("compacts on s3");
    assert_eq!(summary.rows, EPISODES);
    compact(&local).expect("compacts locally");
    let remote =
        Warehouse::from_store(server.store("warehouse", "wh").expect("store")).expect("opens s3");
    assert!(matches!(
        remote.compaction_state(),
        CompactionState::Current { delta: 0, .. }
    ));
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
    assert_eq!(local.snapshot_id(), remote.snapshot_id());

    // By position, the remote selection points at the bases in the store by their
    // object URIs, and reads as the local one.
    let options = CurationOptions::default().by_position();
    let c = dir.path().join("c.arrow");
    let summary = curate_to_manifest_with(&remote, sql, rule, &c, options).expect("s3");
    assert!(summary.selection);
    let node = tempfile::tempdir().expect("tempdir");
    let selection =
        reel_manifest::open_uri_with(c.to_str().expect("utf-8"), node.path(), &server.options())
            .expect("opens, fetching its bases");
    assert!(
        selection
            .bases()
            .all(|b| b.location.starts_with("s3://warehouse/wh/compacted/"))
    );
    assert_same_episodes(&selection, &Manifest::open(&b).expect("opens"), sql);
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
