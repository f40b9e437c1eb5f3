//! Recorded video (`foxglove.CompressedVideo`, encoded by PyAV): H.264 that meets the
//! canonical rules is kept message for message; H.265, B-frames and keyframes that miss
//! the chunk windows are transcoded, each with its reason; pictures of odd sizes survive
//! the round trip. Outputs are checked by Python `mcap` and decoded by PyAV.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use reel_io::MemorySource;
use reel_landing::{PackConfig, pack, read_landing};
use reel_mcap::{DoctorOptions, EpisodeReader, VideoOrigin, doctor, keys};
use reel_video::{H264Decoder, RgbConversion};
use serde_json::Value;

fn python() -> PathBuf {
    reel_io::test_support::python().unwrap()
}

/// The recording, written once per test binary.
fn recording() -> &'static (PathBuf, Value) {
    static RECORDING: OnceLock<(PathBuf, Value)> = OnceLock::new();
    RECORDING.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let (mcap, expected) = (dir.join("video.mcap"), dir.join("video.json"));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/write_video.py");
        let status = Command::new(python())
            .args([script, mcap.to_str().unwrap(), expected.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success(), "write_video.py failed");
        let expected = serde_json::from_slice(&std::fs::read(expected).unwrap()).unwrap();
        (mcap, expected)
    })
}

fn source_frame(exp: &Value, i: usize) -> Vec<u8> {
    exp["rgb"][i.to_string()]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u8)
        .collect()
}

fn packed(out: &Path) -> (PathBuf, reel_landing::PackReport) {
    let (mcap, _) = recording();
    let output = out.join("episode.mcap");
    let report = pack(
        mcap.to_str().unwrap(),
        output.to_str().unwrap(),
        &PackConfig::default(),
        &Default::default(),
    )
    .unwrap();
    (output, report)
}

#[test]
fn recorded_h264_is_kept_and_other_video_is_transcoded_with_its_reason() {
    let (_, exp) = recording();
    let dir = tempfile::tempdir().unwrap();
    let (output, report) = packed(dir.path());
    assert_eq!(report.kept_videos, ["/video/kept"]);
    let reasons = &report.transcoded_videos;
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons["/video/bframes"].contains("B-frames"),
        "{reasons:?}"
    );
    assert!(reasons["/video/hevc"].contains("h265"), "{reasons:?}");
    assert!(
        reasons["/video/offset"].contains("keyframes do not start"),
        "{reasons:?}"
    );
    assert_eq!(report.cameras, 5);
    assert_eq!(report.bad_frames, 0);

    let bytes = std::fs::read(&output).unwrap();
    let verdict = doctor(
        MemorySource::new("episode.mcap", bytes.clone()),
        DoctorOptions::default(),
    )
    .unwrap();
    assert!(verdict.problems.is_empty(), "{:?}", verdict.problems);

    // The kept camera's access units are the recorded ones, byte for byte, and the chunk
    // windows are its GOPs.
    let reader = EpisodeReader::open(MemorySource::new("episode.mcap", bytes.clone())).unwrap();
    let kept = reader.read_topics(&["/video/kept"], 0..u64::MAX).unwrap();
    let recorded: Vec<Vec<u8>> = exp["kept_units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            let hex = u.as_str().unwrap();
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect();
    assert_eq!(kept.len(), recorded.len());
    for (message, unit) in kept.iter().zip(&recorded) {
        let video =
            <reel_mcap::proto::CompressedVideo as prost::Message>::decode(message.data.as_ref())
                .unwrap();
        assert_eq!(&video.data, unit);
    }
    let layout = &reader.metadata()[keys::LAYOUT_RECORD];
    let start = exp["start_ns"].as_u64().unwrap();
    let period = exp["period_ns"].as_u64().unwrap();
    assert_eq!(layout["camera_origin_ns"], start.to_string());
    assert_eq!(layout["camera_window_ns"], (15 * period).to_string());

    // The channels say what happened; `reel inspect` shows it.
    let meta = |topic: &str, key: &str| reader.channel(topic).unwrap().metadata.get(key).cloned();
    assert_eq!(meta("/video/kept", keys::VIDEO).as_deref(), Some("kept"));
    assert_eq!(
        meta("/video/hevc", keys::VIDEO).as_deref(),
        Some("transcoded")
    );
    assert_eq!(
        meta("/video/hevc", keys::SOURCE_ENCODING).as_deref(),
        Some("h265")
    );
    assert!(
        meta("/video/bframes", keys::VIDEO_REASON)
            .unwrap()
            .contains("B-frames")
    );
    assert_eq!(meta("/video/raw", keys::VIDEO).as_deref(), Some("encoded"));
    assert_eq!(
        meta("/video/raw", keys::SOURCE_ENCODING).as_deref(),
        Some("rgb8")
    );
    let table = reel_mcap::inspect(MemorySource::new("episode.mcap", bytes), false)
        .unwrap()
        .to_table();
    assert!(table.contains("h264, kept"), "{table}");
    assert!(
        table.contains("h265, transcoded (recorded as h265"),
        "{table}"
    );

    // Every camera shows frame 20 close to its source.
    let mut decoder = H264Decoder::with_conversion(RgbConversion::Accurate).unwrap();
    let source = source_frame(exp, 20);
    for topic in [
        "/video/kept",
        "/video/bframes",
        "/video/hevc",
        "/video/offset",
        "/video/raw",
    ] {
        let frame = reader
            .frames_at(topic, &[start + 20 * period], &mut decoder, None)
            .unwrap()
            .remove(0);
        let psnr = reel_video::quality::psnr(&source, &frame.data);
        assert!(psnr > 30.0, "{topic}: {psnr:.1} dB");
    }

    // Independent readers: Python mcap reads every message, PyAV decodes every camera.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/check_video.py");
    let result = Command::new(python())
        .args([
            script,
            output.to_str().unwrap(),
            recording().0.with_extension("json").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let checked: Value = serde_json::from_slice(&result.stdout).unwrap();
    for (topic, c) in checked.as_object().unwrap() {
        assert!(c["psnr"].as_f64().unwrap() > 30.0, "{topic}: {c}");
    }
    assert_eq!(checked.as_object().unwrap().len(), 5);
}

#[test]
fn a_recorded_video_is_read_from_the_landing_as_video() {
    let (mcap, exp) = recording();
    let episode = read_landing("video.mcap", &std::fs::read(mcap).unwrap(), &|_| false).unwrap();
    let frames = exp["frames"].as_u64().unwrap() as usize;
    for topic in ["/video/kept", "/video/hevc"] {
        let camera = episode.cameras.iter().find(|c| c.topic == topic).unwrap();
        assert_eq!(camera.frames.len(), frames);
        assert!(reel_landing::is_recorded_video(camera));
    }
    let (windows, origins) = reel_landing::plan_recorded_videos(&episode.cameras, true);
    let windows = windows.unwrap();
    assert_eq!(windows.origin_ns, exp["start_ns"].as_u64().unwrap());
    let kept = episode
        .cameras
        .iter()
        .zip(&origins)
        .filter(|(_, o)| **o == VideoOrigin::Kept)
        .map(|(c, _)| c.topic.as_str())
        .collect::<Vec<_>>();
    assert_eq!(kept, ["/video/kept"]);
    // Told not to keep, every recorded video is transcoded.
    let (windows, origins) = reel_landing::plan_recorded_videos(&episode.cameras, false);
    assert!(windows.is_none());
    assert!(!origins.contains(&VideoOrigin::Kept));
    // Decoded front to back, the n-th picture is the n-th message's.
    let hevc = episode
        .cameras
        .iter()
        .find(|c| c.topic == "/video/hevc")
        .unwrap();
    let pictures: Vec<_> = reel_landing::CameraFrames::new(hevc)
        .map(|(i, p)| (i, p.unwrap()))
        .collect();
    assert_eq!(pictures.len(), frames);
    let psnr = reel_video::quality::psnr(&source_frame(exp, 7), &pictures[7].1.data);
    assert!(psnr > 30.0, "{psnr:.1}");
}
