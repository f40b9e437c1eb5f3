//! `reel-pack` end to end: local folders and S3, JSON lines, exit codes.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use std::process::Command;

use reel_io::test_support::S3Server;
use reel_synth::{SynthConfig, generate_episode};

fn landing(index: u64) -> (String, Vec<u8>) {
    let config = SynthConfig {
        seconds: 1.5,
        cameras: 2,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let episode = generate_episode(&config, index).unwrap();
    (episode.name.clone(), episode.mcap)
}

fn reel_pack() -> Command {
    Command::new(env!("CARGO_BIN_EXE_reel-pack"))
}

#[test]
fn packs_several_local_files_with_a_json_line_each() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for i in 0..2 {
        let (name, bytes) = landing(i);
        let path = dir.path().join(format!("{name}.mcap"));
        std::fs::write(&path, bytes).unwrap();
        inputs.push(path);
    }
    let garbage = dir.path().join("garbage.mcap");
    std::fs::write(&garbage, b"not an mcap").unwrap();
    let out_dir = dir.path().join("canonical");

    let output = reel_pack()
        .args(&inputs)
        .arg(&garbage)
        .arg("-o")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(!output.status.success(), "one input is garbage");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    let failed: Vec<_> = lines.iter().filter(|l| l.get("error").is_some()).collect();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("garbage.mcap")
    );
    for line in lines.iter().filter(|l| l.get("error").is_none()) {
        assert_eq!(line["cameras"], 2);
        let output = line["output"].as_str().unwrap();
        assert!(std::path::Path::new(output).is_file(), "{output}");
    }
}

#[test]
fn packs_from_s3_to_s3() {
    let server = S3Server::start("robots").unwrap();
    let (name, bytes) = landing(5);
    server
        .store("robots", "landing")
        .unwrap()
        .write_atomic(&format!("{name}.mcap"), bytes)
        .unwrap();
    let options = server.options();
    let input = format!(
        "s3://robots/landing/{name}.mcap?endpoint=http://127.0.0.1:{}",
        server.port()
    );
    let output = format!(
        "s3://robots/canonical/{name}.mcap?endpoint=http://127.0.0.1:{}",
        server.port()
    );
    let run = reel_pack()
        .args([&input, "-o", &output, "--gop", "15"])
        .env("AWS_ACCESS_KEY_ID", options.access_key_id.unwrap())
        .env("AWS_SECRET_ACCESS_KEY", options.secret_access_key.unwrap())
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["output"], output);
    let written = server.root().join(format!("robots/canonical/{name}.mcap"));
    assert_eq!(
        std::fs::metadata(&written).unwrap().len(),
        report["bytes_out"].as_u64().unwrap()
    );
}
