//! Canonical episodes read with independent tools: the Python `mcap` library (all
//! messages, counts, order, CRCs, MessageIndex entries, depth frames) and the ffmpeg CLI
//! (H.264).

use std::process::Command;

use reel_io::MemorySource;
use reel_landing::{PackConfig, pack_episode};
use reel_mcap::EpisodeReader;
use reel_synth::{Flavor, SynthConfig, generate_episode};
use reel_video::H264Decoder;

fn check(flavor: Flavor) {
    let python = reel_io::test_support::python().unwrap();
    assert!(
        Command::new("ffmpeg").arg("-version").output().is_ok(),
        "the ffmpeg CLI is needed: run scripts/setup.sh"
    );
    let config = SynthConfig {
        seconds: 2.5,
        cameras: 2,
        depth_cameras: 1,
        width: 96,
        height: 64,
        flavor,
        ..SynthConfig::default()
    };
    let landing = generate_episode(&config, 3).unwrap();
    let (bytes, _) = pack_episode("landing.mcap", &landing.mcap, &PackConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let episode = dir.path().join("episode.mcap");
    std::fs::write(&episode, &bytes).unwrap();

    // Reel's own decode of a few frames, for ffmpeg to agree with.
    let reader = EpisodeReader::open(MemorySource::new("episode.mcap", bytes)).unwrap();
    let camera = reader.groups()["cameras"]
        .iter()
        .find(|t| reader.channel(t).unwrap().metadata[reel_mcap::keys::KIND] == "camera")
        .unwrap()
        .clone();
    let messages = reader.read_topics(&[&camera], 0..u64::MAX).unwrap();
    let mut decoder = H264Decoder::new().unwrap();
    let mut frames = serde_json::Map::new();
    for index in [0usize, 17, 31, messages.len() - 1] {
        let picture = reader
            .frames_at(&camera, &[messages[index].log_time], &mut decoder, None)
            .unwrap();
        let path = dir.path().join(format!("frame-{index}.rgb"));
        std::fs::write(&path, &picture[0].data).unwrap();
        frames.insert(index.to_string(), path.to_str().unwrap().into());
    }
    let expected = serde_json::json!({
        "counts": landing.report.counts,
        "camera": camera,
        "frames": frames,
        "width": 96,
        "height": 64,
        "format_version": reel_mcap::FORMAT_VERSION,
    });
    let expected_path = dir.path().join("expected.json");
    std::fs::write(&expected_path, expected.to_string()).unwrap();

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/check_canonical.py"
    );
    let out = Command::new(python)
        .arg(script)
        .arg(&episode)
        .arg(&expected_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("\"ok\": true"), "{stdout}");
    eprintln!("{stdout}");
}

#[test]
fn python_mcap_and_ffmpeg_read_ros2_packs() {
    check(Flavor::Ros2);
}

#[test]
fn python_mcap_and_ffmpeg_read_foxglove_packs() {
    check(Flavor::Foxglove);
}
