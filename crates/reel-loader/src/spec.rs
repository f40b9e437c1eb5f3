//! What one training sample holds: per-camera frame offsets, per-stream state windows and
//! action chunks, each at its own rate, around an anchor time.

use std::collections::HashSet;
use std::path::Path;

use reel_manifest::SamplingRule;
use serde::{Deserialize, Serialize};

use crate::error::{LoaderError, Result};

/// A sample spec. The same struct is read from TOML (`testdata/spec.toml`):
///
/// ```toml
/// anchor_hz = 10.0
/// edge = "drop"
///
/// [[camera]]
/// name = "cam_high"
/// topic = "/camera/high/image_raw/compressed"
/// offsets_s = [-0.5, 0.0]
///
/// [[depth]]
/// name = "wrist_depth"
/// topic = "/camera/wrist/depth"
/// offsets_s = [0.0]
/// unit = "m"
///
/// [[proprio]]
/// name = "state"
/// topic = "/joint_states"
/// kind = "window"
/// steps = 200
/// hz = 200.0
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleSpec {
    /// Anchors per second of episode.
    pub anchor_hz: f64,
    /// What happens where a window leaves the episode.
    #[serde(default)]
    pub edge: EdgePolicy,
    /// Cameras, in output order.
    #[serde(default, rename = "camera")]
    pub cameras: Vec<CameraSpec>,
    /// Depth cameras, in output order (after the cameras).
    #[serde(default, rename = "depth")]
    pub depths: Vec<DepthSpec>,
    /// Numeric streams (state, actions, poses), in output order.
    #[serde(default, rename = "proprio")]
    pub proprio: Vec<ProprioSpec>,
}

/// Anchors whose windows leave the episode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgePolicy {
    /// Only anchors whose every window lies inside the episode.
    #[default]
    Drop,
    /// Anchors over the whole episode; elements outside it are zero with mask 0.
    Pad,
}

/// Frames of one camera.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraSpec {
    /// Tensor name.
    pub name: String,
    /// Topic in the canonical episode.
    pub topic: String,
    /// Frame times relative to the anchor, seconds.
    pub offsets_s: Vec<f64>,
    /// Output size `[width, height]`; the stream's own size when absent.
    #[serde(default)]
    pub size: Option<[usize; 2]>,
    /// Pixel layout of each frame.
    #[serde(default)]
    pub layout: Layout,
}

/// Frames of one depth camera: a `[k, height, width]` tensor per sample, `u16`
/// millimetres or `f32` metres.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DepthSpec {
    /// Tensor name.
    pub name: String,
    /// Topic in the canonical episode (a `reel.kind=depth` channel).
    pub topic: String,
    /// Frame times relative to the anchor, seconds.
    pub offsets_s: Vec<f64>,
    /// Unit of the tensor.
    #[serde(default)]
    pub unit: DepthTensorUnit,
}

/// Element type and unit of a depth tensor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DepthTensorUnit {
    /// `u16` as stored: millimetres (or `mono16` counts); 0 is no reading.
    #[default]
    Mm,
    /// `f32` metres (`mm / 1000`; no reading stays 0).
    M,
}

impl DepthSpec {
    /// Offsets from the anchor in nanoseconds.
    pub fn offsets_ns(&self) -> Vec<i64> {
        self.offsets_s.iter().map(|&s| seconds_to_ns(s)).collect()
    }
}

/// Pixel layout of a frame tensor (always u8 RGB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `[height, width, 3]`.
    #[default]
    Hwc,
    /// `[3, height, width]`.
    Chw,
}

/// Steps of one numeric stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProprioSpec {
    /// Tensor name.
    pub name: String,
    /// Topic in the canonical episode.
    pub topic: String,
    /// History ending at the anchor, or a chunk starting at it.
    pub kind: ProprioKind,
    /// Steps.
    pub steps: usize,
    /// Steps per second.
    pub hz: f64,
}

/// Where a numeric window sits relative to the anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProprioKind {
    /// `steps` samples ending at the anchor: `t - (steps-1)/hz ..= t`.
    Window,
    /// `steps` samples starting at the anchor: `t ..= t + (steps-1)/hz`.
    Chunk,
}

pub(crate) fn seconds_to_ns(s: f64) -> i64 {
    (s * 1e9).round() as i64
}

pub(crate) fn period_ns(hz: f64) -> i64 {
    ((1e9 / hz).round() as i64).max(1)
}

impl CameraSpec {
    /// Offsets from the anchor in nanoseconds.
    pub fn offsets_ns(&self) -> Vec<i64> {
        self.offsets_s.iter().map(|&s| seconds_to_ns(s)).collect()
    }
}

impl ProprioSpec {
    /// Offsets of each step from the anchor in nanoseconds.
    pub fn offsets_ns(&self) -> Vec<i64> {
        let period = period_ns(self.hz);
        let steps = self.steps as i64;
        match self.kind {
            ProprioKind::Window => (0..steps).map(|i| (i - (steps - 1)) * period).collect(),
            ProprioKind::Chunk => (0..steps).map(|i| i * period).collect(),
        }
    }
}

impl SampleSpec {
    /// Reads and validates a TOML spec.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let spec_err = |reason: String| LoaderError::Spec {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| spec_err(e.to_string()))?;
        let spec: Self = toml::from_str(&text).map_err(|e| spec_err(e.to_string()))?;
        spec.validate().map_err(spec_err)?;
        Ok(spec)
    }

    /// Parses and validates a TOML spec held in memory.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let spec_err = |reason: String| LoaderError::Spec {
            path: "<string>".into(),
            reason,
        };
        let spec: Self = toml::from_str(text).map_err(|e| spec_err(e.to_string()))?;
        spec.validate().map_err(spec_err)?;
        Ok(spec)
    }

    /// Checks rates, offsets and names; the reason names the offending entry.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(self.anchor_hz.is_finite() && self.anchor_hz > 0.0) {
            return Err(format!(
                "anchor_hz must be positive, not {}",
                self.anchor_hz
            ));
        }
        if self.cameras.is_empty() && self.depths.is_empty() && self.proprio.is_empty() {
            return Err("the spec asks for no camera and no numeric stream".into());
        }
        let mut names = HashSet::new();
        for c in &self.cameras {
            if c.offsets_s.is_empty() || c.offsets_s.iter().any(|o| !o.is_finite()) {
                return Err(format!(
                    "camera {}: offsets_s must be finite, at least one",
                    c.name
                ));
            }
            if c.size
                .is_some_and(|[w, h]| w == 0 || h == 0 || w % 2 == 1 || h % 2 == 1)
            {
                return Err(format!("camera {}: size must be even and non-zero", c.name));
            }
            if !names.insert(c.name.as_str()) {
                return Err(format!("name {} is used twice", c.name));
            }
        }
        for d in &self.depths {
            if d.offsets_s.is_empty() || d.offsets_s.iter().any(|o| !o.is_finite()) {
                return Err(format!(
                    "depth {}: offsets_s must be finite, at least one",
                    d.name
                ));
            }
            if !names.insert(d.name.as_str()) {
                return Err(format!("name {} is used twice", d.name));
            }
        }
        for p in &self.proprio {
            if p.steps == 0 || !(p.hz.is_finite() && p.hz > 0.0) {
                return Err(format!("{}: steps and hz must be positive", p.name));
            }
            if !names.insert(p.name.as_str()) {
                return Err(format!("name {} is used twice", p.name));
            }
        }
        Ok(())
    }

    /// How far before and after its anchor a sample reaches, in nanoseconds.
    pub fn reach_ns(&self) -> (u64, u64) {
        let offsets = self
            .cameras
            .iter()
            .flat_map(CameraSpec::offsets_ns)
            .chain(self.depths.iter().flat_map(DepthSpec::offsets_ns))
            .chain(self.proprio.iter().flat_map(ProprioSpec::offsets_ns));
        let (mut before, mut after) = (0i64, 0i64);
        for o in offsets {
            before = before.max(-o);
            after = after.max(o);
        }
        (before as u64, after as u64)
    }

    /// The anchors this spec samples: every `1/anchor_hz` from the episode start, keeping
    /// every window inside the episode (`edge = "drop"`) or not (`edge = "pad"`). The lead
    /// is rounded up to whole anchor periods so anchors stay on the episode's time grid:
    /// with rates that divide each other every element then falls on a grid point.
    pub fn sampling_rule(&self) -> SamplingRule {
        let period = period_ns(self.anchor_hz) as u64;
        let (before_ns, after_ns) = match self.edge {
            EdgePolicy::Drop => {
                let (before, after) = self.reach_ns();
                (before.div_ceil(period) * period, after)
            }
            EdgePolicy::Pad => (0, 0),
        };
        SamplingRule {
            period_ns: period,
            before_ns,
            after_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
anchor_hz = 10.0
[[camera]]
name = "high"
topic = "/camera/high"
offsets_s = [-0.5, 0.0]
layout = "chw"
[[depth]]
name = "depth"
topic = "/camera/depth"
offsets_s = [0.0]
unit = "m"
[[proprio]]
name = "state"
topic = "/joint_states"
kind = "window"
steps = 200
hz = 200.0
[[proprio]]
name = "action"
topic = "/action"
kind = "chunk"
steps = 50
hz = 50.0
"#;

    #[test]
    fn reads_a_spec_and_derives_its_reach_and_rule() {
        let spec = SampleSpec::from_toml_str(SPEC).expect("parses");
        assert_eq!(spec.cameras[0].layout, Layout::Chw);
        assert_eq!(spec.depths[0].unit, DepthTensorUnit::M);
        assert_eq!(spec.edge, EdgePolicy::Drop);
        let state = spec.proprio[0].offsets_ns();
        assert_eq!(state.len(), 200);
        assert_eq!((state[0], state[199]), (-995_000_000, 0));
        let action = spec.proprio[1].offsets_ns();
        assert_eq!((action[0], action[49]), (0, 980_000_000));
        assert_eq!(spec.reach_ns(), (995_000_000, 980_000_000));
        let rule = spec.sampling_rule();
        assert_eq!(
            (rule.period_ns, rule.before_ns, rule.after_ns),
            (100_000_000, 1_000_000_000, 980_000_000)
        );
    }

    #[test]
    fn rejects_bad_specs_with_the_reason() {
        for (edit, needle) in [
            (
                SPEC.replace("anchor_hz = 10.0", "anchor_hz = 0.0"),
                "anchor_hz",
            ),
            (SPEC.replace("steps = 50", "steps = 0"), "action"),
            (
                SPEC.replace("name = \"action\"", "name = \"state\""),
                "twice",
            ),
            (
                SPEC.replace("offsets_s = [-0.5, 0.0]", "offsets_s = []"),
                "high",
            ),
            (
                SPEC.replace("unit = \"m\"", "unit = \"cm\""),
                "unknown variant",
            ),
            (SPEC.replace("name = \"depth\"", "name = \"high\""), "twice"),
            (
                SPEC.replace("kind = \"chunk\"", "kind = \"future\""),
                "unknown variant",
            ),
            (
                SPEC.replace("hz = 50.0", "hz = 50.0\nrate = 3"),
                "unknown field",
            ),
        ] {
            let err = SampleSpec::from_toml_str(&edit)
                .expect_err("invalid")
                .to_string();
            assert!(err.contains(needle), "{err} should mention {needle}");
        }
    }
}
