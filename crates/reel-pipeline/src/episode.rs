//! Step 1: decode a landing episode and its `episode` metadata record.

use std::collections::BTreeMap;

use reel_landing::LandingEpisode;
use reel_warehouse::episodes::SourceDataset;
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
    /// The dataset an imported episode came from ([`source_keys`]); none for a recording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceDataset>,
}

/// Keys of the landing `episode` record that name the dataset an imported episode came
/// from: `reel-import` writes them, the warehouse's `source_*` columns hold them.
pub mod source_keys {
    /// The dataset's format (`lerobot`, `hdf5.aloha`…); without it, the rest is ignored.
    pub const FORMAT: &str = "source";
    /// The dataset: its folder, repository id or file.
    pub const DATASET: &str = "source.dataset";
    /// Its revision.
    pub const REVISION: &str = "source.revision";
    /// The episode's index in it (an integer).
    pub const EPISODE_INDEX: &str = "source.episode_index";
    /// Its frame rate, Hz.
    pub const FPS: &str = "source.fps";
}

/// The source named by an `episode` record, or the key whose value is not what it must be.
fn source_of(
    meta: &BTreeMap<String, String>,
) -> std::result::Result<Option<SourceDataset>, String> {
    let Some(format) = meta.get(source_keys::FORMAT).filter(|f| !f.is_empty()) else {
        return Ok(None);
    };
    let text = |key: &str| meta.get(key).cloned().unwrap_or_default();
    let episode_index = (meta.get(source_keys::EPISODE_INDEX))
        .map(|index| {
            index.parse::<i64>().map_err(|_| {
                format!(
                    "metadata `{}` is `{index}`, not an integer",
                    source_keys::EPISODE_INDEX
                )
            })
        })
        .transpose()?;
    let fps = (meta.get(source_keys::FPS))
        .map(|fps| {
            (fps.parse::<f64>().ok())
                .filter(|f| f.is_finite() && *f > 0.0)
                .ok_or_else(|| {
                    format!(
                        "metadata `{}` is `{fps}`, not a positive frame rate",
                        source_keys::FPS
                    )
                })
        })
        .transpose()?;
    Ok(Some(SourceDataset {
        format: format.clone(),
        dataset: text(source_keys::DATASET),
        revision: text(source_keys::REVISION),
        episode_index,
        fps,
    }))
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
    decode_landing_skipping(name, fallback_id, bytes, &|_| false)
}

/// [`decode_landing`] for a recording already fetched: an MCAP or a rosbag2 recording.
pub fn decode_recording(
    name: &str,
    fallback_id: &str,
    files: &reel_landing::LandingFiles,
) -> Result<Landing> {
    decode_recording_skipping(name, fallback_id, files, &|_| false)
}

/// [`decode_landing`], leaving out the topics `skip` names (a topic rule's `skip`).
pub(crate) fn decode_landing_skipping(
    name: &str,
    fallback_id: &str,
    bytes: &[u8],
    skip: &dyn Fn(&str) -> bool,
) -> Result<Landing> {
    let episode = reel_landing::read_landing(name, bytes, skip)?;
    landing_of(name, fallback_id, episode, bytes.len() as u64)
}

/// [`decode_recording`], leaving out the topics `skip` names (a topic rule's `skip`).
pub(crate) fn decode_recording_skipping(
    name: &str,
    fallback_id: &str,
    files: &reel_landing::LandingFiles,
    skip: &dyn Fn(&str) -> bool,
) -> Result<Landing> {
    let episode = files.read(skip)?;
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
    let source = source_of(meta).map_err(landing_err)?;
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
            source,
        },
        episode,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kinded;
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
    fn an_imported_episode_names_its_source() {
        let record = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            (pairs.iter())
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(source_of(&record(&[("task", "pick")])), Ok(None));
        let source = source_of(&record(&[
            (source_keys::FORMAT, "lerobot"),
            (source_keys::DATASET, "lerobot/pusht"),
            (source_keys::REVISION, "v3.0"),
            (source_keys::EPISODE_INDEX, "12"),
            (source_keys::FPS, "10"),
        ]));
        assert_eq!(
            source,
            Ok(Some(SourceDataset {
                format: "lerobot".into(),
                dataset: "lerobot/pusht".into(),
                revision: "v3.0".into(),
                episode_index: Some(12),
                fps: Some(10.0),
            }))
        );
        let bad_index = source_of(&record(&[
            (source_keys::FORMAT, "lerobot"),
            (source_keys::EPISODE_INDEX, "twelve"),
        ]));
        assert!(bad_index.is_err_and(|e| e.contains(source_keys::EPISODE_INDEX)));
        let bad_fps = source_of(&record(&[
            (source_keys::FORMAT, "hdf5.aloha"),
            (source_keys::FPS, "0"),
        ]));
        assert!(bad_fps.is_err_and(|e| e.contains(source_keys::FPS)));
    }

    #[test]
    fn garbage_is_a_typed_error() {
        let err = decode_landing("bad.mcap", "bad", b"not an mcap").expect_err("rejects");
        assert_eq!(err.kind(), crate::ErrorKind::BadInput, "{err}");
        assert!(err.to_string().contains("bad.mcap"), "{err}");
    }
}
