//! The canonical encoding: one set of settings for every path from landing streams to a
//! canonical episode, so changing how canonical cameras are encoded is one edit.

use reel_video::EncoderConfig;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How landing streams become canonical ones: the H.264 settings of cameras and the chunk
/// windows and groups of the other streams. `reel-pack` (`[encode]` in its config) and
/// ingest (`[encode]` in the pipeline config) both encode with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EncodeConfig {
    /// FFmpeg's H.264 encoder. Left out of the settings digest while it is the default,
    /// so episodes encoded before the setting existed stay current.
    #[serde(skip_serializing_if = "is_default_encoder")]
    pub encoder: String,
    /// Grid frames per GOP, and per camera chunk window.
    pub gop: u32,
    /// x264 constant rate factor.
    pub crf: f32,
    /// x264 preset.
    pub preset: String,
    /// x264 tune (empty for none).
    pub tune: String,
    /// Chunk window of numeric groups, seconds.
    pub signal_window_s: f64,
    /// Topic group of cameras.
    pub camera_group: String,
    /// Topic group of numeric streams.
    pub signal_group: String,
    /// Keep recorded H.264 that meets the canonical rules as recorded instead of
    /// transcoding it. Left out of the settings digest while on (the default).
    #[serde(skip_serializing_if = "is_true")]
    pub keep_recorded_video: bool,
}

impl Default for EncodeConfig {
    fn default() -> Self {
        Self {
            encoder: reel_video::DEFAULT_ENCODER.into(),
            gop: 30,
            crf: 23.0,
            preset: "medium".into(),
            tune: "fastdecode".into(),
            signal_window_s: 2.0,
            camera_group: "cameras".into(),
            signal_group: "proprio".into(),
            keep_recorded_video: true,
        }
    }
}

impl EncodeConfig {
    /// The encoder settings for one camera stream (one x264 thread: cameras and episodes
    /// run in parallel instead).
    pub fn encoder(&self, fps: u32) -> EncoderConfig {
        EncoderConfig {
            encoder: self.encoder.clone(),
            // Keyframes are forced at window starts; the slack keeps x264 from adding its own.
            gop: self.gop + self.gop / 2 + 1,
            crf: self.crf,
            preset: self.preset.clone(),
            tune: (!self.tune.is_empty()).then(|| self.tune.clone()),
            fps: fps.max(1),
            threads: 1,
            ..EncoderConfig::default()
        }
    }

    /// Checks the settings; `name` (the config file) is used in errors.
    pub fn validate(&self, name: &str) -> Result<()> {
        if self.gop == 0
            || !(0.0..=51.0).contains(&self.crf)
            || !(self.signal_window_s.is_finite() && self.signal_window_s > 0.0)
        {
            return Err(Error::Config {
                name: name.into(),
                reason: "gop must be ≥ 1, crf in 0..=51, signal_window_s > 0".into(),
            });
        }
        Ok(())
    }

    /// The chunk window of numeric groups, ns.
    pub fn signal_window_ns(&self) -> u64 {
        (self.signal_window_s * 1e9) as u64
    }
}

fn is_true(value: &bool) -> bool {
    *value
}

fn is_default_encoder(encoder: &str) -> bool {
    encoder == reel_video::DEFAULT_ENCODER
}
