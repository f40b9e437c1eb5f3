//! HDF5 episodes written by h5py (testdata/hdf5/make_fixtures.py) in the ALOHA layout (raw
//! and JPEG pictures) and robomimic's, imported into a store: values exact, pictures near
//! what was stored, a file without `/action` refused by name.

use std::path::{Path, PathBuf};

use crate::common::{canonical, worst_psnr};
use reel_import::hdf5::{Hdf5Files, Mapping};
use reel_import::{ImportReport, Source, config_for, default_config, import};
use reel_io::Store;
use reel_mcap::SignalKind;
use reel_pipeline::RunOptions;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/hdf5")
        .join(name)
}

/// The values make_fixtures.py wrote, by dataset path.
fn expected(stem: &str) -> serde_json::Map<String, serde_json::Value> {
    let text = std::fs::read_to_string(fixture(&format!("{stem}.expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn rows(value: &serde_json::Value) -> Vec<f64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
        .collect()
}

fn run(files: &[PathBuf], store: &Store) -> (Hdf5Files, ImportReport) {
    let set = Hdf5Files::open(files, None).unwrap();
    let config = config_for(set.fps().unwrap(), &default_config());
    let report = import(&set, store, config, &RunOptions::default(), &|_| {}).unwrap();
    (set, report)
}

#[test]
fn aloha_files_raw_and_jpeg_import_with_exact_values() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let files = [fixture("aloha_raw.hdf5"), fixture("aloha_jpeg.hdf5")];
    let (set, report) = run(&files, &store);
    assert_eq!(report.failed().count(), 0, "{:?}", report.landed);
    assert!(report.ingest.quarantined.is_empty());
    assert_eq!(set.fps().unwrap(), 50.0);
    let sources = crate::common::warehouse_sources(&store, &report);
    for (stem, episode) in ["aloha_raw", "aloha_jpeg"].iter().zip(set.episodes()) {
        assert_eq!(episode.id, format!("hdf5_{stem}"));
        let reader = canonical(&store, &episode.id);
        let record = &reader.metadata()["episode"];
        assert_eq!(record["source"], "hdf5.aloha");
        // File names without a number: the episode has no index in its dataset.
        let source = &sources[&episode.id];
        assert_eq!(source.format.as_deref(), Some("hdf5.aloha"));
        assert_eq!((source.episode_index, source.fps), (None, Some(50.0)));
        assert_eq!(record["robot_id"], "aloha");
        assert!(
            record["hdf5.attributes"].contains("\"sim\""),
            "{}",
            record["hdf5.attributes"]
        );
        let want = expected(stem);
        for (topic, kind) in [
            ("/observations/qpos", SignalKind::State),
            ("/action", SignalKind::Action),
            ("/observations/qvel", SignalKind::Signal),
        ] {
            let window = &reader.signals(&[topic], 0..u64::MAX).unwrap()[0];
            // Exact: float64 values on the 50 Hz grid, none resampled.
            assert_eq!(window.values, rows(&want[topic]), "{stem} {topic}");
            assert_eq!(window.fields[0], "left_waist");
            assert_eq!(window.fields[13], "right_gripper");
            let channel = reader.channel(topic).unwrap();
            assert_eq!(
                channel.metadata.get("reel.kind").map(String::as_str),
                Some(kind.as_str())
            );
        }
        for camera in ["top", "angle"] {
            let topic = format!("/observations/images/{camera}");
            let reference = fixture(&format!("{stem}.{camera}.rgb"));
            let worst = worst_psnr(&reader, &topic, &reference, (32, 24), 20_000_000);
            eprintln!("{stem} {camera}: worst frame {worst:.1} dB");
            // Raw pictures against themselves: the canonical H.264 is 4:2:0, and these 32x24
            // pictures with a saturated block lose to chroma subsampling what larger camera
            // pictures do not (36-37 dB measured). JPEG ones against Pillow's decode
            // (another decoder than FFmpeg's, its own chroma upsampling: 34.5-35 dB).
            let floor = if *stem == "aloha_raw" { 35.0 } else { 33.0 };
            assert!(worst >= floor, "{stem} {camera}: {worst:.1} dB");
        }
    }
}

#[test]
fn robomimic_demos_become_episodes_at_the_control_rate() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let (set, report) = run(&[fixture("robomimic.hdf5")], &store);
    assert_eq!(report.failed().count(), 0, "{:?}", report.landed);
    assert_eq!(set.fps().unwrap(), 20.0);
    let episodes = set.episodes();
    assert_eq!(episodes.len(), 2);
    let want = expected("robomimic");
    let sources = crate::common::warehouse_sources(&store, &report);
    for (d, episode) in episodes.iter().enumerate() {
        assert_eq!(episode.id, format!("robomimic_demo_{d}"));
        let reader = canonical(&store, &episode.id);
        let record = &reader.metadata()["episode"];
        assert_eq!(record["task"], "Lift");
        assert_eq!(record["robot_id"], "Panda");
        assert_eq!(record["source.demo"], format!("demo_{d}"));
        assert_eq!(
            sources[&episode.id],
            crate::common::SourceColumns {
                format: Some("hdf5.robomimic".into()),
                dataset: Some(record["source.dataset"].clone()),
                revision: None,
                episode_index: Some(d as i64),
                fps: Some(20.0),
            }
        );
        let actions = &reader.signals(&["/actions"], 0..u64::MAX).unwrap()[0];
        assert_eq!(
            actions.values,
            rows(&want[&format!("/data/demo_{d}/actions")])
        );
        // 20 Hz: one sample every 50 ms from 0.
        assert_eq!(actions.log_times[1], 50_000_000);
        let joints = reader.channel("/obs/robot0_joint_pos").unwrap();
        assert_eq!(
            joints.metadata.get("reel.kind").map(String::as_str),
            Some("state")
        );
        let reference = fixture(&format!("robomimic.demo_{d}.rgb"));
        let worst = worst_psnr(
            &reader,
            "/obs/agentview_image",
            &reference,
            (32, 24),
            50_000_000,
        );
        eprintln!("demo_{d}: worst frame {worst:.1} dB");
        assert!(worst >= 35.0, "demo_{d}: {worst:.1} dB");
    }
}

#[test]
fn a_file_without_its_actions_is_refused_by_name_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let files = [fixture("aloha_no_action.hdf5"), fixture("aloha_raw.hdf5")];
    let (_, report) = run(&files, &store);
    let failed: Vec<_> = report.failed().collect();
    assert_eq!(failed.len(), 1, "{:?}", report.landed);
    let error = failed[0].error.as_deref().unwrap();
    assert!(
        error.contains("aloha_no_action.hdf5") && error.contains("action"),
        "{error}"
    );
    let canonical = store.list_recursive("canonical/").unwrap();
    assert_eq!(canonical, ["canonical/hdf5_aloha_raw.mcap"]);
    assert!(
        !store
            .list_recursive("landing/")
            .unwrap()
            .contains(&failed[0].landing_key)
    );

    let missing = Hdf5Files::open(&[fixture("nowhere.hdf5")], None).unwrap_err();
    assert!(missing.to_string().contains("nowhere.hdf5"), "{missing}");
    let not_hdf5 = Hdf5Files::open(&[fixture("make_fixtures.py")], None).unwrap_err();
    assert!(
        not_hdf5.to_string().contains("not a readable HDF5 file"),
        "{not_hdf5}"
    );
}

#[test]
fn another_layout_imports_through_a_toml_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let text = std::fs::read_to_string(fixture("custom.toml")).unwrap();
    let mapping = Mapping::parse("custom.toml", &text).unwrap();
    let set = Hdf5Files::open_with(&[fixture("custom.hdf5")], None, Some(mapping)).unwrap();
    assert_eq!(set.fps().unwrap(), 30.0);
    let config = config_for(30.0, &default_config());
    let report = import(&set, &store, config, &RunOptions::default(), &|_| {}).unwrap();
    assert_eq!(report.failed().count(), 0, "{:?}", report.landed);
    let want = expected("custom");
    for (e, episode) in set.episodes().iter().enumerate() {
        assert_eq!(episode.id, format!("custom_ep_{e}"));
        let reader = canonical(&store, &episode.id);
        let record = &reader.metadata()["episode"];
        assert_eq!(record["task"], "stack cups");
        assert_eq!(record["robot_id"], "ur5e");
        assert_eq!(record["source"], "hdf5.mapped");
        let windows = reader
            .signals(&["/joints", "/gripper/command"], 0..u64::MAX)
            .unwrap();
        assert_eq!(windows[0].fields, ["shoulder", "elbow", "wrist"]);
        // float32 joints and float64 commands, both unchanged.
        assert_eq!(
            windows[0].values,
            rows(&want[&format!("/episodes/ep_{e}/joints")])
        );
        let command: Vec<f64> = want[&format!("/episodes/ep_{e}/gripper_command")]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(windows[1].values, command);
        let kind = |topic: &str| {
            reader
                .channel(topic)
                .unwrap()
                .metadata
                .get("reel.kind")
                .cloned()
        };
        assert_eq!(kind("/joints").as_deref(), Some("state"));
        assert_eq!(kind("/gripper/command").as_deref(), Some("action"));
        let reference = fixture(&format!("custom.ep_{e}.rgb"));
        let worst = worst_psnr(&reader, "/wrist_rgb", &reference, (32, 24), 33_333_333);
        assert!(worst >= 35.0, "ep_{e}: {worst:.1} dB");
    }

    for (bad, says) in [
        ("fps = 30.0\n", "maps no signal"),
        (
            "fps = 30.0\n[[signal]]\ndataset = \"x\"\nkind = \"torque\"\n",
            "kind `torque`",
        ),
        ("fps = 0.0\n[[camera]]\ndataset = \"x\"\n", "fps is 0"),
        ("fps = 30.0\nunknown = 1\n", "unknown"),
    ] {
        let err = Mapping::parse("m.toml", bad).unwrap_err();
        assert!(
            err.to_string().contains("m.toml") && err.to_string().contains(says),
            "{err}"
        );
    }
    // A mapping naming a dataset the file lacks fails that episode by name.
    let missing = Mapping::parse(
        "m.toml",
        "fps = 30.0\nepisodes = \"episodes/ep_*\"\n[[signal]]\ndataset = \"torques\"\n",
    )
    .unwrap();
    let set = Hdf5Files::open_with(&[fixture("custom.hdf5")], None, Some(missing)).unwrap();
    let err = set.landing_log(0).unwrap_err().to_string();
    assert!(
        err.contains("custom.hdf5") && err.contains("/episodes/ep_0/torques"),
        "{err}"
    );
}
