//! Decoding: H.264 runs from a keyframe, and JPEG/PNG landing frames.

use ffmpeg_next::codec::{self, Id};
use ffmpeg_next::format::Pixel;
use ffmpeg_next::util::frame::Video as Frame;
use ffmpeg_next::{Packet, decoder};

use crate::picture::Picture;
use crate::scale::{RgbConversion, Scaler};
use crate::{Error, Result, RgbImage, ffmpeg_err};

pub(crate) fn open_decoder(id: Id, name: &'static str) -> Result<decoder::Video> {
    let codec = decoder::find(id).ok_or_else(|| Error::CodecMissing(name.to_owned()))?;
    let mut context = codec::context::Context::new_with_codec(codec);
    // One decoder per worker thread: frame threading would only add latency and memory.
    context.set_threading(codec::threading::Config {
        kind: codec::threading::Type::None,
        count: 1,
        ..Default::default()
    });
    context
        .decoder()
        .video()
        .map_err(ffmpeg_err("opening a decoder"))
}

pub(crate) fn is_again(e: &ffmpeg_next::Error) -> bool {
    matches!(e, ffmpeg_next::Error::Other { errno } if *errno == ffmpeg_next::util::error::EAGAIN)
}

/// Decodes H.264 access units to RGB. Keep one per worker thread.
pub struct H264Decoder {
    decoder: decoder::Video,
    scaler: Scaler,
    units_decoded: u64,
}

impl std::fmt::Debug for H264Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("H264Decoder")
    }
}

impl H264Decoder {
    /// Opens FFmpeg's native H.264 decoder, single-threaded, with the accurate RGB
    /// conversion.
    pub fn new() -> Result<Self> {
        Self::with_conversion(RgbConversion::Accurate)
    }

    /// Like [`new`](Self::new), converting pictures to RGB as `conversion` says.
    pub fn with_conversion(conversion: RgbConversion) -> Result<Self> {
        Ok(Self {
            decoder: open_decoder(Id::H264, "h264")?,
            scaler: Scaler::with_conversion(conversion),
            units_decoded: 0,
        })
    }

    /// Decodes `units` in order — the first must be a keyframe — and returns the pictures
    /// of the units at indexes `wanted` (into `units`, in the order given), as RGB at
    /// `size` (width, height) or the stream's own size. Units after the last wanted one are
    /// not decoded, nor are unwanted units that are not reference pictures (nothing
    /// predicts from them: in a [star GOP](crate::GopStructure::Star) a frame needs only
    /// its keyframe). The decoder is reset afterwards, ready for an unrelated run.
    pub fn decode_run(
        &mut self,
        units: &[&[u8]],
        wanted: &[usize],
        size: Option<(usize, usize)>,
    ) -> Result<Vec<RgbImage>> {
        self.decode_pictures(units, wanted)?
            .iter()
            .map(|picture| self.to_rgb(picture, size))
            .collect()
    }

    /// Like [`decode_run`](Self::decode_run), but returns the pictures unconverted.
    pub fn decode_pictures(&mut self, units: &[&[u8]], wanted: &[usize]) -> Result<Vec<Picture>> {
        let Some(&last) = wanted.iter().max() else {
            return Ok(Vec::new());
        };
        if last >= units.len() {
            return Err(Error::InvalidInput(format!(
                "frame {last} requested from a run of {} access units",
                units.len()
            )));
        }
        let mut pictures: Vec<Option<Picture>> = (0..wanted.len()).map(|_| None).collect();
        let result = self.decode_into(&units[..=last], wanted, &mut pictures);
        // Reset whatever happened, so a corrupt run cannot poison the next one.
        self.decoder.flush();
        result?;
        pictures
            .into_iter()
            .zip(wanted)
            .map(|(p, i)| p.ok_or_else(|| Error::NoPicture(format!("access unit {i} of the run"))))
            .collect()
    }

    /// Access units this decoder has decoded so far (the units it skipped not counted).
    pub fn units_decoded(&self) -> u64 {
        self.units_decoded
    }

    /// Converts a picture to packed RGB at `size` (width, height) or its own size.
    pub fn to_rgb(&mut self, picture: &Picture, size: Option<(usize, usize)>) -> Result<RgbImage> {
        self.scaler.convert_to_rgb(&picture.frame, size)
    }

    /// Converts a picture to packed RGB at `size` (width, height) or its own size, written
    /// straight into `dst`, which must hold exactly `width * height * 3` bytes: a caller
    /// that owns the destination (a batch slot) skips the intermediate image.
    pub fn to_rgb_into(
        &mut self,
        picture: &Picture,
        size: Option<(usize, usize)>,
        dst: &mut [u8],
    ) -> Result<()> {
        self.scaler.convert_to_rgb_into(&picture.frame, size, dst)
    }

    fn decode_into(
        &mut self,
        units: &[&[u8]],
        wanted: &[usize],
        pictures: &mut [Option<Picture>],
    ) -> Result<()> {
        for (i, unit) in units.iter().enumerate() {
            if !wanted.contains(&i) && !crate::h264::is_reference(unit) {
                continue;
            }
            self.units_decoded += 1;
            let mut packet = Packet::copy(unit);
            packet.set_pts(Some(i as i64));
            packet.set_dts(Some(i as i64));
            self.decoder
                .send_packet(&packet)
                .map_err(|source| Error::Decode {
                    what: "an H.264 access unit",
                    source,
                })?;
            self.receive(wanted, pictures)?;
        }
        self.decoder.send_eof().map_err(|source| Error::Decode {
            what: "the end of an H.264 run",
            source,
        })?;
        self.receive(wanted, pictures)
    }

    fn receive(&mut self, wanted: &[usize], pictures: &mut [Option<Picture>]) -> Result<()> {
        loop {
            // A fresh frame each time: a wanted picture keeps the decoder's buffer (a
            // reference, not a copy) and the others release theirs when dropped.
            let mut frame = Frame::empty();
            match self.decoder.receive_frame(&mut frame) {
                Ok(()) => {
                    let index = frame.pts().unwrap_or(-1);
                    let slots: Vec<usize> = wanted
                        .iter()
                        .enumerate()
                        .filter(|(_, w)| **w as i64 == index)
                        .map(|(slot, _)| slot)
                        .collect();
                    if let Some((&last, rest)) = slots.split_last() {
                        for &slot in rest {
                            pictures[slot] = Some(Picture {
                                frame: frame.clone(),
                            });
                        }
                        pictures[last] = Some(Picture { frame });
                    }
                }
                Err(ffmpeg_next::Error::Eof) => return Ok(()),
                Err(e) if is_again(&e) => return Ok(()),
                Err(source) => {
                    return Err(Error::Decode {
                        what: "an H.264 picture",
                        source,
                    });
                }
            }
        }
    }
}

/// Still-image formats found in landing logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// JPEG (`jpeg`, `jpg`).
    Jpeg,
    /// PNG.
    Png,
}

impl ImageFormat {
    /// Parses a format name as written in `CompressedImage.format` (`jpeg`, `png`,
    /// `rgb8; jpeg compressed bgr8`, ...).
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.to_ascii_lowercase();
        if name.contains("png") {
            Some(Self::Png)
        } else if name.contains("jpeg") || name.contains("jpg") {
            Some(Self::Jpeg)
        } else {
            None
        }
    }

    /// Recognises the format from the first bytes.
    pub fn sniff(data: &[u8]) -> Option<Self> {
        if data.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if data.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else {
            None
        }
    }
}

/// Decodes JPEG and PNG images to RGB. The JPEG decoder is kept between images; a PNG
/// gets a fresh one each time, because FFmpeg's PNG decoder carries the last row of one
/// image into the next (a first row filtered "Up" then adds the previous image's last
/// row, and every row below inherits it).
pub struct ImageDecoder {
    jpeg: Option<decoder::Video>,
    scaler: Scaler,
    frame: Frame,
}

impl std::fmt::Debug for ImageDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ImageDecoder")
    }
}

impl Default for ImageDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ImageDecoder {
    /// A decoder; codecs are opened on first use.
    pub fn new() -> Self {
        Self {
            jpeg: None,
            scaler: Scaler::default(),
            frame: Frame::empty(),
        }
    }

    /// Decodes one image to RGB at its own size.
    pub fn decode(&mut self, format: ImageFormat, data: &[u8]) -> Result<RgbImage> {
        let what = match format {
            ImageFormat::Jpeg => "a JPEG image",
            ImageFormat::Png => "a PNG image",
        };
        self.decode_frame(format, what, data)?;
        self.scaler.convert_to_rgb(&self.frame, None)
    }

    /// Decodes one image into `self.frame`.
    fn decode_frame(&mut self, format: ImageFormat, what: &'static str, data: &[u8]) -> Result<()> {
        if ImageFormat::sniff(data) != Some(format) {
            return Err(Error::Decode {
                what,
                source: ffmpeg_next::Error::InvalidData,
            });
        }
        let mut fresh;
        let decoder = match format {
            ImageFormat::Jpeg => match &mut self.jpeg {
                Some(d) => d,
                None => self.jpeg.insert(open_decoder(Id::MJPEG, "mjpeg")?),
            },
            ImageFormat::Png => {
                fresh = open_decoder(Id::PNG, "png")?;
                &mut fresh
            }
        };
        let result = decoder
            .send_packet(&Packet::copy(data))
            .and_then(|()| decoder.receive_frame(&mut self.frame))
            .map_err(|source| Error::Decode { what, source });
        // Each image stands alone: nothing of a failed one may leak into the next.
        if result.is_err() {
            decoder.flush();
        }
        result?;
        if self.frame.width() == 0 || self.frame.height() == 0 {
            return Err(Error::NoPicture(what.to_owned()));
        }
        Ok(())
    }

    /// Decodes a single-channel PNG (16- or 8-bit grey) to its values, row-major:
    /// `(width, height, values)`. Colour PNGs are refused, not converted.
    pub fn decode_gray16(&mut self, data: &[u8]) -> Result<(usize, usize, Vec<u16>)> {
        self.decode_frame(ImageFormat::Png, "a 16-bit PNG image", data)?;
        let (width, height) = (self.frame.width() as usize, self.frame.height() as usize);
        let (stride, plane) = (self.frame.stride(0), self.frame.data(0));
        let row = |y: usize| &plane[y * stride..];
        let mut values = Vec::with_capacity(width * height);
        for y in 0..height {
            let r = row(y);
            match self.frame.format() {
                Pixel::GRAY16BE => values.extend(
                    r[..width * 2]
                        .chunks_exact(2)
                        .map(|b| u16::from_be_bytes([b[0], b[1]])),
                ),
                Pixel::GRAY16LE => values.extend(
                    r[..width * 2]
                        .chunks_exact(2)
                        .map(|b| u16::from_le_bytes([b[0], b[1]])),
                ),
                Pixel::GRAY8 => values.extend(r[..width].iter().map(|&v| u16::from(v))),
                other => {
                    return Err(Error::InvalidInput(format!(
                        "a depth PNG must be single-channel grey, this one is {other:?}"
                    )));
                }
            }
        }
        Ok((width, height, values))
    }
}
