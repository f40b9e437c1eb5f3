//! Recorded video decoded front to back: the H.264 or H.265 a robot recorded, one access
//! unit per message, turned back into RGB pictures so it can be re-encoded canonically.

use ffmpeg_next::codec::Id;
use ffmpeg_next::util::frame::Video as Frame;
use ffmpeg_next::{Packet, decoder};

use crate::decode::{is_again, open_decoder};
use crate::scale::Scaler;
use crate::{Error, Result, RgbImage};

/// The codec of a recorded video stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoCodec {
    /// H.264 / AVC.
    H264,
    /// H.265 / HEVC.
    H265,
}

impl VideoCodec {
    /// The codec of a `foxglove.CompressedVideo` `format` (`h264`, `h265`; `avc`, `hevc`).
    pub fn from_name(format: &str) -> Option<Self> {
        match format.to_ascii_lowercase().as_str() {
            "h264" | "avc" => Some(Self::H264),
            "h265" | "hevc" => Some(Self::H265),
            _ => None,
        }
    }

    /// `h264` or `h265`.
    pub fn name(self) -> &'static str {
        match self {
            Self::H264 => "h264",
            Self::H265 => "h265",
        }
    }

    fn id(self) -> Id {
        match self {
            Self::H264 => Id::H264,
            Self::H265 => Id::HEVC,
        }
    }
}

/// Decodes one recorded stream in order, access unit by access unit, to RGB pictures in
/// presentation order. One per stream; not shared between threads.
pub struct StreamDecoder {
    codec: VideoCodec,
    decoder: decoder::Video,
    scaler: Scaler,
}

impl std::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StreamDecoder({})", self.codec.name())
    }
}

impl StreamDecoder {
    /// Opens FFmpeg's decoder for `codec`.
    pub fn new(codec: VideoCodec) -> Result<Self> {
        Ok(Self {
            codec,
            decoder: open_decoder(codec.id(), codec.name())?,
            scaler: Scaler::default(),
        })
    }

    /// Decodes the next access unit; returns the pictures that became ready (none while
    /// the decoder holds frames back to reorder them). A unit that does not decode is an
    /// error, and the stream goes on with the next one.
    pub fn push(&mut self, unit: &[u8]) -> Result<Vec<RgbImage>> {
        self.decoder
            .send_packet(&Packet::copy(unit))
            .map_err(|source| Error::Decode {
                what: "a recorded video access unit",
                source,
            })?;
        self.receive()
    }

    /// The pictures still held back, after the last unit.
    pub fn finish(&mut self) -> Result<Vec<RgbImage>> {
        self.decoder.send_eof().map_err(|source| Error::Decode {
            what: "the end of a recorded video",
            source,
        })?;
        self.receive()
    }

    fn receive(&mut self) -> Result<Vec<RgbImage>> {
        let mut out = Vec::new();
        loop {
            let mut frame = Frame::empty();
            match self.decoder.receive_frame(&mut frame) {
                Ok(()) => out.push(self.scaler.convert_to_rgb(&frame, None)?),
                Err(ffmpeg_next::Error::Eof) => return Ok(out),
                Err(e) if is_again(&e) => return Ok(out),
                Err(source) => {
                    return Err(Error::Decode {
                        what: "a recorded video picture",
                        source,
                    });
                }
            }
        }
    }
}
