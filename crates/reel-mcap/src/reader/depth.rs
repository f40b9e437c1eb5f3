//! Depth cameras: `foxglove.RawImage` 16-bit frames decoded into windows of values.

use std::ops::Range;

use prost::Message as _;
use reel_io::ByteSource;
use reel_video::DepthUnit;

use super::EpisodeReader;
use crate::proto::RawImage;
use crate::records::{ChannelContent, DepthInfo};
use crate::{Error, Result};

/// A window of depth frames of one camera, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthWindow {
    /// Topic.
    pub topic: String,
    /// Frame width in pixels.
    pub width: usize,
    /// Frame height in pixels.
    pub height: usize,
    /// What the values mean (`reel.unit`).
    pub unit: DepthUnit,
    /// Log time of each frame (ns).
    pub log_times: Vec<u64>,
    /// Values, frame-major: `log_times.len()` frames of `width * height`.
    pub values: Vec<u16>,
}

impl DepthWindow {
    /// The values of frame `i`.
    pub fn frame(&self, i: usize) -> &[u16] {
        let n = self.width * self.height;
        &self.values[i * n..(i + 1) * n]
    }
}

impl<S: ByteSource> EpisodeReader<S> {
    /// Decoded frames of the depth camera `topic` over `window` (one ranged read of its
    /// group's chunks on a canonical file).
    pub fn depth(&self, topic: &str, window: Range<u64>) -> Result<DepthWindow> {
        let corrupt = |reason: String| Error::Corrupt {
            name: self.name.clone(),
            reason: format!("depth channel `{topic}`: {reason}"),
        };
        let DepthInfo {
            width,
            height,
            unit,
            ..
        } = match self.channel_info(topic)?.content {
            ChannelContent::Depth(depth) => depth,
            _ => {
                return Err(corrupt(
                    "not a depth camera (reel.kind is not `depth`)".into(),
                ));
            }
        };
        let messages = self.read_topics(&[topic], window)?;
        let mut out = DepthWindow {
            topic: topic.to_owned(),
            width,
            height,
            unit,
            log_times: Vec::with_capacity(messages.len()),
            values: Vec::with_capacity(messages.len() * width * height),
        };
        for m in &messages {
            let bad = |reason: String| Error::BadMessage {
                name: self.name.clone(),
                topic: topic.to_owned(),
                log_time: m.log_time,
                reason,
            };
            let image = RawImage::decode(m.data.as_ref()).map_err(|e| bad(e.to_string()))?;
            let (w, h, step) = (
                image.width as usize,
                image.height as usize,
                image.step as usize,
            );
            if (w, h) != (width, height) || step != 2 * width || image.data.len() != step * height {
                return Err(bad(format!(
                    "frame is {w}x{h} with step {step} and {} bytes, the channel {width}x{height}",
                    image.data.len()
                )));
            }
            out.log_times.push(m.log_time);
            out.values.extend(
                image
                    .data
                    .chunks_exact(2)
                    .map(|b| u16::from_le_bytes([b[0], b[1]])),
            );
        }
        Ok(out)
    }
}
