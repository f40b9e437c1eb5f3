//! The thresholds of the quality checks, and their valid ranges.

use serde::{Deserialize, Serialize};

/// Thresholds of the checks. Defaults start from FFmpeg's blackdetect/freezedetect and
/// common robotics limits (see `docs/ARCHITECTURE.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QcConfig {
    /// A pixel is black below this luma, as a share of full scale (blackdetect: 0.10).
    pub black_pixel_luma: f64,
    /// A frame is black when at least this share of its pixels is (blackdetect: 0.98).
    pub black_frame_ratio: f64,
    /// Black frames over at least this long make a blackout, seconds.
    pub min_blackout_s: f64,
    /// A frame is frozen when it differs from the previous one by at most this much,
    /// dB below full scale (freezedetect: −60 dB).
    pub frozen_noise_db: f64,
    /// Repeated frames over at least this long make a freeze, seconds (freezedetect uses
    /// 2 s; a 1 s stall already poisons every training sample that spans it).
    pub min_frozen_s: f64,
    /// A joint moving more than this between consecutive samples jumps, radians.
    pub joint_jump_rad: f64,
    /// A joint's second difference (acceleration × landing period²) above this is jerky,
    /// radians.
    pub jerk_rad: f64,
    /// Window in which jerky samples are counted, seconds.
    pub choppy_window_s: f64,
    /// Share of jerky samples in a window that makes the joints choppy.
    pub choppy_ratio: f64,
    /// A stream below this share of its target rate (outside flagged gaps) falls short.
    pub min_rate_ratio: f64,
    /// A stream that starts this much after the episode's first message, or ends this much
    /// before its last, does not cover the episode, seconds.
    pub coverage_gap_s: f64,
}

impl Default for QcConfig {
    fn default() -> Self {
        Self {
            black_pixel_luma: 0.10,
            black_frame_ratio: 0.98,
            min_blackout_s: 0.5,
            frozen_noise_db: -60.0,
            min_frozen_s: 1.0,
            joint_jump_rad: 0.2,
            jerk_rad: 0.01,
            choppy_window_s: 0.25,
            choppy_ratio: 0.3,
            min_rate_ratio: 0.9,
            coverage_gap_s: 0.5,
        }
    }
}

impl QcConfig {
    /// Largest mean squared error (0–255²) of a frozen frame.
    pub fn frozen_max_mse(&self) -> f32 {
        (255.0f64.powi(2) * 10f64.powf(self.frozen_noise_db / 10.0)) as f32
    }

    /// Luma (0–255) below which a pixel counts as black.
    pub fn black_luma(&self) -> f32 {
        (self.black_pixel_luma * 255.0) as f32
    }

    /// Checks ranges.
    pub fn validate(&self) -> crate::Result<()> {
        let unit = [
            self.black_pixel_luma,
            self.black_frame_ratio,
            self.choppy_ratio,
            self.min_rate_ratio,
        ];
        let positive = [
            self.min_blackout_s,
            self.min_frozen_s,
            self.joint_jump_rad,
            self.jerk_rad,
            self.choppy_window_s,
            self.coverage_gap_s,
        ];
        if unit.iter().any(|v| !(0.0..=1.0).contains(v))
            || positive.iter().any(|v| !(v.is_finite() && *v > 0.0))
            || !self.frozen_noise_db.is_finite()
        {
            return Err(crate::Error::Config(
                "qc: ratios must be in [0, 1], durations and thresholds positive".into(),
            ));
        }
        Ok(())
    }
}
