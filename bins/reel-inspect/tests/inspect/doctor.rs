//! `reel-inspect doctor` on a good canonical episode and on one with a damaged chunk, and
//! `reel-inspect cat` on one topic.

use std::path::Path;
use std::process::{Command, Output};

use reel_io::FileSource;
use reel_landing::{PackConfig, pack_episode};
use reel_synth::{SynthConfig, generate_episode};

use crate::json_lines;

/// Bytes of a chunk record in front of its compressed records: opcode, length, start and
/// end time, uncompressed size and CRC, the compression name (`zstd`), records length.
const CHUNK_HEADER: u64 = 1 + 8 + 8 + 8 + 8 + 4 + (4 + 4) + 8;

fn canonical_episode(dir: &Path) -> std::path::PathBuf {
    let config = SynthConfig {
        seconds: 2.5,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let landing = generate_episode(&config, 0).unwrap();
    let (canonical, _) =
        pack_episode("landing.mcap", &landing.mcap, &PackConfig::default()).unwrap();
    let path = dir.join("canonical.mcap");
    std::fs::write(&path, canonical).unwrap();
    path
}

fn inspect(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reel-inspect"))
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

#[test]
fn doctor_passes_a_good_file_and_names_a_damaged_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = canonical_episode(dir.path());
    let good = inspect(&["doctor"], &path);
    let text = String::from_utf8_lossy(&good.stdout);
    assert!(
        good.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(text.contains(": OK ("), "{text}");

    // Flip one byte in the middle of the compressed records of the `proprio` group's first
    // chunk.
    let layout = reel_mcap::inspect(FileSource::open(&path).unwrap(), false).unwrap();
    let proprio = layout.groups.iter().find(|g| g.group == "proprio").unwrap();
    let chunk = &proprio.chunk_list[0];
    let mut bytes = std::fs::read(&path).unwrap();
    let at = (chunk.offset + CHUNK_HEADER + chunk.compressed_bytes / 2) as usize;
    bytes[at] ^= 0x40;
    let damaged_path = dir.path().join("damaged.mcap");
    std::fs::write(&damaged_path, &bytes).unwrap();

    let damaged = inspect(&["doctor", "--json"], &damaged_path);
    assert_eq!(damaged.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&damaged.stdout).unwrap();
    let problems = report["problems"].as_array().unwrap();
    let named = format!("at offset {}", chunk.offset);
    assert!(
        problems
            .iter()
            .any(|p| p["check"] == "chunk" && p["detail"].as_str().unwrap().contains(&named)),
        "{problems:?}"
    );
    let text = String::from_utf8(inspect(&["doctor"], &damaged_path).stdout).unwrap();
    assert!(
        text.contains("problem(s)") && text.contains(&named),
        "{text}"
    );
}

#[test]
fn doctor_refuses_a_truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = canonical_episode(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let run = inspect(&["doctor"], &path);
    assert_eq!(run.status.code(), Some(1));
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        text.contains("magic: the file does not end with the MCAP magic"),
        "{text}"
    );
}

#[test]
fn cat_prints_one_json_line_per_message_of_a_topic() {
    let dir = tempfile::tempdir().unwrap();
    let path = canonical_episode(dir.path());
    let layout = reel_mcap::inspect(FileSource::open(&path).unwrap(), false).unwrap();
    let joints = layout
        .channels
        .iter()
        .find(|c| c.topic == "/joint_states")
        .unwrap();
    let run = inspect(&["cat", "--topic", "/joint_states"], &path);
    let lines = json_lines(run);
    assert_eq!(lines.len() as u64, joints.messages);
    assert!(
        lines
            .windows(2)
            .all(|w| w[0]["log_time"].as_u64() <= w[1]["log_time"].as_u64())
    );
    let first = &lines[0];
    assert_eq!(first["topic"], "/joint_states");
    assert!(first["publish_time"].is_u64());
    // Decoded: values named by the channel's fields.
    assert!(
        first["message"]["values"].as_object().unwrap().len() >= 14,
        "{first}"
    );

    let camera = layout
        .channels
        .iter()
        .find(|c| c.schema == "foxglove.CompressedVideo")
        .unwrap();
    let cameras = inspect(&["cat", "-t", &camera.topic], &path);
    let frame: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&cameras.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(frame["message"]["keyframe"], true, "{frame}");
}
