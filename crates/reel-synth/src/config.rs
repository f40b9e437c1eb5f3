//! What to generate: cameras, rates, jitter, drops, faults and the encoding flavour, and
//! the ranges they must lie in.

use serde::{Deserialize, Serialize};

use crate::error::SynthError;
use crate::faults::FaultRates;
use crate::topics::CAMERA_NAMES;

/// How the episode is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// rosbag2: `cdr` messages with `ros2msg` schemas.
    #[default]
    Ros2,
    /// Foxglove SDK: protobuf images and poses, JSON joint states.
    Foxglove,
}

/// What to generate. `Default` is 3 cameras at 320×240, 10 s, no faults.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthConfig {
    pub seed: u64,
    pub seconds: f64,
    pub cameras: usize,
    /// Depth cameras (`16UC1`, at the camera rate and size), paired with the first
    /// `depth_cameras` cameras.
    pub depth_cameras: usize,
    pub width: u32,
    pub height: u32,
    pub camera_hz: f64,
    pub joint_hz: f64,
    pub action_hz: f64,
    pub hand_hz: f64,
    /// Clock jitter: each timestamp moves by up to this fraction of its period.
    pub jitter: f64,
    /// Probability that any one message is lost in transport.
    pub drop_probability: f64,
    pub jpeg_quality: u8,
    pub faults: FaultRates,
    pub flavor: Flavor,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            seconds: 10.0,
            cameras: 3,
            depth_cameras: 0,
            width: 320,
            height: 240,
            camera_hz: 30.0,
            joint_hz: 200.0,
            action_hz: 50.0,
            hand_hz: 30.0,
            jitter: 0.1,
            drop_probability: 0.002,
            jpeg_quality: 90,
            faults: FaultRates::none(),
            flavor: Flavor::Ros2,
        }
    }
}

impl SynthConfig {
    pub(crate) fn validate(&self) -> Result<(), SynthError> {
        let bad = |m: &str| Err(SynthError::Config(m.to_string()));
        if !(self.seconds.is_finite() && self.seconds > 0.0 && self.seconds <= 24.0 * 3600.0) {
            return bad("seconds must be in (0, 86400]");
        }
        if !(1..=CAMERA_NAMES.len()).contains(&self.cameras) {
            return bad("cameras must be between 1 and 6");
        }
        if self.depth_cameras > self.cameras {
            return bad("depth cameras pair with cameras: at most as many as cameras");
        }
        if self.width < 16 || self.height < 16 || self.width > 4096 || self.height > 4096 {
            return bad("width and height must be between 16 and 4096");
        }
        for hz in [self.camera_hz, self.joint_hz, self.action_hz, self.hand_hz] {
            if !(hz.is_finite() && hz > 0.0 && hz <= 10_000.0) {
                return bad("rates must be in (0, 10000] Hz");
            }
        }
        if !(0.0..0.5).contains(&self.jitter) {
            return bad("jitter must be in [0, 0.5) of a period");
        }
        if !(0.0..0.5).contains(&self.drop_probability) {
            return bad("drop probability must be in [0, 0.5)");
        }
        if !(1..=100).contains(&self.jpeg_quality) {
            return bad("JPEG quality must be in 1..=100");
        }
        Ok(())
    }
}
