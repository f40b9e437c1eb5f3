//! The main job, shortened: synthesise landing episodes, ingest them (canonical MCAP and
//! warehouse rows), curate train and held-out manifests with SQL, warm the block cache,
//! then train under supervision with a crash in the middle: the supervised run ends
//! with exactly the parameters of an uninterrupted one, and the training loss falls.

use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use reel_cache::{BlockCache, CacheConfig, WarmItem, WarmOptions};
use reel_curate::{Warehouse, compact, curate_to_manifest};
use reel_io::Store;
use reel_loader::SampleSpec;
use reel_pipeline::episode_rows;
use reel_pipeline::test_support::SynthCorpus;
use reel_resilience::supervise::{Outcome, SuperviseConfig, supervise};
use reel_synth::SynthConfig;

const TRAINER: &str = env!("CARGO_BIN_EXE_train-policy");

fn spec_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/spec.toml")
}

fn summary(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("summary written"))
        .expect("summary is JSON")
}

#[test]
fn the_chain_trains_and_a_crashed_run_resumes_exactly() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = work.path().join("store");
    std::fs::create_dir_all(root.join("episodes")).expect("mkdir");

    // Synth + ingest.
    let synth = SynthConfig {
        seed: 11,
        seconds: 5.0,
        cameras: 3,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let corpus = SynthCorpus::ingest(&synth, 5, &root).expect("ingests");
    let summaries: Vec<_> = corpus.summaries().cloned().collect();
    reel_warehouse::Warehouse::open(root.to_str().expect("utf-8"))
        .expect("warehouse")
        .commit_ingestion(
            "chain",
            &|at| episode_rows(&summaries, at),
            1_700_000_000_000_000_000,
        )
        .expect("commits");

    // Compact, then curate: two episodes to train on, one held out.
    let spec = SampleSpec::from_toml_file(spec_path()).expect("spec");
    let log = Warehouse::open(root.to_str().expect("utf-8")).expect("warehouse");
    assert_eq!(compact(&log).expect("compacts").rows, 5);
    let warehouse = Warehouse::open(root.to_str().expect("utf-8")).expect("warehouse");
    assert_eq!(warehouse.files().len(), 1, "compacted into one file");
    let heldout_id = &summaries[4].episode_id;
    let train = work.path().join("train.arrow");
    let heldout = work.path().join("heldout.arrow");
    let rule = spec.sampling_rule();
    let t = curate_to_manifest(
        &warehouse,
        &format!("SELECT * FROM episodes WHERE episode_id <> '{heldout_id}'"),
        rule,
        &train,
    )
    .expect("curates");
    assert_eq!(t.rows, 4);
    let h = curate_to_manifest(
        &warehouse,
        &format!("SELECT * FROM episodes WHERE episode_id = '{heldout_id}'"),
        rule,
        &heldout,
    )
    .expect("curates");
    assert_eq!(h.rows, 1);

    // Warm the cache with what the loader will read of both manifests' episodes.
    let store = Store::open(root.to_str().expect("utf-8")).expect("store");
    let cache_dir = work.path().join("cache");
    let cache =
        BlockCache::for_store(CacheConfig::new(&cache_dir, 4 << 30), &store).expect("cache");
    let spec = reel_loader::SampleSpec::from_toml_file(spec_path()).expect("spec");
    let mut items: Vec<WarmItem> = Vec::new();
    for manifest in [&train, &heldout] {
        let manifest = reel_manifest::Manifest::open(manifest).expect("manifest");
        items.extend(reel_loader::working_set(&manifest, &spec, &store).expect("working set"));
    }
    assert_eq!(
        items.len(),
        summaries.len(),
        "every episode is in one manifest"
    );
    let options = WarmOptions::default();
    let plan = cache.plan_warm(&items, &options).expect("plan");
    let report = cache.warm(plan, &options, |_| {}).expect("warms");
    assert!(report.fetched_bytes > 0);

    let args = |checkpoints: &Path, summary: &Path| -> Vec<String> {
        [
            "--manifest",
            train.to_str().expect("utf-8"),
            "--heldout",
            heldout.to_str().expect("utf-8"),
            "--spec",
            spec_path().to_str().expect("utf-8"),
            "--store",
            root.to_str().expect("utf-8"),
            "--cache",
            cache_dir.to_str().expect("utf-8"),
            "--steps",
            "60",
            "--batch-size",
            "8",
            "--hidden",
            "32",
            "--muon-lr",
            "0.005",
            "--adamw-lr",
            "0.001",
            "--checkpoint-every",
            "5",
            "--checkpoints",
            checkpoints.to_str().expect("utf-8"),
            "--summary",
            summary.to_str().expect("utf-8"),
        ]
        .map(String::from)
        .to_vec()
    };

    // Uninterrupted.
    let plain = work.path().join("plain.json");
    let status = std::process::Command::new(TRAINER)
        .args(args(&work.path().join("ckpt-plain"), &plain))
        .status()
        .expect("runs");
    assert!(status.success());
    let plain = summary(&plain);
    // The policy fits its training episodes; held-out loss is reported (on a handful of
    // tiny synthetic episodes it does not reliably fall within a test's budget).
    let (first, last) = (
        plain["train_loss_first"].as_f64().expect("loss"),
        plain["train_loss_last"].as_f64().expect("loss"),
    );
    assert!(last < 0.8 * first, "training loss {first} -> {last}");
    assert!(
        plain["heldout_loss_after"]
            .as_f64()
            .is_some_and(f64::is_finite)
    );

    // Supervised, crashing after step 23: restarted from the checkpoint of step 20.
    let supervised = work.path().join("supervised.json");
    let mut command = vec![TRAINER.to_string()];
    command.extend(args(&work.path().join("ckpt-supervised"), &supervised));
    command.extend(["--crash-after".to_string(), "23".to_string()]);
    let mut config = SuperviseConfig::new(command);
    config.checkpoints = Some(work.path().join("ckpt-supervised"));
    config.backoff = Duration::from_millis(10);
    config.trainer_stdout_to_stderr = true;
    let stop = AtomicUsize::new(0);
    let mut events = Vec::new();
    let outcome = supervise(&config, &stop, |e| events.push(format!("{e:?}"))).expect("supervises");
    assert_eq!(outcome, Outcome::Done { restarts: 1 }, "{events:#?}");
    let supervised = summary(&supervised);
    assert_eq!(supervised["resumed_from"], 20);
    assert_eq!(supervised["steps"], 60);
    assert_eq!(
        supervised["params_hash"], plain["params_hash"],
        "the restarted run ends with the uninterrupted run's parameters"
    );

    // The last checkpoint's lineage: the training manifest as curated, and each episode's
    // canonical object as ingested (its digest came through the warehouse and the
    // curation), made from its landing recording.
    let mut records = Vec::new();
    reel_lineage::Lineage::new(reel_lineage::LineageOptions::default())
        .walk(&work.path().join("ckpt-supervised"), &mut |r| {
            records.push(r);
            Ok(())
        })
        .expect("lineage");
    let manifests: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            reel_lineage::Record::Manifest(m) => Some(m),
            _ => None,
        })
        .collect();
    assert_eq!(manifests.len(), 1);
    assert_eq!(manifests[0].status, reel_lineage::Status::Same);
    let episodes: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            reel_lineage::Record::Episode(e) => Some(e),
            _ => None,
        })
        .collect();
    assert_eq!(episodes.len(), manifests[0].rows);
    for e in &episodes {
        let ingested = summaries
            .iter()
            .find(|s| s.episode_id == e.episode_id)
            .expect("an ingested episode");
        assert_eq!(e.status, reel_lineage::Status::Same, "{e:?}");
        assert_eq!(
            e.recorded_digest,
            Some(reel_manifest::digest_text(ingested.canonical_digest))
        );
        assert_eq!(
            e.landing_key.as_deref(),
            Some(ingested.landing_key.as_str())
        );
        assert_eq!(
            e.landing_digest,
            Some(reel_manifest::digest_text(ingested.landing_digest))
        );
    }
}
