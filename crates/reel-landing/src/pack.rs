//! `reel-pack`'s settings and report, and packing a landing log as recorded.

use std::time::Instant;

use reel_io::{Store, StoreOptions, split_object_uri};
use reel_mcap::{CanonicalEpisode, Error, Result, WriteConfig, write_episode};
use serde::{Deserialize, Serialize};

use crate::as_recorded::{PackReport, prepare_as_recorded};
use crate::encoding::EncodeConfig;
use crate::episode::LandingEpisode;
use crate::read::{read_landing, read_landing_object};
use crate::topics::{TopicConfig, TopicRule};

/// Packing settings; every field has a default, and a TOML file may set any of them.
/// `[encode]` is the canonical encoding ([`EncodeConfig`]), the same table as ingest's;
/// the other fields are the topic settings ([`TopicConfig`]), which ingest's config holds
/// under `[topics]`.
///
/// ```toml
/// [encode]
/// gop = 30
/// crf = 23
/// signal_window_s = 2.0
/// [[topic]]
/// match = "/camera/*"
/// group = "cameras"
/// [[topic]]
/// match = "/diagnostics"
/// skip = true
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PackConfig {
    /// The canonical encoding: H.264 settings, chunk windows, default groups.
    pub encode: EncodeConfig,
    /// Group of topics kept as recorded (nothing reads them, or none of their messages
    /// decoded).
    pub other_group: String,
    /// Leave the topics Reel does not read out (listed as skipped) instead of keeping them
    /// as recorded in `other_group`.
    pub skip_unknown: bool,
    /// Drop landing frames that do not decode instead of failing.
    pub skip_bad_frames: bool,
    /// Topic rules, first match wins.
    #[serde(rename = "topic")]
    pub topics: Vec<TopicRule>,
}

impl Default for PackConfig {
    fn default() -> Self {
        Self {
            encode: EncodeConfig::default(),
            other_group: reel_mcap::keys::OTHER_GROUP.into(),
            skip_unknown: false,
            skip_bad_frames: false,
            topics: Vec::new(),
        }
    }
}

impl PackConfig {
    /// Parses a TOML config; `name` is used in errors.
    pub fn from_toml(name: &str, text: &str) -> Result<Self> {
        let config: Self = toml::from_str(text).map_err(|e| Error::Config {
            name: name.into(),
            reason: e.to_string(),
        })?;
        config.encode.validate(name)?;
        config.topic_config().validate(name)?;
        Ok(config)
    }

    /// The topic settings of this config: `other_group`, `skip_unknown`,
    /// `skip_bad_frames` and the rules.
    pub fn topic_config(&self) -> TopicConfig {
        TopicConfig {
            other_group: self.other_group.clone(),
            skip_unknown: self.skip_unknown,
            skip_bad_frames: self.skip_bad_frames,
            rules: self.topics.clone(),
        }
    }
}

/// Packs one landing episode held in memory; returns the canonical MCAP and a report
/// (`output` left for the caller to fill).
pub fn pack_episode(
    name: &str,
    landing: &[u8],
    config: &PackConfig,
) -> Result<(Vec<u8>, PackReport)> {
    let started = Instant::now();
    write_prepared(prepare_episode(name, landing, config)?, started)
}

/// Writes a prepared episode and completes its report with the bytes and the time taken.
fn write_prepared(
    (episode, write_config, report): (CanonicalEpisode, WriteConfig, PackReport),
    started: Instant,
) -> Result<(Vec<u8>, PackReport)> {
    let bytes = write_episode(&episode, &write_config)?;
    let report = PackReport {
        bytes_out: bytes.len() as u64,
        seconds: started.elapsed().as_secs_f64(),
        ..report
    };
    Ok((bytes, report))
}

/// The part of [`pack_episode`] before writing: the landing episode parsed and its cameras
/// encoded, with the chunk windows to write it with. Lets a caller write other layouts of
/// the very same content (the container benchmarks do).
pub fn prepare_episode(
    name: &str,
    landing: &[u8],
    config: &PackConfig,
) -> Result<(CanonicalEpisode, WriteConfig, PackReport)> {
    let topics = config.topic_config();
    let landing_episode = read_landing(name, landing, &|topic| topics.skips(topic))?;
    prepare_landing(name, landing_episode, landing.len() as u64, config)
}

/// [`prepare_episode`] from an episode already read (an MCAP or a rosbag2 recording of
/// `bytes_in` bytes, read with [`TopicConfig::skips`] of `config`'s topic settings).
pub fn prepare_landing(
    name: &str,
    landing_episode: LandingEpisode,
    bytes_in: u64,
    config: &PackConfig,
) -> Result<(CanonicalEpisode, WriteConfig, PackReport)> {
    let topics = config.topic_config();
    let ruled = topics.apply(name, landing_episode, &config.encode)?;
    prepare_as_recorded(
        name,
        &ruled.episode,
        &ruled.groups,
        bytes_in,
        &config.encode,
        topics.skip_bad_frames,
    )
}

/// Packs the landing object at `input` (local path or S3 URI) into `output`, written
/// atomically, both through opendal.
pub fn pack(
    input: &str,
    output: &str,
    config: &PackConfig,
    options: &StoreOptions,
) -> Result<PackReport> {
    let started = Instant::now();
    let topics = config.topic_config();
    let (in_store, in_key) = split_object_uri(input)?;
    let (landing, bytes_in) = read_landing_object(
        &Store::open_existing_with(&in_store, options)?,
        &in_key,
        &|topic| topics.skips(topic),
    )?;
    let (bytes, report) =
        write_prepared(prepare_landing(input, landing, bytes_in, config)?, started)?;
    let (out_store, out_key) = split_object_uri(output)?;
    Store::open_with(&out_store, options)?.write_atomic(&out_key, bytes)?;
    Ok(PackReport {
        output: output.into(),
        ..report
    })
}
