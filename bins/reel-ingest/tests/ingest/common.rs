//! What the ingest CLI's tests share: the binary, plans, the JSON lines of a run, the
//! warehouse.

use std::path::Path;

use arrow_array::{Array, Int64Array, StringArray};
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

/// The warehouse's episode tables: (episode id, ingested_at) of every row of
/// `episodes` and of `ingestions`, sorted.
#[derive(Debug)]
pub struct Tables {
    pub episodes: Vec<(String, i64)>,
    pub ingestions: Vec<(String, i64)>,
}

/// The rows of the warehouse's episode tables in `store` (every path checked against its
/// episode id).
pub fn warehouse(store: &Store) -> Tables {
    let warehouse = reel_warehouse::Warehouse::for_store(store).expect("warehouse");
    let rows = |name: &str| -> Vec<(String, i64)> {
        let table = warehouse.table(name).expect("table");
        if !table.exists().expect("lists") {
            return Vec::new();
        }
        let batch = table
            .version(None)
            .expect("version")
            .read(Some(&["episode_id", "ingested_at_ns", "uri"]))
            .expect("rows");
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("utf8");
        let at = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("i64");
        let uri = batch
            .column(2)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("utf8");
        let mut rows: Vec<(String, i64)> = (0..ids.len())
            .map(|i| {
                assert_eq!(uri.value(i), format!("canonical/{}.mcap", ids.value(i)));
                (ids.value(i).to_owned(), at.value(i))
            })
            .collect();
        rows.sort();
        rows
    };
    Tables {
        episodes: rows(reel_warehouse::episodes::EPISODES),
        ingestions: rows(reel_warehouse::episodes::INGESTIONS),
    }
}
