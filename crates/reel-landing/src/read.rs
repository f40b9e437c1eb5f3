//! Reading landing logs as robots record them: MCAP (ROS 2 `cdr` + `ros2msg`, Foxglove
//! protobuf and JSON) and rosbag2 sqlite3, decoded from the schemas the log carries.
//!
//! Each topic is decoded by its schema ([`crate::ros2msg`], [`crate::protobuf`],
//! [`crate::json`]) into one [`crate::value::Value`] tree, then recognised by its message
//! type ([`crate::interpret`]) as a camera or as numeric streams. One message that fails
//! costs that message (counted in [`LandingEpisode::problems`]); a topic that nothing
//! reads, or that fails wholly, is kept as recorded in [`LandingEpisode::other`], never
//! dropped.

use bytes::Bytes;
use reel_mcap::{Error, Result};

use crate::assemble::{Assembler, ChannelInfo};
use crate::episode::LandingEpisode;
use crate::rosbag2::{Rosbag2Metadata, read_rosbag2};

/// Parses a landing MCAP held in memory. `skip(topic)` leaves topics out (listed in
/// [`LandingEpisode::skipped`]); every other topic is read or kept as recorded.
pub fn read_landing(
    name: &str,
    bytes: &[u8],
    skip: &dyn Fn(&str) -> bool,
) -> Result<LandingEpisode> {
    let mut assembler = Assembler::new(skip);
    push_mcap(&mut assembler, name, bytes)?;
    Ok(assembler.finish())
}

/// Several MCAP files of one recording (a rosbag2 bag split by size or duration) as one
/// episode: topics match across files by name.
pub fn read_split_mcap(
    files: &[(String, Bytes)],
    skip: &dyn Fn(&str) -> bool,
) -> Result<LandingEpisode> {
    let mut assembler = Assembler::new(skip);
    for (name, bytes) in files {
        push_mcap(&mut assembler, name, bytes)?;
    }
    Ok(assembler.finish())
}

/// Feeds one MCAP's messages to `assembler`, channels keyed by topic so split files of
/// one recording join up; its metadata records and the chunks that repeated an earlier
/// one are added to the assembler's.
///
/// One linear pass over the records, trusting nothing in the summary: metadata comes from
/// the Metadata records themselves (a file whose summary is missing, damaged or without a
/// metadata index keeps its robot and task), every chunk's CRC is checked, and a chunk
/// that repeats an earlier one byte for byte (a writer or copy fault) is read once, so its
/// messages are not doubled.
fn push_mcap(assembler: &mut Assembler<'_>, name: &str, bytes: &[u8]) -> Result<()> {
    let mut channels = mcap::read::ChannelAccumulator::default();
    let duplicate_chunks = reel_mcap::for_each_record(name, bytes, |record| {
        if let mcap::records::Record::Metadata(record) = record {
            assembler.metadata.insert(record.name, record.metadata);
            return Ok(());
        }
        push_record(assembler, &mut channels, record).map_err(|source| Error::Mcap {
            name: name.to_owned(),
            source,
        })
    })?;
    assembler.duplicate_chunks += duplicate_chunks;
    Ok(())
}

/// One record of the data section: schemas and channels are linked (with mcap's checks),
/// messages go to the assembler, the rest is not needed here.
fn push_record(
    assembler: &mut Assembler<'_>,
    channels: &mut mcap::read::ChannelAccumulator<'static>,
    record: mcap::records::Record<'_>,
) -> std::result::Result<(), mcap::McapError> {
    use mcap::records::Record;
    match record {
        Record::Schema { header, data } => channels.add_schema_from_slice(header, &data),
        Record::Channel(channel) => channels.add_channel(channel),
        Record::Message { header, data } => {
            let channel =
                channels
                    .get(header.channel_id)
                    .ok_or(mcap::McapError::UnknownChannel(
                        header.sequence,
                        header.channel_id,
                    ))?;
            assembler.push_topic(
                &channel.topic,
                || {
                    let (schema, schema_encoding, schema_data) = channel
                        .schema
                        .as_ref()
                        .map(|s| {
                            (
                                s.name.clone(),
                                s.encoding.clone(),
                                Bytes::copy_from_slice(&s.data),
                            )
                        })
                        .unwrap_or_default();
                    ChannelInfo {
                        topic: channel.topic.clone(),
                        schema,
                        schema_encoding,
                        schema_data,
                        message_encoding: channel.message_encoding.clone(),
                        metadata: channel.metadata.clone(),
                    }
                },
                header.log_time,
                header.publish_time,
                &data,
            );
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether `key` names a rosbag2 recording: its `metadata.yaml` (the folder holds the
/// `.db3` files it lists).
pub fn is_rosbag2(key: &str) -> bool {
    key == "metadata.yaml" || key.ends_with("/metadata.yaml")
}

/// The name a landing recording goes by: an MCAP's key without `.mcap`, a rosbag2
/// recording's folder however the bag is named (`robot-a/ep-7.mcap` → `robot-a/ep-7`;
/// `bags/run-3/metadata.yaml`, `bags/run-3/run-3_0.db3` and `bags/run-3/` → `bags/run-3`).
pub fn recording_stem(key: &str) -> &str {
    let folder_of = |file: &str| {
        let folder = key.strip_suffix(file).unwrap_or(key).trim_end_matches('/');
        if folder.is_empty() { key } else { folder }
    };
    if is_rosbag2(key) {
        folder_of("metadata.yaml")
    } else if key.ends_with(".db3") {
        folder_of(key.rsplit('/').next().unwrap_or(key))
    } else if key.ends_with('/') {
        folder_of("")
    } else {
        key.strip_suffix(".mcap").unwrap_or(key)
    }
}

/// The key of the recording `key` names in `store`, however ROS 2 names a bag: its folder
/// (with or without a trailing `/`), its `metadata.yaml` or any of its `.db3` files all
/// name the folder's `metadata.yaml`, so the split files of one recording are one episode.
/// Any other key names itself (an MCAP file).
pub fn recording_key(store: &reel_io::Store, key: &str) -> Result<String> {
    if is_rosbag2(key) || key.ends_with(".mcap") {
        return Ok(key.to_owned());
    }
    let names_bag = key.is_empty() || key.ends_with('/') || key.ends_with(".db3");
    let folder = if key.ends_with(".db3") {
        key.rfind('/').map_or("", |i| &key[..=i]).to_owned()
    } else if names_bag {
        key.to_owned()
    } else {
        format!("{key}/")
    };
    let metadata = format!("{folder}metadata.yaml");
    match store.len_of(&metadata) {
        Ok(_) => Ok(metadata),
        Err(reel_io::Error::NotFound { .. }) if names_bag => Err(Error::Corrupt {
            name: store.object_uri(key),
            reason: format!(
                "a rosbag2 bag is read through its metadata.yaml, and {} has none",
                store.object_uri(&folder)
            ),
        }),
        Err(e) if names_bag => Err(e.into()),
        // Not a bag's folder: the object itself (read next, which reports what is wrong).
        Err(_) => Ok(key.to_owned()),
    }
}

/// A landing recording's bytes, fetched: one MCAP, or the `.db3` files of a rosbag2
/// recording in `metadata.yaml` order. Fetching is separate from parsing, so a caller can
/// fingerprint or measure what it read.
#[derive(Debug, Clone)]
pub enum LandingFiles {
    /// One MCAP file.
    Mcap {
        /// Its name (URI), used in errors.
        name: String,
        /// Its bytes.
        bytes: Bytes,
    },
    /// A rosbag2 recording.
    Rosbag2 {
        /// `sqlite3` (`.db3` files) or `mcap`.
        storage: String,
        /// `(name, bytes)` of each file, in `metadata.yaml` order.
        files: Vec<(String, Bytes)>,
    },
}

impl LandingFiles {
    /// Fetches the recording at `key` of `store`: an MCAP, or a rosbag2 bag named by its
    /// folder, its `metadata.yaml` or one of its `.db3` files ([`recording_key`]).
    pub fn fetch(store: &reel_io::Store, key: &str) -> Result<Self> {
        let key = &recording_key(store, key)?;
        if !is_rosbag2(key) {
            let name = store.object_uri(key);
            let bytes = store.read(key)?;
            if let Some(reason) = reel_mcap::not_mcap(&bytes) {
                return Err(Error::Corrupt {
                    name,
                    reason: reason.into(),
                });
            }
            return Ok(Self::Mcap { name, bytes });
        }
        let name = store.object_uri(key);
        let text = store.read(key)?;
        let text = std::str::from_utf8(&text).map_err(|_| Error::Corrupt {
            name: name.clone(),
            reason: "metadata.yaml is not UTF-8".into(),
        })?;
        let metadata = Rosbag2Metadata::parse(&name, text)?;
        if !matches!(metadata.storage.as_str(), "sqlite3" | "mcap")
            || !metadata.compression.is_empty()
        {
            return Err(Error::Corrupt {
                name,
                reason: format!(
                    "rosbag2 storage `{}`{} is not read; record with sqlite3 or mcap storage, uncompressed (MCAP compresses its own chunks)",
                    metadata.storage,
                    if metadata.compression.is_empty() {
                        String::new()
                    } else {
                        format!(" compressed with {}", metadata.compression)
                    }
                ),
            });
        }
        let folder = key.strip_suffix("metadata.yaml").unwrap_or("");
        let files = metadata
            .files
            .iter()
            .map(|file| {
                let file_key = format!("{folder}{file}");
                Ok((store.object_uri(&file_key), store.read(&file_key)?))
            })
            .collect::<Result<_>>()?;
        Ok(Self::Rosbag2 {
            storage: metadata.storage,
            files,
        })
    }

    /// The bytes of every file, in order.
    pub fn parts(&self) -> Vec<&[u8]> {
        match self {
            Self::Mcap { bytes, .. } => vec![bytes],
            Self::Rosbag2 { files, .. } => files.iter().map(|(_, b)| &b[..]).collect(),
        }
    }

    /// Total bytes.
    pub fn len(&self) -> u64 {
        self.parts().iter().map(|p| p.len() as u64).sum()
    }

    /// Whether the recording has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parses the recording; `skip(topic)` leaves topics out.
    pub fn read(&self, skip: &dyn Fn(&str) -> bool) -> Result<LandingEpisode> {
        match self {
            Self::Mcap { name, bytes } => read_landing(name, bytes, skip),
            Self::Rosbag2 { storage, files } if storage == "mcap" => read_split_mcap(files, skip),
            Self::Rosbag2 { files, .. } => read_rosbag2(files, skip),
        }
    }
}

/// Fetches and parses the landing recording at `key` in `store` ([`LandingFiles`]);
/// returns the episode and the recording's bytes.
pub fn read_landing_object(
    store: &reel_io::Store,
    key: &str,
    skip: &dyn Fn(&str) -> bool,
) -> Result<(LandingEpisode, u64)> {
    let files = LandingFiles::fetch(store, key)?;
    Ok((files.read(skip)?, files.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_are_named_after_their_file_or_bag_folder() {
        assert_eq!(recording_stem("robot-a/ep-7.mcap"), "robot-a/ep-7");
        assert_eq!(recording_stem("bags/run-3/metadata.yaml"), "bags/run-3");
        assert_eq!(recording_stem("metadata.yaml"), "metadata.yaml");
        assert_eq!(recording_stem("bags/run-3/run-3_1.db3"), "bags/run-3");
        assert_eq!(recording_stem("bags/run-3/"), "bags/run-3");
        assert!(is_rosbag2("run-3/metadata.yaml") && !is_rosbag2("run-3/metadata.yaml.bak"));
    }

    #[test]
    fn rosbag2_metadata_names_its_files_and_storage() {
        let text = "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: sqlite3\n  \
                    relative_file_paths:\n  - run_0.db3\n  - run_1.db3\n  message_count: 12\n  \
                    compression_format: ''\n";
        let meta = Rosbag2Metadata::parse("m.yaml", text).expect("parses");
        assert_eq!(meta.files, ["run_0.db3", "run_1.db3"]);
        assert_eq!((meta.storage.as_str(), meta.message_count), ("sqlite3", 12));
        let err = Rosbag2Metadata::parse("m.yaml", "a: [1").expect_err("bad YAML");
        assert!(err.to_string().contains("m.yaml"), "{err}");
    }
}
