//! The canonical encoding: one set of settings for every path from landing streams to a
//! canonical episode, so changing how canonical cameras are encoded is one edit.

use reel_mcap::{CameraWindows, Error, Result, WriteConfig};
use reel_video::{EncoderConfig, GopStructure};
use serde::{Deserialize, Serialize};

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
    /// How a GOP's frames predict from each other: `chain` (each from the one before) or
    /// `star` (each from the keyframe alone; see `reel_video::GopStructure`). Left out of
    /// the settings digest while `chain`.
    #[serde(skip_serializing_if = "EncodeStructure::is_chain")]
    pub structure: EncodeStructure,
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
    /// Compress chunks with zstd. Off, numeric chunks are read without decompressing
    /// (cameras' H.264 does not compress either way); files grow by what zstd saved on
    /// numeric streams. Left out of the settings digest while on (the default).
    #[serde(skip_serializing_if = "is_true")]
    pub compress_chunks: bool,
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
            structure: EncodeStructure::Chain,
            crf: 23.0,
            preset: "medium".into(),
            tune: "fastdecode".into(),
            signal_window_s: 2.0,
            camera_group: "cameras".into(),
            signal_group: "proprio".into(),
            keep_recorded_video: true,
            compress_chunks: true,
        }
    }
}

/// GOP structure as written in configs (`reel_video::GopStructure`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncodeStructure {
    /// Each frame predicts from the one before.
    #[default]
    Chain,
    /// Each frame predicts from its keyframe alone.
    Star,
}

impl EncodeStructure {
    fn is_chain(&self) -> bool {
        *self == Self::Chain
    }
}

impl EncodeConfig {
    /// Names of the encodings [`named`](Self::named) knows.
    pub const NAMES: [&str; 2] = ["canonical", "random-access"];

    /// A named encoding: `canonical` (the default: GOP 30 chains, the smallest files and
    /// the fastest reads in Reel's locality order) or `random-access` (for training that
    /// draws samples in a global shuffle: 2-frame GOPs, so a random frame decodes from
    /// at most two access units, CRF 26, whose fewer bits decode faster, libx264 tuned
    /// for PSNR as well as fast decoding (no psychovisual rate-distortion or adaptive
    /// quantisation: bits go to the squared error a model sees, which on real footage
    /// takes fewer bytes than LeRobot's datasets at equal PSNR), and numeric chunks of
    /// 0.5 s stored uncompressed, so a sample's numeric streams are read from a few small
    /// chunks without decompressing; docs/BENCHMARKS.md has the measurements behind it).
    /// Both are plain H.264 that Foxglove plays.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "canonical" => Some(Self::default()),
            "random-access" => Some(Self {
                gop: 2,
                crf: 26.0,
                tune: "fastdecode,psnr".into(),
                compress_chunks: false,
                signal_window_s: 0.5,
                ..Self::default()
            }),
            _ => None,
        }
    }

    /// These settings with the codec and chunk settings of the named encoding, the groups
    /// kept, and the signal window kept where these settings chose one other than the
    /// default (what `--encoding` does on top of a config file); `None` for a name
    /// [`named`](Self::named) does not know.
    pub fn with_encoding(&self, name: &str) -> Option<Self> {
        let named = Self::named(name)?;
        let signal_window_s = if self.signal_window_s == Self::default().signal_window_s {
            named.signal_window_s
        } else {
            self.signal_window_s
        };
        Some(Self {
            camera_group: self.camera_group.clone(),
            signal_group: self.signal_group.clone(),
            signal_window_s,
            ..named
        })
    }

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
            structure: match self.structure {
                EncodeStructure::Chain => GopStructure::Chain,
                EncodeStructure::Star => GopStructure::Star,
            },
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

    /// The camera chunk windows when no recorded video sets them: `gop` frames of
    /// `period_ns` each, from `origin_ns`.
    pub fn camera_windows(&self, origin_ns: u64, period_ns: u64) -> CameraWindows {
        CameraWindows {
            origin_ns,
            window_ns: (period_ns * u64::from(self.gop)).max(1),
        }
    }

    /// How a canonical episode encoded with these settings is written: cameras chunked by
    /// `windows`, numeric groups by `signal_window_s`.
    pub fn write_config(&self, windows: CameraWindows) -> WriteConfig {
        WriteConfig {
            camera_window_ns: windows.window_ns,
            camera_origin_ns: Some(windows.origin_ns),
            signal_window_ns: self.signal_window_ns(),
            compress: self.compress_chunks,
            ..WriteConfig::default()
        }
    }
}

fn is_true(value: &bool) -> bool {
    *value
}

fn is_default_encoder(encoder: &str) -> bool {
    encoder == reel_video::DEFAULT_ENCODER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_encoding_on_top_of_a_config_keeps_its_groups_and_a_chosen_signal_window() {
        let random_access = EncodeConfig::named("random-access").expect("known name");
        assert_eq!(random_access.signal_window_s, 0.5);
        assert!(!random_access.compress_chunks);

        // A config that left the signal window alone gets the encoding's own.
        let config = EncodeConfig {
            camera_group: "video".into(),
            ..EncodeConfig::default()
        };
        let chosen = config.with_encoding("random-access").expect("known name");
        assert_eq!(chosen.signal_window_s, 0.5);
        assert_eq!(chosen.camera_group, "video");
        assert_eq!((chosen.gop, chosen.crf), (2, 26.0));
        assert_eq!(chosen.tune, "fastdecode,psnr");

        // One that chose a window keeps it, whatever the encoding.
        let config = EncodeConfig {
            signal_window_s: 1.0,
            ..EncodeConfig::default()
        };
        let chosen = config.with_encoding("random-access").expect("known name");
        assert_eq!(chosen.signal_window_s, 1.0);
        assert_eq!(
            config.with_encoding("canonical").expect("known name"),
            config
        );
        assert!(config.with_encoding("fastest").is_none());
    }
}
