//! What the ingest CLI's tests share: the binary, plans, the JSON lines of a run, the
//! warehouse.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{Array, Int64Array, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use reel_io::Store;
use reel_pipeline::{BatchTarget, Plan, list_landing, make_plan};

pub const BIN: &str = env!("CARGO_BIN_EXE_reel-ingest");

/// A plan of everything under `landing_uri` (opened as `store`), written to `dir/name`;
/// returns its path and the plan.
pub fn write_plan(
    landing_uri: &str,
    store: &Store,
    dir: &Path,
    name: &str,
    target: BatchTarget,
) -> (String, Plan) {
    let episodes = list_landing(store, "").expect("list");
    let plan = make_plan(landing_uri, episodes, target);
    let path = dir.join(name);
    std::fs::write(&path, plan.to_json()).expect("plan");
    (path.to_string_lossy().into_owned(), plan)
}

/// (step, episode id, status) of every episode line.
pub fn events(stdout: &[u8]) -> Vec<(String, String, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("status").is_some())
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            (s("step"), s("episode_id"), s("status"))
        })
        .collect()
}

/// Warehouse rows: (episode id, ingested_at) per part file.
pub fn warehouse(store: &Store) -> BTreeMap<String, Vec<(String, i64)>> {
    let mut parts = BTreeMap::new();
    for key in store.list("episodes/").expect("list") {
        if !key.ends_with(".parquet") {
            continue;
        }
        let bytes = store.read(&key).expect("part");
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .expect("parquet")
            .build()
            .expect("reader");
        let mut rows = Vec::new();
        for batch in reader {
            let batch = batch.expect("batch");
            let ids = batch.column_by_name("episode_id").expect("id");
            let ids = ids.as_any().downcast_ref::<StringArray>().expect("utf8");
            let at = batch.column_by_name("ingested_at_ns").expect("at");
            let at = at.as_any().downcast_ref::<Int64Array>().expect("i64");
            let uri = batch.column_by_name("uri").expect("uri");
            let uri = uri.as_any().downcast_ref::<StringArray>().expect("utf8");
            for i in 0..ids.len() {
                assert_eq!(uri.value(i), format!("canonical/{}.mcap", ids.value(i)));
                rows.push((ids.value(i).to_owned(), at.value(i)));
            }
        }
        parts.insert(key, rows);
    }
    parts
}
