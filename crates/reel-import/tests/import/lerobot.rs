//! LeRobot datasets written by LeRobot 0.6.1 itself (testdata/lerobot/make_fixtures.py)
//! imported into a store: state and action exact, frames against LeRobot's own decode,
//! provenance, resuming, and bad datasets.

use std::path::{Path, PathBuf};

use crate::common::canonical;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use reel_import::lerobot::{Dataset, keys};
use reel_import::{ImportReport, config_for, default_config, import};
use reel_io::{Kinded, Store};
use reel_pipeline::RunOptions;
use reel_video::quality::psnr;
use reel_video::{H264Decoder, RgbConversion};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/lerobot")
        .join(name)
}

/// Every row of the data files (v3.0's one, or v2.1's one per episode, in order): (episode
/// index, state, action), read with arrow-rs directly, not through the importer.
fn rows(dataset: &Path) -> Vec<(i64, Vec<f32>, Vec<f32>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dataset.join("data/chunk-000"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let batches = files.iter().flat_map(|path| {
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap()
    });
    let mut out = Vec::new();
    for batch in batches {
        let batch = batch.unwrap();
        let episode = batch
            .column_by_name("episode_index")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        let list = |name: &str| {
            batch
                .column_by_name(name)
                .unwrap()
                .as_fixed_size_list()
                .clone()
        };
        let (state, action) = (list("observation.state"), list("action"));
        for i in 0..batch.num_rows() {
            let values = |l: &arrow_array::FixedSizeListArray| -> Vec<f32> {
                l.value(i).as_primitive::<Float32Type>().values().to_vec()
            };
            out.push((episode.value(i), values(&state), values(&action)));
        }
    }
    out
}

fn run_import(dataset: &Dataset, store: &Store) -> ImportReport {
    let config = config_for(dataset.info().fps, &default_config());
    import(dataset, store, config, &RunOptions::default(), &|_| {}).unwrap()
}

#[test]
fn lerobot_datasets_import_exactly_and_near_lerobots_own_frames() {
    // pusht_v21 holds pusht_av1's frames and values, written by LeRobot 0.3.3 in format v2.1.
    for (name, format) in [
        ("pusht_h264", "v3.0"),
        ("pusht_av1", "v3.0"),
        ("pusht_v21", "v2.1"),
    ] {
        let root = fixture(name);
        let dataset = Dataset::open(&root).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        let report = run_import(&dataset, &store);
        assert_eq!(report.failed().count(), 0, "{name}: {:?}", report.landed);
        assert!(
            report.ingest.quarantined.is_empty(),
            "{name}: {:?}",
            report.ingest.quarantined
        );
        assert_eq!(dataset.episodes().len(), 3);

        let rows = rows(&root);
        if format == "v2.1" {
            assert_eq!(rows, self::rows(&fixture("pusht_av1")), "the same values");
        }
        let decoded = std::fs::read(root.with_file_name(format!("{name}.decoded.rgb"))).unwrap();
        let frame_len = 64 * 48 * 3;
        assert_eq!(decoded.len(), rows.len() * frame_len);
        // LeRobot's decoders convert with swscale's fast path (reel-video's tests).
        let mut decoder = H264Decoder::with_conversion(RgbConversion::Fast).unwrap();
        let mut first_row = 0;
        let mut worst = f64::INFINITY;
        let sources = crate::common::warehouse_sources(&store, &report);
        assert_eq!(sources.len(), 3, "{name}: one warehouse row per episode");
        for episode in dataset.episodes() {
            let id = dataset.episode_id(episode);
            let reader = canonical(&store, &id);
            let record = &reader.metadata()["episode"];
            assert_eq!(record["episode_id"], id);
            assert_eq!(record[keys::SOURCE], "lerobot");
            assert_eq!(record[keys::SOURCE_DATASET], name);
            assert_eq!(record[keys::SOURCE_REVISION], format);
            assert_eq!(
                record[keys::SOURCE_EPISODE_INDEX],
                episode.index.to_string()
            );
            assert_eq!(record["task"], episode.tasks.join("; "));
            assert_eq!(record["robot_id"], "pusht-sim");
            assert_eq!(record[keys::FPS], "10");
            assert_eq!(
                sources[&id],
                crate::common::SourceColumns {
                    format: Some("lerobot".into()),
                    dataset: Some(name.into()),
                    revision: Some(format.into()),
                    episode_index: Some(episode.index),
                    fps: Some(10.0),
                },
                "{name}: the warehouse row of {id}"
            );
            assert!(record[keys::INFO].contains("\"codebase_version\""));
            assert!(record[keys::STATS].contains("observation.state"));

            let mine: Vec<_> = rows
                .iter()
                .filter(|(e, _, _)| *e == episode.index)
                .collect();
            assert_eq!(mine.len(), episode.length);
            let signals = reader
                .signals(&["/observation.state", "/action"], 0..u64::MAX)
                .unwrap();
            assert_eq!(signals[0].fields, ["x", "y", "theta"]);
            assert_eq!(signals[1].fields, ["vx", "vy"]);
            for (signal, pick) in signals.iter().zip([1, 2]) {
                assert_eq!(
                    signal.log_times.len(),
                    episode.length,
                    "{name} {}",
                    signal.topic
                );
                let got: Vec<f32> = signal.values.iter().map(|v| *v as f32).collect();
                let want: Vec<f32> = mine
                    .iter()
                    .flat_map(|(_, s, a)| if pick == 1 { s.clone() } else { a.clone() })
                    .collect();
                // Exact: every f32 survives the f64 round trip, and no value was resampled.
                assert_eq!(
                    got, want,
                    "{name} episode {} {}",
                    episode.index, signal.topic
                );
                assert!(
                    signal
                        .values
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| *g == f64::from(*w))
                );
            }

            let period = 100_000_000;
            let times: Vec<u64> = (0..episode.length as u64).map(|i| i * period).collect();
            let frames = reader
                .frames_at("/observation.images.cam", &times, &mut decoder, None)
                .unwrap();
            assert_eq!(frames.len(), episode.length);
            for (i, frame) in frames.iter().enumerate() {
                let row = first_row + i;
                let theirs = &decoded[row * frame_len..(row + 1) * frame_len];
                let q = psnr(theirs, &frame.data);
                worst = worst.min(q);
                assert!(
                    q >= 40.0,
                    "{name} episode {} frame {i}: {q:.1} dB",
                    episode.index
                );
            }
            first_row += episode.length;
        }
        eprintln!("{name}: worst frame {worst:.1} dB against LeRobot's decode");
        assert!(
            worst >= 40.0,
            "{name}: worst frame {worst:.1} dB against LeRobot's decode"
        );
    }
}

#[test]
fn a_second_import_reads_nothing_again_and_changes_nothing() {
    let dataset = Dataset::open(fixture("pusht_h264")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let first = run_import(&dataset, &store);
    assert!(first.landed.iter().all(|l| l.status == "landed"));
    let canonical_key = format!("canonical/{}.mcap", first.landed[0].episode_id);
    let before = store.read(&canonical_key).unwrap();
    let again = run_import(&dataset, &store);
    assert!(
        again.landed.iter().all(|l| l.status == "present"),
        "{:?}",
        again.landed
    );
    assert_eq!(store.read(&canonical_key).unwrap(), before);
    assert_eq!(
        again.ingest.warehouse_commit, first.ingest.warehouse_commit,
        "the index step found complete"
    );
}

/// Copies a fixture dataset to a scratch folder a test may damage.
fn scratch_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join(name);
    copy_dir(&fixture(name), &to);
    (dir, to)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

#[test]
fn a_dataset_without_info_is_refused_naming_the_file() {
    let (_dir, root) = scratch_copy("pusht_h264");
    std::fs::remove_file(root.join("meta/info.json")).unwrap();
    let err = Dataset::open(&root).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("meta/info.json") && text.contains("missing"),
        "{text}"
    );
    assert_eq!(err.kind(), reel_io::ErrorKind::BadInput);
}

#[test]
fn a_truncated_video_fails_its_episodes_and_writes_nothing_for_them() {
    let (_dir, root) = scratch_copy("pusht_h264");
    let video = root.join("videos/observation.images.cam/chunk-000/file-000.mp4");
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&video, &bytes[..bytes.len() / 2]).unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::open(store_dir.path().to_str().unwrap()).unwrap();
    let report = run_import(&dataset, &store);
    let failed: Vec<_> = report.failed().collect();
    assert!(!failed.is_empty());
    for f in &failed {
        let error = f.error.as_deref().unwrap();
        assert!(error.contains("file-000.mp4"), "{error}");
        assert!(
            !store
                .list_recursive("landing/")
                .unwrap()
                .contains(&f.landing_key)
        );
        assert!(
            !store
                .list_recursive("canonical/")
                .unwrap()
                .iter()
                .any(|k| k.contains(&f.episode_id))
        );
    }
    // Nothing half-written: every object is whole or absent (no temporaries left).
    assert!(
        store
            .list_recursive("")
            .unwrap()
            .iter()
            .all(|k| !k.contains(".tmp")),
    );
}

#[test]
fn rows_that_disagree_with_the_video_fail_that_episode_only() {
    let (_dir, root) = scratch_copy("pusht_h264");
    // The episode table says episode 1 is one frame longer than its rows and video.
    let table = root.join("meta/episodes/chunk-000/file-000.parquet");
    let file = std::fs::File::open(&table).unwrap();
    let batches: Vec<_> = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let schema = batches[0].schema();
    let mut changed = Vec::new();
    for batch in &batches {
        let columns: Vec<arrow_array::ArrayRef> = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(field, column)| {
                if field.name() != "length" {
                    return column.clone();
                }
                let lengths = column.as_primitive::<Int64Type>();
                let episodes = batch
                    .column_by_name("episode_index")
                    .unwrap()
                    .as_primitive::<Int64Type>();
                std::sync::Arc::new(arrow_array::Int64Array::from_iter_values(
                    lengths
                        .values()
                        .iter()
                        .zip(episodes.values())
                        .map(|(l, e)| if *e == 1 { l + 1 } else { *l }),
                )) as arrow_array::ArrayRef
            })
            .collect();
        changed.push(arrow_array::RecordBatch::try_new(schema.clone(), columns).unwrap());
    }
    let out = std::fs::File::create(&table).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(out, schema, None).unwrap();
    for batch in &changed {
        writer.write(batch).unwrap();
    }
    writer.close().unwrap();

    let dataset = Dataset::open(&root).unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::open(store_dir.path().to_str().unwrap()).unwrap();
    let report = run_import(&dataset, &store);
    let failed: Vec<_> = report.failed().collect();
    assert_eq!(failed.len(), 1, "{:?}", report.landed);
    assert_eq!(failed[0].episode_index, 1);
    let error = failed[0].error.as_deref().unwrap();
    assert!(
        error.contains("file-000.parquet") && error.contains("rows"),
        "{error}"
    );
    let canonical = store.list_recursive("canonical/").unwrap();
    assert_eq!(canonical.len(), 2, "{canonical:?}");
}

#[test]
fn a_v21_episode_missing_its_video_fails_alone_and_a_missing_list_is_named() {
    let (_dir, root) = scratch_copy("pusht_v21");
    std::fs::remove_file(root.join("videos/chunk-000/observation.images.cam/episode_000001.mp4"))
        .unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::open(store_dir.path().to_str().unwrap()).unwrap();
    let report = run_import(&dataset, &store);
    let failed: Vec<_> = report.failed().collect();
    assert_eq!(failed.len(), 1, "{:?}", report.landed);
    assert_eq!(failed[0].episode_index, 1);
    let error = failed[0].error.as_deref().unwrap();
    assert!(
        error.contains("episode_000001.mp4") && error.contains("missing"),
        "{error}"
    );
    assert_eq!(
        store.list_recursive("canonical/").unwrap().len(),
        2,
        "the other episodes imported"
    );

    std::fs::remove_file(root.join("meta/episodes.jsonl")).unwrap();
    let text = Dataset::open(&root).unwrap_err().to_string();
    assert!(
        text.contains("meta/episodes.jsonl") && text.contains("missing"),
        "{text}"
    );
}

#[test]
fn a_depth_video_imports_as_the_millimetres_lerobot_reads() {
    let root = fixture("pusht_depth");
    let dataset = Dataset::open(&root).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let report = run_import(&dataset, &store);
    assert_eq!(report.failed().count(), 0, "{:?}", report.landed);
    assert!(report.ingest.quarantined.is_empty());
    let theirs: Vec<u16> = std::fs::read(root.with_file_name("pusht_depth.decoded.depth"))
        .unwrap()
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    let frame_len = 64 * 48;
    let (mut first_row, mut equal, mut worst) = (0, 0usize, 0u16);
    for episode in dataset.episodes() {
        let reader = canonical(&store, &dataset.episode_id(episode));
        let depth = reader
            .depth("/observation.images.depth", 0..u64::MAX)
            .unwrap();
        assert_eq!(depth.unit, reel_video::DepthUnit::Millimetres);
        assert_eq!((depth.width, depth.height), (64, 48));
        assert_eq!(depth.log_times.len(), episode.length);
        for i in 0..episode.length {
            let want = &theirs[(first_row + i) * frame_len..(first_row + i + 1) * frame_len];
            for (mine, want) in depth.frame(i).iter().zip(want) {
                equal += usize::from(mine == want);
                worst = worst.max(mine.abs_diff(*want));
            }
        }
        first_row += episode.length;
    }
    // LeRobot's float32 exp and Rust's may differ in the last bit: at most 1 mm, rarely.
    let total = theirs.len();
    assert_eq!(first_row * frame_len, total);
    assert!(worst <= 1, "worst {worst} mm");
    assert!(equal * 1000 >= total * 999, "{equal} of {total} equal");
    eprintln!("depth: {equal} of {total} values equal to LeRobot's, worst {worst} mm");
}

#[test]
fn an_image_feature_imports_as_a_camera_near_lerobots_pictures() {
    let root = fixture("pusht_images");
    let dataset = Dataset::open(&root).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let report = run_import(&dataset, &store);
    assert_eq!(report.failed().count(), 0, "{:?}", report.landed);
    assert!(report.ingest.quarantined.is_empty());
    let rows = rows(&root);
    let decoded = std::fs::read(root.with_file_name("pusht_images.decoded.rgb")).unwrap();
    let frame_len = 64 * 48 * 3;
    let mut decoder = H264Decoder::new().unwrap();
    let (mut first_row, mut worst) = (0, f64::INFINITY);
    for episode in dataset.episodes() {
        let reader = canonical(&store, &dataset.episode_id(episode));
        let times: Vec<u64> = (0..episode.length as u64)
            .map(|i| i * 100_000_000)
            .collect();
        let frames = reader
            .frames_at("/observation.images.cam", &times, &mut decoder, None)
            .unwrap();
        assert_eq!(frames.len(), episode.length);
        for (i, frame) in frames.iter().enumerate() {
            let row = first_row + i;
            worst = worst.min(psnr(
                &decoded[row * frame_len..(row + 1) * frame_len],
                &frame.data,
            ));
        }
        let state = reader
            .signals(&["/observation.state"], 0..u64::MAX)
            .unwrap();
        let want: Vec<f64> = rows[first_row..first_row + episode.length]
            .iter()
            .flat_map(|(_, s, _)| s.iter().map(|v| f64::from(*v)))
            .collect();
        assert_eq!(state[0].values, want);
        first_row += episode.length;
    }
    assert_eq!(first_row, rows.len());
    assert!(
        worst >= 40.0,
        "worst frame {worst:.1} dB against LeRobot's pictures"
    );
}
