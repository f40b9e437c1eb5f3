//! Delta tables as Reel writes them, checked by what the format promises and by readers
//! that are not Reel's: Python `deltalake` and Polars' `read_delta`, on a folder and through
//! an S3-compatible server on loopback.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use reel_io::test_support::{S3Server, python};
use reel_io::{ErrorKind, Kinded, StoreOptions};
use reel_warehouse::{Change, Compression, Layout, Table, Warehouse, WarehouseError};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("id", DataType::Utf8, false),
        Field::new("score", DataType::Int64, false),
        Field::new("at", DataType::Int64, false),
        Field::new("note", DataType::Utf8, true),
    ]))
}

/// Rows (id, score, at): the key is a hash of the id, spread over the signed range.
fn rows(rows: &[(&str, i64, i64)]) -> RecordBatch {
    let key = |id: &str| {
        id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }) as i64
    };
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| key(r.0)))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from(
                rows.iter()
                    .map(|r| (r.1 % 2 == 0).then_some("even"))
                    .collect::<Vec<_>>(),
            )),
        ],
    )
    .expect("rows")
}

fn upsert<'a>(app: (&'a str, i64), batch: RecordBatch) -> Change<'a> {
    Change {
        app: Some(app),
        add: vec![batch],
        key: vec!["key", "id"],
        newest: Some("at"),
        ..Change::default()
    }
}

/// The table's rows at `version` (latest when `None`), read from its files: id → (score,
/// at); a row twice fails.
fn contents(
    warehouse: &Warehouse,
    table: &Table,
    version: Option<u64>,
) -> BTreeMap<String, (i64, i64)> {
    let version = table.version(version).expect("version");
    let store = warehouse.store();
    let mut out = BTreeMap::new();
    for file in version.files().expect("files") {
        let bytes = store.read(&file.key).expect("reads");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .expect("parquet")
            .build()
            .expect("reader");
        for batch in reader {
            let batch = batch.expect("batch");
            let ids = batch.column_by_name("id").expect("id");
            let ids = ids.as_any().downcast_ref::<StringArray>().expect("utf8");
            let int = |name: &str| {
                batch
                    .column_by_name(name)
                    .expect("column")
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("i64")
                    .clone()
            };
            let (scores, ats) = (int("score"), int("at"));
            for i in 0..batch.num_rows() {
                let previous = out.insert(ids.value(i).to_owned(), (scores.value(i), ats.value(i)));
                assert!(previous.is_none(), "{} twice", ids.value(i));
            }
        }
    }
    out
}

fn open(uri: &str, options: &StoreOptions) -> Warehouse {
    Warehouse::open_with(uri, options).expect("opens")
}

#[test]
fn rows_are_replaced_and_deleted_by_key_once_and_every_version_stays_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = open(
        dir.path().to_str().expect("utf-8"),
        &StoreOptions::default(),
    );
    let table = warehouse.table("scores").expect("table");
    assert!(matches!(
        table.version(None),
        Err(WarehouseError::NoTable { .. })
    ));
    assert!(
        table
            .create(&schema(), &[("delta.checkpointInterval", "10")])
            .expect("creates")
    );
    assert!(!table.create(&schema(), &[]).expect("exists"), "made once");

    let first = table
        .commit(&upsert(
            ("w", 1),
            rows(&[("a", 1, 10), ("b", 2, 10), ("c", 3, 10)]),
        ))
        .expect("commits");
    assert_eq!(
        (first.version, first.rows_added, first.rows_removed),
        (1, 3, 0)
    );
    // Made again (a writer that crashed after committing): nothing is added.
    let again = table
        .commit(&upsert(
            ("w", 1),
            rows(&[("a", 1, 10), ("b", 2, 10), ("c", 3, 10)]),
        ))
        .expect("commits");
    assert!(again.already && again.version == 1);

    // b replaced by a newer row; c's added row is older than the table's: it stays.
    let second = table
        .commit(&upsert(
            ("w", 2),
            rows(&[("b", 20, 11), ("c", 30, 9), ("d", 4, 11)]),
        ))
        .expect("commits");
    assert_eq!(
        (
            second.rows_added,
            second.rows_removed,
            second.rows_older,
            second.files_rewritten
        ),
        (2, 1, 1, 1)
    );
    let deleted = table
        .commit(&Change {
            app: Some(("w", 3)),
            key: vec!["key", "id"],
            delete: Some(rows(&[("a", 0, 0)]).project(&[0, 1]).expect("keys")),
            ..Change::default()
        })
        .expect("deletes");
    assert_eq!(deleted.rows_removed, 1);
    let latest = contents(&warehouse, &table, None);
    assert_eq!(
        latest,
        BTreeMap::from([
            ("b".to_owned(), (20, 11)),
            ("c".to_owned(), (3, 10)),
            ("d".to_owned(), (4, 11)),
        ])
    );
    // Time travel: version 1 reads as it was.
    assert_eq!(contents(&warehouse, &table, Some(1)).len(), 3);
    assert_eq!(contents(&warehouse, &table, Some(1))["b"], (2, 10));
    let err = table.version(Some(99)).expect_err("no such version");
    assert!(
        matches!(err, WarehouseError::NoVersion { version: 99, .. }),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Environment);

    // Two added rows of one key are refused, nothing committed.
    let err = table
        .commit(&upsert(("w", 4), rows(&[("e", 1, 1), ("e", 2, 1)])))
        .expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::BadInput);
    assert_eq!(
        table.version(None).expect("latest").number(),
        deleted.version
    );

    let truncated = table
        .commit(&Change {
            app: Some(("w", 5)),
            truncate: true,
            ..Change::default()
        })
        .expect("truncates");
    assert_eq!(truncated.rows_removed, 3);
    assert!(contents(&warehouse, &table, None).is_empty());
}

/// Writers committing to one table at once (each its own warehouse handle, as tasks of a
/// Slurm array are) all land: every row once, every writer's version recorded.
fn writers_at_once(uri: &str, options: &StoreOptions) {
    const WRITERS: usize = 8;
    let warehouse = open(uri, options);
    let table = warehouse.table("episodes").expect("table");
    table.create(&schema(), &[]).expect("creates");
    // Each writer adds its own rows, and one row every writer also writes ("shared").
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            let uri = uri.to_owned();
            let options = options.clone();
            scope.spawn(move || {
                let warehouse = Warehouse::open_with(&uri, &options).expect("opens");
                let table = warehouse.table("episodes").expect("table");
                let ids: Vec<String> = (0..5).map(|i| format!("w{w}-{i}")).collect();
                let mut batch: Vec<(&str, i64, i64)> =
                    ids.iter().map(|id| (id.as_str(), w as i64, 1)).collect();
                batch.push(("shared", w as i64, w as i64));
                let app = format!("writer-{w}");
                let done = table
                    .commit(&upsert((&app, 1), rows(&batch)))
                    .expect("lands");
                assert!(!done.already);
            });
        }
    });
    let latest = table.version(None).expect("latest");
    for w in 0..WRITERS {
        assert_eq!(
            latest.app_version(&format!("writer-{w}")).expect("app"),
            Some(1),
            "writer {w}"
        );
    }
    let rows = contents(&warehouse, &table, None);
    assert_eq!(rows.len(), WRITERS * 5 + 1, "every row once");
    // The newest of the shared rows stays, whoever committed last.
    assert_eq!(rows["shared"], ((WRITERS - 1) as i64, (WRITERS - 1) as i64));
}

#[test]
fn eight_writers_at_once_on_a_folder_all_land() {
    let dir = tempfile::tempdir().expect("tempdir");
    writers_at_once(
        dir.path().to_str().expect("utf-8"),
        &StoreOptions::default(),
    );
}

#[test]
fn eight_writers_at_once_on_s3_all_land() {
    let server = S3Server::start("reel").expect("s3s-fs");
    writers_at_once(&server.uri("reel", "wh"), &server.options());
}

/// What Python `deltalake` and Polars' `read_delta` read of the table at `url`: sorted
/// `id,score,at` lines, from each reader.
fn python_reads(url: &str, storage: &[(&str, String)], version: Option<u64>) -> (String, String) {
    let options: serde_json::Map<String, serde_json::Value> = storage
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String(v.clone())))
        .collect();
    let script = r#"
import json, sys
import deltalake, polars as pl
url, options, version = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
table = deltalake.DeltaTable(url, storage_options=options or None, version=version)
rows = table.to_pyarrow_table().to_pylist()
print(";".join(sorted(f"{r['id']},{r['score']},{r['at']}" for r in rows)))
frame = pl.read_delta(url, storage_options=options or None, version=version)
print(";".join(sorted(f"{r['id']},{r['score']},{r['at']}" for r in frame.to_dicts())))
"#;
    let out = Command::new(python().expect("the test venv's Python"))
        .args(["-c", script, url])
        .arg(serde_json::Value::Object(options).to_string())
        .arg(version.map_or("null".to_owned(), |v| v.to_string()))
        .output()
        .expect("runs python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    (
        lines.next().unwrap_or_default().to_owned(),
        lines.next().unwrap_or_default().to_owned(),
    )
}

fn expected(rows: &BTreeMap<String, (i64, i64)>) -> String {
    let mut lines: Vec<String> = rows
        .iter()
        .map(|(id, (score, at))| format!("{id},{score},{at}"))
        .collect();
    lines.sort();
    lines.join(";")
}

fn independent_readers(uri: &str, options: &StoreOptions, storage: &[(&str, String)]) {
    let warehouse = open(uri, options);
    let table = warehouse.table("episodes").expect("table");
    table.create(&schema(), &[]).expect("creates");
    table
        .commit(&upsert(
            ("w", 1),
            rows(&[("a", 1, 1), ("b", 2, 1), ("c", 3, 1)]),
        ))
        .expect("commits");
    table
        .commit(&upsert(("w", 2), rows(&[("b", 5, 2), ("d", 4, 2)])))
        .expect("commits");
    let latest = contents(&warehouse, &table, None);
    let (deltalake, polars) = python_reads(table.url().as_str(), storage, None);
    assert_eq!(deltalake, expected(&latest), "deltalake");
    assert_eq!(polars, expected(&latest), "polars");
    let (deltalake, polars) = python_reads(table.url().as_str(), storage, Some(1));
    assert_eq!(deltalake, "a,1,1;b,2,1;c,3,1");
    assert_eq!(polars, deltalake);
    // Compacted and checkpointed, the same rows.
    let compacted = table
        .compact(&Layout {
            file_rows: 2,
            sort_by: vec!["id"],
            split_by: Some("key"),
            compression: Compression::Lz4,
        })
        .expect("compacts");
    assert!(compacted.version.is_some() && compacted.files_after >= 2);
    let (deltalake, polars) = python_reads(table.url().as_str(), storage, None);
    assert_eq!(
        (deltalake.as_str(), polars.as_str()),
        (expected(&latest).as_str(), expected(&latest).as_str())
    );
}

#[test]
fn deltalake_and_polars_read_the_rows_reel_committed_from_a_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    independent_readers(
        dir.path().to_str().expect("utf-8"),
        &StoreOptions::default(),
        &[],
    );
}

#[test]
fn deltalake_and_polars_read_the_rows_reel_committed_through_s3() {
    let server = S3Server::start("reel").expect("s3s-fs");
    let options = server.options();
    let storage = [
        (
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{}", server.port()),
        ),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        (
            "AWS_ACCESS_KEY_ID",
            options.access_key_id.clone().unwrap_or_default(),
        ),
        (
            "AWS_SECRET_ACCESS_KEY",
            options.secret_access_key.clone().unwrap_or_default(),
        ),
        ("AWS_S3_ALLOW_UNSAFE_RENAME", "true".to_owned()),
    ];
    independent_readers(&server.uri("reel", "wh"), &options, &storage);
}

#[test]
fn compaction_and_vacuum_keep_what_the_retention_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = open(
        dir.path().to_str().expect("utf-8"),
        &StoreOptions::default(),
    );
    let table = warehouse.table("episodes").expect("table");
    table.create(&schema(), &[]).expect("creates");
    for v in 1..=6i64 {
        let id = format!("e{v}");
        table
            .commit(&upsert(("w", v), rows(&[(&id, v, v), ("shared", v, v)])))
            .expect("commits");
    }
    let before = contents(&warehouse, &table, None);
    let files_before = table
        .version(None)
        .expect("v")
        .files()
        .expect("files")
        .len();
    let layout = Layout {
        file_rows: 4,
        sort_by: vec!["id"],
        split_by: Some("key"),
        compression: Compression::Zstd,
    };
    let compacted = table.compact(&layout).expect("compacts");
    assert_eq!(compacted.files_before, files_before);
    assert!(compacted.files_after <= 2, "{compacted:?}");
    assert_eq!(contents(&warehouse, &table, None), before, "same rows");
    assert_eq!(
        table.compact(&layout).expect("again").version,
        None,
        "already compact"
    );

    // Within the retention every version reads; past it, only what the latest reads.
    let now = reel_warehouse_now_ms();
    let kept = table
        .vacuum(Duration::from_secs(3600), now)
        .expect("vacuums");
    assert!(kept.files.is_empty(), "{kept:?}");
    assert_eq!(
        contents(&warehouse, &table, Some(3)).len(),
        4,
        "e1, e2, e3 and the shared row"
    );
    let removed = table.vacuum(Duration::ZERO, now + 60_000).expect("vacuums");
    assert!(!removed.files.is_empty());
    assert_eq!(contents(&warehouse, &table, None), before);
    let latest = table.version(None).expect("latest").number();
    assert_eq!(removed.oldest_version, latest);
}

fn reel_warehouse_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// A row replaced in a file of several row groups: the file is written again with the row
/// groups that lose rows encoded anew and the others copied as they were (column chunks,
/// Bloom filters, page index), and the add's statistics, read by Python `deltalake`, are
/// what pyarrow computes from the file's rows.
#[test]
fn a_replaced_row_rewrites_its_row_group_and_copies_the_others() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = open(
        dir.path().to_str().expect("utf-8"),
        &StoreOptions::default(),
    );
    let table = warehouse.table("big").expect("table");
    table
        .create(&schema(), &[(reel_warehouse::BLOOM_COLUMN_PROPERTY, "key")])
        .expect("creates");
    let n = 2 * reel_warehouse::ROW_GROUP_ROWS + 1000;
    let ids: Vec<String> = (0..n).map(|i| format!("r{i:06}")).collect();
    let first: Vec<(&str, i64, i64)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i as i64, 1))
        .collect();
    table
        .commit(&upsert(("w", 1), rows(&first)))
        .expect("commits");
    let before = table
        .version(None)
        .expect("version")
        .files()
        .expect("files");
    assert_eq!(before.len(), 1, "{before:?}");
    let store = warehouse.store();
    let original = store.read(&before[0].key).expect("reads");
    // One row of the first row group and one of the last, replaced; the middle one keeps
    // all its rows.
    let (a, b) = (5, n - 3);
    let done = table
        .commit(&upsert(
            ("w", 2),
            rows(&[(ids[a].as_str(), -1, 2), (ids[b].as_str(), -2, 2)]),
        ))
        .expect("commits");
    assert_eq!(
        (done.rows_added, done.rows_removed, done.files_rewritten),
        (2, 2, 1)
    );
    let mut expected = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        expected.insert(id.clone(), (i as i64, 1));
    }
    expected.insert(ids[a].clone(), (-1, 2));
    expected.insert(ids[b].clone(), (-2, 2));
    assert_eq!(contents(&warehouse, &table, None), expected);

    let after = table
        .version(None)
        .expect("version")
        .files()
        .expect("files");
    let rewritten = after
        .iter()
        .find(|f| f.rows == Some(n as u64 - 2))
        .unwrap_or_else(|| panic!("a file of {} rows in {after:?}", n - 2));
    let rewritten_bytes = store.read(&rewritten.key).expect("reads");
    let footer = |bytes: &[u8]| {
        parquet::file::metadata::ParquetMetaDataReader::new()
            .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Required)
            .parse_and_finish(&bytes::Bytes::from(bytes.to_vec()))
            .expect("footer")
    };
    let (old, new) = (footer(&original), footer(&rewritten_bytes));
    assert_eq!(
        new.row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect::<Vec<_>>(),
        vec![
            reel_warehouse::ROW_GROUP_ROWS as i64 - 1,
            reel_warehouse::ROW_GROUP_ROWS as i64,
            999
        ]
    );
    // The middle row group's column chunks, byte for byte.
    for (old_chunk, new_chunk) in old
        .row_group(1)
        .columns()
        .iter()
        .zip(new.row_group(1).columns())
    {
        let range = |c: &parquet::file::metadata::ColumnChunkMetaData| {
            let (start, length) = c.byte_range();
            start as usize..(start + length) as usize
        };
        assert_eq!(
            &original[range(old_chunk)],
            &rewritten_bytes[range(new_chunk)]
        );
    }
    // Every row group has its page index and a Bloom filter that answers for its keys.
    let page_index = new.page_index().expect("a page index");
    let key_column = 0;
    let mut first_row = 0usize;
    for (g, group) in new.row_groups().iter().enumerate() {
        assert!(page_index.offset_index(g, key_column).is_some());
        assert!(page_index.column_index(g, key_column).is_some());
        let chunk = group.column(key_column);
        let start = chunk.bloom_filter_offset().expect("a Bloom filter") as usize;
        let end = start + chunk.bloom_filter_length().expect("its length") as usize;
        let filter = parquet::bloom_filter::Sbbf::from_bytes(&rewritten_bytes[start..end])
            .expect("a filter");
        let rows_here = group.num_rows() as usize;
        let keys = rows(
            &expected
                .iter()
                .filter(|(_, (_, at))| *at == 1)
                .skip(first_row)
                .take(rows_here)
                .map(|(id, (score, at))| (id.as_str(), *score, *at))
                .collect::<Vec<_>>(),
        );
        let keys = keys
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("keys");
        assert!(keys.iter().flatten().all(|k| filter.check(&k)), "group {g}");
        first_row += rows_here;
    }

    // The log's statistics for each file are its rows' own, as an independent reader sees.
    let script = r#"
import sys
import deltalake, pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc
table = deltalake.DeltaTable(sys.argv[1])
actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
for action in actions:
    rows = pq.read_table(sys.argv[1] + "/" + action["path"])
    assert action["num_records"] == rows.num_rows, action
    for name in rows.column_names:
        column = rows[name]
        assert action[f"null_count.{name}"] == column.null_count, (name, action)
        bounds = pc.min_max(column)
        assert action[f"min.{name}"] == bounds["min"].as_py(), (name, action)
        assert action[f"max.{name}"] == bounds["max"].as_py(), (name, action)
print(len(actions))
"#;
    let out = Command::new(python().expect("the test venv's Python"))
        .args(["-c", script])
        .arg(table.url().to_file_path().expect("a folder"))
        .output()
        .expect("runs python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        after.len().to_string()
    );
}
