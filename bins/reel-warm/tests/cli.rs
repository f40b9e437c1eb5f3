//! reel-warm end to end: warm from a manifest, refuse what cannot fit, resume after a
//! kill, and share one cache between concurrent runs.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use reel_cache::{BlockCache, CacheConfig};
use reel_io::test_support::S3Server;
use reel_io::{ByteSource, Store};
use reel_manifest::{ManifestMeta, ManifestRow, SamplingRule, write_manifest};
use reel_pipeline::test_support::SynthCorpus;

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 11) as u8)
        .collect()
}

/// Writes `sizes.len()` episodes into `store` and a manifest listing them.
fn episodes_and_manifest(store: &Store, dir: &Path, sizes: &[usize]) -> (PathBuf, Vec<String>) {
    let keys: Vec<String> = (0..sizes.len())
        .map(|i| format!("canonical/ep-{i:04}.mcap"))
        .collect();
    let ids: Vec<String> = (0..sizes.len()).map(|i| format!("ep-{i:04}")).collect();
    for (i, (key, size)) in keys.iter().zip(sizes).enumerate() {
        store.write_atomic(key, pattern(*size, i as u32)).unwrap();
    }
    let rows: Vec<ManifestRow<'_>> = keys
        .iter()
        .zip(&ids)
        .zip(sizes)
        .map(|((key, id), size)| ManifestRow {
            episode_id: id,
            uri: key,
            start_ns: 0,
            end_ns: 1_000_000_000,
            bytes: *size as u64,
            ..Default::default()
        })
        .collect();
    let path = dir.join("manifest.arrow");
    let meta = ManifestMeta::new(
        "SELECT * FROM episodes",
        "snap",
        SamplingRule::at_hz(10.0, 0.0, 0.0),
    );
    write_manifest(&path, &rows, &meta).unwrap();
    (path, keys)
}

fn warm_cmd(manifest: &Path, store: &str, cache: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reel-warm"));
    cmd.arg("--manifest")
        .arg(manifest)
        .args(["--store", store])
        .arg("--cache")
        .arg(cache)
        .args(["--block-size", "64K", "--quiet"]);
    cmd
}

fn json_line(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reel-warm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// Every byte of every episode, read back through the cache with the remote's answer.
fn assert_all_cached(store: &Store, cache_dir: &Path, keys: &[String]) {
    let mut config = CacheConfig::new(cache_dir, 1 << 40);
    config.block_size = 64 << 10;
    config.trust_cached_metadata = true;
    let cache = BlockCache::for_store(config, store).unwrap();
    for key in keys {
        let object = cache.object(key).unwrap();
        for i in 0..object.num_blocks() {
            assert!(object.is_cached(i, true), "{key} block {i}");
        }
        let data = store.read(key).unwrap();
        assert_eq!(
            &object.read_range(0..data.len() as u64).unwrap()[..],
            &data[..]
        );
    }
    assert_eq!(cache.metrics().remote_requests, 0);
}

#[test]
fn warms_a_manifest_then_has_nothing_left_to_fetch() {
    let remote = tempfile::tempdir().unwrap();
    let store = Store::open(remote.path().to_str().unwrap()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let sizes = [300_000, 1_000_001, 65_536, 5];
    let (manifest, keys) = episodes_and_manifest(&store, work.path(), &sizes);
    let cache = work.path().join("cache");
    let uri = remote.path().to_str().unwrap();

    let out = warm_cmd(&manifest, uri, &cache).output().unwrap();
    let line = json_line(&out);
    let total: u64 = sizes.iter().map(|s| *s as u64).sum();
    assert_eq!(line["report"]["fetched_bytes"], total);
    assert_eq!(line["report"]["objects"], 4);
    assert_eq!(
        line["metrics"]["Client.CacheBytesReadExternal"],
        total as f64
    );
    assert!(line["pin"].as_str().unwrap().starts_with("manifest-"));
    assert_all_cached(&store, &cache, &keys);

    let again = json_line(
        &warm_cmd(&manifest, uri, &cache)
            .arg("--verify")
            .output()
            .unwrap(),
    );
    assert_eq!(again["report"]["fetched_bytes"], 0);
    assert_eq!(again["report"]["cached_bytes"], total);
    assert_eq!(again["report"]["requests"], 0);
}

#[test]
fn refuses_before_fetching_when_the_set_cannot_fit() {
    let remote = tempfile::tempdir().unwrap();
    let store = Store::open(remote.path().to_str().unwrap()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let (manifest, _) = episodes_and_manifest(&store, work.path(), &[2_000_000, 2_000_000]);
    let cache = work.path().join("cache");
    let out = warm_cmd(&manifest, remote.path().to_str().unwrap(), &cache)
        .args(["--capacity", "3M"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("working set needs"), "{stderr}");
    assert!(stderr.contains("manifest.arrow"), "{stderr}");
    assert_eq!(std::fs::read_dir(cache.join("blocks")).unwrap().count(), 0);

    let out = warm_cmd(&work.path().join("nope.arrow"), ".", &cache)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope.arrow"));
}

#[test]
fn resumes_after_being_killed_mid_warm() {
    let server = S3Server::start("landing").unwrap();
    let store = server.store("landing", "").unwrap();
    let work = tempfile::tempdir().unwrap();
    // 48 MiB in 768 blocks, fetched one request at a time: long enough to kill mid-way.
    let (manifest, keys) = episodes_and_manifest(&store, work.path(), &[16 << 20; 3]);
    let cache = work.path().join("cache");
    let uri = server.uri("landing", "");
    let envs = [
        ("AWS_ACCESS_KEY_ID", server.options().access_key_id.unwrap()),
        (
            "AWS_SECRET_ACCESS_KEY",
            server.options().secret_access_key.unwrap(),
        ),
    ];

    let mut child = warm_cmd(&manifest, &uri, &cache)
        .args(["--concurrency", "1"])
        .envs(envs.clone())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let count_blocks = || -> usize {
        std::fs::read_dir(cache.join("blocks"))
            .map(|dirs| {
                dirs.flatten()
                    .map(|d| std::fs::read_dir(d.path()).map(|f| f.count()).unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0)
    };
    while count_blocks() < 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    let killed_mid_way = !status.success();
    let before = count_blocks();
    eprintln!("killed mid-way: {killed_mid_way}, {before} blocks cached before the rerun");

    let out = warm_cmd(&manifest, &uri, &cache)
        .envs(envs)
        .output()
        .unwrap();
    let line = json_line(&out);
    let total = 3 * (16u64 << 20);
    let fetched = line["report"]["fetched_bytes"].as_u64().unwrap();
    if killed_mid_way {
        assert!(before >= 20, "{before}");
        assert!(fetched < total, "{fetched}");
        assert_eq!(
            line["report"]["cached_bytes"].as_u64().unwrap() + fetched,
            total
        );
    }
    assert_all_cached(&store, &cache, &keys);
}

#[test]
fn concurrent_runs_share_one_cache() {
    let remote = tempfile::tempdir().unwrap();
    let store = Store::open(remote.path().to_str().unwrap()).unwrap();
    let work = tempfile::tempdir().unwrap();
    let (manifest, keys) = episodes_and_manifest(&store, work.path(), &[3_000_000; 4]);
    let cache = work.path().join("cache");
    let uri = remote.path().to_str().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            warm_cmd(&manifest, uri, &cache)
                .args(["--concurrency", "8"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut fetched = 0;
    for child in children {
        let line = json_line(&child.wait_with_output().unwrap());
        fetched += line["report"]["fetched_bytes"].as_u64().unwrap();
    }
    // Runs race on some blocks, but together they fetch at least the set once.
    assert!(fetched >= 12_000_000, "{fetched}");
    assert_all_cached(&store, &cache, &keys);
}

/// With `--spec`, only what a loader with that spec reads is fetched: a state-and-actions
/// spec leaves the camera chunks in the store. The manifest itself is an S3 object,
/// fetched once into the node's manifest folder.
#[test]
fn with_a_spec_warms_only_what_the_loader_reads() {
    let server = S3Server::start("reel").unwrap();
    let store = server.store("reel", "corpus").unwrap();
    // Cameras large enough that their chunks fill whole 64 KiB cache blocks.
    let synth = reel_synth::SynthConfig {
        seconds: 3.0,
        cameras: 2,
        width: 320,
        height: 240,
        ..reel_synth::SynthConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let corpus = SynthCorpus::ingest(&synth, 1, dir.path()).unwrap();
    let key = &corpus.keys()[0];
    store
        .write_atomic(key, std::fs::read(dir.path().join(key)).unwrap())
        .unwrap();
    let manifest = dir.path().join("train.arrow");
    let meta = ManifestMeta::new("q", "snap", SamplingRule::at_hz(10.0, 1.0, 1.0));
    corpus.write_manifest(&manifest, &meta).unwrap();
    store
        .write_atomic("runs/train.arrow", std::fs::read(&manifest).unwrap())
        .unwrap();
    let spec = dir.path().join("state.toml");
    std::fs::write(
        &spec,
        "anchor_hz = 10.0\n\n[[proprio]]\nname = \"state\"\ntopic = \"/joint_states\"\nkind = \"window\"\nsteps = 20\nhz = 200.0\n\n\
         [[proprio]]\nname = \"action\"\ntopic = \"/action\"\nkind = \"chunk\"\nsteps = 5\nhz = 50.0\n",
    )
    .unwrap();
    let options = server.options();
    let node = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = Command::new(env!("CARGO_BIN_EXE_reel-warm"))
        .args(["--manifest", &server.uri("reel", "corpus/runs/train.arrow")])
        .args(["--store", &server.uri("reel", "corpus")])
        .arg("--cache")
        .arg(&cache)
        .arg("--spec")
        .arg(&spec)
        .args(["--block-size", "64K", "--quiet"])
        .env("AWS_ACCESS_KEY_ID", options.access_key_id.unwrap())
        .env("AWS_SECRET_ACCESS_KEY", options.secret_access_key.unwrap())
        .env("TMPDIR", node.path())
        .output()
        .unwrap();
    let line = json_line(&out);
    let fetched = line["report"]["fetched_bytes"].as_u64().unwrap();
    let total = corpus.episodes[0].summary.bytes;
    assert!(fetched > 0, "{line}");
    assert!(
        fetched < total,
        "fetched {fetched} of {total} bytes: camera chunks too"
    );
    // The manifest was fetched once into the node's folder, under its URI's hash.
    let copies: Vec<_> = std::fs::read_dir(node.path().join("reel-manifests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert!(copies[0].ends_with("-train.arrow"), "{copies:?}");
}
