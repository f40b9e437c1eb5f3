//! The `reel.layout` record: how the file's chunks are cut (layout, topic groups, chunk
//! windows), and the camera windows every camera's keyframes start.

use std::collections::BTreeMap;

use super::{Fields, RecordError};
use crate::keys;

/// Where camera chunk windows start: `window = (log_time - origin_ns) / window_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CameraWindows {
    /// Origin of the windows (ns).
    pub origin_ns: u64,
    /// Length of a window (ns).
    pub window_ns: u64,
}

impl CameraWindows {
    /// The window of a log time (times before the origin are in window 0).
    pub fn of(&self, log_time: u64) -> u64 {
        log_time.saturating_sub(self.origin_ns) / self.window_ns.max(1)
    }
}

/// The `reel.layout` metadata record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutRecord {
    /// Canonical format version the file was written in.
    pub format_version: String,
    /// Chunk layout (`topic-groups`, `interleaved`, `topic-per-chunk`).
    pub layout: String,
    /// Each topic group's topics.
    pub groups: BTreeMap<String, Vec<String>>,
    /// Origin of the chunk windows (ns): the episode's earliest log time.
    pub origin_ns: u64,
    /// Origin of the camera windows when not `origin_ns` (format 3): the first keyframe of
    /// a camera kept as recorded.
    pub camera_origin_ns: Option<u64>,
    /// Length of a camera chunk window (ns), positive.
    pub camera_window_ns: u64,
    /// Length of the other groups' chunk windows (ns), positive.
    pub signal_window_ns: u64,
}

const FORMAT_VERSION: &str = "format_version";
const LAYOUT: &str = "layout";
const GROUPS: &str = "groups";
const ORIGIN_NS: &str = "origin_ns";
const CAMERA_ORIGIN_NS: &str = "camera_origin_ns";
const CAMERA_WINDOW_NS: &str = "camera_window_ns";
const SIGNAL_WINDOW_NS: &str = "signal_window_ns";

impl LayoutRecord {
    /// The record's name in the file.
    pub const NAME: &'static str = keys::LAYOUT_RECORD;

    /// Every key of the record.
    pub const KEYS: [&'static str; 7] = [
        FORMAT_VERSION,
        LAYOUT,
        GROUPS,
        ORIGIN_NS,
        CAMERA_ORIGIN_NS,
        CAMERA_WINDOW_NS,
        SIGNAL_WINDOW_NS,
    ];

    /// The windows every camera's chunks follow: a keyframe starts each.
    pub fn camera_windows(&self) -> CameraWindows {
        CameraWindows {
            origin_ns: self.camera_origin_ns.unwrap_or(self.origin_ns),
            window_ns: self.camera_window_ns,
        }
    }

    /// The record as written.
    pub fn to_metadata(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::from([
            (FORMAT_VERSION.to_owned(), self.format_version.clone()),
            (LAYOUT.to_owned(), self.layout.clone()),
            (
                GROUPS.to_owned(),
                serde_json::to_string(&self.groups).unwrap_or_default(),
            ),
            (ORIGIN_NS.to_owned(), self.origin_ns.to_string()),
            (
                CAMERA_WINDOW_NS.to_owned(),
                self.camera_window_ns.to_string(),
            ),
            (
                SIGNAL_WINDOW_NS.to_owned(),
                self.signal_window_ns.to_string(),
            ),
        ]);
        if let Some(origin) = self.camera_origin_ns {
            map.insert(CAMERA_ORIGIN_NS.to_owned(), origin.to_string());
        }
        map
    }

    /// Parses the record; every key but `camera_origin_ns` is required, and the windows
    /// must be positive.
    pub fn parse(metadata: &BTreeMap<String, String>) -> Result<Self, RecordError> {
        let fields = Fields::new(keys::LAYOUT_RECORD, metadata);
        let groups = fields.text(GROUPS)?;
        let groups = serde_json::from_str(groups)
            .map_err(|e| fields.error(format!("`{GROUPS}` is not a JSON map of topics: {e}")))?;
        let positive = |key: &str| -> Result<u64, RecordError> {
            match fields.number(key)? {
                0 => Err(fields.error(format!("`{key}` is 0"))),
                window => Ok(window),
            }
        };
        Ok(Self {
            format_version: fields.text(FORMAT_VERSION)?.to_owned(),
            layout: fields.text(LAYOUT)?.to_owned(),
            groups,
            origin_ns: fields.number(ORIGIN_NS)?,
            camera_origin_ns: fields.optional_number(CAMERA_ORIGIN_NS)?,
            camera_window_ns: positive(CAMERA_WINDOW_NS)?,
            signal_window_ns: positive(SIGNAL_WINDOW_NS)?,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    fn record() -> LayoutRecord {
        LayoutRecord {
            format_version: "3".into(),
            layout: "topic-groups".into(),
            groups: BTreeMap::from([("cameras".into(), vec!["/cam".into()])]),
            origin_ns: 1_000,
            camera_origin_ns: Some(1_500),
            camera_window_ns: 1_000_000_000,
            signal_window_ns: 2_000_000_000,
        }
    }

    #[test]
    fn it_parses_back_to_what_was_written() {
        let written = record();
        assert_eq!(
            LayoutRecord::parse(&written.to_metadata()),
            Ok(written.clone())
        );
        let older = LayoutRecord {
            camera_origin_ns: None,
            ..written
        };
        assert_eq!(LayoutRecord::parse(&older.to_metadata()), Ok(older));
    }

    #[test]
    fn camera_windows_start_at_the_camera_origin_else_the_episode_origin() {
        let mut layout = record();
        assert_eq!(layout.camera_windows().origin_ns, 1_500);
        layout.camera_origin_ns = None;
        assert_eq!(
            layout.camera_windows(),
            CameraWindows {
                origin_ns: 1_000,
                window_ns: 1_000_000_000
            }
        );
    }

    #[test]
    fn a_zero_window_is_refused_by_name() {
        let mut metadata = record().to_metadata();
        metadata.insert(CAMERA_WINDOW_NS.into(), "0".into());
        assert_eq!(
            LayoutRecord::parse(&metadata).unwrap_err().to_string(),
            "reel.layout: `camera_window_ns` is 0"
        );
    }
}
