//! Other HDF5 layouts, described by a TOML mapping: which groups are episodes, which
//! datasets are signals (and of what kind) and which are cameras.
//!
//! ```toml
//! fps = 30.0
//! episodes = "episodes/ep_*"    # groups that are episodes; absent: each file is one
//! task = "stack cups"
//! robot = "ur5e"
//!
//! [[signal]]
//! dataset = "joints"            # relative to the episode's group
//! kind = "state"                # state, action, pose or signal
//! names = ["shoulder", "elbow", "wrist"]
//!
//! [[signal]]
//! dataset = "gripper_command"
//! topic = "/gripper/command"    # default: the dataset's path
//! kind = "action"
//!
//! [[camera]]
//! dataset = "wrist_rgb"         # (frames, height, width, 3) uint8, or (frames, bytes) JPEG
//! ```

use serde::Deserialize;

use reel_mcap::SignalKind;

use crate::{Error, Result};

/// A mapping of an HDF5 layout onto topics.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// Frames per second of every dataset it names.
    pub fps: f64,
    /// The groups that are episodes: a path whose last part may end in `*`. Absent: each
    /// file is one episode.
    #[serde(default)]
    pub episodes: Option<String>,
    /// The task of every episode.
    #[serde(default)]
    pub task: String,
    /// The robot.
    #[serde(default)]
    pub robot: String,
    /// Numeric datasets.
    #[serde(default, rename = "signal")]
    pub signals: Vec<MappedSignal>,
    /// Picture datasets.
    #[serde(default, rename = "camera")]
    pub cameras: Vec<MappedCamera>,
}

/// A numeric dataset of a [`Mapping`]: (frames,) or (frames, values).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappedSignal {
    /// The dataset, relative to the episode's group.
    pub dataset: String,
    /// Its topic (default: `/` and the dataset's path).
    #[serde(default)]
    pub topic: Option<String>,
    /// `state`, `action`, `pose` or `signal`.
    #[serde(default = "signal_kind")]
    pub kind: String,
    /// Its value names (default: the dataset's name and the value's index).
    #[serde(default)]
    pub names: Option<Vec<String>>,
}

/// A picture dataset of a [`Mapping`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappedCamera {
    /// The dataset, relative to the episode's group.
    pub dataset: String,
    /// Its topic (default: `/` and the dataset's path).
    #[serde(default)]
    pub topic: Option<String>,
}

fn signal_kind() -> String {
    "signal".into()
}

impl Mapping {
    /// Parses a mapping; `name` names it in errors.
    pub fn parse(name: &str, text: &str) -> Result<Self> {
        let mapping: Self = toml::from_str(text)
            .map_err(|e| Error::dataset(name, format!("not an HDF5 mapping: {e}")))?;
        if !(mapping.fps.is_finite() && mapping.fps > 0.0) {
            return Err(Error::dataset(name, format!("fps is {}", mapping.fps)));
        }
        if mapping.signals.is_empty() && mapping.cameras.is_empty() {
            return Err(Error::dataset(name, "maps no signal and no camera"));
        }
        for signal in &mapping.signals {
            if SignalKind::from_name(&signal.kind).is_none() {
                return Err(Error::dataset(
                    name,
                    format!(
                        "{}: kind `{}` is not state, action, pose or signal",
                        signal.dataset, signal.kind
                    ),
                ));
            }
        }
        Ok(mapping)
    }
}

impl MappedSignal {
    pub(crate) fn kind(&self) -> SignalKind {
        SignalKind::from_name(&self.kind).unwrap_or(SignalKind::Signal)
    }

    pub(crate) fn topic(&self) -> String {
        self.topic
            .clone()
            .unwrap_or_else(|| format!("/{}", self.dataset.trim_start_matches('/')))
    }
}

impl MappedCamera {
    pub(crate) fn topic(&self) -> String {
        self.topic
            .clone()
            .unwrap_or_else(|| format!("/{}", self.dataset.trim_start_matches('/')))
    }
}
