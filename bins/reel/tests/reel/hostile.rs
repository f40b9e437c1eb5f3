//! What damaged or hostile input cannot make the CLIs do: read outside their store (keys
//! with `..`, absolute paths, other buckets in a manifest), echo credentials put in a
//! URI (or taken from the environment), or panic when their reader closes stdout.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use reel_manifest::{Manifest, ManifestMeta, ManifestRow, ManifestWriter, SamplingRule};

const SECRET: &str = "SUPERSECRET0123456789";
/// The signal a write to a closed pipe raises (Linux).
const SIGPIPE: i32 = 13;

fn reel<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reel"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = reel(args);
    assert!(
        out.status.success(),
        "reel {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `reel load` of the fixture's manifest and spec, reading `store`, then `extra`.
fn load_args(store_dir: &Path, extra: &[&str]) -> Vec<String> {
    let dir = store();
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let mut args = vec![
        "load".to_owned(),
        "--manifest".to_owned(),
        path(&dir.join("manifest.arrow")),
        "--spec".to_owned(),
        path(&dir.join("spec.toml")),
        "--store".to_owned(),
        path(store_dir),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

const SPEC: &str = "anchor_hz = 10.0\n[[camera]]\nname = \"high\"\ntopic = \"/camera/high/image_raw/compressed\"\noffsets_s = [0.0]\n";

/// A store with two ingested episodes and their manifest, made once by `reel` itself.
fn store() -> &'static Path {
    static DIR: OnceLock<std::path::PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let p = |name: &str| dir.join(name).to_str().unwrap().to_owned();
        ok(&[
            "synth",
            "-o",
            &p("landing"),
            "--episodes",
            "2",
            "--seconds",
            "3",
            "--cameras",
            "1",
            "--width",
            "64",
            "--height",
            "48",
            "-q",
        ]);
        ok(&[
            "plan",
            &p("landing"),
            "-o",
            &p("plan.json"),
            "--batches",
            "1",
        ]);
        ok(&[
            "ingest",
            "--plan",
            &p("plan.json"),
            "--batch",
            "0",
            "--store",
            &p("store"),
            "-q",
        ]);
        ok(&[
            "curate",
            "--warehouse",
            &p("store"),
            "--sql",
            "SELECT * FROM episodes ORDER BY episode_id",
            "-o",
            &p("manifest.arrow"),
            "--anchor-hz",
            "10",
            "--before",
            "0",
            "--after",
            "0",
        ]);
        std::fs::write(dir.join("spec.toml"), SPEC).unwrap();
        dir
    })
}

#[test]
fn manifest_keys_cannot_reach_outside_the_store() {
    let dir = store();
    let store = dir.join("store");
    let manifest = Manifest::open(dir.join("manifest.arrow")).unwrap();
    let row = manifest.episode(0).unwrap();
    let real = row.uri().unwrap().into_owned();
    // A readable copy of a real episode outside the store, so a reader that followed
    // `..` or an absolute path would serve it.
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::copy(store.join(&real), outside.join("x.mcap")).unwrap();
    let absolute = outside.join("x.mcap").to_str().unwrap().to_owned();
    let hostile = [
        "../outside/x.mcap".to_owned(),
        absolute,
        "/etc/passwd".to_owned(),
        "s3://other-bucket/x.mcap".to_owned(),
        "canonical/../../outside/x.mcap".to_owned(),
    ];
    let path = dir.join("hostile.arrow");
    let meta = ManifestMeta::new(
        "SELECT * FROM episodes",
        "test",
        SamplingRule {
            period_ns: 100_000_000,
            before_ns: 0,
            after_ns: 0,
        },
    );
    let mut writer = ManifestWriter::create(&path, &meta).unwrap();
    let ids: Vec<String> = (0..=hostile.len()).map(|i| format!("ep-{i}")).collect();
    for (i, uri) in std::iter::once(&real).chain(&hostile).enumerate() {
        writer
            .push(&ManifestRow {
                episode_id: &ids[i],
                uri,
                start_ns: row.start_ns(),
                end_ns: row.end_ns(),
                bytes: row.bytes(),
                camera_frames: row.camera_frames(),
                state_steps: row.state_steps(),
                action_steps: row.action_steps(),
                digest: row.digest().unwrap_or(0),
            })
            .unwrap();
    }
    writer.finish().unwrap();
    let (store_arg, manifest_arg, spec_arg) = (
        store.to_str().unwrap(),
        path.to_str().unwrap(),
        dir.join("spec.toml").to_str().unwrap().to_owned(),
    );

    // reel load: the hostile rows are skipped, each named; only the real episode serves.
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "load",
        "--manifest",
        manifest_arg,
        "--spec",
        &spec_arg,
        "--store",
        store_arg,
        "--batch-size",
        "1",
        "--batches",
        "1000",
        "--max-skipped",
        "1",
        "--json",
        "-q",
    ]))
    .unwrap();
    let skipped = report["skipped_episodes"].as_array().unwrap();
    assert_eq!(skipped.len(), hostile.len(), "{skipped:?}");
    // A thousand one-sample batches span many epochs: every sample of every hostile row
    // was skipped at least once over (a row served in part would have fewer).
    for episode in skipped {
        let reason = episode["reason"].as_str().unwrap();
        assert!(reason.contains("not a key inside the store"), "{reason}");
        assert!(
            episode["samples"].as_u64().unwrap() >= row.num_samples(),
            "{episode}"
        );
    }
    let hostile_samples: u64 = skipped.iter().map(|e| e["samples"].as_u64().unwrap()).sum();
    assert_eq!(report["skipped"], hostile_samples);

    // reel warm refuses the manifest before fetching anything.
    let cache = dir.join("cache");
    let out = reel(&[
        "warm",
        "--manifest",
        manifest_arg,
        "--store",
        store_arg,
        "--cache",
        cache.to_str().unwrap(),
        "-q",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a key inside the store"), "{err}");
}

#[test]
fn credentials_in_uris_and_the_environment_are_never_printed() {
    let dir = store();
    let spec = dir.join("spec.toml");
    let cache = dir.join("cache-secrets");
    let with_user = format!("s3://AKIAEXAMPLE:{SECRET}@bucket/store");
    let with_query =
        format!("s3://bucket/store?endpoint=http://127.0.0.1:9&aws_secret_access_key={SECRET}");
    let unreachable = "s3://bucket/store?endpoint=http://127.0.0.1:9&region=us-east-1";
    let runs: Vec<Vec<String>> = vec![
        vec!["inspect".into(), format!("{with_user}/x.mcap")],
        vec![
            "inspect".into(),
            format!("s3://bucket/x.mcap?endpoint=http://127.0.0.1:9&secret_key={SECRET}"),
        ],
        vec![
            "load".into(),
            "--manifest".into(),
            format!("{with_query}/m.arrow"),
            "--spec".into(),
            spec.to_str().unwrap().into(),
            "-q".into(),
        ],
        vec![
            "load".into(),
            "--manifest".into(),
            dir.join("manifest.arrow").to_str().unwrap().into(),
            "--spec".into(),
            spec.to_str().unwrap().into(),
            "--store".into(),
            with_user.clone(),
            "-q".into(),
        ],
        vec![
            "warm".into(),
            "--manifest".into(),
            dir.join("manifest.arrow").to_str().unwrap().into(),
            "--store".into(),
            with_query.clone(),
            "--cache".into(),
            cache.to_str().unwrap().into(),
            "-q".into(),
        ],
        vec![
            "curate".into(),
            "--warehouse".into(),
            with_user.clone(),
            "--sql".into(),
            "SELECT * FROM episodes".into(),
            "-o".into(),
            dir.join("x.arrow").to_str().unwrap().into(),
        ],
        // Credentials from the environment against a store that cannot be reached.
        vec!["inspect".into(), format!("{unreachable}/x.mcap")],
    ];
    for args in runs {
        let out = Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(&args)
            .env("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
            .env("AWS_SECRET_ACCESS_KEY", format!("ENV{SECRET}"))
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr.contains("error"), "{args:?}: {stderr}");
        for text in [&stdout, &stderr] {
            assert!(
                !text.contains(SECRET),
                "{args:?} printed the secret: {text}"
            );
        }
    }
}

#[test]
fn a_closed_stdout_ends_a_cli_quietly() {
    let dir = store();
    let canonical = std::fs::read_dir(dir.join("store/canonical"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "mcap"))
        .unwrap();
    let runs = [
        vec![
            "inspect".to_owned(),
            "cat".to_owned(),
            canonical.to_str().unwrap().to_owned(),
        ],
        load_args(&dir.join("store"), &["--batches", "100", "--dump", "-q"]),
    ];
    for args in runs {
        let mut child = Command::new(env!("CARGO_BIN_EXE_reel"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader takes a little and leaves, as `| head -c 100` does.
        let mut stdout = child.stdout.take().unwrap();
        let mut some = [0u8; 100];
        stdout.read_exact(&mut some).unwrap();
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
        // Killed by SIGPIPE like any Unix tool, or ended by itself: never a crash.
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.success() || out.status.signal() == Some(SIGPIPE),
            "{args:?}: {:?}",
            out.status
        );
    }
}

#[test]
fn a_folder_or_a_missing_store_gets_a_plain_message() {
    let dir = store();
    let missing = dir.join("no-such-store");
    let out = reel(&load_args(&missing, &["-q"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no-such-store") && err.contains("not found"),
        "{err}"
    );
    assert!(!missing.exists(), "reading a store must not create it");

    // A folder where a file belongs: said so, by every reader, and nothing written.
    let folder = dir.join("store");
    let packed = dir.join("packed.mcap");
    for args in [
        vec!["inspect", folder.to_str().unwrap()],
        vec![
            "pack",
            folder.to_str().unwrap(),
            "-o",
            packed.to_str().unwrap(),
        ],
        vec![
            "curate",
            "--warehouse",
            folder.to_str().unwrap(),
            "--sql-file",
            folder.to_str().unwrap(),
            "-o",
            packed.to_str().unwrap(),
        ],
    ] {
        let out = reel(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains("is a folder, not a file") || err.contains("Is a directory"),
            "{args:?}: {err}"
        );
        assert!(!packed.exists(), "{args:?}");
    }

    // Each command's help describes that command.
    let help = ok(&["compact", "--help"]);
    assert!(
        help.starts_with("Compact, vacuum or migrate the warehouse"),
        "{help}"
    );
    assert!(!help.contains("SQL query"), "{help}");
}

#[test]
fn a_store_folder_gone_still_serves_what_the_cache_holds() {
    let dir = store();
    let own = tempfile::tempdir().unwrap();
    let copy = own.path().join("store");
    for entry in walk(&dir.join("store")) {
        let to = copy.join(entry.strip_prefix(dir.join("store")).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    let cache = own.path().join("cache");
    let load = |store: &Path| {
        reel(&load_args(
            store,
            &[
                "--cache",
                cache.to_str().unwrap(),
                "--shuffle",
                "global",
                "--batches",
                "6",
                "--dump",
                "-q",
            ],
        ))
    };
    let warm = load(&copy);
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    std::fs::remove_dir_all(&copy).unwrap();

    let cold = load(&copy);
    let err = String::from_utf8_lossy(&cold.stderr);
    assert!(cold.status.success(), "{err}");
    assert!(
        err.contains("is missing: serving what the cache holds"),
        "{err}"
    );
    assert_eq!(cold.stdout, warm.stdout, "the same batches, from the cache");
    assert!(!copy.exists(), "reading a store must not create it");

    // Without a cache the same store is a plain error.
    let out = reel(&load_args(&copy, &["-q"]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}

/// Every file under `root`.
fn walk(root: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
