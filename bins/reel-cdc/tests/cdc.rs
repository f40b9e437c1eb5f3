//! `reel-cdc` against a real PostgreSQL: every kind of change lands once, curation joins
//! the captured tables with the warehouse, SIGKILLs under load lose and double nothing,
//! and a misconfigured server gets an error that says what to fix.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arrow_array::Array;
use reel_cdc::Database;
use reel_cdc::test_support::PgServer;
use reel_curate::Warehouse;

fn reel_cdc(url: &str, warehouse: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_reel-cdc"));
    command
        .args(["--postgres", url, "--warehouse"])
        .arg(warehouse)
        .args(["--quiet", "--flush-ms", "50"]);
    command
}

fn once(url: &str, warehouse: &Path) -> Output {
    let out = reel_cdc(url, warehouse)
        .arg("--once")
        .output()
        .expect("run reel-cdc");
    assert!(
        out.status.success(),
        "reel-cdc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A warehouse with generated episodes (the warehouse's `episodes` table) whose ids the
/// metadata database uses too.
fn warehouse_with_episodes(dir: &Path, n: u64) -> Vec<String> {
    let tables = reel_warehouse::Warehouse::open(&dir.to_string_lossy()).expect("warehouse");
    reel_curate::synthetic::ingest(&tables, "episodes", 7, 0..n, 0, None, true).expect("rows");
    (0..n)
        .map(|i| reel_curate::synthetic::row(7, i, 0).episode_id)
        .collect()
}

/// Rows of `sql` on the database, as text, sorted.
fn db_rows(db: &mut Database, sql: &str) -> Vec<Vec<Option<String>>> {
    let mut rows = db.query(sql).expect("query");
    rows.sort();
    rows
}

/// The same columns of the warehouse's view of a captured table, as PostgreSQL prints
/// them, sorted.
fn warehouse_rows(warehouse: &Path, sql: &str) -> Vec<Vec<Option<String>>> {
    let frame = Warehouse::open(&warehouse.to_string_lossy())
        .expect("warehouse")
        .query(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows = Vec::new();
    for i in 0..frame.height() {
        let row = frame
            .columns()
            .iter()
            .map(|c| {
                let v = c.get(i).expect("cell");
                match v {
                    polars::prelude::AnyValue::Null => None,
                    polars::prelude::AnyValue::Boolean(b) => Some(if b { "t" } else { "f" }.into()),
                    polars::prelude::AnyValue::String(s) => Some(s.to_owned()),
                    polars::prelude::AnyValue::StringOwned(s) => Some(s.to_string()),
                    other => Some(other.to_string()),
                }
            })
            .collect();
        rows.push(row);
    }
    rows.sort();
    rows
}

/// The columns `columns` of the captured table `table` as independent Delta readers
/// (Python `deltalake`, and Polars' `read_delta`) read its folder, as PostgreSQL prints
/// them, sorted; both readers must agree.
fn independent_rows(warehouse: &Path, table: &str, columns: &[&str]) -> Vec<Vec<Option<String>>> {
    let folder = warehouse
        .join("tables")
        .join(reel_manifest::changes::captured_table_name(table));
    let script = r#"
import json, sys
import deltalake, polars
path, columns = sys.argv[1], sys.argv[2].split(",")
def text(v):
    if v is None: return None
    if isinstance(v, bool): return "t" if v else "f"
    return str(v)
def rows(table):
    return sorted([[text(v) for v in row] for row in zip(*(table[c] for c in columns))],
                  key=lambda r: [(x is None, x or "") for x in r])
a = deltalake.DeltaTable(path).to_pyarrow_table(columns=columns).to_pydict()
b = polars.read_delta(path).select(columns).to_dict(as_series=False)
assert rows(a) == rows(b), "deltalake and polars disagree"
print(json.dumps(rows(a)))
"#;
    let python = reel_io::test_support::python().expect("the test venv's Python");
    let out = Command::new(python)
        .args(["-c", script])
        .arg(&folder)
        .arg(columns.join(","))
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "independent read of {}: {}",
        folder.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows: Vec<Vec<Option<String>>> =
        serde_json::from_slice(&out.stdout).expect("JSON rows");
    rows.sort();
    rows
}

/// The values of column `key` in every version of the captured table `table` (its Delta
/// table `db_<table>`), oldest first: what any reader could ever have read of it.
fn every_version(warehouse: &Path, table: &str, key: &str) -> Vec<Vec<String>> {
    let tables = reel_warehouse::Warehouse::open(&warehouse.to_string_lossy()).expect("tables");
    let table = tables
        .table(&reel_manifest::changes::captured_table_name(table))
        .expect("table");
    let latest = table.version(None).expect("latest").number();
    (0..=latest)
        .map(|v| {
            let rows = table
                .version(Some(v))
                .expect("version")
                .read(Some(&[key]))
                .expect("rows");
            let column = rows
                .column(0)
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .expect("text")
                .clone();
            (0..column.len())
                .map(|i| column.value(i).to_owned())
                .collect()
        })
        .collect()
}

/// The capture's position (its `txn` version) in the captured table `table`.
fn capture_position(warehouse: &Path, table: &str) -> Option<i64> {
    let tables = reel_warehouse::Warehouse::open(&warehouse.to_string_lossy()).expect("tables");
    tables
        .table(&reel_manifest::changes::captured_table_name(table))
        .expect("table")
        .version(None)
        .expect("latest")
        .app_version(&reel_manifest::changes::capture_app("reel"))
        .expect("position")
}

#[test]
fn every_kind_of_change_lands_once_and_curation_joins_it() {
    let pg = PgServer::start().expect("PostgreSQL");
    let url = pg.metadata_database("metadata").expect("database");
    let mut db = Database::connect(&url).expect("connect");
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    let ids = warehouse_with_episodes(&warehouse, 40);

    // Rows before the capture starts arrive through the snapshot.
    for id in &ids[..10] {
        db.query(&format!(
            "INSERT INTO episodes (episode_id, status, robot) VALUES ('{id}', 'recorded', 'aloha-01')"
        ))
        .expect("insert");
    }
    db.query(&format!(
        "INSERT INTO annotations (episode_id, key, value, author) VALUES ('{}', 'grasp', 'clean', 'ann')",
        ids[0]
    ))
    .expect("insert");
    once(&url, &warehouse);
    assert!(
        capture_position(&warehouse, "annotations").is_some(),
        "the snapshot committed"
    );

    // Then every kind of change, each its own transaction.
    for id in &ids[1..6] {
        db.query(&format!(
            "INSERT INTO annotations (episode_id, key, value, author) VALUES ('{id}', 'grasp', 'clean', 'ann')"
        ))
        .expect("insert");
    }
    db.query(&format!(
        "UPDATE annotations SET value = 'slipped' WHERE episode_id = '{}'",
        ids[1]
    ))
    .expect("update");
    db.query(&format!(
        "DELETE FROM annotations WHERE episode_id = '{}'",
        ids[2]
    ))
    .expect("delete");
    // A primary-key change: the old row leaves, the new one arrives.
    db.query(&format!(
        "UPDATE annotations SET key = 'grasp_quality' WHERE episode_id = '{}'",
        ids[3]
    ))
    .expect("key change");
    // Rolled back: never lands.
    db.query("BEGIN").expect("begin");
    db.query(&format!(
        "INSERT INTO annotations (episode_id, key, value, author) VALUES ('{}', 'rolled', 'back', 'x')",
        ids[7]
    ))
    .expect("insert");
    db.query("ROLLBACK").expect("rollback");
    // A large transaction: 20,000 rows in one commit.
    db.query(
        "INSERT INTO annotations (episode_id, key, value, author) \
         SELECT 'bulk-' || i, 'score', (i % 7)::text, 'bulk' FROM generate_series(1, 20000) i",
    )
    .expect("bulk");
    // A column added while captured, then set.
    db.query("ALTER TABLE annotations ADD COLUMN confidence float8")
        .expect("alter");
    db.query(&format!(
        "UPDATE annotations SET confidence = 0.25 WHERE episode_id = '{}'",
        ids[4]
    ))
    .expect("update");
    // A truncate, then new rows.
    db.query(&format!(
        "INSERT INTO qc_overrides (episode_id, \"check\", verdict, reason) VALUES ('{}', 'frozen_frames', 'pass', 'static scene')",
        ids[8]
    ))
    .expect("insert");
    db.query("TRUNCATE qc_overrides").expect("truncate");
    db.query(&format!(
        "INSERT INTO qc_overrides (episode_id, \"check\", verdict, reason) VALUES ('{}', 'camera_blackout', 'fail', 'lens cap')",
        ids[9]
    ))
    .expect("insert");
    db.query(&format!(
        "UPDATE episodes SET status = 'annotated' WHERE episode_id = '{}'",
        ids[0]
    ))
    .expect("update");
    db.query(&format!(
        "DELETE FROM episodes WHERE episode_id = '{}'",
        ids[9]
    ))
    .expect("delete");
    let out = once(&url, &warehouse);
    let lines = String::from_utf8_lossy(&out.stdout);
    assert!(lines.lines().any(|l| l.contains("\"summary\"")), "{lines}");

    // The warehouse's view of each table equals the database, column for column.
    let annotations = "SELECT episode_id, key, value, author, confidence FROM annotations";
    assert_eq!(
        warehouse_rows(&warehouse, annotations),
        db_rows(&mut db, annotations)
    );
    let qc = "SELECT episode_id, \"check\", verdict, reason FROM qc_overrides";
    assert_eq!(warehouse_rows(&warehouse, qc), db_rows(&mut db, qc));
    assert_eq!(
        warehouse_rows(
            &warehouse,
            "SELECT episode_id, status, robot FROM db_episodes"
        ),
        db_rows(&mut db, "SELECT episode_id, status, robot FROM episodes")
    );
    // No version of the table ever held the rolled-back insert, or a row twice.
    for keys in every_version(&warehouse, "annotations", "episode_id") {
        assert!(!keys.contains(&ids[7]), "a rolled-back insert landed");
        let bulk = keys.iter().filter(|k| k.starts_with("bulk-")).count();
        assert!(
            bulk == 0 || bulk == 20_000,
            "the bulk transaction landed in part: {bulk}"
        );
    }

    // A compaction of the captured tables answers the same; so do changes after it.
    let compaction =
        reel_curate::compact(&Warehouse::open(&warehouse.to_string_lossy()).expect("warehouse"))
            .expect("compact");
    let compacted: Vec<&str> = compaction
        .db_tables
        .iter()
        .map(|(t, _)| t.as_str())
        .collect();
    assert_eq!(compacted, ["annotations", "episodes", "qc_overrides"]);
    db.query(&format!(
        "DELETE FROM annotations WHERE episode_id = '{}' AND key = 'grasp_quality'",
        ids[3]
    ))
    .expect("delete");
    db.query("UPDATE annotations SET value = 'x' WHERE episode_id = 'bulk-7'")
        .expect("update");
    once(&url, &warehouse);
    assert_eq!(
        warehouse_rows(&warehouse, annotations),
        db_rows(&mut db, annotations)
    );
    assert_eq!(warehouse_rows(&warehouse, qc), db_rows(&mut db, qc));
    reel_curate::compact(&Warehouse::open(&warehouse.to_string_lossy()).expect("warehouse"))
        .expect("compact");
    assert_eq!(
        warehouse_rows(&warehouse, annotations),
        db_rows(&mut db, annotations)
    );
    // Any Delta reader sees PostgreSQL's own rows, with nothing of Reel's to apply.
    assert_eq!(
        independent_rows(
            &warehouse,
            "annotations",
            &["episode_id", "key", "value", "author", "confidence"]
        ),
        db_rows(&mut db, annotations)
    );
    assert_eq!(
        independent_rows(
            &warehouse,
            "qc_overrides",
            &["episode_id", "check", "verdict", "reason"]
        ),
        db_rows(&mut db, qc)
    );

    // A curation joins the captured annotations with the warehouse's episodes.
    let manifest = dir.path().join("annotated.arrow");
    let summary = reel_curate::curate_to_manifest(
        &Warehouse::open(&warehouse.to_string_lossy()).expect("warehouse"),
        "SELECT e.* FROM episodes e JOIN annotations a ON a.episode_id = e.episode_id \
         WHERE a.key = 'grasp' AND a.value = 'clean'",
        reel_manifest::SamplingRule::at_hz(10.0, 1.0, 1.0),
        &manifest,
    )
    .expect("curate");
    let clean: Vec<&String> = [&ids[0], &ids[4], &ids[5]].into_iter().collect();
    assert_eq!(summary.rows, clean.len());
    let rows = reel_manifest::Manifest::open(&manifest).expect("manifest");
    let mut got: Vec<String> = rows
        .episodes()
        .map(|e| e.episode_id().expect("id").to_owned())
        .collect();
    got.sort();
    let mut want: Vec<String> = clean.into_iter().cloned().collect();
    want.sort();
    assert_eq!(got, want);

    // --drop removes the slot, and the server stops keeping WAL for it.
    let out = Command::new(env!("CARGO_BIN_EXE_reel-cdc"))
        .args(["--postgres", &url, "--drop", "--quiet"])
        .output()
        .expect("drop");
    assert!(out.status.success());
    assert!(!db.slot_exists("reel").expect("slots"));
}

#[test]
fn rows_a_transaction_writes_after_its_truncate_are_kept() {
    let pg = PgServer::start().expect("PostgreSQL");
    let url = pg.metadata_database("metadata").expect("database");
    let mut db = Database::connect(&url).expect("connect");
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    let ids = warehouse_with_episodes(&warehouse, 20);
    let insert = |db: &mut Database, id: &str, check: &str| {
        db.query(&format!(
            "INSERT INTO qc_overrides (episode_id, \"check\", verdict, reason) \
             VALUES ('{id}', '{check}', 'pass', 'reviewed')"
        ))
        .expect("insert");
    };
    let qc = "SELECT episode_id, \"check\", verdict, reason FROM qc_overrides";
    // The warehouse's view of the table equals the database's, before and after a
    // compaction of the change log (which reads the log the same way).
    let same = |db: &mut Database, what: &str| {
        let want = db_rows(db, qc);
        assert_eq!(warehouse_rows(&warehouse, qc), want, "{what}");
        reel_curate::compact(&Warehouse::open(&warehouse.to_string_lossy()).expect("warehouse"))
            .expect("compact");
        assert_eq!(warehouse_rows(&warehouse, qc), want, "{what}, compacted");
        want.len()
    };
    for id in &ids[..3] {
        insert(&mut db, id, "frozen_frames");
    }
    once(&url, &warehouse);
    assert_eq!(same(&mut db, "snapshot"), 3);

    // Truncate and reload in one transaction: the reload shares the truncate's LSN.
    db.query("BEGIN").expect("begin");
    db.query("TRUNCATE qc_overrides").expect("truncate");
    for id in &ids[3..8] {
        insert(&mut db, id, "camera_blackout");
    }
    db.query("COMMIT").expect("commit");
    once(&url, &warehouse);
    assert_eq!(same(&mut db, "truncate and reload"), 5);

    // Two truncates in one transaction, rows before, between and after them.
    db.query("BEGIN").expect("begin");
    insert(&mut db, &ids[8], "before");
    db.query("TRUNCATE qc_overrides").expect("truncate");
    insert(&mut db, &ids[9], "between");
    insert(&mut db, &ids[10], "between");
    db.query("TRUNCATE qc_overrides").expect("truncate");
    for id in &ids[11..14] {
        insert(&mut db, id, "after");
    }
    db.query("COMMIT").expect("commit");
    // And a later transaction on top of it.
    insert(&mut db, &ids[14], "later");
    once(&url, &warehouse);
    assert_eq!(same(&mut db, "two truncates"), 4);

    // A truncate as the table's last change leaves it empty.
    insert(&mut db, &ids[15], "gone");
    db.query("TRUNCATE qc_overrides").expect("truncate");
    once(&url, &warehouse);
    assert_eq!(same(&mut db, "truncate last"), 0);
}

/// A steady writer: inserts (each a new key), updates and deletes of annotations, one
/// small transaction at a time; counts the committed inserts.
fn writer(url: String, stop: Arc<AtomicBool>, inserted: Arc<AtomicU64>) {
    let mut db = Database::connect(&url).expect("writer");
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let sql = match i % 5 {
            0 => format!(
                "UPDATE annotations SET value = 'v{i}' WHERE episode_id = 'w-{}'",
                i / 2
            ),
            3 => format!("DELETE FROM annotations WHERE episode_id = 'w-{}'", i / 3),
            _ => format!(
                "INSERT INTO annotations (episode_id, key, value, author) VALUES ('w-{i}', 'k', 'v', 'w')"
            ),
        };
        db.query(&sql).expect("write");
        if !matches!(i % 5, 0 | 3) {
            inserted.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn sigkill_at_random_moments_under_load_then_resume_loses_and_doubles_nothing() {
    let pg = PgServer::start().expect("PostgreSQL");
    let url = pg.metadata_database("metadata").expect("database");
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    warehouse_with_episodes(&warehouse, 4);
    // Rows for the snapshot, and a first kill early enough to land in it.
    let mut db = Database::connect(&url).expect("connect");
    db.query(
        "INSERT INTO annotations (episode_id, key, value, author) \
         SELECT 'pre-' || i, 'k', 'v', 'pre' FROM generate_series(1, 5000) i",
    )
    .expect("preload");
    let mut child = reel_cdc(&url, &warehouse)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(40));
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    once(&url, &warehouse);

    // Then a steady writer, and ten kills at deterministic "random" moments (xorshift)
    // while streaming and flushing every 50 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let inserted = Arc::new(AtomicU64::new(0));
    let load = {
        let (url, stop, inserted) = (url.clone(), stop.clone(), inserted.clone());
        std::thread::spawn(move || writer(url, stop, inserted))
    };
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..10 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let wait = Duration::from_millis(80 + state % 500);
        let mut child: Child = reel_cdc(&url, &warehouse)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(wait);
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
    }
    stop.store(true, Ordering::Relaxed);
    load.join().expect("writer");
    once(&url, &warehouse);

    let sql = "SELECT episode_id, key, value, author FROM annotations";
    let want = db_rows(&mut db, sql);
    assert!(
        want.len() > 5100,
        "the writer wrote too little: {}",
        want.len()
    );
    assert_eq!(warehouse_rows(&warehouse, sql), want);
    assert_eq!(
        independent_rows(
            &warehouse,
            "annotations",
            &["episode_id", "key", "value", "author"]
        ),
        want
    );
    // Every committed insert of the writer is there (a row is its key's: none can be
    // there twice), and the capture's position is the newest change's.
    let writer_rows = want
        .iter()
        .filter(|r| r[0].as_deref().is_some_and(|k| k.starts_with("w-")))
        .count();
    assert!(writer_rows > 0 && writer_rows as u64 <= inserted.load(Ordering::Relaxed));
    assert!(capture_position(&warehouse, "annotations").is_some());
}

fn failure(url: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_reel-cdc"))
        .args(["--postgres", url, "--warehouse"])
        .arg(dir.path())
        .arg("--once")
        .output()
        .expect("run");
    assert!(!out.status.success(), "reel-cdc succeeded against {url}");
    assert!(
        std::fs::read_dir(dir.path()).expect("dir").next().is_none(),
        "a refused capture wrote to the warehouse"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_misconfigured_database_gets_an_error_that_says_what_to_fix() {
    // Nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let err = failure(&format!(
        "postgresql://postgres:pw@127.0.0.1:{port}/metadata"
    ));
    assert!(err.contains("cannot be reached"), "{err}");
    assert!(!err.contains(":pw@"), "the password was printed: {err}");

    let pg = PgServer::start().expect("PostgreSQL");
    let url = pg.metadata_database("metadata").expect("database");
    // Wrong password.
    let err = failure(&url.replace(reel_cdc::test_support::PASSWORD, "wrong-password"));
    assert!(err.contains("refused the credentials"), "{err}");
    assert!(
        !err.contains("wrong-password"),
        "the password was printed: {err}"
    );
    // A table without a primary key.
    let mut db = Database::connect(&url).expect("connect");
    db.query("CREATE TABLE notes (episode_id text, note text)")
        .expect("create");
    let out = Command::new(env!("CARGO_BIN_EXE_reel-cdc"))
        .args([
            "--postgres",
            &url,
            "--tables",
            "annotations,notes",
            "--once",
            "--warehouse",
        ])
        .arg(tempfile::tempdir().expect("tempdir").path())
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("notes") && err.contains("no primary key"),
        "{err}"
    );

    // wal_level = replica.
    let replica = PgServer::start_with_wal_level("replica").expect("PostgreSQL");
    let url = replica.metadata_database("metadata").expect("database");
    let err = failure(&url);
    assert!(
        err.contains("wal_level") && err.contains("logical") && err.contains("restart"),
        "{err}"
    );
}

#[test]
fn a_quiet_capture_moves_its_slot_past_other_tables_wal() {
    let pg = PgServer::start().expect("PostgreSQL");
    let url = pg.metadata_database("metadata").expect("database");
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().join("warehouse");
    once(&url, &warehouse);
    let mut db = Database::connect(&url).expect("connect");
    db.query("CREATE TABLE telemetry (id int PRIMARY KEY, payload text)")
        .expect("create");
    let mut child = reel_cdc(&url, &warehouse)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // WAL of a table the capture does not follow: pgoutput sends nothing for it, so only
    // the capture's markers can let the slot move past it.
    db.query("INSERT INTO telemetry SELECT i, repeat('x', 200) FROM generate_series(1, 20000) i")
        .expect("insert");
    let written = db.current_wal_lsn().expect("lsn");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut confirmed = 0;
    while std::time::Instant::now() < deadline {
        confirmed = db.confirmed_flush_lsn("reel").expect("slot").unwrap_or(0);
        if confirmed >= written {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert!(
        confirmed >= written,
        "the slot stayed at {confirmed:X}, before the other table's WAL ending at {written:X}"
    );
}
