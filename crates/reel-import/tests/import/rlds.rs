//! RLDS builds written by TensorFlow Datasets itself (testdata/rlds/make_fixtures.py): a
//! DROID-shaped, a Bridge-shaped and a generic one, imported into a store and compared with
//! what TFDS's own reader returned for the same episodes: every step's values exactly,
//! every picture by PSNR; damaged shards cost only the episodes they hold.

use std::path::{Path, PathBuf};

use crate::common::{
    self, assert_topic, canonical, json_f64, run_import, warehouse_sources, worst_psnr,
};
use reel_import::rlds::{RldsDataset, RldsOptions};
use reel_import::{ImportReport, Source};
use reel_io::{MmapSource, Store};
use reel_mcap::{EpisodeReader, SignalKind};
use serde_json::Value;

/// The fixtures' pictures: width, height.
const PICTURE: (usize, usize) = (48, 32);
/// The worst frame's PSNR a JPEG camera keeps through the import (see its use).
const JPEG_FLOOR_DB: f64 = 31.0;

fn build(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/rlds")
        .join(name)
        .join("1.0.0")
}

fn reference(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/rlds")
        .join(name)
}

/// What TFDS's reader returned for each episode of the build.
fn expected(name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(reference(&format!("{name}.expected.json"))).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    value["episodes"].as_array().unwrap().clone()
}

/// A feature's per-step values, flattened (booleans as 0 and 1).
fn flat(steps: &Value) -> Vec<f64> {
    steps
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|step| step.as_array().unwrap().clone())
        .map(|v| json_f64(&v))
        .collect()
}

fn run(dataset: &RldsDataset, store: &Store) -> ImportReport {
    run_import(dataset, dataset.fps().unwrap(), store)
}

/// `dataset` imported into a new store, every episode landed and none quarantined.
fn import_cleanly(dataset: &RldsDataset) -> (tempfile::TempDir, Store, ImportReport) {
    common::import_cleanly(dataset, dataset.fps().unwrap())
}

fn open(name: &str, options: &RldsOptions) -> RldsDataset {
    RldsDataset::open(build(name).to_str().unwrap(), options).unwrap()
}

/// Checks every numeric feature TFDS returned against the canonical episode's topic of
/// the same path: same values, bit for bit as f64.
fn assert_values(reader: &EpisodeReader<MmapSource>, want: &Value, skip: &[&str]) -> usize {
    let mut checked = 0;
    for (path, steps) in want["values"].as_object().unwrap() {
        let first = &steps.as_array().unwrap()[0];
        if first.is_string() || skip.contains(&path.as_str()) {
            continue;
        }
        let steps_count = want["steps"].as_u64().unwrap() as usize;
        assert_topic(
            reader,
            &format!("/{path}"),
            &flat(steps),
            steps_count,
            "TFDS",
        );
        checked += 1;
    }
    checked
}

#[test]
fn a_droid_build_imports_with_tfds_s_values_and_pictures() {
    let dataset = open("droid_mini", &RldsOptions::default());
    assert_eq!(dataset.fps().unwrap(), 15.0, "DROID's rate, known by name");
    assert_eq!(dataset.shards().len(), 2);
    let (_dir, store, report) = import_cleanly(&dataset);
    let sources = warehouse_sources(&store, &report);
    let want = expected("droid_mini");
    let episodes = dataset.episodes();
    assert_eq!(episodes.len(), want.len());
    for (e, (episode, want)) in episodes.iter().zip(&want).enumerate() {
        assert_eq!(episode.id, format!("droid_mini_train_{e:06}"));
        let reader = canonical(&store, &episode.id);
        let record = &reader.metadata()["episode"];
        assert_eq!(record["source"], "rlds");
        assert_eq!(record["rlds.split"], "train");
        let instruction = want["values"]["language_instruction"][0].as_str().unwrap();
        assert_eq!(record["task"], instruction);
        assert_eq!(record["rlds.language_instruction"], instruction);
        assert_eq!(
            record["rlds.language_instruction_2"],
            want["values"]["language_instruction_2"][0]
                .as_str()
                .unwrap()
        );
        let third = want["values"]["language_instruction_3"][0]
            .as_str()
            .unwrap();
        assert_eq!(
            record
                .get("rlds.language_instruction_3")
                .map(String::as_str),
            (!third.is_empty()).then_some(third)
        );
        assert_eq!(
            record["rlds.episode_metadata.file_path"],
            want["metadata"]["file_path"].as_str().unwrap()
        );
        let source = &sources[&episode.id];
        assert_eq!(source.format.as_deref(), Some("rlds"));
        assert_eq!(source.dataset.as_deref(), Some("droid_mini"));
        assert_eq!(source.revision.as_deref(), Some("1.0.0"));
        assert_eq!(
            (source.episode_index, source.fps),
            (Some(e as i64), Some(15.0))
        );
        // action, action_dict/* (6), observation/* (3), reward, discount, is_first/last/terminal.
        assert_eq!(assert_values(&reader, want, &[]), 15, "{}", episode.id);
        for (topic, kind) in [
            ("/action", SignalKind::Action),
            ("/action_dict/joint_velocity", SignalKind::Action),
            ("/observation/joint_position", SignalKind::State),
            ("/reward", SignalKind::Signal),
        ] {
            let channel = reader.channel(topic).unwrap();
            assert_eq!(
                channel.metadata.get("reel.kind").map(String::as_str),
                Some(kind.as_str()),
                "{topic}"
            );
        }
        let window = &reader
            .signals(&["/observation/joint_position"], 0..u64::MAX)
            .unwrap()[0];
        assert_eq!(window.fields[0], "joint_position.0");
        assert_eq!(window.log_times[1], 66_666_667);
        for camera in [
            "exterior_image_1_left",
            "exterior_image_2_left",
            "wrist_image_left",
        ] {
            let topic = format!("/observation/{camera}");
            let worst = worst_psnr(
                &reader,
                &topic,
                &reference(&format!("droid_mini.{e}.{camera}.rgb")),
                PICTURE,
                66_666_667,
            );
            eprintln!("droid_mini {e} {camera}: worst frame {worst:.1} dB");
            // The canonical H.264 (4:2:0, the import's CRF) of TFDS's JPEG, against TFDS's
            // own decode of that JPEG (another decoder than FFmpeg's): 32.0-33.8 dB measured
            // on these small noisy pictures, a second lossy generation.
            assert!(worst >= JPEG_FLOOR_DB, "{camera}: {worst:.1} dB");
        }
    }
}

#[test]
fn bridge_s_absent_cameras_are_left_out_and_float32_kept_exactly() {
    let dataset = open("bridge_mini", &RldsOptions::default());
    assert_eq!(dataset.fps().unwrap(), 5.0, "Bridge's rate, known by name");
    let (_dir, store, _) = import_cleanly(&dataset);
    for (episode, want) in dataset.episodes().iter().zip(expected("bridge_mini")) {
        let reader = canonical(&store, &episode.id);
        assert_eq!(assert_values(&reader, &want, &[]), 7, "{}", episode.id);
        let record = &reader.metadata()["episode"];
        let instruction = want["values"]["language_instruction"][0].as_str().unwrap();
        assert_eq!(record["task"], instruction);
        assert_eq!(
            record["rlds.episode_metadata.episode_id"],
            want["metadata"]["episode_id"][0].to_string()
        );
        for k in 0..4 {
            let has = want["metadata"][format!("has_image_{k}")][0]
                .as_bool()
                .unwrap();
            let topic = format!("/observation/image_{k}");
            assert_eq!(
                reader.channel(&topic).is_ok(),
                has,
                "{} {topic}",
                episode.id
            );
            if has {
                let file = reference(&format!("bridge_mini.{}.image_{k}.rgb", episode.index));
                let worst = worst_psnr(&reader, &topic, &file, PICTURE, 200_000_000);
                eprintln!(
                    "bridge_mini {} image_{k}: worst frame {worst:.1} dB",
                    episode.index
                );
                assert!(worst >= JPEG_FLOOR_DB, "{topic}: {worst:.1} dB");
            }
        }
    }
}

#[test]
fn odd_dtypes_and_encodings_read_as_tfds_reads_them() {
    // No rate recorded: listed and checked, but an import needs --fps.
    let unrated = open("generic_mini", &RldsOptions::default());
    assert_eq!(unrated.mappings().len(), 20);
    let err = unrated.fps().expect_err("no known rate").to_string();
    assert!(
        err.contains("dataset_info.json") && err.contains("--fps"),
        "{err}"
    );
    let options = RldsOptions {
        fps: Some(10.0),
        split: Some("train".into()),
        shards: None,
    };
    let dataset = open("generic_mini", &options);
    let mappings = dataset.mappings();
    let reel_of = |feature: &str| {
        mappings
            .iter()
            .find(|m| m.feature == feature)
            .map(|m| m.reel.clone())
            .unwrap()
    };
    assert_eq!(
        reel_of("steps/observation/arm/torques"),
        "signal /observation/arm/torques (state, 6 values)"
    );
    assert_eq!(reel_of("steps/exact"), "signal /exact (signal, 2 values)");
    assert_eq!(reel_of("steps/note"), "record rlds.note");
    assert_eq!(
        reel_of("episode_metadata/seed"),
        "record rlds.episode_metadata.seed"
    );
    assert!(reel_of("steps/observation/camera").starts_with("camera /observation/camera (PNG"));
    let (_dir, store, _) = import_cleanly(&dataset);
    for (episode, want) in dataset.episodes().iter().zip(expected("generic_mini")) {
        let reader = canonical(&store, &episode.id);
        // int8 matrices, bools, uint16, float16, uint64 past 2^32, zlib float32, float64 as
        // bytes (exact), a ClassLabel, the RLDS flags.
        assert_eq!(assert_values(&reader, &want, &[]), 14, "{}", episode.id);
        let record = &reader.metadata()["episode"];
        let notes: Vec<String> = want["values"]["note"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            record["rlds.note"],
            serde_json::to_string(&notes).unwrap(),
            "a text that changes per step: the list"
        );
        assert_eq!(record["task"], "");
        assert_eq!(
            record["rlds.episode_metadata.operator"],
            want["metadata"]["operator"].as_str().unwrap()
        );
        assert_eq!(
            record["rlds.episode_metadata.seed"],
            want["metadata"]["seed"][0].to_string()
        );
        let file = reference(&format!("generic_mini.{}.camera.rgb", episode.index));
        let worst = worst_psnr(&reader, "/observation/camera", &file, PICTURE, 100_000_000);
        eprintln!(
            "generic_mini {} camera (PNG): worst frame {worst:.1} dB",
            episode.index
        );
        assert!(worst >= 33.0, "{worst:.1} dB");
    }
}

/// A copy of a build to damage.
fn copy_build(name: &str, to: &Path) -> PathBuf {
    let dest = to.join(name).join("1.0.0");
    std::fs::create_dir_all(&dest).unwrap();
    for entry in std::fs::read_dir(build(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dest.join(entry.file_name())).unwrap();
    }
    dest
}

#[test]
fn damaged_shards_cost_only_their_damaged_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_build("droid_mini", dir.path());
    // Shard 0 holds two episodes: a byte flipped inside the second's record fails its
    // checksum. Shard 1's single episode is cut short.
    let shard0 = copy.join("droid_mini-train.tfrecord-00000-of-00002");
    let mut bytes = std::fs::read(&shard0).unwrap();
    let last = bytes.len() - 100;
    bytes[last] ^= 0x40;
    std::fs::write(&shard0, &bytes).unwrap();
    let shard1 = copy.join("droid_mini-train.tfrecord-00001-of-00002");
    let bytes = std::fs::read(&shard1).unwrap();
    std::fs::write(&shard1, &bytes[..bytes.len() / 2]).unwrap();
    let dataset = RldsDataset::open(copy.to_str().unwrap(), &RldsOptions::default()).unwrap();
    let store = Store::open(dir.path().join("store").to_str().unwrap()).unwrap();
    let report = run(&dataset, &store);
    let failed: Vec<(&str, &str)> = report
        .failed()
        .map(|l| {
            (
                l.episode_id.as_str(),
                l.error.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed[0].0, "droid_mini_train_000001");
    assert!(
        failed[0].1.contains("tfrecord-00000-of-00002")
            && failed[0].1.contains("record 1")
            && failed[0].1.contains("checksum"),
        "{}",
        failed[0].1
    );
    assert_eq!(failed[1].0, "droid_mini_train_000002");
    assert!(
        failed[1].1.contains("tfrecord-00001-of-00002") && failed[1].1.contains("truncated"),
        "{}",
        failed[1].1
    );
    canonical(&store, "droid_mini_train_000000");

    // A feature type Reel does not read is named, before anything is imported.
    let features = copy.join("features.json");
    let text = std::fs::read_to_string(&features).unwrap();
    std::fs::write(
        &features,
        text.replacen("\"text\": {}", "\"audio\": {}", 1).replacen(
            "text_feature.Text",
            "audio_feature.Audio",
            1,
        ),
    )
    .unwrap();
    let err = RldsDataset::open(copy.to_str().unwrap(), &RldsOptions::default())
        .expect_err("unknown type");
    assert!(
        err.to_string().contains("features.json")
            && err.to_string().contains("unknown feature type"),
        "{err}"
    );
}

#[test]
fn a_plan_of_shards_imports_in_parallel_batches_with_the_whole_build_s_ids() {
    let build_dir = build("droid_mini");
    let build_store = Store::open_existing(build_dir.to_str().unwrap()).unwrap();
    let shards = reel_pipeline::list_rlds_shards(&build_store).unwrap();
    assert_eq!(
        shards.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(),
        [
            "droid_mini-train.tfrecord-00000-of-00002",
            "droid_mini-train.tfrecord-00001-of-00002"
        ]
    );
    let plan = reel_pipeline::make_plan(
        build_dir.to_str().unwrap(),
        shards,
        reel_pipeline::BatchTarget::Count(2),
    );
    assert_eq!(plan.batches.len(), 2);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let mut ids = Vec::new();
    let mut batch_keys = Vec::new();
    // Both batches at once, as two tasks of an array would run them.
    std::thread::scope(|scope| {
        let runs: Vec<_> = plan
            .batches
            .iter()
            .map(|batch| {
                let options = RldsOptions {
                    shards: Some(batch.episodes.iter().map(|e| e.key.clone()).collect()),
                    ..RldsOptions::default()
                };
                let dataset = open("droid_mini", &options);
                let store = store.clone();
                scope.spawn(move || (run(&dataset, &store), dataset.episodes()))
            })
            .collect();
        for handle in runs {
            let (report, episodes) = handle.join().unwrap();
            assert_eq!(report.failed().count(), 0, "{:?}", report.landed);
            assert!(report.ingest.quarantined.is_empty());
            batch_keys.push(report.ingest.batch.clone());
            ids.extend(episodes.into_iter().map(|e| e.id));
        }
    });
    ids.sort();
    assert_eq!(
        ids,
        [
            "droid_mini_train_000000",
            "droid_mini_train_000001",
            "droid_mini_train_000002"
        ]
    );
    assert_ne!(
        batch_keys[0], batch_keys[1],
        "each task its own batch state"
    );
    for id in &ids {
        canonical(&store, id);
    }
    let err = RldsDataset::open(
        build_dir.to_str().unwrap(),
        &RldsOptions {
            shards: Some(vec!["droid_mini-train.tfrecord-00009-of-00010".into()]),
            ..RldsOptions::default()
        },
    )
    .expect_err("a shard the build does not list");
    assert!(
        err.to_string()
            .contains("lists no shard `droid_mini-train.tfrecord-00009-of-00010`"),
        "{err}"
    );
}

#[test]
fn a_build_in_an_s3_bucket_imports_as_from_a_folder() {
    // The build copied to a bucket as `gsutil cp -r`/`aws s3 sync` lay it out, served by a
    // real S3-compatible server on loopback.
    let server = reel_io::test_support::S3Server::start("oxe").unwrap();
    let remote = server.root().join("oxe/droid_mini/1.0.0");
    std::fs::create_dir_all(&remote).unwrap();
    for entry in std::fs::read_dir(build("droid_mini")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), remote.join(entry.file_name())).unwrap();
    }
    let bucket = server.store("oxe", "droid_mini/1.0.0").unwrap();
    let dataset = RldsDataset::open_in(bucket, &RldsOptions::default()).unwrap();
    assert_eq!(dataset.shards().len(), 2);
    let (_dir, store, _) = import_cleanly(&dataset);
    for (episode, want) in dataset.episodes().iter().zip(expected("droid_mini")) {
        let reader = canonical(&store, &episode.id);
        assert_eq!(assert_values(&reader, &want, &[]), 15, "{}", episode.id);
    }
}
