//! Zarr replay buffers written by Python `zarr` (testdata/zarr/make_fixtures.py): Diffusion
//! Policy's PushT layout (v2, Blosc LZ4), UMI's (v2, JPEG XL pictures by imagecodecs,
//! Blosc Zstd, also zipped) and a v3 one with odd dtypes, Zstd and sharding, imported into
//! a store and compared with what `zarr` read from them: every value exactly, every
//! picture by PSNR; a damaged chunk costs only the episodes it holds.

use std::path::{Path, PathBuf};

use crate::common::{
    self, assert_topic, canonical, json_f64, run_import, warehouse_sources, worst_psnr,
};
use reel_import::zarr::{ZarrOptions, ZarrReplayBuffer};
use reel_import::{ImportReport, Source};
use reel_io::{MmapSource, Store};
use reel_landing::LandingImage;
use reel_mcap::{EpisodeReader, SignalKind};
use serde_json::Value;

/// The fixtures' pictures: width, height.
const PICTURE: (usize, usize) = (48, 32);
/// The rate the tests import at (replay buffers do not record one).
const FPS: f64 = 10.0;
/// The worst frame's PSNR a camera of exactly stored pictures keeps through the import's
/// H.264 (4:2:0, CRF 12): 34.7-36.9 dB measured on these small noisy pictures (4:2:0 is
/// most of the loss), as for RLDS's PNG cameras.
const EXACT_FLOOR_DB: f64 = 33.0;
/// The same for lossy JPEG XL, against libjxl's decode: a second lossy generation,
/// 33.0-35.2 dB measured, as for RLDS's JPEG cameras.
const LOSSY_FLOOR_DB: f64 = 31.0;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/zarr")
        .join(name)
}

/// What `zarr` read for each episode of the buffer.
fn expected(stem: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(fixture(&format!("{stem}.expected.json"))).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    value["episodes"].as_array().unwrap().clone()
}

fn rated() -> ZarrOptions {
    ZarrOptions {
        fps: Some(FPS),
        ..ZarrOptions::default()
    }
}

fn open(path: &Path) -> ZarrReplayBuffer {
    ZarrReplayBuffer::open(path, &rated()).unwrap()
}

fn run(buffer: &ZarrReplayBuffer, store: &Store) -> ImportReport {
    run_import(buffer, buffer.fps().unwrap(), store)
}

/// `buffer` imported into a new store, every episode landed and none quarantined.
fn import_cleanly(buffer: &ZarrReplayBuffer) -> (tempfile::TempDir, Store, ImportReport) {
    common::import_cleanly(buffer, buffer.fps().unwrap())
}

/// Checks every array `zarr` returned against the canonical episode's topic of the same
/// name: same values, bit for bit as f64 (booleans 0 and 1). Returns how many.
fn assert_values(reader: &EpisodeReader<MmapSource>, want: &Value) -> usize {
    let steps = want["steps"].as_u64().unwrap() as usize;
    let mut checked = 0;
    for (key, values) in want["values"].as_object().unwrap() {
        let topic = format!("/{key}");
        let expected: Vec<f64> = values.as_array().unwrap().iter().map(json_f64).collect();
        assert_topic(reader, &topic, &expected, steps, "zarr");
        let window = &reader.signals(&[topic.as_str()], 0..u64::MAX).unwrap()[0];
        assert_eq!(
            window.log_times[1], 100_000_000,
            "{topic}: on the 10 Hz grid"
        );
        checked += 1;
    }
    checked
}

/// Checks each camera of each episode against `zarr`'s pictures by PSNR: the worst frame
/// at least the camera's floor.
fn assert_pictures(store: &Store, buffer: &ZarrReplayBuffer, stem: &str, cameras: &[(&str, f64)]) {
    for episode in buffer.episodes() {
        let reader = canonical(store, &episode.id);
        for &(camera, floor) in cameras {
            let file = fixture(&format!("{stem}.{}.{camera}.rgb", episode.index));
            let topic = format!("/{camera}");
            let worst = worst_psnr(&reader, &topic, &file, PICTURE, 100_000_000);
            eprintln!(
                "{stem} {} {camera}: worst frame {worst:.1} dB",
                episode.index
            );
            assert!(worst >= floor, "{topic}: {worst:.1} dB");
        }
    }
}

#[test]
fn a_diffusion_policy_buffer_imports_with_zarr_s_values_and_pictures() {
    let buffer = open(&fixture("pusht_v2.zarr"));
    assert_eq!(buffer.revision(), "zarr v2");
    assert_eq!(buffer.steps(), 27);
    let reel_of = |array: &str| {
        let mappings = buffer.mappings();
        let mapping = mappings.iter().find(|m| m.array == array).unwrap();
        (mapping.zarr.clone(), mapping.reel.clone())
    };
    assert_eq!(
        reel_of("data/img"),
        (
            "float32 [27, 32, 48, 3] blosc".into(),
            "camera /img (48x32 RGB, H.264 on ingest)".into()
        )
    );
    assert_eq!(
        reel_of("data/keypoint").1,
        "signal /keypoint (state, 18 values)"
    );
    assert_eq!(
        reel_of("data/action").1,
        "signal /action (action, 2 values)"
    );
    let record_path = std::fs::canonicalize(fixture("pusht_v2.zarr")).unwrap();
    let (_dir, store, report) = import_cleanly(&buffer);
    let sources = warehouse_sources(&store, &report);
    let want = expected("pusht_v2");
    let episodes = buffer.episodes();
    assert_eq!(episodes.len(), want.len());
    for (e, (episode, want)) in episodes.iter().zip(&want).enumerate() {
        assert_eq!(episode.id, format!("pusht_v2_{e:06}"));
        let reader = canonical(&store, &episode.id);
        // action, keypoint, n_contacts, state.
        assert_eq!(assert_values(&reader, want), 4, "{}", episode.id);
        let action = reader.channel("/action").unwrap();
        assert_eq!(
            action.metadata.get("reel.kind").map(String::as_str),
            Some(SignalKind::Action.as_str())
        );
        let record = &reader.metadata()["episode"];
        assert_eq!(record["source"], "zarr");
        let source = &sources[&episode.id];
        assert_eq!(source.format.as_deref(), Some("zarr"));
        assert_eq!(source.revision.as_deref(), Some("zarr v2"));
        assert_eq!(
            source.dataset.as_deref(),
            record_path.to_str(),
            "the buffer's absolute path"
        );
        assert_eq!(
            (source.episode_index, source.fps),
            (Some(e as i64), Some(FPS))
        );
    }
    assert_pictures(&store, &buffer, "pusht_v2", &[("img", EXACT_FLOOR_DB)]);
}

#[test]
fn umi_s_jpeg_xl_pictures_decode_as_imagecodecs_decodes_them() {
    let folder = open(&fixture("umi_v2.zarr"));
    let mappings = folder.mappings();
    assert_eq!(
        mappings[0].zarr, "uint8 [19, 32, 48, 3] imagecodecs_jpegxl",
        "{mappings:?}"
    );
    // The landing log holds the pictures as zarrs and jxl-oxide decode them: lossless JPEG
    // XL exactly as imagecodecs (libjxl) decodes it, lossy within rounding.
    for (index, episode) in folder.episodes().iter().enumerate() {
        let log = folder.landing_log(index).unwrap();
        for (camera, tolerance) in [("camera0_rgb", 0), ("camera1_rgb", 2)] {
            let reference =
                std::fs::read(fixture(&format!("umi_v2.{}.{camera}.rgb", episode.index))).unwrap();
            let images = log
                .images
                .iter()
                .find(|i| i.topic == format!("/{camera}"))
                .unwrap();
            let decoded: Vec<u8> = images
                .frames
                .iter()
                .flat_map(|(_, picture)| match picture {
                    LandingImage::Rgb { data, .. } => data.to_vec(),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(decoded.len(), reference.len(), "{camera}");
            let worst = decoded
                .iter()
                .zip(&reference)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap();
            assert!(
                worst <= tolerance,
                "{camera} episode {}: a sample {worst} off libjxl's",
                episode.index
            );
        }
    }
    // The zipped buffer, as UMI publishes it, imports the same.
    let zipped = open(&fixture("umi_v2.zarr.zip"));
    assert_eq!(zipped.mappings(), mappings);
    let (_dir, store, _) = import_cleanly(&zipped);
    for (episode, want) in zipped.episodes().iter().zip(expected("umi_v2")) {
        assert_eq!(episode.id, format!("umi_v2_{:06}", episode.index));
        let reader = canonical(&store, &episode.id);
        // eef pos and rotation, gripper width (float32), demo start and end (float64).
        assert_eq!(assert_values(&reader, &want), 5, "{}", episode.id);
    }
    let cameras = [
        ("camera0_rgb", EXACT_FLOOR_DB),
        ("camera1_rgb", LOSSY_FLOOR_DB),
    ];
    assert_pictures(&store, &zipped, "umi_v2", &cameras);
}

#[test]
fn a_v3_buffer_with_odd_dtypes_shards_and_zstd_reads_exactly() {
    let buffer = open(&fixture("generic_v3.zarr"));
    assert_eq!(buffer.revision(), "zarr v3");
    let mappings = buffer.mappings();
    let action = mappings.iter().find(|m| m.array == "data/action").unwrap();
    assert_eq!(action.zarr, "float32 [9, 4] sharding_indexed");
    let (_dir, store, _) = import_cleanly(&buffer);
    for (episode, want) in buffer.episodes().iter().zip(expected("generic_v3")) {
        let reader = canonical(&store, &episode.id);
        // action (sharded), flags (bool), grid (int8 3x2), half (float16), joint (float64),
        // stamp (int64 past 2^32), ticks (uint16).
        assert_eq!(assert_values(&reader, &want), 7, "{}", episode.id);
    }
    assert_pictures(&store, &buffer, "generic_v3", &[("camera", EXACT_FLOOR_DB)]);
}

/// A copy of a buffer to damage.
fn copy_buffer(name: &str, to: &Path) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let dest = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &dest);
            } else {
                std::fs::copy(entry.path(), dest).unwrap();
            }
        }
    }
    let dest = to.join(name);
    copy(&fixture(name), &dest);
    dest
}

#[test]
fn a_damaged_chunk_costs_only_its_episodes_and_bad_buffers_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_buffer("umi_v2.zarr", dir.path());
    // UMI's episodes are 6, 8 and 5 steps: step 9's picture is episode 1's. Cut it short.
    let chunk = copy.join("data/camera0_rgb/9.0.0.0");
    let bytes = std::fs::read(&chunk).unwrap();
    std::fs::write(&chunk, &bytes[..bytes.len() / 2]).unwrap();
    // And a 64-bit integer an f64 does not hold, at step 15 (episode 2), in an array
    // written as Zarr v2 lays one out uncompressed.
    let big = copy.join("data/counter");
    std::fs::create_dir_all(&big).unwrap();
    std::fs::write(
        big.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [19], "chunks": [19], "dtype": "<i8",
            "compressor": null, "fill_value": 0, "filters": null, "order": "C"}"#,
    )
    .unwrap();
    let mut values = vec![0u8; 19 * 8];
    values[15 * 8..16 * 8].copy_from_slice(&((1i64 << 53) + 1).to_le_bytes());
    std::fs::write(big.join("0"), values).unwrap();
    // An array of a codec zarrs lacks (Diffusion Policy's real buffers keep some cameras
    // in imagecodecs' JPEG 2000) is named and left out; the rest imports.
    let jp2 = copy.join("data/camera2_rgb");
    std::fs::create_dir_all(&jp2).unwrap();
    std::fs::write(
        jp2.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [19, 32, 48, 3], "chunks": [1, 32, 48, 3],
            "dtype": "|u1", "compressor": {"id": "imagecodecs_jpeg2k", "level": 50},
            "fill_value": 0, "filters": null, "order": "C"}"#,
    )
    .unwrap();
    let buffer = open(&copy);
    let skipped = buffer
        .mappings()
        .into_iter()
        .find(|m| m.array == "data/camera2_rgb")
        .unwrap();
    assert!(
        skipped.reel.starts_with("not read:") && skipped.reel.contains("imagecodecs_jpeg2k"),
        "{skipped:?}"
    );
    let store = Store::open(dir.path().join("store").to_str().unwrap()).unwrap();
    let report = run(&buffer, &store);
    let failed: Vec<(&str, &str)> = report
        .failed()
        .map(|l| (l.episode_id.as_str(), l.error.as_deref().unwrap()))
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed[0].0, "umi_v2_000001");
    assert!(
        failed[0].1.contains("umi_v2.zarr/data/camera0_rgb") && failed[0].1.contains("JPEG XL"),
        "{}",
        failed[0].1
    );
    assert_eq!(failed[1].0, "umi_v2_000002");
    assert!(
        failed[1].1.contains("data/counter") && failed[1].1.contains("9007199254740993"),
        "{}",
        failed[1].1
    );
    canonical(&store, "umi_v2_000000");

    // No rate: listed, but an import needs one.
    let unrated = ZarrReplayBuffer::open(&copy, &ZarrOptions::default()).unwrap();
    let err = unrated.fps().expect_err("no rate").to_string();
    assert!(
        err.contains("umi_v2.zarr") && err.contains("--fps"),
        "{err}"
    );
    // An array shorter than the episodes say.
    std::fs::write(
        big.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [18], "chunks": [19], "dtype": "<i8",
            "compressor": null, "fill_value": 0, "filters": null, "order": "C"}"#,
    )
    .unwrap();
    let err = ZarrReplayBuffer::open(&copy, &rated())
        .expect_err("short")
        .to_string();
    assert!(
        err.contains("data/counter") && err.contains("fewer rows"),
        "{err}"
    );
    std::fs::remove_dir_all(&big).unwrap();
    // Episodes that end before the one before them.
    let ends = copy.join("meta/episode_ends");
    std::fs::write(
        ends.join(".zarray"),
        r#"{"zarr_format": 2, "shape": [3], "chunks": [3], "dtype": "<i8",
            "compressor": null, "fill_value": 0, "filters": null, "order": "C"}"#,
    )
    .unwrap();
    let raw: Vec<u8> = [6i64, 14, 10]
        .iter()
        .flat_map(|e| e.to_le_bytes())
        .collect();
    std::fs::write(ends.join("0"), raw).unwrap();
    let err = ZarrReplayBuffer::open(&copy, &rated())
        .expect_err("decreasing")
        .to_string();
    assert!(err.contains("episode 2 ends at step 10"), "{err}");
    // Not a replay buffer.
    std::fs::remove_dir_all(copy.join("meta/episode_ends")).unwrap();
    let err = ZarrReplayBuffer::open(&copy, &rated())
        .expect_err("no episode_ends")
        .to_string();
    assert!(
        err.contains("umi_v2.zarr") && err.contains("meta/episode_ends"),
        "{err}"
    );
    let err = ZarrReplayBuffer::open(&dir.path().join("nothing.zarr"), &rated())
        .expect_err("missing")
        .to_string();
    assert!(err.contains("nothing.zarr"), "{err}");
}

#[test]
fn a_plan_of_episodes_imports_in_parallel_batches_with_the_whole_buffer_s_ids() {
    let path = fixture("pusht_v2.zarr");
    let buffer = open(&path);
    let episodes = buffer.plan_episodes();
    // A step: a 48x32x3 float32 picture and 26 other float32 values (state 5, action 2,
    // keypoint 9x2, n_contacts 1).
    let step_bytes = (48 * 32 * 3 + 26) * 4;
    assert_eq!(
        episodes
            .iter()
            .map(|e| (e.key.as_str(), e.bytes))
            .collect::<Vec<_>>(),
        [
            ("pusht_v2_000000", 9 * step_bytes),
            ("pusht_v2_000001", 11 * step_bytes),
            ("pusht_v2_000002", 7 * step_bytes)
        ]
    );
    let plan = reel_pipeline::make_plan(
        path.to_str().unwrap(),
        episodes,
        reel_pipeline::BatchTarget::Count(2),
    );
    assert_eq!(plan.batches.len(), 2);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let mut ids = Vec::new();
    std::thread::scope(|scope| {
        let runs: Vec<_> = plan
            .batches
            .iter()
            .map(|batch| {
                let options = ZarrOptions {
                    episodes: Some(batch.episodes.iter().map(|e| e.key.clone()).collect()),
                    ..rated()
                };
                let buffer = ZarrReplayBuffer::open(&path, &options).unwrap();
                let store = store.clone();
                scope.spawn(move || (run(&buffer, &store), buffer.episodes()))
            })
            .collect();
        for handle in runs {
            let (report, episodes) = handle.join().unwrap();
            assert_eq!(report.failed().count(), 0);
            assert!(report.ingest.quarantined.is_empty());
            ids.extend(episodes.into_iter().map(|e| (e.index, e.id)));
        }
    });
    ids.sort();
    assert_eq!(
        ids,
        (0..3)
            .map(|e| (e, format!("pusht_v2_{e:06}")))
            .collect::<Vec<_>>()
    );
    for (_, id) in &ids {
        canonical(&store, id);
    }
    // A buffer named as many are (Diffusion Policy's replay_buffer.zarr): its folder's
    // name leads its episode ids, so two such buffers do not share ids.
    let dir = tempfile::tempdir().unwrap();
    let generic = dir.path().join("pusht_cchi").join("replay_buffer.zarr");
    std::fs::create_dir_all(generic.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&path, &generic).unwrap();
    let ids: Vec<String> = open(&generic)
        .episodes()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids[0], "pusht_cchi_replay_buffer_000000");
    let named = ZarrOptions {
        name: Some("pusht".into()),
        ..rated()
    };
    let ids: Vec<String> = ZarrReplayBuffer::open(&generic, &named)
        .unwrap()
        .episodes()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids[2], "pusht_000002");
    let err = ZarrReplayBuffer::open(
        &path,
        &ZarrOptions {
            episodes: Some(vec!["pusht_v2_000009".into()]),
            ..rated()
        },
    )
    .expect_err("no such episode")
    .to_string();
    assert!(err.contains("pusht_v2_000009"), "{err}");
}
