//! Step 1: decode a landing episode and its `episode` metadata record.

use reel_mcap::LandingEpisode;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Who recorded what, from the landing `episode` metadata record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct EpisodeInfo {
    /// Recorder's episode id (the landing object's name when the record lacks one).
    pub episode_id: String,
    /// Robot.
    pub robot_id: String,
    /// Task.
    pub task: String,
    /// Operator.
    pub operator: String,
    /// Operator-labelled outcome.
    pub success: bool,
    /// Software running on the robot at recording time (provenance).
    pub robot_software_version: String,
    /// Recording start, ns since the Unix epoch (the first log time when not recorded).
    pub recorded_at_ns: i64,
}

/// A decoded landing episode.
#[derive(Debug, Clone)]
pub struct Landing {
    /// Name used in errors (the landing object).
    pub name: String,
    /// Metadata.
    pub info: EpisodeInfo,
    /// Streams, still holding compressed frames.
    pub episode: LandingEpisode,
    /// Size of the landing file.
    pub bytes: u64,
}

/// Parses a landing MCAP held in memory. `fallback_id` names the episode when its
/// metadata has no `episode_id`. Topics Reel does not read are kept as recorded
/// ([`LandingEpisode::other`]); an episode without any camera or numeric stream is an error.
pub fn decode_landing(name: &str, fallback_id: &str, bytes: &[u8]) -> Result<Landing> {
    let episode = reel_mcap::read_landing(name, bytes, &|_| false)?;
    landing_of(name, fallback_id, episode, bytes.len() as u64)
}

/// [`decode_landing`] for a recording already fetched: an MCAP or a rosbag2 recording.
pub fn decode_recording(
    name: &str,
    fallback_id: &str,
    files: &reel_mcap::LandingFiles,
) -> Result<Landing> {
    let episode = files.read(&|_| false)?;
    landing_of(name, fallback_id, episode, files.len())
}

fn landing_of(
    name: &str,
    fallback_id: &str,
    episode: LandingEpisode,
    bytes: u64,
) -> Result<Landing> {
    let landing_err = |reason: String| Error::Landing {
        name: name.to_owned(),
        reason,
    };
    let frames: usize = episode.cameras.iter().map(|c| c.frames.len()).sum();
    let samples: usize = episode.signals.iter().map(|s| s.samples.len()).sum();
    if frames + samples == 0 {
        return Err(landing_err(
            "no camera frames or numeric samples Reel can read".into(),
        ));
    }
    let first_log_time = crate::resample::episode_origin(&episode);
    let empty = Default::default();
    let meta = episode.metadata.get("episode").unwrap_or(&empty);
    let text = |key: &str| meta.get(key).cloned().unwrap_or_default();
    let success = match meta.get("success").map(String::as_str) {
        None => false,
        Some("true" | "1" | "yes") => true,
        Some("false" | "0" | "no" | "") => false,
        Some(other) => {
            return Err(landing_err(format!(
                "metadata `success` is `{other}`, expected true or false"
            )));
        }
    };
    let recorded_at_ns = match meta.get("recorded_at") {
        None => first_log_time as i64,
        Some(stamp) => {
            time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339)
                .map(|t| t.unix_timestamp_nanos() as i64)
                .map_err(|e| {
                    landing_err(format!(
                        "metadata `recorded_at` is `{stamp}`, not RFC 3339: {e}"
                    ))
                })?
        }
    };
    let episode_id = match meta.get("episode_id") {
        Some(id) if !id.is_empty() => id.clone(),
        _ => fallback_id.to_owned(),
    };
    Ok(Landing {
        name: name.to_owned(),
        info: EpisodeInfo {
            episode_id,
            robot_id: text("robot_id"),
            task: text("task"),
            operator: text("operator"),
            success,
            robot_software_version: text("robot_software_version"),
            recorded_at_ns,
        },
        episode,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_synth::{SynthConfig, generate_episode};

    #[test]
    fn reads_metadata_and_streams_of_both_flavours() {
        for flavor in [reel_synth::Flavor::Ros2, reel_synth::Flavor::Foxglove] {
            let config = SynthConfig {
                seconds: 0.5,
                width: 32,
                height: 24,
                cameras: 2,
                flavor,
                ..SynthConfig::default()
            };
            let synth = generate_episode(&config, 3).expect("synth");
            let landing = decode_landing("x.mcap", "fallback", &synth.mcap).expect("decodes");
            let meta = &synth.report.meta;
            assert_eq!(landing.info.episode_id, meta.episode_id);
            assert_eq!(landing.info.robot_id, meta.robot_id);
            assert_eq!(landing.info.success, meta.success);
            assert_eq!(
                landing.info.robot_software_version,
                meta.robot_software_version
            );
            assert_eq!(landing.episode.cameras.len(), 2);
            // joint states, actions and two hands
            assert_eq!(landing.episode.signals.len(), 4);
            assert_eq!(landing.bytes, synth.mcap.len() as u64);
        }
    }

    #[test]
    fn garbage_is_a_typed_error() {
        let err = decode_landing("bad.mcap", "bad", b"not an mcap").expect_err("rejects");
        assert_eq!(err.kind(), crate::ErrorKind::BadInput, "{err}");
        assert!(err.to_string().contains("bad.mcap"), "{err}");
    }
}
