//! Landing messages in, streams out: each topic decoded by its schema and recognised by
//! its type, whatever container the messages came from (MCAP or rosbag2).

use std::collections::BTreeMap;

use bytes::Bytes;
use reel_mcap::{RecordedMessage, RecordedTopic, Sample, SignalKind};

use crate::episode::{
    ImageEncoding, LandingCamera, LandingEpisode, LandingFrame, LandingSignal, StreamProblem,
};
use crate::interpret::{self, Interpretation};
use crate::protobuf::ProtobufSchema;
use crate::ros2msg::{Ros2Schema, normalize_type};
use crate::value::Fields;

/// A topic as its container describes it.
#[derive(Debug, Clone)]
pub(crate) struct ChannelInfo {
    pub topic: String,
    pub schema: String,
    pub schema_encoding: String,
    pub schema_data: Bytes,
    pub message_encoding: String,
    /// The channel's metadata (MCAP; empty for rosbag2).
    pub metadata: BTreeMap<String, String>,
}

enum Decoder {
    Ros2(Ros2Schema),
    Protobuf(ProtobufSchema),
    Json,
}

impl Decoder {
    fn for_channel(info: &ChannelInfo) -> Result<Self, String> {
        match (
            info.message_encoding.as_str(),
            info.schema_encoding.as_str(),
        ) {
            ("cdr", "ros2msg") => {
                let text = std::str::from_utf8(&info.schema_data)
                    .map_err(|_| "ros2msg schema is not UTF-8".to_owned())?;
                Ros2Schema::parse(&info.schema, text)
                    .map(Self::Ros2)
                    .map_err(|e| format!("schema does not parse: {e}"))
            }
            ("cdr", "") => Err(format!(
                "no message definition for `{}` in the log (rosbag2 before Iron stores none)",
                info.schema
            )),
            ("cdr", other) => Err(format!("`{other}` schemas are not read yet")),
            ("protobuf", _) => {
                ProtobufSchema::parse(&info.schema, &info.schema_data).map(Self::Protobuf)
            }
            ("json", _) => Ok(Self::Json),
            (other, _) => Err(format!("message encoding `{other}` is not read")),
        }
    }

    fn decode(&self, data: &[u8]) -> Result<Fields, String> {
        match self {
            Self::Ros2(schema) => schema.decode(data),
            Self::Protobuf(schema) => schema.decode(data),
            Self::Json => crate::json::decode(data),
        }
    }
}

enum State {
    Skipped,
    /// Kept as recorded, with the reason.
    Recorded(String),
    Reading {
        decoder: Decoder,
        interpretation: Option<Interpretation>,
    },
}

struct Topic {
    info: ChannelInfo,
    state: State,
    messages: u64,
    bad: u64,
    first_bad: Option<(String, u64)>,
    /// Whether a message has decoded; until then messages are also kept as recorded, so a
    /// topic that never decodes is kept whole.
    established: bool,
    recorded: Vec<RecordedMessage>,
    /// Whether a schema failure made this topic recorded (reported as a problem).
    schema_failed: bool,
}

impl Topic {
    fn open(skip: &dyn Fn(&str) -> bool, info: ChannelInfo) -> Self {
        let (state, schema_failed) = if skip(&info.topic) {
            (State::Skipped, false)
        } else {
            match Decoder::for_channel(&info) {
                Ok(decoder) => (
                    State::Reading {
                        decoder,
                        interpretation: Interpretation::of_type(&normalize_type(&info.schema)),
                    },
                    false,
                ),
                Err(reason) => (State::Recorded(reason), true),
            }
        };
        Self {
            info,
            state,
            messages: 0,
            bad: 0,
            first_bad: None,
            established: false,
            recorded: Vec::new(),
            schema_failed,
        }
    }
}

/// Collects one episode's topics from any container.
pub(crate) struct Assembler<'a> {
    skip: &'a dyn Fn(&str) -> bool,
    /// By topic name: the split files of one recording number their channels each their own way.
    topics: BTreeMap<String, Topic>,
    cameras: BTreeMap<String, LandingCamera>,
    signals: BTreeMap<String, LandingSignal>,
    /// Metadata records by name, from every file read.
    pub(crate) metadata: BTreeMap<String, BTreeMap<String, String>>,
    /// Chunks that repeated an earlier one, read once.
    pub(crate) duplicate_chunks: u64,
}

enum Outcome {
    Read,
    Bad(String),
    NothingToRead,
}

impl<'a> Assembler<'a> {
    pub(crate) fn new(skip: &'a dyn Fn(&str) -> bool) -> Self {
        Self {
            skip,
            topics: BTreeMap::new(),
            cameras: BTreeMap::new(),
            signals: BTreeMap::new(),
            metadata: BTreeMap::new(),
            duplicate_chunks: 0,
        }
    }

    /// One message of `topic`; `info` is asked for on the topic's first message.
    pub(crate) fn push_topic(
        &mut self,
        topic: &str,
        info: impl FnOnce() -> ChannelInfo,
        log_time: u64,
        publish_time: u64,
        data: &[u8],
    ) {
        let skip = self.skip;
        if !self.topics.contains_key(topic) {
            self.topics
                .insert(topic.to_owned(), Topic::open(skip, info()));
        }
        let Some(topic) = self.topics.get_mut(topic) else {
            return;
        };
        let recorded = || RecordedMessage {
            log_time,
            publish_time,
            data: Bytes::copy_from_slice(data),
        };
        topic.messages += 1;
        let outcome = match &mut topic.state {
            State::Skipped => return,
            State::Recorded(_) => {
                topic.recorded.push(recorded());
                return;
            }
            State::Reading {
                decoder,
                interpretation,
            } => match decoder.decode(data) {
                Err(reason) => Outcome::Bad(reason),
                Ok(fields) => {
                    let kind =
                        *interpretation.get_or_insert_with(|| Interpretation::of_fields(&fields));
                    read_message(
                        &topic.info,
                        kind,
                        fields,
                        log_time,
                        publish_time,
                        &mut self.cameras,
                        &mut self.signals,
                    )
                }
            },
        };
        match outcome {
            Outcome::Read => {
                topic.established = true;
                topic.recorded = Vec::new();
            }
            Outcome::NothingToRead if !topic.established => {
                topic.state = State::Recorded("no images or numeric fields".into());
                topic.recorded.push(recorded());
            }
            Outcome::NothingToRead => {
                topic.bad += 1;
                topic
                    .first_bad
                    .get_or_insert(("message has no numeric fields".into(), log_time));
            }
            Outcome::Bad(reason) => {
                topic.bad += 1;
                topic.first_bad.get_or_insert((reason, log_time));
                if !topic.established {
                    topic.recorded.push(recorded());
                }
            }
        }
    }

    pub(crate) fn finish(self) -> LandingEpisode {
        let mut episode = LandingEpisode {
            metadata: self.metadata,
            duplicate_chunks: self.duplicate_chunks,
            ..LandingEpisode::default()
        };
        for (_, topic) in self.topics {
            let problem = |bad: u64, reason: String, first_log_time: u64| StreamProblem {
                topic: topic.info.topic.clone(),
                schema: topic.info.schema.clone(),
                bad_messages: bad,
                messages: topic.messages,
                reason,
                first_log_time,
            };
            let reason = match topic.state {
                State::Skipped => {
                    episode
                        .skipped
                        .insert(topic.info.topic.clone(), topic.info.schema.clone());
                    continue;
                }
                State::Recorded(reason) => {
                    if topic.schema_failed {
                        let first = topic.recorded.first().map_or(0, |m| m.log_time);
                        episode
                            .problems
                            .push(problem(topic.messages, reason.clone(), first));
                    }
                    reason
                }
                State::Reading { .. } if topic.established => {
                    if let Some((reason, at)) = topic.first_bad {
                        episode.problems.push(problem(topic.bad, reason, at));
                    }
                    continue;
                }
                State::Reading { .. } => {
                    // Every message failed: reported, and kept as recorded.
                    let (reason, at) = topic.first_bad.unwrap_or_default();
                    episode
                        .problems
                        .push(problem(topic.bad, reason.clone(), at));
                    format!("no message decoded: {reason}")
                }
            };
            let mut messages = topic.recorded;
            messages.sort_by_key(|m| m.log_time);
            episode.other.push(RecordedTopic {
                topic: topic.info.topic,
                schema: topic.info.schema,
                schema_encoding: topic.info.schema_encoding,
                schema_data: topic.info.schema_data,
                message_encoding: topic.info.message_encoding,
                reason,
                messages,
            });
        }
        for (_, mut camera) in self.cameras {
            camera.frames.sort_by_key(|f| f.log_time);
            if camera.frames.first().is_some_and(|f| f.encoding.is_depth()) {
                episode.depths.push(camera);
            } else {
                episode.cameras.push(camera);
            }
        }
        for (_, mut signal) in self.signals {
            signal.samples.sort_by_key(|s| s.log_time);
            episode.signals.push(signal);
        }
        episode.other.sort_by(|a, b| a.topic.cmp(&b.topic));
        episode.problems.sort_by(|a, b| a.topic.cmp(&b.topic));
        episode
    }
}

fn image_encoding(image: &interpret::Image) -> Result<ImageEncoding, String> {
    match image.geometry {
        None => {
            if let Some(codec) = reel_video::VideoCodec::from_name(&image.format) {
                return Ok(ImageEncoding::Video { codec });
            }
            if let Some((layout, codec)) = reel_video::compressed_depth_format(&image.format) {
                return Ok(ImageEncoding::CompressedDepth { layout, codec });
            }
            if image.format.contains("compressedDepth") {
                return Err(format!("unsupported depth format `{}`", image.format));
            }
            let by_bytes = reel_video::ImageFormat::sniff(&image.data);
            let by_name = reel_video::ImageFormat::from_name(&image.format);
            match by_bytes.or(by_name) {
                Some(reel_video::ImageFormat::Jpeg) => Ok(ImageEncoding::Jpeg),
                Some(reel_video::ImageFormat::Png) => Ok(ImageEncoding::Png),
                None => Err(format!("unsupported image format `{}`", image.format)),
            }
        }
        Some((width, height, step)) => {
            if let Some(layout) = reel_video::DepthLayout::from_name(&image.format) {
                reel_video::check_depth(layout, width, height, step, image.data.len())
                    .map_err(|e| e.to_string())?;
                return Ok(ImageEncoding::RawDepth {
                    layout,
                    width,
                    height,
                    step,
                    big_endian: image.big_endian,
                });
            }
            let layout = reel_video::PixelLayout::from_name(&image.format)
                .ok_or_else(|| format!("unsupported raw image encoding `{}`", image.format))?;
            reel_video::check_raw(layout, width, height, step, image.data.len())
                .map_err(|e| e.to_string())?;
            Ok(ImageEncoding::Raw {
                layout,
                width,
                height,
                step,
            })
        }
    }
}

fn read_message(
    info: &ChannelInfo,
    kind: Interpretation,
    fields: Fields,
    log_time: u64,
    publish_time: u64,
    cameras: &mut BTreeMap<String, LandingCamera>,
    signals: &mut BTreeMap<String, LandingSignal>,
) -> Outcome {
    if kind.is_camera() {
        let image = match interpret::image(kind, fields) {
            Ok(image) => image,
            Err(reason) => return Outcome::Bad(reason),
        };
        let encoding = match image_encoding(&image) {
            Ok(e) => e,
            Err(reason) => return Outcome::Bad(reason),
        };
        if let Some(first) = cameras.get(&info.topic).and_then(|c| c.frames.first())
            && first.encoding.class() != encoding.class()
        {
            return Outcome::Bad(format!(
                "a {} in a camera of {}s",
                encoding.class().describe(),
                first.encoding.class().describe()
            ));
        }
        let camera = cameras
            .entry(info.topic.clone())
            .or_insert_with(|| LandingCamera {
                topic: info.topic.clone(),
                schema: info.schema.clone(),
                frame_id: image.frame_id.clone(),
                frames: Vec::new(),
            });
        camera.frames.push(LandingFrame {
            log_time,
            publish_time,
            stamp_ns: image.stamp_ns,
            encoding,
            data: Bytes::from(image.data),
        });
        return Outcome::Read;
    }
    let samples = match interpret::values(kind, &fields) {
        Ok(samples) if samples.is_empty() => return Outcome::NothingToRead,
        Ok(samples) => samples,
        Err(reason) => return Outcome::Bad(reason),
    };
    let mut samples = samples;
    if kind == Interpretation::FloatArray
        && let Err(reason) = name_float_array(info, &mut samples)
    {
        return Outcome::Bad(reason);
    }
    // Checked before any is stored, so a bad message costs all of itself and nothing more.
    let topic_of = |stream: &Option<String>| match stream {
        None => info.topic.clone(),
        Some(child) => format!("{}/{child}", info.topic.trim_end_matches('/')),
    };
    for s in &samples {
        if let Some(signal) = signals.get(&topic_of(&s.stream))
            && signal.fields != s.fields
        {
            return Outcome::Bad(format!(
                "{}: fields changed mid-stream: {}",
                signal.topic,
                field_change(&signal.fields, &s.fields)
            ));
        }
    }
    for s in samples {
        let topic = topic_of(&s.stream);
        let signal = signals
            .entry(topic.clone())
            .or_insert_with(|| LandingSignal {
                topic,
                schema: info.schema.clone(),
                kind: match kind {
                    Interpretation::FloatArray => info
                        .metadata
                        .get(reel_mcap::keys::KIND)
                        .and_then(|k| SignalKind::from_name(k))
                        .unwrap_or(SignalKind::Signal),
                    _ => kind.kind(&info.topic),
                },
                fields: s.fields.clone(),
                samples: Vec::new(),
            });
        signal.samples.push(Sample {
            log_time,
            publish_time,
            stamp_ns: if s.stamp_ns == 0 {
                log_time
            } else {
                s.stamp_ns
            },
            values: s.values,
        });
    }
    Outcome::Read
}

/// Names a `reel.FloatArray` message's values by its channel's `reel.fields`, which must
/// name each of them.
fn name_float_array(info: &ChannelInfo, samples: &mut [interpret::Values]) -> Result<(), String> {
    let Some(names) = info.metadata.get(reel_mcap::keys::FIELDS) else {
        return Ok(());
    };
    let names: Vec<String> = names.split(',').map(str::to_owned).collect();
    for s in samples {
        if s.values.len() != names.len() {
            return Err(format!(
                "{} values, the channel's `{}` names {}",
                s.values.len(),
                reel_mcap::keys::FIELDS,
                names.len()
            ));
        }
        s.fields.clone_from(&names);
    }
    Ok(())
}

/// What differs between a stream's field names and a message's: the count, or the first
/// name that differs (a message that renames a field has as many as before).
fn field_change(was: &[String], now: &[String]) -> String {
    if was.len() != now.len() {
        return format!("{} values became {}", was.len(), now.len());
    }
    match was.iter().zip(now).position(|(a, b)| a != b) {
        Some(i) => format!("value {i} was `{}`, is now `{}`", was[i], now[i]),
        None => "the same names in another form".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::field_change;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_field_change_names_what_changed() {
        assert_eq!(
            field_change(&names(&["a", "b"]), &names(&["a", "b", "c"])),
            "2 values became 3"
        );
        // As many fields as before, one renamed: the message says which.
        assert_eq!(
            field_change(&names(&["j0", "j1", "j2"]), &names(&["j0", "wrist", "j2"])),
            "value 1 was `j1`, is now `wrist`"
        );
    }
}
