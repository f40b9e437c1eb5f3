//! `meta/info.json`: the dataset's format, rate and features, each feature's value names,
//! and what a numeric feature measures.

use std::collections::BTreeMap;

use reel_mcap::SignalKind;
use serde::Deserialize;

/// One feature of `meta/info.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct Feature {
    /// `video`, `image`, `float32`, `int64`, `bool`, `string`…
    pub dtype: String,
    /// Shape of one frame's value.
    #[serde(default)]
    pub shape: Vec<usize>,
    /// Value names: a list, or a map with one list (`{"motors": […]}`), or none.
    #[serde(default)]
    pub names: Option<serde_json::Value>,
    /// Video settings (`video.codec`, `video.is_depth_map`…).
    #[serde(default)]
    pub info: Option<serde_json::Value>,
}

impl Feature {
    /// Value names for `count` values: the feature's own when it names each, else the
    /// key with the value's index.
    pub(super) fn value_names(&self, key: &str, count: usize) -> Vec<String> {
        let list = match &self.names {
            Some(serde_json::Value::Array(names)) => Some(names),
            Some(serde_json::Value::Object(map)) if map.len() == 1 => {
                map.values().next().and_then(serde_json::Value::as_array)
            }
            _ => None,
        };
        let named: Option<Vec<String>> = list.and_then(|names| {
            names
                .iter()
                .map(|n| n.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        });
        match named {
            Some(names)
                if names.len() == count
                    && names.iter().all(|n| !n.is_empty() && !n.contains(',')) =>
            {
                names
            }
            _ if count == 1 => vec![key.to_owned()],
            _ => (0..count).map(|i| format!("{key}.{i}")).collect(),
        }
    }

    pub(super) fn is_depth(&self) -> bool {
        let info = self.info.as_ref();
        ["video.is_depth_map", "is_depth_map"].iter().any(|k| {
            info.and_then(|i| i.get(k))
                .and_then(serde_json::Value::as_bool)
                == Some(true)
        })
    }
}

/// `meta/info.json`: what an import reads of it.
#[derive(Debug, Clone, Deserialize)]
pub struct Info {
    /// Format version (`v3.0`).
    pub codebase_version: String,
    /// Frames per second of every feature.
    pub fps: f64,
    /// The robot.
    #[serde(default)]
    pub robot_type: Option<String>,
    /// Features by key.
    pub features: BTreeMap<String, Feature>,
    /// Data file path template.
    #[serde(default)]
    pub data_path: Option<String>,
    /// Video file path template.
    #[serde(default)]
    pub video_path: Option<String>,
    /// Episodes per chunk folder (v2: the folder of an episode's files).
    #[serde(default = "default_chunks_size")]
    pub chunks_size: i64,
}

fn default_chunks_size() -> i64 {
    1000
}

/// What a numeric feature measures: LeRobot's names say it.
pub(super) fn kind_of(key: &str) -> SignalKind {
    if key == "action" || key.starts_with("action.") {
        SignalKind::Action
    } else if key == "observation.state" {
        SignalKind::State
    } else {
        SignalKind::Signal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_names_come_from_the_feature_when_it_names_each_value() {
        let feature = |names: serde_json::Value| Feature {
            dtype: "float32".into(),
            shape: vec![2],
            names: Some(names),
            info: None,
        };
        let listed = feature(serde_json::json!(["a.pos", "b.pos"]));
        assert_eq!(
            listed.value_names("observation.state", 2),
            ["a.pos", "b.pos"]
        );
        let mapped = feature(serde_json::json!({"motors": ["m0", "m1"]}));
        assert_eq!(mapped.value_names("action", 2), ["m0", "m1"]);
        assert_eq!(
            listed.value_names("action", 3),
            ["action.0", "action.1", "action.2"]
        );
        assert_eq!(kind_of("action"), SignalKind::Action);
        assert_eq!(kind_of("observation.state"), SignalKind::State);
        assert_eq!(kind_of("observation.environment_state"), SignalKind::Signal);
    }
}
