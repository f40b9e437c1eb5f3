//! Real canonical episodes in a store folder, and manifests over them, for the tests and
//! benchmarks of every stage after ingest (feature `test-support`).
//!
//! [`SynthCorpus::ingest`] generates landing episodes with reel-synth, ingests each with
//! the default [`PipelineConfig`] and writes its canonical object at its key
//! (`canonical/<episode_id>.mcap`) under a folder that a `Store` then opens;
//! [`SynthCorpus::write_manifest`] lists them, in order, in a manifest. Tests that need
//! something odd (a damaged object, a manifest of their own) start from these and change
//! what they must.

use std::path::Path;

use reel_manifest::{ManifestMeta, ManifestWriter};
use reel_synth::{SynthConfig, SynthEpisode, generate_episode};

use crate::{EpisodeSummary, PipelineConfig, process_episode};

/// Any failure to build a corpus: fixtures only report it.
pub type Error = Box<dyn std::error::Error>;

/// Synthesised landing episodes, ingested into a store folder.
#[derive(Debug)]
pub struct SynthCorpus {
    /// One per episode index, in order.
    pub episodes: Vec<IngestedEpisode>,
}

/// One landing episode and what ingest made of it.
#[derive(Debug)]
pub struct IngestedEpisode {
    /// The landing episode, for checks against what ingest read.
    pub landing: SynthEpisode,
    /// The canonical episode's summary: its key, digest and manifest row.
    pub summary: EpisodeSummary,
}

impl SynthCorpus {
    /// Episodes `0..episodes` of `synth`, each ingested and its canonical object written
    /// under `root` at its canonical key.
    pub fn ingest(synth: &SynthConfig, episodes: u64, root: &Path) -> Result<Self, Error> {
        let episodes = (0..episodes)
            .map(|index| {
                let landing = generate_episode(synth, index)?;
                let processed = process_episode(
                    &landing.name,
                    &landing.name,
                    &landing.mcap,
                    &PipelineConfig::default(),
                )?;
                let path = root.join(&processed.summary.canonical_key);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&path, &processed.bytes)?;
                Ok(IngestedEpisode {
                    landing,
                    summary: processed.summary,
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Self { episodes })
    }

    /// Writes a manifest at `path` with one row per episode, in order, as ingest gives it.
    pub fn write_manifest(&self, path: &Path, meta: &ManifestMeta) -> Result<(), Error> {
        let mut writer = ManifestWriter::create(path, meta)?;
        for episode in &self.episodes {
            writer.push(&episode.summary.manifest_row())?;
        }
        writer.finish()?;
        Ok(())
    }

    /// The episodes' summaries, in order.
    pub fn summaries(&self) -> impl Iterator<Item = &EpisodeSummary> {
        self.episodes.iter().map(|e| &e.summary)
    }

    /// The canonical objects' keys, in order.
    pub fn keys(&self) -> Vec<String> {
        self.summaries().map(|s| s.canonical_key.clone()).collect()
    }
}
