//! The `episode` record: the episode's own fields (id, robot, task, what its source
//! recorded) and the format version and time span the writer adds.

use std::collections::BTreeMap;

use super::{Fields, RecordError};

/// The `episode` metadata record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EpisodeRecord {
    /// Canonical format version the file was written in.
    pub format_version: String,
    /// First log time of any stream (ns).
    pub start_ns: u64,
    /// Last log time of any stream (ns).
    pub end_ns: u64,
    /// Every other field, as the landing log, importer or pipeline gave it
    /// (`episode_id`, `robot_id`, `task`, provenance...).
    pub fields: BTreeMap<String, String>,
}

const FORMAT_VERSION: &str = "reel.format_version";
const START_NS: &str = "start_ns";
const END_NS: &str = "end_ns";
const EPISODE_ID: &str = "episode_id";
const ROBOT_ID: &str = "robot_id";
const TASK: &str = "task";

impl EpisodeRecord {
    /// The record's name in the file.
    pub const NAME: &'static str = "episode";

    /// The keys the writer sets, and the well-known fields read by name.
    pub const KEYS: [&'static str; 6] =
        [FORMAT_VERSION, START_NS, END_NS, EPISODE_ID, ROBOT_ID, TASK];

    /// The episode's id, when its source gave one.
    pub fn episode_id(&self) -> Option<&str> {
        self.field(EPISODE_ID)
    }

    /// The robot that recorded it, when its source said.
    pub fn robot_id(&self) -> Option<&str> {
        self.field(ROBOT_ID)
    }

    /// The task it shows, when its source said.
    pub fn task(&self) -> Option<&str> {
        self.field(TASK)
    }

    fn field(&self, key: &str) -> Option<&str> {
        self.fields
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The record as written: the fields, then the writer's keys over them.
    pub fn to_metadata(&self) -> BTreeMap<String, String> {
        let mut map = self.fields.clone();
        map.insert(FORMAT_VERSION.to_owned(), self.format_version.clone());
        map.insert(START_NS.to_owned(), self.start_ns.to_string());
        map.insert(END_NS.to_owned(), self.end_ns.to_string());
        map
    }

    /// Parses the record; the format version and time span are required.
    pub fn parse(metadata: &BTreeMap<String, String>) -> Result<Self, RecordError> {
        let fields = Fields::new(Self::NAME, metadata);
        let record = Self {
            format_version: fields.text(FORMAT_VERSION)?.to_owned(),
            start_ns: fields.number(START_NS)?,
            end_ns: fields.number(END_NS)?,
            fields: metadata
                .iter()
                .filter(|(k, _)| ![FORMAT_VERSION, START_NS, END_NS].contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        };
        if record.start_ns > record.end_ns {
            return Err(fields.error(format!(
                "it ends ({}) before it starts ({})",
                record.end_ns, record.start_ns
            )));
        }
        Ok(record)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    #[test]
    fn it_parses_back_to_what_was_written() {
        let record = EpisodeRecord {
            format_version: "3".into(),
            start_ns: 5,
            end_ns: 9,
            fields: BTreeMap::from([
                ("task".into(), "fold the towel".into()),
                ("robot_id".into(), String::new()),
            ]),
        };
        let parsed = EpisodeRecord::parse(&record.to_metadata()).unwrap();
        assert_eq!(parsed, record);
        assert_eq!(parsed.task(), Some("fold the towel"));
        assert_eq!(parsed.robot_id(), None, "an empty field is no field");
    }

    #[test]
    fn a_missing_span_is_named() {
        let metadata = BTreeMap::from([(FORMAT_VERSION.to_owned(), "3".to_owned())]);
        assert_eq!(
            EpisodeRecord::parse(&metadata).unwrap_err().to_string(),
            "episode: no `start_ns`"
        );
    }
}
