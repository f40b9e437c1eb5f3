//! Steps 1–5 for one episode in memory: the landing episode read through the topic
//! rules, then written on the resampled grid or as recorded, as the config says.

use reel_landing::RuledEpisode;

use crate::Result;
use crate::as_recorded::process_as_recorded;
use crate::canonical::{ProcessedEpisode, process_on_grid};
use crate::config::PipelineConfig;
use crate::episode::{Landing, decode_landing_skipping, decode_recording_skipping};
use crate::resample::Grid;

/// Runs steps 1–5 on one landing episode held in memory: decode through the topic rules,
/// resample, derive, measure and encode cameras, check quality, write the canonical MCAP
/// (or, with `resample.grid = "as_recorded"`, write every stream at its recorded times). `name` is used in
/// errors and recorded as the landing key; `fallback_id` names the episode when its
/// metadata does not.
pub fn process_episode(
    name: &str,
    fallback_id: &str,
    landing_bytes: &[u8],
    config: &PipelineConfig,
) -> Result<ProcessedEpisode> {
    process_landing(
        decode_landing_skipping(name, fallback_id, landing_bytes, &|topic| {
            config.topics.skips(topic)
        })?,
        reel_manifest::object_digest(landing_bytes),
        config,
    )
}

/// [`process_episode`] for a recording already fetched: an MCAP or a rosbag2 recording.
pub fn process_recording(
    name: &str,
    fallback_id: &str,
    files: &reel_landing::LandingFiles,
    config: &PipelineConfig,
) -> Result<ProcessedEpisode> {
    let landing_digest = match files {
        reel_landing::LandingFiles::Mcap { bytes, .. } => reel_manifest::object_digest(bytes),
        reel_landing::LandingFiles::Rosbag2 { files, .. } => {
            reel_manifest::parts_digest(files.iter().map(|(_, bytes)| &bytes[..]))
        }
    };
    process_landing(
        decode_recording_skipping(name, fallback_id, files, &|topic| {
            config.topics.skips(topic)
        })?,
        landing_digest,
        config,
    )
}

/// Applies the topic rules to a decoded episode and writes it as the config's grid says.
fn process_landing(
    landing: Landing,
    landing_digest: u64,
    config: &PipelineConfig,
) -> Result<ProcessedEpisode> {
    let config_digest = config.digest()?;
    let Landing {
        name,
        info,
        episode,
        bytes,
    } = landing;
    let RuledEpisode { episode, groups } = config.topics.apply(&name, episode, &config.encode)?;
    let landing = Landing {
        name,
        info,
        episode,
        bytes,
    };
    match config.resample.grid {
        Grid::Resampled => process_on_grid(landing, &groups, landing_digest, config, config_digest),
        Grid::AsRecorded => {
            process_as_recorded(landing, &groups, landing_digest, config, config_digest)
        }
    }
}
