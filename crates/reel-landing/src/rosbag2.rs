//! rosbag2's sqlite3 storage: `metadata.yaml` naming the `.db3` files of one recording
//! (split by size or duration), each a database of `topics`, `messages` and (Iron and
//! later) `message_definitions`. Read with rusqlite (SQLite built in, so no system
//! library is needed) and yaml-rust2, the maintained YAML parser.

use std::collections::BTreeMap;
use std::io::Write;

use bytes::Bytes;
use reel_mcap::{Error, Result};

use crate::assemble::{Assembler, ChannelInfo};
use crate::episode::LandingEpisode;

/// What a rosbag2 `metadata.yaml` says about its recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rosbag2Metadata {
    /// `storage_identifier`: `sqlite3` or `mcap`.
    pub storage: String,
    /// The recording's files, relative to the bag folder, in order.
    pub files: Vec<String>,
    /// `compression_format` (empty when uncompressed).
    pub compression: String,
    /// `message_count`.
    pub message_count: u64,
}

impl Rosbag2Metadata {
    /// Parses `metadata.yaml`; `name` is used in errors.
    pub fn parse(name: &str, text: &str) -> Result<Self> {
        let bad = |reason: String| Error::Corrupt {
            name: name.to_owned(),
            reason,
        };
        let docs = yaml_rust2::YamlLoader::load_from_str(text)
            .map_err(|e| bad(format!("metadata.yaml does not parse: {e}")))?;
        let info = docs
            .first()
            .map(|d| &d["rosbag2_bagfile_information"])
            .filter(|i| !i.is_badvalue())
            .ok_or_else(|| bad("no `rosbag2_bagfile_information`".into()))?;
        let files: Vec<String> = info["relative_file_paths"]
            .as_vec()
            .ok_or_else(|| bad("no `relative_file_paths` list".into()))?
            .iter()
            .map(|f| f.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("a `relative_file_paths` entry is not a string".into()))?;
        if files.is_empty() {
            return Err(bad("`relative_file_paths` is empty".into()));
        }
        Ok(Self {
            storage: info["storage_identifier"]
                .as_str()
                .unwrap_or("sqlite3")
                .to_owned(),
            files,
            compression: info["compression_format"].as_str().unwrap_or("").to_owned(),
            message_count: info["message_count"].as_i64().unwrap_or(0).max(0) as u64,
        })
    }
}

/// Reads one recording's `.db3` files (`(name, bytes)` in `metadata.yaml` order) as one
/// landing episode. Topics are matched across files by name, so a recording split in
/// several files is one episode.
pub fn read_rosbag2(
    files: &[(String, Bytes)],
    skip: &dyn Fn(&str) -> bool,
) -> Result<LandingEpisode> {
    let mut assembler = Assembler::new(skip);
    for (name, bytes) in files {
        let bad = |reason: String| Error::Corrupt {
            name: name.clone(),
            reason,
        };
        let sql = |e: rusqlite::Error| bad(format!("not a readable rosbag2 database: {e}"));
        // SQLite reads files; the landing object is copied to a private temporary one.
        let mut file = tempfile::NamedTempFile::new().map_err(|e| bad(e.to_string()))?;
        file.write_all(bytes).map_err(|e| bad(e.to_string()))?;
        let db = rusqlite::Connection::open_with_flags(
            file.path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sql)?;
        let definitions = definitions(&db);
        let mut topics = BTreeMap::new();
        let mut statement = db
            .prepare("SELECT id, name, type, serialization_format FROM topics")
            .map_err(sql)?;
        let rows = statement
            .query_map([], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                ))
            })
            .map_err(sql)?;
        for row in rows {
            let (id, topic, ty, format) = row.map_err(sql)?;
            let (schema_encoding, schema_data) = definitions
                .get(&ty)
                .cloned()
                .unwrap_or_else(|| (String::new(), Bytes::new()));
            topics.insert(
                id,
                ChannelInfo {
                    topic,
                    schema: ty,
                    schema_encoding,
                    schema_data,
                    message_encoding: format,
                    metadata: Default::default(),
                },
            );
        }
        let mut statement = db
            .prepare("SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp, id")
            .map_err(sql)?;
        let mut rows = statement.query([]).map_err(sql)?;
        while let Some(row) = rows.next().map_err(sql)? {
            let topic_id: i64 = row.get(0).map_err(sql)?;
            let timestamp: i64 = row.get(1).map_err(sql)?;
            let data = row
                .get_ref(2)
                .map_err(sql)?
                .as_blob()
                .map_err(|e| bad(format!("message data is not a blob: {e}")))?;
            let info = topics.get(&topic_id).ok_or_else(|| {
                bad(format!(
                    "a message names topic id {topic_id}, which `topics` lacks"
                ))
            })?;
            let time = timestamp.max(0) as u64;
            assembler.push_topic(&info.topic, || info.clone(), time, time, data);
        }
    }
    Ok(assembler.finish())
}

/// `message_definitions` by type (rosbag2 Iron and later); older bags have none, and their
/// topics are kept as recorded.
fn definitions(db: &rusqlite::Connection) -> BTreeMap<String, (String, Bytes)> {
    let Ok(mut statement) = db.prepare(
        "SELECT topic_type, encoding, encoded_message_definition FROM message_definitions",
    ) else {
        return BTreeMap::new();
    };
    let Ok(rows) = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
        ))
    }) else {
        return BTreeMap::new();
    };
    rows.flatten()
        .map(|(ty, encoding, text)| (ty, (encoding, Bytes::from(text.into_bytes()))))
        .collect()
}
