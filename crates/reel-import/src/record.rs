//! What every importer's `episode` record starts with, and the text forms of its values.

use std::collections::BTreeMap;

use crate::keys;

/// Where an episode comes from: the record keys every importer writes.
pub(crate) struct EpisodeSource<'a> {
    pub id: &'a str,
    /// `rlds`, `zarr`…
    pub format: &'a str,
    pub dataset: &'a str,
    pub revision: &'a str,
    pub index: usize,
    pub fps: f64,
}

impl EpisodeSource<'_> {
    /// The record: `episode_id`, empty `task` and `robot_id`, and the `source…` keys.
    pub(crate) fn record(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("episode_id".to_owned(), self.id.to_owned()),
            ("task".to_owned(), String::new()),
            ("robot_id".to_owned(), String::new()),
            (keys::SOURCE.to_owned(), self.format.to_owned()),
            (keys::SOURCE_DATASET.to_owned(), self.dataset.to_owned()),
            (keys::SOURCE_REVISION.to_owned(), self.revision.to_owned()),
            (
                keys::SOURCE_EPISODE_INDEX.to_owned(),
                self.index.to_string(),
            ),
            (keys::FPS.to_owned(), self.fps.to_string()),
        ])
    }
}

/// Numbers as record text: the one, or a JSON list.
pub(crate) fn number_text(values: &[f64]) -> String {
    match values {
        [one] => one.to_string(),
        many => serde_json::to_string(many).unwrap_or_default(),
    }
}

/// A name as one path segment or id part: characters other than ASCII letters, digits and
/// `-` as `_`.
pub(crate) fn path_segment(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
