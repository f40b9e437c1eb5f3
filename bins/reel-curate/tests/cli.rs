//! The two curation binaries on a generated warehouse: `reel-compact` writes a
//! compaction once, `reel-curate` reads through it and gives the same episodes
//! as from the log.

use std::path::Path;
use std::process::Command;

use reel_curate::synthetic::parquet_file;
use reel_manifest::Manifest;

fn run(bin: &str, args: &[&str]) -> (serde_json::Value, String) {
    let out = Command::new(bin).args(args).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{bin} {args:?}: {stderr}");
    let line = String::from_utf8(out.stdout).expect("utf-8");
    let json = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("{line}: {e}"));
    (json, stderr)
}

fn episode_ids(path: &Path) -> Vec<String> {
    let m = Manifest::open(path).expect("opens");
    let mut ids: Vec<String> = m
        .episodes()
        .map(|e| e.episode_id().expect("utf-8").to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn compact_then_curate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let episodes = dir.path().join("episodes");
    std::fs::create_dir_all(&episodes).expect("mkdir");
    std::fs::write(
        episodes.join("part-0.parquet"),
        parquet_file(5, 0..400, 1).expect("encodes"),
    )
    .expect("writes");
    std::fs::write(
        episodes.join("part-1.parquet"),
        parquet_file(5, 0..100, 2).expect("encodes"),
    )
    .expect("writes");
    let warehouse = dir.path().to_str().expect("utf-8");
    let sql = "SELECT * FROM episodes WHERE success AND task IN ('fold_towel', 'stack_cups')";
    let curate = env!("CARGO_BIN_EXE_reel-curate");
    let compact = env!("CARGO_BIN_EXE_reel-compact");

    let from_log = dir.path().join("log.arrow");
    let log_out = from_log.to_str().expect("utf-8");
    let (log_json, stderr) = run(
        curate,
        &["--warehouse", warehouse, "--sql", sql, "-o", log_out],
    );
    assert!(stderr.contains("no compaction"), "{stderr}");

    let (first, _) = run(compact, &["--warehouse", warehouse]);
    assert_eq!(first["rows"], 400);
    assert_eq!(first["covered_files"], 2);
    assert_eq!(first["written"], true);
    let (again, stderr) = run(compact, &["--warehouse", warehouse]);
    assert_eq!(again["written"], false, "{stderr}");
    assert_eq!(again["id"], first["id"]);

    let compacted = dir.path().join("compacted.arrow");
    let out = compacted.to_str().expect("utf-8");
    let (json, stderr) = run(curate, &["--warehouse", warehouse, "--sql", sql, "-o", out]);
    assert!(stderr.contains("reading compaction"), "{stderr}");
    assert_eq!(json["rows"], log_json["rows"]);
    assert_eq!(json["samples"], log_json["samples"]);
    let id = first["id"].as_str().expect("id");
    assert!(json["snapshot"].as_str().expect("snapshot").ends_with(id));
    assert_eq!(episode_ids(&compacted), episode_ids(&from_log));
    assert!(!episode_ids(&compacted).is_empty());

    // Episodes 350..400 re-ingested since, then curated by position and uploaded: the
    // selection and the newer rows beside it land side by side in the store.
    std::fs::write(
        episodes.join("part-2.parquet"),
        reel_curate::synthetic::parquet_file_ingested_at(5, 350..400, 3, Some(i64::MAX / 2))
            .expect("encodes"),
    )
    .expect("writes");
    let selected = dir.path().join("selected.arrow");
    let out = selected.to_str().expect("utf-8");
    let store = dir.path().join("runs");
    let (json, stderr) = run(
        curate,
        &[
            "--warehouse",
            warehouse,
            "--sql",
            sql,
            "-o",
            out,
            "--by-position",
            "--upload",
            "42/train.arrow",
            "--store",
            store.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(json["selection"], true, "{stderr}");
    let beside = json["beside"].as_array().expect("beside");
    assert_eq!(beside.len(), 1, "{json}");
    let plain = dir.path().join("plain.arrow");
    let plain_out = plain.to_str().expect("utf-8");
    let (plain_json, _) = run(
        curate,
        &["--warehouse", warehouse, "--sql", sql, "-o", plain_out],
    );
    assert_eq!(json["rows"], plain_json["rows"]);
    assert_eq!(json["samples"], plain_json["samples"]);
    let uploaded = Manifest::open(store.join("42/train.arrow")).expect("opens the upload");
    assert!(uploaded.is_selection());
    let local = Manifest::open(&selected).expect("opens");
    assert_eq!(uploaded.content_hash(), local.content_hash());
    let in_order = |m: &Manifest| -> Vec<(String, i64, u64)> {
        m.episodes()
            .map(|e| {
                (
                    e.episode_id().expect("id").to_string(),
                    e.end_ns(),
                    e.sample_offset(),
                )
            })
            .collect()
    };
    assert_eq!(
        in_order(&uploaded),
        in_order(&Manifest::open(&plain).expect("opens"))
    );
}
