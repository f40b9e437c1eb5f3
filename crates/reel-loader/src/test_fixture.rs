//! A small local store of synthesised canonical episodes and a manifest over it, for the
//! crate's unit tests.

use std::path::PathBuf;

use reel_manifest::{Manifest, ManifestMeta, ManifestWriter};
use reel_pipeline::test_support::SynthCorpus;
use reel_synth::SynthConfig;

use crate::{Loader, LoaderOptions, SampleSpec, Sources};

/// One 64x48 camera at the anchor and a 5-step action chunk: cheap samples.
const SPEC: &str = r#"
anchor_hz = 10.0
[[camera]]
name = "cam"
topic = "/camera/high/image_raw/compressed"
offsets_s = [0.0]
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 5
hz = 50.0
"#;

pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
    pub manifest: PathBuf,
    pub spec: SampleSpec,
}

/// `episodes` episodes of `seconds` each, stored under `canonical/` and listed in order.
pub(crate) fn fixture(episodes: u64, seconds: f64) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = SampleSpec::from_toml_str(SPEC).expect("spec");
    let synth = SynthConfig {
        seed: 11,
        seconds,
        cameras: 1,
        width: 64,
        height: 48,
        ..SynthConfig::default()
    };
    let manifest = dir.path().join("manifest.arrow");
    let meta = ManifestMeta::new("SELECT * FROM episodes", "test", spec.sampling_rule());
    SynthCorpus::ingest(&synth, episodes, dir.path())
        .expect("ingests")
        .write_manifest(&manifest, &meta)
        .expect("manifest");
    Fixture {
        dir,
        manifest,
        spec,
    }
}

impl Fixture {
    /// A loader over the fixture's store.
    pub fn loader(&self, options: LoaderOptions) -> Loader {
        let store = reel_io::Store::open(self.dir.path().to_str().expect("utf-8")).expect("store");
        let manifest = Manifest::open(&self.manifest).expect("manifest");
        Loader::new(manifest, &self.spec, Sources::Store(store), options).expect("loader")
    }
}

/// A manifest named `name` of `rows` episodes of `seconds` each (no objects behind
/// them), curated with `rule`: for orders and indexes, which never open an episode.
pub(crate) fn rows_manifest(
    dir: &std::path::Path,
    name: &str,
    rows: usize,
    seconds: f64,
    rule: reel_manifest::SamplingRule,
) -> Manifest {
    let path = dir.join(format!("{name}.arrow"));
    let meta = ManifestMeta::new("q", "test", rule);
    let mut writer = ManifestWriter::create(&path, &meta).expect("manifest");
    let ids: Vec<String> = (0..rows).map(|i| format!("{name}{i}")).collect();
    let end = (seconds * 1e9).round() as i64;
    let (start, end) = (vec![0i64; rows], vec![end; rows]);
    let (bytes, counts) = (vec![1u64; rows], vec![1u32; rows]);
    writer
        .push_columns(
            ids.iter().map(String::as_str),
            ids.iter().map(String::as_str),
            reel_manifest::ManifestNumbers {
                start_ns: &start,
                end_ns: &end,
                bytes: &bytes,
                camera_frames: &counts,
                state_steps: &counts,
                action_steps: &counts,
                digest: &[],
            },
        )
        .expect("rows");
    writer.finish().expect("finish");
    Manifest::open(&path).expect("open")
}
