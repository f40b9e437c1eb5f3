//! The as-recorded profile (`resample.grid = "as_recorded"`): every stream written at its
//! recorded times by reel-landing's one as-recorded path. `reel-pack` runs it through
//! [`pack`]; ingest runs it through `process_episode` and stamps the episode with its
//! summary and provenance, as on the grid.

use reel_io::StoreOptions;
use reel_landing::{PackReport, TopicGroups};
use reel_mcap::{CameraStream, DepthStream};

use crate::canonical::{EpisodeSummary, ProcessedEpisode, processed, stamp, summarize};
use crate::config::PipelineConfig;
use crate::episode::Landing;
use crate::qc::quality_check;
use crate::resample::{Grid, recorded_grid};
use crate::{Error, Result};

/// Steps 2–5 with every stream at its recorded times: cameras encoded frame for frame
/// (or a conforming recorded H.264 kept), nothing interpolated or derived. The quality
/// checks run on the landing streams; frames are not measured (only the grid's pass
/// decodes a kept recording), so the camera checks find nothing.
pub(crate) fn process_as_recorded(
    landing: Landing,
    groups: &TopicGroups,
    landing_digest: u64,
    config: &PipelineConfig,
    config_digest: String,
) -> Result<ProcessedEpisode> {
    let (mut canonical, write, _) = reel_landing::prepare_as_recorded(
        &landing.name,
        &landing.episode,
        groups,
        landing.bytes,
        &config.encode,
        config.topics.skip_bad_frames,
    )?;
    let recorded = recorded_grid(&landing.episode, &config.resample);
    let qc = quality_check(&landing.episode, &[], &config.resample, &config.qc);
    let cameras: Vec<(&CameraStream, u64)> = canonical.cameras.iter().map(|c| (c, 0)).collect();
    let depths: Vec<(&DepthStream, u64)> = (canonical.depths.iter())
        .zip(&landing.episode.depths)
        .map(|(written, read)| {
            let lost = read.frames.len().saturating_sub(written.frames.len());
            (written, lost as u64)
        })
        .collect();
    let summary = EpisodeSummary {
        landing_digest,
        ..summarize(
            &landing,
            &recorded,
            &cameras,
            &depths,
            qc,
            config,
            config_digest,
        )
    };
    stamp(&mut canonical.episode, &summary)?;
    let bytes = reel_mcap::write_episode(&canonical, &write)?;
    Ok(processed(summary, bytes))
}

/// Packs the landing object at `input` (a local path or S3 URI) into `output` under the
/// as-recorded profile, written atomically: `reel-pack`. The episode is the as-recorded
/// one alone, without ingest's summary; `config.resample.grid` must be `as_recorded`.
pub fn pack(
    input: &str,
    output: &str,
    config: &PipelineConfig,
    options: &StoreOptions,
) -> Result<PackReport> {
    if config.resample.grid != Grid::AsRecorded {
        return Err(Error::Config(
            "packing writes streams as recorded: resample.grid must be \"as_recorded\"".into(),
        ));
    }
    Ok(reel_landing::pack(
        input,
        output,
        &config.pack_config(),
        options,
    )?)
}
