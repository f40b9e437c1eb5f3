//! `reel-load` against a small store: `--dump` writes exactly the library's Arrow stream
//! of the batches, across an epoch boundary, and `--json` reports them.

use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_ipc::reader::StreamReader;
use reel_loader::{
    ArrowStreamWriter, Loader, LoaderOptions, LoaderState, SampleSpec, Shuffle, Sources,
};
use reel_manifest::{Manifest, ManifestMeta};
use reel_pipeline::test_support::SynthCorpus;
use reel_synth::SynthConfig;

const SPEC: &str = r#"
anchor_hz = 10.0
[[camera]]
name = "cam"
topic = "/camera/high/image_raw/compressed"
offsets_s = [-0.2, 0.0]
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 5
hz = 50.0
"#;

const BATCH_SIZE: usize = 4;

/// A store holding one short canonical episode, its manifest and the spec file.
struct Fixture {
    dir: tempfile::TempDir,
    manifest: PathBuf,
    spec: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec_path = dir.path().join("spec.toml");
    std::fs::write(&spec_path, SPEC).expect("writes spec");
    let spec = SampleSpec::from_toml_str(SPEC).expect("spec");
    let synth = SynthConfig {
        seed: 3,
        seconds: 3.0,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let manifest = dir.path().join("manifest.arrow");
    let meta = ManifestMeta::new("SELECT * FROM episodes", "test", spec.sampling_rule());
    SynthCorpus::ingest(&synth, 1, dir.path())
        .expect("ingests")
        .write_manifest(&manifest, &meta)
        .expect("manifest");
    Fixture {
        dir,
        manifest,
        spec: spec_path,
    }
}

/// The loader `reel-load` builds for these arguments (global shuffle, other defaults).
fn loader(f: &Fixture) -> Loader {
    let spec = SampleSpec::from_toml_file(&f.spec).expect("spec");
    let store = reel_io::Store::open(f.dir.path().to_str().expect("utf-8")).expect("store");
    let options = LoaderOptions {
        batch_size: BATCH_SIZE,
        shuffle: Shuffle::Global,
        ..LoaderOptions::default()
    };
    let manifest = Manifest::open(&f.manifest).expect("manifest");
    Loader::new(manifest, &spec, Sources::Store(store), options).expect("loader")
}

fn reel_load(f: &Fixture, batches: u64, extra: &[&str]) -> Vec<u8> {
    let output = Command::new(env!("CARGO_BIN_EXE_reel-load"))
        .arg("--manifest")
        .arg(&f.manifest)
        .arg("--spec")
        .arg(&f.spec)
        .args(["--batch-size", &BATCH_SIZE.to_string()])
        .args(["--batches", &batches.to_string()])
        .args(["--shuffle", "global"])
        .args(extra)
        .output()
        .expect("runs reel-load");
    assert!(
        output.status.success(),
        "reel-load failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn per_epoch(loader: &Loader) -> u64 {
    loader.epoch(0).expect("epoch").total_batches()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

#[test]
fn dump_is_the_library_stream_across_an_epoch_boundary() {
    let f = fixture();
    let loader = loader(&f);
    let batches = per_epoch(&loader) + 2;
    let dumped = reel_load(&f, batches, &["--dump"]);

    let mut expected = ArrowStreamWriter::new(Vec::new());
    for batch in loader.epochs(LoaderState::default()).take(batches as usize) {
        expected.write(batch.expect("batch")).expect("writes");
    }
    assert!(
        dumped == expected.finish().expect("finishes"),
        "the dump differs"
    );

    let reader = StreamReader::try_new(dumped.as_slice(), None).expect("an Arrow stream");
    let schema = reader.schema();
    assert_eq!(
        schema.field_with_name("cam").expect("cam").metadata()["reel.shape"],
        "[2,48,64,3]"
    );
    let rows: Vec<usize> = reader
        .map(|r| r.expect("record batch").num_rows())
        .collect();
    assert_eq!(rows.len() as u64, batches);
    assert!(rows.iter().all(|&n| n > 0 && n <= BATCH_SIZE), "{rows:?}");
}

#[test]
fn json_reports_the_batches_and_where_the_run_stands() {
    let f = fixture();
    let loader = loader(&f);
    let per_epoch = per_epoch(&loader);
    let stdout = reel_load(
        &f,
        per_epoch + 1,
        &["--json", "--store", path_str(f.dir.path())],
    );
    let report: serde_json::Value = serde_json::from_slice(&stdout).expect("one JSON object");
    assert_eq!(report["batches"], per_epoch + 1);
    assert_eq!(report["state"]["epoch"], 1);
    assert_eq!(report["state"]["batch"], 1);
    let expected_samples: u64 = loader
        .epochs(LoaderState::default())
        .take(per_epoch as usize + 1)
        .map(|b| b.expect("batch").len() as u64)
        .sum();
    assert_eq!(report["samples"], expected_samples);
    assert!(report["frames_decoded"].as_u64().is_some_and(|n| n > 0));
}

/// The (episode row, anchor) of every sample of an Arrow stream `reel-load --dump` wrote.
fn dumped_samples(dumped: &[u8]) -> Vec<(i64, i64)> {
    use arrow_array::{Array, FixedSizeListArray, Int64Array};
    let column = |batch: &arrow_array::RecordBatch, name: &str| -> Vec<i64> {
        let column = batch.column_by_name(name).expect("the column");
        // A scalar per sample: an i64 column, or a list of one.
        let values = match column.as_any().downcast_ref::<FixedSizeListArray>() {
            Some(list) => list.values().clone(),
            None => column.clone(),
        };
        let ints = values
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("i64 values");
        (0..ints.len()).map(|i| ints.value(i)).collect()
    };
    StreamReader::try_new(dumped, None)
        .expect("an Arrow stream")
        .flat_map(|batch| {
            let batch = batch.expect("record batch");
            let rows = column(&batch, "episode_row");
            let anchors = column(&batch, "anchor_ns");
            rows.into_iter().zip(anchors).collect::<Vec<_>>()
        })
        .collect()
}

/// Two ranks save where they stand (their `--json` reports); `--resume` with both on a
/// world of one delivers the rest of the epoch, each remaining sample once; one rank's
/// report alone is refused on another world size, naming what it needs.
#[test]
fn resume_takes_every_rank_s_report_onto_another_world_size() {
    let f = fixture();
    let whole = dumped_samples(&reel_load(&f, per_epoch(&loader(&f)), &["--dump"]));
    let mut seen = Vec::new();
    let mut reports = Vec::new();
    for rank in 0..2 {
        let rank = rank.to_string();
        let args = ["--rank", rank.as_str(), "--world", "2"];
        seen.extend(dumped_samples(&reel_load(
            &f,
            2,
            &[&args[..], &["--dump"]].concat(),
        )));
        let report = f.dir.path().join(format!("rank-{rank}.json"));
        std::fs::write(
            &report,
            reel_load(&f, 2, &[&args[..], &["--json"]].concat()),
        )
        .expect("writes the report");
        reports.push(report);
    }
    let rest = dumped_samples(&reel_load(
        &f,
        1000,
        &[
            "--resume",
            path_str(&reports[0]),
            path_str(&reports[1]),
            "--dump",
        ],
    ));
    // The rest of epoch 0, then epoch 1 from its start: the first part is what was left.
    let left = whole.len() - seen.len();
    seen.extend(&rest[..left]);
    let (mut seen, mut whole) = (seen, whole);
    seen.sort();
    whole.sort();
    assert_eq!(seen, whole);

    let refused = Command::new(env!("CARGO_BIN_EXE_reel-load"))
        .arg("--manifest")
        .arg(&f.manifest)
        .arg("--spec")
        .arg(&f.spec)
        .args([
            "--batch-size",
            &BATCH_SIZE.to_string(),
            "--shuffle",
            "global",
        ])
        .args(["--resume", path_str(&reports[0])])
        .output()
        .expect("runs reel-load");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("all 2 ranks"), "{err}");
}

/// `--mixture` loads each source of a TOML mixture file from its own store, and the report
/// counts the samples each source gave: its weight's share of the epoch.
#[test]
fn a_mixture_file_draws_each_source_by_its_weight() {
    let (a, b) = (fixture(), fixture());
    let mixture = a.dir.path().join("mix.toml");
    std::fs::write(
        &mixture,
        format!(
            "[[source]]\nmanifest = {:?}\nweight = 3\n\n[[source]]\nmanifest = {:?}\nweight = 1\n",
            path_str(&a.manifest),
            path_str(&b.manifest)
        ),
    )
    .expect("writes the mixture");
    let spec = SampleSpec::from_toml_file(&a.spec).expect("spec");
    let entries = reel_loader::MixtureEntry::from_toml_str(
        &std::fs::read_to_string(&mixture).expect("reads"),
    )
    .expect("a mixture");
    let options = LoaderOptions {
        batch_size: BATCH_SIZE,
        shuffle: Shuffle::Global,
        ..LoaderOptions::default()
    };
    let library = reel_loader::open_loader(&entries, &spec, None, options).expect("loader");
    let batches = per_epoch(&library);
    let output = Command::new(env!("CARGO_BIN_EXE_reel-load"))
        .arg("--mixture")
        .arg(&mixture)
        .arg("--spec")
        .arg(&a.spec)
        .args(["--batch-size", &BATCH_SIZE.to_string()])
        .args(["--batches", &batches.to_string()])
        .args(["--shuffle", "global", "--json"])
        .output()
        .expect("runs reel-load");
    assert!(
        output.status.success(),
        "reel-load failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let shares: Vec<u64> = (0..2)
        .map(|k| library.source_share(k).expect("source").0)
        .collect();
    assert_eq!(report["samples_by_source"], serde_json::json!(shares));
    // Three quarters of the epoch, to the sample.
    let total = library.total_samples();
    assert_eq!(shares[0] + shares[1], total);
    assert!(
        (shares[0] as f64 - 0.75 * total as f64).abs() <= 1.0,
        "{shares:?}"
    );
    assert_eq!(report["state"]["epoch"], 1);
}
