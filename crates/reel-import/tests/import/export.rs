//! Canonical episodes out as LeRobot v3.0 datasets, read back by LeRobot 0.6.1 itself
//! (testdata/lerobot/check_export.py, in LeRobot's venv): the round trip LeRobot → Reel →
//! LeRobot, robot recordings at LeRobot's default encoding, a damaged row, an output that
//! exists.

use std::path::{Path, PathBuf};
use std::process::Command;

use reel_import::lerobot::Dataset;
use reel_import::lerobot::export::{ExportOptions, ExportReport, export};
use reel_import::{config_for, default_config, import};
use reel_io::{MmapSource, Store};
use reel_manifest::{Manifest, ManifestMeta, ManifestRow, SamplingRule, write_manifest};
use reel_mcap::EpisodeReader;
use reel_pipeline::RunOptions;
use reel_pipeline::test_support::SynthCorpus;
use reel_synth::SynthConfig;
use reel_video::Mp4Encoding;

fn testdata(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(path)
}

/// A manifest of the store's canonical episodes `ids`, each over the span its file holds.
fn manifest_of(store: &Store, ids: &[String], path: &Path) -> Manifest {
    let spans: Vec<(String, i64, i64)> = ids
        .iter()
        .map(|id| {
            let key = format!("canonical/{id}.mcap");
            let file = store.local_path(&key).unwrap().unwrap();
            let reader = EpisodeReader::open(MmapSource::open(&file).unwrap()).unwrap();
            let stats = reader.summary().unwrap().stats.clone().unwrap();
            (
                key,
                stats.message_start_time as i64,
                stats.message_end_time as i64,
            )
        })
        .collect();
    let rows: Vec<ManifestRow<'_>> = ids
        .iter()
        .zip(&spans)
        .map(|(id, (key, start, end))| ManifestRow {
            episode_id: id,
            uri: key,
            start_ns: *start,
            end_ns: *end,
            ..Default::default()
        })
        .collect();
    let rule = SamplingRule {
        period_ns: 100_000_000,
        before_ns: 0,
        after_ns: 0,
    };
    write_manifest(
        path,
        &rows,
        &ManifestMeta::new("SELECT * FROM episodes", "test", rule),
    )
    .unwrap();
    Manifest::open(path).unwrap()
}

/// What LeRobot saw of the dataset at `root` (and, with `source`, how it compares).
fn lerobot_reads(root: &Path, source: Option<&Path>) -> serde_json::Value {
    let python = reel_io::test_support::lerobot_python().expect("LeRobot's venv");
    let mut command = Command::new(python);
    command.arg(testdata("lerobot/check_export.py")).arg(root);
    if let Some(source) = source {
        command.arg("--source").arg(source);
    }
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "LeRobot refused {}: {stdout}\n{}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

fn export_quietly(
    manifest: &Manifest,
    store: &Store,
    output: &Path,
    options: &ExportOptions,
) -> ExportReport {
    export(manifest, store, output, options, &|_| {}).unwrap()
}

#[test]
fn lerobot_datasets_come_back_out_as_lerobot_reads_them() {
    for (name, encoder, preset, codec) in [
        ("pusht_h264", "libx264", None, "h264"),
        ("pusht_av1", "libaom-av1", Some("8"), "av1"),
    ] {
        let source = testdata(&format!("lerobot/{name}"));
        let dataset = Dataset::open(&source).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store").to_str().unwrap()).unwrap();
        let config = config_for(dataset.info().fps, &default_config());
        import(&dataset, &store, config, &RunOptions::default(), &|_| {}).unwrap();
        let ids: Vec<String> = dataset
            .episodes()
            .iter()
            .map(|e| dataset.episode_id(e))
            .collect();
        let manifest = manifest_of(&store, &ids, &dir.path().join("m.arrow"));
        let output = dir.path().join("exported");
        let options = ExportOptions {
            encoding: Mp4Encoding {
                encoder: encoder.into(),
                gop: 2,
                crf: 30,
                preset: preset.map(str::to_owned),
            },
            ..ExportOptions::default()
        };
        let report = export_quietly(&manifest, &store, &output, &options);
        assert_eq!(report.failed().count(), 0, "{name}: {report:?}");
        assert_eq!(report.fps, 10);
        assert_eq!(
            report.episodes.iter().map(|e| e.frames).collect::<Vec<_>>(),
            [12, 7, 15]
        );

        // LeRobot compares every frame with the source: state and action exactly, the
        // pictures within 30 dB of its own decode of the source video.
        let seen = lerobot_reads(&output, Some(&source));
        assert_eq!(seen["episodes"], 3, "{name}: {seen}");
        assert_eq!(seen["frames"], 34);
        assert_eq!(seen["lengths"], serde_json::json!([12, 7, 15]));
        assert_eq!(seen["video_codecs"], serde_json::json!([codec]));
        assert!(seen["min_psnr_db"].as_f64().unwrap() >= 30.0, "{seen}");
        assert_eq!(seen["losses"].as_array().unwrap().len(), 4);

        // LeRobot's default encoder, as Debian's FFmpeg has it, codes nothing this small:
        // each episode says so, and no dataset appears.
        let small = dir.path().join("svt");
        let report = export(&manifest, &store, &small, &ExportOptions::default(), &|e| {
            let error = e.error.as_deref().unwrap_or_default();
            assert!(
                error.contains("at least 64x64") && error.contains("64x48"),
                "{error}"
            );
        });
        assert!(report.is_err() && !small.exists());
    }
}

#[test]
fn robot_recordings_export_at_lerobots_defaults_and_a_damaged_row_is_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    std::fs::create_dir_all(root.join("canonical")).unwrap();
    let store = Store::open(root.to_str().unwrap()).unwrap();
    // Cameras at 30 Hz, joints at 100, actions at 50, one depth camera (which no LeRobot
    // RGB feature holds); 128x96, as SVT-AV1 codes nothing under 64 pixels tall.
    let synth = SynthConfig {
        seed: 5,
        seconds: 2.0,
        cameras: 2,
        depth_cameras: 1,
        width: 128,
        height: 96,
        ..SynthConfig::default()
    };
    let ids: Vec<String> = SynthCorpus::ingest(&synth, 2, &root)
        .unwrap()
        .summaries()
        .map(|s| s.episode_id.clone())
        .collect();
    let mut manifest_ids = ids.clone();
    manifest_ids.insert(1, "damaged".to_owned());
    let good = std::fs::read(root.join(format!("canonical/{}.mcap", ids[0]))).unwrap();
    // The damaged episode: a good one's first half, so only opening it tells.
    let manifest = {
        std::fs::write(root.join("canonical/damaged.mcap"), &good).unwrap();
        let m = manifest_of(&store, &manifest_ids, &dir.path().join("m.arrow"));
        std::fs::write(root.join("canonical/damaged.mcap"), &good[..good.len() / 2]).unwrap();
        m
    };
    let output = dir.path().join("robots");
    let report = export_quietly(&manifest, &store, &output, &ExportOptions::default());

    let failed: Vec<_> = report.failed().collect();
    assert_eq!(failed.len(), 1, "{report:?}");
    assert_eq!(failed[0].uri, "canonical/damaged.mcap");
    assert!(
        failed[0]
            .error
            .as_deref()
            .unwrap()
            .contains("canonical/damaged.mcap"),
        "{failed:?}"
    );
    assert_eq!(report.fps, 30);
    assert_eq!(
        report.left_out.len(),
        1,
        "the depth camera: {:?}",
        report.left_out
    );
    assert!(report.features.contains(&"observation.state".to_owned()));
    assert!(report.features.contains(&"action".to_owned()));
    let exported: Vec<_> = report
        .episodes
        .iter()
        .filter(|e| e.status == "exported")
        .collect();
    assert_eq!(
        exported.iter().map(|e| e.episode_index).collect::<Vec<_>>(),
        [Some(0), Some(1)]
    );

    let seen = lerobot_reads(&output, None);
    assert_eq!(seen["episodes"], 2, "{seen}");
    assert_eq!(seen["video_codecs"], serde_json::json!(["av1"]));
    let lengths: Vec<u64> = exported.iter().map(|e| e.frames as u64).collect();
    assert_eq!(seen["lengths"], serde_json::json!(lengths));
    // Two seconds at 30 fps, from the latest first frame to the earliest last one.
    assert!(
        lengths.iter().all(|&n| (55..=61).contains(&n)),
        "{lengths:?}"
    );
    // Nothing but the dataset was left beside it.
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(beside.iter().all(|n| !n.contains("partial")), "{beside:?}");
}

#[test]
fn an_output_that_exists_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store").to_str().unwrap()).unwrap();
    let output = dir.path().join("existing");
    std::fs::create_dir_all(&output).unwrap();
    std::fs::write(output.join("mine.txt"), b"keep").unwrap();
    let rule = SamplingRule {
        period_ns: 100_000_000,
        before_ns: 0,
        after_ns: 0,
    };
    let path = dir.path().join("m.arrow");
    write_manifest(&path, &[], &ManifestMeta::new("q", "s", rule)).unwrap();
    let manifest = Manifest::open(&path).unwrap();
    let error = export(
        &manifest,
        &store,
        &output,
        &ExportOptions::default(),
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("existing") && error.contains("already exists"),
        "{error}"
    );
    assert_eq!(std::fs::read(output.join("mine.txt")).unwrap(), b"keep");
}
