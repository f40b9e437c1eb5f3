//! The loader against real canonical episodes (synthesised, ingested by reel-pipeline):
//! exact grid times and values, frames equal to an independent decode and close to the
//! landing JPEGs, determinism, shards, resume, edge padding, the block cache and a
//! corrupt episode.
//!
//! This file holds the fixtures the modules share; the modules hold the tests by topic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reel_io::test_support::{CloudProxy, S3Server};
use reel_io::{ErrorKind, Kinded, MmapSource, Store, StoreOptions};
use reel_loader::{
    Batch, EdgePolicy, Loader, LoaderError, LoaderOptions, LoaderState, ResumeCheck, SampleSpec,
    SavedState, Shuffle, Sources,
};
use reel_manifest::{Manifest, ManifestMeta, ManifestWriter, SamplingRule};
use reel_mcap::EpisodeReader;
use reel_pipeline::test_support::SynthCorpus;
use reel_pipeline::{PipelineConfig, decode_landing, process_episode};
use reel_synth::{SynthConfig, generate_episode};
use reel_video::{H264Decoder, ImageDecoder, ImageFormat, RgbConversion, RgbImage};

const HIGH: &str = "/camera/high/image_raw/compressed";
const WRIST: &str = "/camera/left_wrist/image_raw/compressed";

const SPEC: &str = r#"
anchor_hz = 10.0
[[camera]]
name = "high"
topic = "/camera/high/image_raw/compressed"
offsets_s = [-0.5, 0.0]
[[camera]]
name = "wrist"
topic = "/camera/left_wrist/image_raw/compressed"
offsets_s = [0.0]
layout = "chw"
[[proprio]]
name = "state"
topic = "/joint_states"
kind = "window"
steps = 200
hz = 200.0
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 50
hz = 50.0
"#;

struct Fixture {
    dir: tempfile::TempDir,
    manifest: PathBuf,
    /// Landing episodes by canonical key, for pixel checks.
    landing: BTreeMap<String, Vec<u8>>,
}

fn fixture(episodes: u64, seconds: f64, rule: SamplingRule) -> Fixture {
    fixture_of(
        SynthConfig {
            seed: 5,
            seconds,
            cameras: 2,
            width: 64,
            height: 48,
            ..SynthConfig::default()
        },
        episodes,
        rule,
    )
}

fn fixture_of(synth: SynthConfig, episodes: u64, rule: SamplingRule) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("manifest.arrow");
    let meta = ManifestMeta::new("SELECT * FROM episodes", "test", rule);
    let corpus = SynthCorpus::ingest(&synth, episodes, dir.path()).expect("ingests");
    corpus.write_manifest(&manifest, &meta).expect("manifest");
    let landing = corpus
        .episodes
        .into_iter()
        .map(|e| (e.summary.canonical_key, e.landing.mcap))
        .collect();
    Fixture {
        dir,
        manifest,
        landing,
    }
}

fn spec() -> SampleSpec {
    SampleSpec::from_toml_str(SPEC).expect("spec")
}

fn store(dir: &Path) -> Store {
    Store::open(dir.to_str().expect("utf-8")).expect("store")
}

fn loader(f: &Fixture, spec: &SampleSpec, options: LoaderOptions) -> Loader {
    loader_of(f, &f.manifest, spec, options)
}

/// A loader over the manifest at `manifest`, reading the fixture's store.
fn loader_of(f: &Fixture, manifest: &Path, spec: &SampleSpec, options: LoaderOptions) -> Loader {
    let manifest = Manifest::open(manifest).expect("manifest");
    Loader::new(manifest, spec, Sources::Store(store(f.dir.path())), options).expect("loader")
}

fn all_batches(loader: &Loader, epoch: u64) -> Vec<Batch> {
    loader
        .epoch(epoch)
        .expect("epoch")
        .map(|b| b.expect("batch"))
        .collect()
}

/// (episode row, anchor) of every sample of the batches, in order.
fn samples(batches: &[Batch]) -> Vec<(i64, i64)> {
    batches
        .iter()
        .flat_map(|b| {
            let rows = b.get("episode_row").and_then(|t| t.as_i64()).expect("rows");
            let anchors = b
                .get("anchor_ns")
                .and_then(|t| t.as_i64())
                .expect("anchors");
            rows.iter()
                .copied()
                .zip(anchors.iter().copied())
                .collect::<Vec<_>>()
        })
        .collect()
}

mod bad_input;
mod caching;
mod edges;
mod mixture;
mod order;
mod remote_store;
mod resume;
mod values;
