//! What the import tests read back from the store: canonical episodes and the warehouse.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use reel_import::{ImportReport, Source, config_for, default_config, import};
use reel_io::{MmapSource, Store};
use reel_mcap::EpisodeReader;
use reel_pipeline::RunOptions;
use reel_video::quality::psnr;
use reel_video::{H264Decoder, RgbConversion};
use serde_json::Value;

/// An episode's `source_*` warehouse columns, read with arrow-rs from the part the
/// import's index step wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceColumns {
    pub format: Option<String>,
    pub dataset: Option<String>,
    pub revision: Option<String>,
    pub episode_index: Option<i64>,
    pub fps: Option<f64>,
}

/// The source columns of every row of the warehouse's `episodes` table after the import,
/// by episode id.
pub fn warehouse_sources(store: &Store, report: &ImportReport) -> BTreeMap<String, SourceColumns> {
    assert!(
        report.ingest.warehouse_commit.is_some(),
        "the import committed rows"
    );
    let warehouse = reel_warehouse::Warehouse::for_store(store).expect("warehouse");
    let batches: Vec<RecordBatch> = vec![
        warehouse
            .table(reel_warehouse::episodes::EPISODES)
            .expect("table")
            .version(None)
            .expect("version")
            .read(None)
            .expect("rows"),
    ];
    let mut out = BTreeMap::new();
    for batch in &batches {
        let text = |name: &str, row: usize| {
            let column = batch.column_by_name(name).expect(name).as_string::<i32>();
            column.is_valid(row).then(|| column.value(row).to_owned())
        };
        let index = batch.column_by_name("source_episode_index").expect("index");
        let index = index.as_primitive::<Int64Type>();
        let fps = batch.column_by_name("source_fps").expect("fps");
        let fps = fps.as_primitive::<Float64Type>();
        for row in 0..batch.num_rows() {
            out.insert(
                text("episode_id", row).expect("an episode id"),
                SourceColumns {
                    format: text("source_format", row),
                    dataset: text("source_dataset", row),
                    revision: text("source_revision", row),
                    episode_index: index.is_valid(row).then(|| index.value(row)),
                    fps: fps.is_valid(row).then(|| fps.value(row)),
                },
            );
        }
    }
    out
}

/// `source` imported into `store` on a grid of `fps`, with the import's default settings.
pub fn run_import(source: &dyn Source, fps: f64, store: &Store) -> ImportReport {
    let config = config_for(fps, &default_config());
    import(source, store, config, &RunOptions::default(), &|_| {}).unwrap()
}

/// `source` imported into a new store: every episode landed and none quarantined.
pub fn import_cleanly(source: &dyn Source, fps: f64) -> (tempfile::TempDir, Store, ImportReport) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let report = run_import(source, fps, &store);
    assert_eq!(report.failed().count(), 0, "{:?}", report.landed);
    assert!(
        report.ingest.quarantined.is_empty(),
        "{:?}",
        report.ingest.quarantined
    );
    (dir, store, report)
}

/// A JSON number, or a boolean as 0 or 1.
pub fn json_f64(value: &Value) -> f64 {
    match value {
        Value::Bool(b) => f64::from(u8::from(*b)),
        other => other.as_f64().unwrap(),
    }
}

/// Checks the canonical episode's `topic` holds `expected` over `steps` steps, bit for
/// bit as f64; `peer` names the reader the expected values come from.
pub fn assert_topic(
    reader: &EpisodeReader<MmapSource>,
    topic: &str,
    expected: &[f64],
    steps: usize,
    peer: &str,
) {
    let window = &reader.signals(&[topic], 0..u64::MAX).unwrap()[0];
    assert_eq!(window.values.len(), expected.len(), "{topic}");
    for (got, want) in window.values.iter().zip(expected) {
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{topic}: {got} against {peer}'s {want}"
        );
    }
    assert_eq!(window.log_times.len(), steps, "{topic}");
}

/// The canonical episode `episode_id` of a local store.
pub fn canonical(store: &Store, episode_id: &str) -> EpisodeReader<MmapSource> {
    let path = store
        .local_path(&format!("canonical/{episode_id}.mcap"))
        .unwrap()
        .unwrap();
    EpisodeReader::open(MmapSource::open(&path).unwrap()).unwrap()
}

/// The worst PSNR of a canonical camera against the packed RGB pictures of `width` x
/// `height` in `reference`, frame `i` at `i * period` ns.
pub fn worst_psnr(
    reader: &EpisodeReader<MmapSource>,
    topic: &str,
    reference: &std::path::Path,
    (width, height): (usize, usize),
    period: u64,
) -> f64 {
    let expected = std::fs::read(reference).unwrap();
    let frame_len = width * height * 3;
    let frames = expected.len() / frame_len;
    let times: Vec<u64> = (0..frames as u64).map(|i| i * period).collect();
    let mut decoder = H264Decoder::with_conversion(RgbConversion::Accurate).unwrap();
    let got = reader.frames_at(topic, &times, &mut decoder, None).unwrap();
    assert_eq!(got.len(), frames, "{topic}");
    got.iter()
        .enumerate()
        .map(|(i, f)| psnr(&expected[i * frame_len..(i + 1) * frame_len], &f.data))
        .fold(f64::INFINITY, f64::min)
}
