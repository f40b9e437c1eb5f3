//! Single-channel 16-bit images: depth in millimetres (`16UC1`, `32FC1` metres converted,
//! `compressedDepth` PNG and RVL) and raw 16-bit intensity (`mono16`).
//!
//! Every path here is lossless on 16-bit input; `32FC1` metres become millimetres by
//! [`metres_to_mm`], the one rule Reel uses everywhere.

use crate::raw::check_rows;
use crate::{Error, ImageDecoder, Result};

/// What the values of a 16-bit image mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepthUnit {
    /// Depth in millimetres; 0 is "no reading" (REP 118).
    Millimetres,
    /// Raw sensor counts (`mono16`: infrared, thermal...): no physical unit.
    Raw,
}

impl DepthUnit {
    /// The name written in channel metadata: `mm` or `raw`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Millimetres => "mm",
            Self::Raw => "raw",
        }
    }

    /// The unit of a name written by [`DepthUnit::as_str`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "mm" => Some(Self::Millimetres),
            "raw" => Some(Self::Raw),
            _ => None,
        }
    }
}

/// A 16-bit single-channel image, rows top to bottom, no padding.
#[derive(Clone, PartialEq, Eq)]
pub struct DepthImage {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// What the values mean.
    pub unit: DepthUnit,
    /// `width * height` values.
    pub data: Vec<u16>,
}

impl std::fmt::Debug for DepthImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DepthImage({}x{} {})",
            self.width,
            self.height,
            self.unit.as_str()
        )
    }
}

/// How an uncompressed single-channel image stores its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepthLayout {
    /// `16UC1`: u16 millimetres.
    Millimetres16,
    /// `mono16`: u16 raw counts.
    Mono16,
    /// `32FC1`: f32 metres, converted by [`metres_to_mm`].
    Metres32,
}

impl DepthLayout {
    /// The layout of a ROS 2 / Foxglove encoding name, or `None` for one that is not a
    /// single-channel 16- or 32-bit image.
    pub fn from_name(encoding: &str) -> Option<Self> {
        match encoding.to_ascii_lowercase().as_str() {
            "16uc1" => Some(Self::Millimetres16),
            "mono16" => Some(Self::Mono16),
            "32fc1" => Some(Self::Metres32),
            _ => None,
        }
    }

    fn bytes_per_pixel(self) -> usize {
        match self {
            Self::Millimetres16 | Self::Mono16 => 2,
            Self::Metres32 => 4,
        }
    }

    fn unit(self) -> DepthUnit {
        match self {
            Self::Mono16 => DepthUnit::Raw,
            Self::Millimetres16 | Self::Metres32 => DepthUnit::Millimetres,
        }
    }
}

/// Metres to millimetres, the rule for `32FC1` depth: rounded to the nearest millimetre;
/// NaN, infinities, zero, negative depths and depths past 65.535 m (beyond any depth
/// sensor, and beyond u16) become 0, "no reading", as in `16UC1`.
pub fn metres_to_mm(metres: f32) -> u16 {
    let mm = (f64::from(metres) * 1000.0).round();
    if mm.is_finite() && mm >= 1.0 && mm <= f64::from(u16::MAX) {
        mm as u16
    } else {
        0
    }
}

/// Millimetres to metres (0, "no reading", stays 0 so tensors stay finite).
pub fn mm_to_metres(mm: u16) -> f32 {
    f32::from(mm) / 1000.0
}

/// A single-channel image's geometry checked against its bytes, as [`crate::check_raw`].
pub fn check_depth(
    layout: DepthLayout,
    width: usize,
    height: usize,
    step: usize,
    data_len: usize,
) -> Result<()> {
    check_rows(
        width * layout.bytes_per_pixel(),
        width,
        height,
        step,
        data_len,
    )
}

/// Converts an uncompressed single-channel image (`16UC1`, `mono16`, `32FC1`) of either
/// byte order, at any row stride, to a [`DepthImage`].
pub fn raw_to_depth(
    layout: DepthLayout,
    width: usize,
    height: usize,
    step: usize,
    big_endian: bool,
    data: &[u8],
) -> Result<DepthImage> {
    let bpp = layout.bytes_per_pixel();
    check_depth(layout, width, height, step, data.len())?;
    let mut out = Vec::with_capacity(width * height);
    for y in 0..height {
        let row = &data[y * step..y * step + width * bpp];
        match layout {
            DepthLayout::Millimetres16 | DepthLayout::Mono16 => {
                out.extend(row.chunks_exact(2).map(|b| {
                    let b = [b[0], b[1]];
                    if big_endian {
                        u16::from_be_bytes(b)
                    } else {
                        u16::from_le_bytes(b)
                    }
                }));
            }
            DepthLayout::Metres32 => out.extend(row.chunks_exact(4).map(|b| {
                let b = [b[0], b[1], b[2], b[3]];
                metres_to_mm(if big_endian {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                })
            })),
        }
    }
    Ok(DepthImage {
        width,
        height,
        unit: layout.unit(),
        data: out,
    })
}

/// The codec of an `image_transport` `compressedDepth` image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepthCodec {
    /// 16-bit grey PNG.
    Png,
    /// Run-length / variable-length coding (Wilson, 2017), as `compressed_depth_image_transport` writes it.
    Rvl,
}

/// The 12-byte header `compressed_depth_image_transport` puts before the codec's bytes:
/// a format word and the two inverse-depth quantisation parameters of `32FC1` sources.
const COMPRESSED_DEPTH_HEADER: usize = 12;
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
/// Sizes past this (16k x 16k) are corrupt headers, not depth cameras.
const MAX_PIXELS: usize = 1 << 28;

/// Parses a `compressedDepth` format string (`16UC1; compressedDepth png`, `32FC1;
/// compressedDepth rvl`): the source layout and the codec.
pub fn compressed_depth_format(format: &str) -> Option<(DepthLayout, DepthCodec)> {
    let (source, rest) = format.split_once(';')?;
    if !rest.contains("compressedDepth") {
        return None;
    }
    let layout = match DepthLayout::from_name(source.trim())? {
        DepthLayout::Mono16 => DepthLayout::Millimetres16,
        other => other,
    };
    let codec = if rest.trim_end().ends_with("rvl") {
        DepthCodec::Rvl
    } else {
        DepthCodec::Png
    };
    Some((layout, codec))
}

/// Decodes a `sensor_msgs/CompressedImage` whose format is `compressedDepth` (parsed by
/// [`compressed_depth_format`]) to millimetres. `32FC1` sources are stored as quantised
/// inverse depth `q = a / depth + b`; they decode to `a / (q - b)` metres, then by
/// [`metres_to_mm`].
pub fn decode_compressed_depth(
    layout: DepthLayout,
    codec: DepthCodec,
    data: &[u8],
    decoder: &mut ImageDecoder,
) -> Result<DepthImage> {
    let bad = |reason: String| Error::InvalidInput(format!("compressedDepth: {reason}"));
    let header = data
        .get(..COMPRESSED_DEPTH_HEADER)
        .ok_or_else(|| bad(format!("{} bytes, shorter than its header", data.len())))?;
    let param =
        |i: usize| f32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let (quant_a, quant_b) = (param(4), param(8));
    let body = &data[COMPRESSED_DEPTH_HEADER..];
    let (width, height, values) = match codec {
        DepthCodec::Png => {
            if !body.starts_with(PNG_MAGIC) {
                return Err(bad("no PNG after the header".into()));
            }
            decoder.decode_gray16(body)?
        }
        DepthCodec::Rvl => {
            let size = |i: usize| {
                body.get(i..i + 4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                    .ok_or_else(|| bad("RVL data shorter than its size".into()))
            };
            let (width, height) = (size(0)?, size(4)?);
            let pixels = width
                .checked_mul(height)
                .filter(|&n| n > 0 && n <= MAX_PIXELS)
                .ok_or_else(|| bad(format!("RVL image of {width}x{height} pixels")))?;
            (width, height, rvl::decode(&body[8..], pixels)?)
        }
    };
    let data = match layout {
        DepthLayout::Metres32 => values
            .iter()
            .map(|&q| {
                if q == 0 {
                    0
                } else {
                    metres_to_mm(quant_a / (f32::from(q) - quant_b))
                }
            })
            .collect(),
        _ => values,
    };
    Ok(DepthImage {
        width,
        height,
        unit: DepthUnit::Millimetres,
        data,
    })
}

/// RVL, the lossless depth codec of `compressed_depth_image_transport`: runs of zeros and
/// of non-zero values, the latter as zig-zag deltas, all in 3-bit variable-length nibbles
/// packed eight to a little-endian 32-bit word.
pub mod rvl {
    use crate::{Error, Result};

    struct Nibbles<'a> {
        words: std::slice::ChunksExact<'a, u8>,
        word: u32,
        left: u32,
    }

    impl Nibbles<'_> {
        fn value(&mut self) -> Result<u32> {
            let mut value = 0u32;
            let mut shift = 0;
            loop {
                if self.left == 0 {
                    let w = self.words.next().ok_or_else(|| {
                        Error::InvalidInput("RVL data ends before its last pixel".into())
                    })?;
                    self.word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    self.left = 8;
                }
                let nibble = self.word >> 28;
                self.word <<= 4;
                self.left -= 1;
                if shift > 30 {
                    return Err(Error::InvalidInput("RVL value longer than 32 bits".into()));
                }
                value |= (nibble & 0x7) << shift;
                shift += 3;
                if nibble & 0x8 == 0 {
                    return Ok(value);
                }
            }
        }
    }

    /// Decodes `pixels` values.
    pub fn decode(data: &[u8], pixels: usize) -> Result<Vec<u16>> {
        let mut nibbles = Nibbles {
            words: data.chunks_exact(4),
            word: 0,
            left: 0,
        };
        let mut out = Vec::with_capacity(pixels);
        let mut previous: i32 = 0;
        let overrun = || Error::InvalidInput(format!("RVL runs exceed the {pixels} pixels"));
        while out.len() < pixels {
            let zeros = nibbles.value()? as usize;
            if zeros > pixels - out.len() {
                return Err(overrun());
            }
            out.resize(out.len() + zeros, 0);
            let nonzeros = nibbles.value()? as usize;
            if nonzeros > pixels - out.len() {
                return Err(overrun());
            }
            for _ in 0..nonzeros {
                let positive = nibbles.value()?;
                let delta = (positive >> 1) as i32 ^ -((positive & 1) as i32);
                previous = previous.wrapping_add(delta);
                out.push(previous as u16);
            }
        }
        Ok(out)
    }

    struct Packer {
        out: Vec<u8>,
        word: u32,
        written: u32,
    }

    impl Packer {
        fn value(&mut self, mut value: u32) {
            loop {
                let mut nibble = value & 0x7;
                value >>= 3;
                if value != 0 {
                    nibble |= 0x8;
                }
                self.word = (self.word << 4) | nibble;
                self.written += 1;
                if self.written == 8 {
                    self.out.extend_from_slice(&self.word.to_le_bytes());
                    self.word = 0;
                    self.written = 0;
                }
                if value == 0 {
                    return;
                }
            }
        }
    }

    /// Encodes values (for writers and for comparing codecs).
    pub fn encode(values: &[u16]) -> Vec<u8> {
        let mut packer = Packer {
            out: Vec::with_capacity(values.len()),
            word: 0,
            written: 0,
        };
        let mut previous: i32 = 0;
        let mut i = 0;
        while i < values.len() {
            let zeros = values[i..].iter().take_while(|&&v| v == 0).count();
            packer.value(zeros as u32);
            i += zeros;
            let nonzeros = values[i..].iter().take_while(|&&v| v != 0).count();
            packer.value(nonzeros as u32);
            for &v in &values[i..i + nonzeros] {
                let delta = i32::from(v) - previous;
                packer.value(((delta << 1) ^ (delta >> 31)) as u32);
                previous = i32::from(v);
            }
            i += nonzeros;
        }
        if packer.written > 0 {
            let word = packer.word << (4 * (8 - packer.written));
            packer.out.extend_from_slice(&word.to_le_bytes());
        }
        packer.out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    #[test]
    fn metres_become_millimetres_by_one_rule() {
        assert_eq!(metres_to_mm(1.2344), 1234);
        assert_eq!(metres_to_mm(1.2346), 1235);
        assert_eq!(metres_to_mm(65.535), 65535);
        for invalid in [f32::NAN, f32::INFINITY, 0.0, -1.0, 65.6, 0.0004] {
            assert_eq!(metres_to_mm(invalid), 0, "{invalid}");
        }
    }

    #[test]
    fn raw_depth_reads_either_byte_order_and_any_step() {
        let (w, h, step) = (3, 2, 8);
        let mut le = vec![0xAAu8; step * h];
        let mut be = le.clone();
        for (i, v) in [1u16, 2, 300, 4000, 50000, 6].iter().enumerate() {
            let (y, x) = (i / w, i % w);
            le[y * step + 2 * x..][..2].copy_from_slice(&v.to_le_bytes());
            be[y * step + 2 * x..][..2].copy_from_slice(&v.to_be_bytes());
        }
        let a = raw_to_depth(DepthLayout::Millimetres16, w, h, step, false, &le).unwrap();
        let b = raw_to_depth(DepthLayout::Millimetres16, w, h, step, true, &be).unwrap();
        assert_eq!(a.data, [1, 2, 300, 4000, 50000, 6]);
        assert_eq!(a, b);
        let err = raw_to_depth(DepthLayout::Metres32, w, h, 12, false, &le).unwrap_err();
        assert!(err.to_string().contains("needs 24 bytes"), "{err}");
    }

    #[test]
    fn rvl_round_trips_runs_of_zeros_and_large_deltas() {
        let values: Vec<u16> = (0..5000u32)
            .map(|i| match i % 97 {
                0..=9 => 0,
                10 => 65535,
                11 => 1,
                _ => (1000 + (i * 7919) % 3000) as u16,
            })
            .collect();
        let coded = rvl::encode(&values);
        assert!(coded.len() < values.len() * 2);
        assert_eq!(rvl::decode(&coded, values.len()).unwrap(), values);
        assert!(rvl::decode(&coded[..coded.len() / 2], values.len()).is_err());
        assert!(rvl::decode(&coded, values.len() - 1).is_err());
    }

    #[test]
    fn compressed_depth_formats_parse() {
        assert_eq!(
            compressed_depth_format("16UC1; compressedDepth png"),
            Some((DepthLayout::Millimetres16, DepthCodec::Png))
        );
        assert_eq!(
            compressed_depth_format("32FC1; compressedDepth rvl"),
            Some((DepthLayout::Metres32, DepthCodec::Rvl))
        );
        assert_eq!(compressed_depth_format("rgb8; jpeg compressed bgr8"), None);
    }
}
