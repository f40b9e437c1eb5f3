//! The canonical format's records, typed: each channel's metadata ([`ChannelInfo`]) and
//! the `episode`, `reel.layout` and `reel.streams` metadata records. Each is written and
//! parsed here alone (`to_metadata` and `parse`), so a key added to the format is one
//! edit, and every reader — the loader, `reel inspect`, the doctor, the exporters — gets
//! typed fields instead of looking up strings. `docs/FORMAT.md` is checked against the
//! keys listed here by a test.

mod channel;
mod episode;
mod layout;
mod streams;

pub use channel::{
    CameraInfo, ChannelContent, ChannelInfo, DepthInfo, SignalInfo, SignalKind, VideoOrigin,
};
pub use episode::EpisodeRecord;
pub use layout::{CameraWindows, LayoutRecord};
pub use streams::{StreamGrid, StreamsRecord, median_period_ns};

use std::collections::BTreeMap;

/// A record that does not parse: which record (or channel), and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{record}: {problem}")]
pub struct RecordError {
    /// The record's name, or `channel <topic>` for a channel's metadata.
    pub record: String,
    /// What is missing or malformed.
    pub problem: String,
}

/// A record's string map, read key by key with errors that name the record and key.
pub(crate) struct Fields<'a> {
    record: &'a str,
    map: &'a BTreeMap<String, String>,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(record: &'a str, map: &'a BTreeMap<String, String>) -> Self {
        Self { record, map }
    }

    pub(crate) fn error(&self, problem: impl Into<String>) -> RecordError {
        RecordError {
            record: self.record.to_owned(),
            problem: problem.into(),
        }
    }

    pub(crate) fn optional(&self, key: &str) -> Option<&'a str> {
        self.map.get(key).map(String::as_str)
    }

    pub(crate) fn text(&self, key: &str) -> Result<&'a str, RecordError> {
        self.optional(key)
            .ok_or_else(|| self.error(format!("no `{key}`")))
    }

    pub(crate) fn number<T: std::str::FromStr>(&self, key: &str) -> Result<T, RecordError> {
        let text = self.text(key)?;
        text.parse()
            .map_err(|_| self.error(format!("`{key}` is {text:?}, not a number")))
    }

    pub(crate) fn optional_number<T: std::str::FromStr>(
        &self,
        key: &str,
    ) -> Result<Option<T>, RecordError> {
        self.optional(key).map(|_| self.number(key)).transpose()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    /// `docs/FORMAT.md` names every record and every key the records write, so the
    /// document cannot fall behind the code.
    #[test]
    fn the_format_document_names_every_key() {
        let document = include_str!("../../../../docs/FORMAT.md");
        let grid = serde_json::to_value(StreamGrid::of(std::iter::empty())).unwrap();
        let grid_keys: Vec<&str> = grid
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let names = [EpisodeRecord::NAME, LayoutRecord::NAME, StreamsRecord::NAME];
        for key in ChannelInfo::KEYS
            .iter()
            .chain(&LayoutRecord::KEYS)
            .chain(&EpisodeRecord::KEYS)
            .chain(&names)
        {
            assert!(
                document.contains(&format!("`{key}`")) || document.contains(&format!("`{key}=")),
                "docs/FORMAT.md does not name `{key}`"
            );
        }
        for key in grid_keys {
            assert!(
                document.contains(&format!("\"{key}\"")),
                "docs/FORMAT.md does not name the stream grid's \"{key}\""
            );
        }
    }
}
