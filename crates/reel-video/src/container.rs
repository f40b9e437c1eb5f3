//! Video files (MP4, Matroska, …) read through FFmpeg's demuxer: one time span of a file's
//! video stream as access units in decode order, in the form [`StreamDecoder`] and
//! `foxglove.CompressedVideo` take (H.264 and H.265 in Annex B with their parameter sets
//! in band; AV1 as temporal units of OBUs led by the sequence header).
//!
//! [`StreamDecoder`]: crate::StreamDecoder

use std::path::Path;

use ffmpeg_next::codec::Id;
use ffmpeg_next::media::Type;

use crate::{Error, Result, VideoCodec};

/// One access unit of a [`VideoSpan`].
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUnit {
    /// Presentation time (s) in the file.
    pub pts_s: f64,
    /// Whether the container marks it a keyframe.
    pub keyframe: bool,
    /// The unit, in the stream decoders' form.
    pub data: Vec<u8>,
}

/// The access units of a file's video stream whose presentation times fall in a span.
#[derive(Debug, Clone)]
pub struct VideoSpan {
    /// The stream's codec.
    pub codec: VideoCodec,
    /// Coded width in pixels.
    pub width: usize,
    /// Coded height in pixels.
    pub height: usize,
    /// Units in decode order, from the keyframe that starts the span.
    pub units: Vec<ContainerUnit>,
}

/// Reads the units of `path`'s video stream presented in `[from_s, to_s)`, starting at
/// the keyframe at or before `from_s` (units before `from_s` are left out, so the span
/// must start at a keyframe, as each episode of a LeRobot video file does: a span that
/// does not is an error). Errors name the file.
pub fn read_video_span(path: &Path, from_s: f64, to_s: f64) -> Result<VideoSpan> {
    let err = |reason: String| Error::Container {
        path: path.display().to_string(),
        reason,
    };
    let mut input = ffmpeg_next::format::input(path).map_err(|e| err(format!("{e}")))?;
    let (index, time_base, codec, width, height, extradata) = {
        let stream = input
            .streams()
            .best(Type::Video)
            .ok_or_else(|| err("no video stream".into()))?;
        let parameters = stream.parameters();
        let codec = match parameters.id() {
            Id::H264 => VideoCodec::H264,
            Id::HEVC => VideoCodec::H265,
            Id::AV1 => VideoCodec::Av1,
            other => return Err(err(format!("video codec {other:?} is not read"))),
        };
        // SAFETY: the parameters belong to `stream`, alive for this block; `extradata`
        // holds `extradata_size` bytes when not null (libavcodec's invariant).
        let (width, height, extradata) = unsafe {
            let p = parameters.as_ptr();
            let extra = if (*p).extradata.is_null() || (*p).extradata_size <= 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts((*p).extradata, (*p).extradata_size as usize).to_vec()
            };
            ((*p).width, (*p).height, extra)
        };
        (
            stream.index(),
            stream.time_base(),
            codec,
            usize::try_from(width).unwrap_or(0),
            usize::try_from(height).unwrap_or(0),
            extradata,
        )
    };
    let framing = Framing::of(codec, &extradata).map_err(err)?;
    let seconds = |ts: i64| ts as f64 * f64::from(time_base);
    if from_s > 0.0 {
        // To the keyframe at or before `from_s` (AV_TIME_BASE units).
        let target = (from_s * 1e6) as i64;
        input
            .seek(target, ..target + 1)
            .map_err(|e| err(format!("cannot seek to {from_s} s: {e}")))?;
    }
    // Half a microsecond of slack: the span's ends are float seconds.
    let (from, to) = (from_s - 5e-7, to_s - 5e-7);
    let mut units = Vec::new();
    let mut packet = ffmpeg_next::Packet::empty();
    loop {
        match packet.read(&mut input) {
            Ok(()) => {}
            Err(ffmpeg_next::Error::Eof) => break,
            Err(e) => return Err(err(format!("cannot read a packet: {e}"))),
        }
        if packet.stream() != index {
            continue;
        }
        let Some(pts) = packet.pts().or(packet.dts()) else {
            return Err(err("a packet without a time".into()));
        };
        let pts_s = seconds(pts);
        let dts_s = packet.dts().map_or(pts_s, seconds);
        // Decode order reaches past the span's end only by the reorder delay.
        if dts_s >= to && pts_s >= to {
            break;
        }
        if pts_s < from || pts_s >= to {
            continue;
        }
        let data = packet.data().unwrap_or_default();
        if units.is_empty() && !packet.is_key() {
            return Err(err(format!(
                "the span from {from_s} s does not start at a keyframe (the first unit is at {pts_s:.6} s)"
            )));
        }
        let keyframe = packet.is_key();
        units.push(ContainerUnit {
            pts_s,
            keyframe,
            data: framing.unit(data, keyframe).map_err(err)?,
        });
    }
    Ok(VideoSpan {
        codec,
        width,
        height,
        units,
    })
}

/// How a container's samples become decoder units.
enum Framing {
    /// AVCC / HVCC: NAL units behind `length_size`-byte lengths, parameter sets in the
    /// extradata, put before each keyframe in Annex B.
    LengthPrefixed {
        length_size: usize,
        parameter_sets: Vec<u8>,
    },
    /// Already Annex B (or a format with no extradata).
    AnnexB,
    /// AV1: the sequence header (the extradata's config OBUs) before each keyframe that
    /// lacks one.
    Av1 { sequence_header: Vec<u8> },
}

const START_CODE: [u8; 4] = [0, 0, 0, 1];

impl Framing {
    fn of(codec: VideoCodec, extradata: &[u8]) -> std::result::Result<Self, String> {
        match codec {
            VideoCodec::Av1 => Ok(Self::Av1 {
                // av1C: 4 bytes of configuration, then the config OBUs.
                sequence_header: extradata.get(4..).unwrap_or_default().to_vec(),
            }),
            _ if extradata.is_empty() || extradata.starts_with(&[0, 0, 1]) => Ok(Self::AnnexB),
            _ if extradata.starts_with(&START_CODE) => Ok(Self::AnnexB),
            VideoCodec::H264 => avcc(extradata),
            VideoCodec::H265 => hvcc(extradata),
        }
    }

    fn unit(&self, data: &[u8], keyframe: bool) -> std::result::Result<Vec<u8>, String> {
        match self {
            Self::AnnexB => Ok(data.to_vec()),
            Self::LengthPrefixed {
                length_size,
                parameter_sets,
            } => {
                let mut out = Vec::with_capacity(data.len() + parameter_sets.len() + 16);
                if keyframe {
                    out.extend_from_slice(parameter_sets);
                }
                let mut rest = data;
                while !rest.is_empty() {
                    let (len, after) = rest
                        .split_at_checked(*length_size)
                        .ok_or("a NAL unit length runs past its sample")?;
                    let len = len.iter().fold(0usize, |n, b| n << 8 | usize::from(*b));
                    let (nal, after) = after
                        .split_at_checked(len)
                        .ok_or("a NAL unit runs past its sample")?;
                    out.extend_from_slice(&START_CODE);
                    out.extend_from_slice(nal);
                    rest = after;
                }
                Ok(out)
            }
            Self::Av1 { sequence_header } => {
                if keyframe && !has_sequence_header(data) {
                    Ok([sequence_header.as_slice(), data].concat())
                } else {
                    Ok(data.to_vec())
                }
            }
        }
    }
}

/// `AVCDecoderConfigurationRecord`: the NAL length size and the SPS and PPS.
fn avcc(extra: &[u8]) -> std::result::Result<Framing, String> {
    let bad = || "the avcC record is truncated".to_owned();
    let length_size = usize::from(extra.get(4).ok_or_else(bad)? & 3) + 1;
    let mut parameter_sets = Vec::new();
    let mut at = 5;
    for mask in [0x1f_u8, 0xff] {
        let count = extra.get(at).ok_or_else(bad)? & mask;
        at += 1;
        for _ in 0..count {
            let len = usize::from(u16::from_be_bytes([
                *extra.get(at).ok_or_else(bad)?,
                *extra.get(at + 1).ok_or_else(bad)?,
            ]));
            let nal = extra.get(at + 2..at + 2 + len).ok_or_else(bad)?;
            parameter_sets.extend_from_slice(&START_CODE);
            parameter_sets.extend_from_slice(nal);
            at += 2 + len;
        }
    }
    Ok(Framing::LengthPrefixed {
        length_size,
        parameter_sets,
    })
}

/// `HEVCDecoderConfigurationRecord`: the NAL length size and the VPS, SPS and PPS arrays.
fn hvcc(extra: &[u8]) -> std::result::Result<Framing, String> {
    let bad = || "the hvcC record is truncated".to_owned();
    let length_size = usize::from(extra.get(21).ok_or_else(bad)? & 3) + 1;
    let arrays = *extra.get(22).ok_or_else(bad)?;
    let mut parameter_sets = Vec::new();
    let mut at = 23;
    let u16_at = |at: usize| -> std::result::Result<usize, String> {
        Ok(usize::from(u16::from_be_bytes([
            *extra.get(at).ok_or_else(bad)?,
            *extra.get(at + 1).ok_or_else(bad)?,
        ])))
    };
    for _ in 0..arrays {
        let count = u16_at(at + 1)?;
        at += 3;
        for _ in 0..count {
            let len = u16_at(at)?;
            let nal = extra.get(at + 2..at + 2 + len).ok_or_else(bad)?;
            parameter_sets.extend_from_slice(&START_CODE);
            parameter_sets.extend_from_slice(nal);
            at += 2 + len;
        }
    }
    Ok(Framing::LengthPrefixed {
        length_size,
        parameter_sets,
    })
}

/// Whether a temporal unit holds a sequence header OBU (type 1). OBUs without a size
/// field end the walk (they run to the end of the unit).
fn has_sequence_header(mut data: &[u8]) -> bool {
    while let Some(&header) = data.first() {
        let obu_type = (header >> 3) & 0x0f;
        if obu_type == 1 {
            return true;
        }
        let extension = header & 0x04 != 0;
        if header & 0x02 == 0 {
            return false;
        }
        let mut at = 1 + usize::from(extension);
        let mut size = 0usize;
        for shift in 0..8 {
            let Some(&byte) = data.get(at) else {
                return false;
            };
            at += 1;
            size |= usize::from(byte & 0x7f) << (7 * shift);
            if byte & 0x80 == 0 {
                break;
            }
        }
        match data.get(at + size..) {
            Some(rest) => data = rest,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avcc_samples_become_annex_b_with_parameter_sets_before_keyframes() {
        // avcC: version, profile, compat, level, 0xff (4-byte lengths), 1 SPS, 1 PPS.
        let extra = [1, 100, 0, 30, 0xff, 0xe1, 0, 2, 0x67, 0xaa, 1, 0, 1, 0x68];
        let framing = avcc(&extra).expect("parses");
        let sample = [0, 0, 0, 2, 0x65, 0x11, 0, 0, 0, 1, 0x06];
        let key = framing.unit(&sample, true).expect("frames");
        assert_eq!(
            key,
            [
                0, 0, 0, 1, 0x67, 0xaa, 0, 0, 0, 1, 0x68, 0, 0, 0, 1, 0x65, 0x11, 0, 0, 0, 1, 0x06
            ]
        );
        let other = framing.unit(&sample, false).expect("frames");
        assert_eq!(other, [0, 0, 0, 1, 0x65, 0x11, 0, 0, 0, 1, 0x06]);
        assert!(framing.unit(&[0, 0, 0, 9, 0x65], false).is_err());
        assert!(avcc(&extra[..9]).is_err());
    }

    #[test]
    fn av1_keyframes_get_the_sequence_header_they_lack() {
        // Temporal delimiter (type 2, size 0), then a frame OBU (type 6) of 1 byte.
        let unit = [0x12, 0x00, 0x32, 0x01, 0xee];
        assert!(!has_sequence_header(&unit));
        // Sequence header OBU (type 1) of 2 bytes.
        let header = [0x0a, 0x02, 0x01, 0x02];
        assert!(has_sequence_header(&[&header[..], &unit[..]].concat()));
        let framing =
            Framing::of(VideoCodec::Av1, &[0x81, 0, 0, 0, 0x0a, 0x02, 0x01, 0x02]).expect("av1C");
        assert_eq!(
            framing.unit(&unit, true).expect("unit"),
            [&header[..], &unit[..]].concat()
        );
        assert_eq!(framing.unit(&unit, false).expect("unit"), unit);
    }
}
