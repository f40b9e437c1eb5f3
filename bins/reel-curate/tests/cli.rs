//! The two curation binaries on a generated warehouse: `reel-compact` compacts its
//! tables once, `reel-curate` gives the same episodes before and after, again at the
//! versions a manifest names, and by position.

use std::path::Path;
use std::process::Command;

use reel_curate::synthetic::ingest;
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
    let warehouse = dir.path().to_str().expect("utf-8");
    let tables = reel_warehouse::Warehouse::open(warehouse).expect("warehouse");
    ingest(&tables, "first", 5, 0..400, 1, None, true).expect("ingests");
    ingest(&tables, "second", 5, 0..100, 2, None, false).expect("ingests");
    let sql = "SELECT * FROM episodes WHERE success AND task IN ('fold_towel', 'stack_cups')";
    let curate = env!("CARGO_BIN_EXE_reel-curate");
    let compact = env!("CARGO_BIN_EXE_reel-compact");

    let before = dir.path().join("before.arrow");
    let before_out = before.to_str().expect("utf-8");
    let (before_json, stderr) = run(
        curate,
        &["--warehouse", warehouse, "--sql", sql, "-o", before_out],
    );
    assert!(stderr.contains("episodes@"), "{stderr}");

    let (first, _) = run(compact, &["--warehouse", warehouse]);
    assert_eq!(first["rows"], 400);
    assert!(first["episodes_version"].is_u64(), "{first}");
    let (again, stderr) = run(compact, &["--warehouse", warehouse]);
    assert!(again["episodes_version"].is_null(), "{stderr}");

    let compacted = dir.path().join("compacted.arrow");
    let out = compacted.to_str().expect("utf-8");
    let (json, _) = run(curate, &["--warehouse", warehouse, "--sql", sql, "-o", out]);
    assert_eq!(json["rows"], before_json["rows"]);
    assert_eq!(json["samples"], before_json["samples"]);
    let version = first["episodes_version"].as_u64().expect("version");
    assert!(
        json["snapshot"]
            .as_str()
            .expect("snapshot")
            .starts_with(&format!("episodes@{version} ")),
        "{json}"
    );
    assert_eq!(episode_ids(&compacted), episode_ids(&before));
    assert!(!episode_ids(&compacted).is_empty());

    // The curation before the compaction, again, at the versions its manifest names.
    let again = dir.path().join("again.arrow");
    let again_out = again.to_str().expect("utf-8");
    let (again_json, _) = run(
        curate,
        &[
            "--warehouse",
            warehouse,
            "--sql",
            sql,
            "-o",
            again_out,
            "--as-of",
            before_out,
        ],
    );
    assert_eq!(again_json["snapshot"], before_json["snapshot"]);
    assert_eq!(episode_ids(&again), episode_ids(&before));

    // Episodes ingested since, then curated by position and uploaded: the selection and
    // the newer rows beside it land side by side in the store.
    ingest(&tables, "third", 5, 400..450, 1, None, true).expect("ingests");
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

/// Writes `script` (Python, given `OUT` and the ids as `IDS`) with the test venv's Python.
fn python_writes(script: &str, out: &Path, ids: &[String]) {
    let python = reel_io::test_support::python().expect("the test venv's Python");
    let status = Command::new(python)
        .arg("-c")
        .arg(script)
        .env("OUT", out)
        .env("IDS", ids.join("\n"))
        .status()
        .expect("runs python");
    assert!(status.success(), "python: {script}");
}

#[test]
fn a_curation_made_elsewhere_is_written_from_its_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warehouse = dir.path().to_str().expect("utf-8");
    let tables = reel_warehouse::Warehouse::open(warehouse).expect("warehouse");
    ingest(&tables, "first", 9, 0..300, 1, None, true).expect("ingests");
    let curate = env!("CARGO_BIN_EXE_reel-curate");
    // What a team selected elsewhere: the failed fold_towel episodes, by SQL here as the
    // reference, and as files other tools wrote.
    let sql = "SELECT * FROM episodes WHERE task = 'fold_towel' AND NOT success";
    let reference = dir.path().join("reference.arrow");
    run(
        curate,
        &[
            "--warehouse",
            warehouse,
            "--sql",
            sql,
            "-o",
            reference.to_str().expect("utf-8"),
        ],
    );
    let mut ids = episode_ids(&reference);
    assert!(ids.len() > 3, "{ids:?}");

    // A Parquet file from pyarrow, listing one id twice; a Delta table from deltalake.
    let parquet = dir.path().join("picked.parquet");
    let mut twice = ids.clone();
    twice.push(ids[0].clone());
    python_writes(
        "import os, pyarrow as pa, pyarrow.parquet as pq\n\
         ids = os.environ['IDS'].split('\\n')\n\
         pq.write_table(pa.table({'episode_id': ids, 'score': list(range(len(ids)))}), os.environ['OUT'])",
        &parquet,
        &twice,
    );
    let delta = dir.path().join("picked-delta");
    python_writes(
        "import os, pyarrow as pa, deltalake\n\
         ids = os.environ['IDS'].split('\\n')\n\
         deltalake.write_deltalake(os.environ['OUT'], pa.table({'episode_id': ids}))",
        &delta,
        &ids,
    );
    for (source, listed_twice) in [(&parquet, 1), (&delta, 0)] {
        let out = dir.path().join("from.arrow");
        let (json, stderr) = run(
            curate,
            &[
                "--warehouse",
                warehouse,
                "--from",
                source.to_str().expect("utf-8"),
                "-o",
                out.to_str().expect("utf-8"),
            ],
        );
        assert_eq!(json["listed_twice"], listed_twice, "{stderr}");
        assert_eq!(episode_ids(&out), ids, "{}", source.display());
        let (from, reference) = (
            Manifest::open(&out).expect("opens"),
            Manifest::open(&reference).expect("opens"),
        );
        assert_eq!(from.num_samples(), reference.num_samples());
    }

    // An id the warehouse does not hold: refused, naming it, and nothing written.
    ids.push("ep-not-ingested".into());
    let unknown = dir.path().join("unknown.parquet");
    python_writes(
        "import os, pyarrow as pa, pyarrow.parquet as pq\n\
         pq.write_table(pa.table({'episode_id': os.environ['IDS'].split('\\n')}), os.environ['OUT'])",
        &unknown,
        &ids,
    );
    let refused = dir.path().join("refused.arrow");
    let out = Command::new(curate)
        .args([
            "--warehouse",
            warehouse,
            "--from",
            unknown.to_str().expect("utf-8"),
            "-o",
            refused.to_str().expect("utf-8"),
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("ep-not-ingested") && stderr.contains("1 of its"),
        "{stderr}"
    );
    assert!(!refused.exists());

    // A file without the column says so.
    let no_column = dir.path().join("no-column.parquet");
    python_writes(
        "import os, pyarrow as pa, pyarrow.parquet as pq\n\
         pq.write_table(pa.table({'id': os.environ['IDS'].split('\\n')}), os.environ['OUT'])",
        &no_column,
        &ids,
    );
    let out = Command::new(curate)
        .args([
            "--warehouse",
            warehouse,
            "--from",
            no_column.to_str().expect("utf-8"),
            "-o",
            refused.to_str().expect("utf-8"),
        ])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no episode_id column"), "{stderr}");
}
