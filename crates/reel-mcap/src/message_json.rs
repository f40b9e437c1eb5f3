//! Messages as JSON lines, for `reel-inspect cat`: a message Reel can decode (the
//! canonical `reel.FloatArray` and `foxglove.CompressedVideo` protobufs, and any JSON
//! message) is shown decoded; any other is shown as its length and base64 payload.

use std::ops::Range;

use mcap::Channel;
use prost::Message as _;
use reel_io::ByteSource;
use serde::Serialize;
use serde_json::{Value, json};

use crate::proto::{COMPRESSED_VIDEO, CompressedVideo, FLOAT_ARRAY, FloatArray};
use crate::reader::plan::holds;
use crate::reader::{EpisodeReader, RawMessage};
use crate::writer::is_idr;
use crate::{Error, Result, keys};

/// One message as a JSON line.
#[derive(Debug, Clone, Serialize)]
pub struct MessageJson {
    /// Topic.
    pub topic: String,
    /// MCAP log time (ns).
    pub log_time: u64,
    /// MCAP publish time (ns).
    pub publish_time: u64,
    /// The decoded message, where Reel can decode it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
    /// Payload length, for a message that was not decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<usize>,
    /// Payload in standard base64, for a message that was not decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
}

impl MessageJson {
    /// `message`, read from `channel`.
    pub fn new(channel: &Channel<'_>, message: &RawMessage) -> Self {
        let decoded = decode_message(channel, &message.data);
        let undecoded = decoded.is_none();
        Self {
            topic: message.topic.to_string(),
            log_time: message.log_time,
            publish_time: message.publish_time,
            message: decoded,
            payload_bytes: undecoded.then_some(message.data.len()),
            payload_base64: undecoded.then(|| base64(&message.data)),
        }
    }
}

/// The message in `data` as JSON, if Reel knows its schema: `reel.FloatArray` (values
/// named by `reel.fields`), `foxglove.CompressedVideo` (the frame's facts, not its
/// bytes) or any message in the `json` encoding.
pub fn decode_message(channel: &Channel<'_>, data: &[u8]) -> Option<Value> {
    let schema = channel.schema.as_ref().map(|s| s.name.as_str());
    match (channel.message_encoding.as_str(), schema) {
        ("protobuf", Some(FLOAT_ARRAY)) => {
            let m = FloatArray::decode(data).ok()?;
            let fields = keys::fields(channel);
            let values = if fields.len() == m.values.len() {
                // NaN (a dropout) has no JSON number: it becomes null.
                Value::Object(
                    fields
                        .iter()
                        .zip(&m.values)
                        .map(|(name, v)| ((*name).to_owned(), json!(v)))
                        .collect(),
                )
            } else {
                json!(m.values)
            };
            Some(json!({
                "timestamp_ns": m.timestamp.map(|t| t.to_ns()),
                "values": values,
            }))
        }
        ("protobuf", Some(COMPRESSED_VIDEO)) => {
            let m = CompressedVideo::decode(data).ok()?;
            Some(json!({
                "timestamp_ns": m.timestamp.map(|t| t.to_ns()),
                "frame_id": m.frame_id,
                "format": m.format,
                "keyframe": is_idr(&m.data),
                "data_bytes": m.data.len(),
            }))
        }
        ("json", _) => serde_json::from_slice(data).ok(),
        _ => None,
    }
}

/// Calls `emit` with every message of `topics` (all topics when empty) in log-time order.
/// Reads the file window by window, from one chunk start to the next, so memory holds a
/// window's messages, not the file's. Returns the number of messages.
pub fn cat_messages<S, E>(
    reader: &EpisodeReader<S>,
    topics: &[&str],
    mut emit: impl FnMut(MessageJson) -> std::result::Result<(), E>,
) -> std::result::Result<u64, E>
where
    S: ByteSource,
    E: From<Error>,
{
    let all_topics: Vec<String>;
    let topics: Vec<&str> = if topics.is_empty() {
        all_topics = match reader.summary() {
            Some(summary) => {
                let mut channels: Vec<_> = summary.channels.values().collect();
                channels.sort_by_key(|c| c.id);
                channels.iter().map(|c| c.topic.clone()).collect()
            }
            None => reader.groups().values().flatten().cloned().collect(),
        };
        all_topics.iter().map(String::as_str).collect()
    } else {
        topics.to_vec()
    };
    let channels = topics
        .iter()
        .map(|t| reader.channel(t))
        .collect::<Result<Vec<_>>>()?;
    let mut count = 0;
    for window in windows(reader, &channels) {
        for message in reader.read_topics(&topics, window)? {
            let Some(channel) = channels
                .iter()
                .find(|c| c.topic.as_str() == &*message.topic)
            else {
                continue;
            };
            emit(MessageJson::new(channel, &message))?;
            count += 1;
        }
    }
    Ok(count)
}

/// Consecutive log-time windows, each starting where a chunk of `channels` starts, that
/// together cover every message once.
fn windows<S>(
    reader: &EpisodeReader<S>,
    channels: &[std::sync::Arc<Channel<'static>>],
) -> Vec<Range<u64>> {
    let Some(summary) = reader.summary() else {
        // A scanned file is held whole in memory already: one window reads it all.
        return std::iter::once(0..u64::MAX).collect();
    };
    let mut starts: Vec<u64> = summary
        .chunk_indexes
        .iter()
        .filter(|c| channels.iter().any(|ch| holds(c, ch.id)))
        .map(|c| c.message_start_time)
        .collect();
    starts.sort_unstable();
    starts.dedup();
    if starts.is_empty() {
        return Vec::new();
    }
    // The first window starts at 0 so that it also holds anything logged before the first
    // chunk's start.
    let mut bounds = vec![0];
    bounds.extend(starts.iter().skip(1));
    bounds.push(u64::MAX);
    bounds.windows(2).map(|w| w[0]..w[1]).collect()
}

/// Standard base64 with padding (RFC 4648), for payloads Reel cannot decode.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for group in data.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(ALPHABET[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648() {
        for (input, expect) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expect);
        }
    }
}
