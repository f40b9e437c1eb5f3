//! The decoded picture: what the decoders give and the encoder takes back for a transcode.

use ffmpeg_next::format::Pixel;
use ffmpeg_next::util::frame::Video as Frame;

use crate::{Error, Result};

/// A decoded picture in the decoder's own pixel format (YUV 4:2:0 for Reel's video),
/// not yet converted: converting to RGB costs about as much as decoding, so callers
/// that decode runs of frames convert only the pictures they use
/// ([`H264Decoder::to_rgb`](crate::H264Decoder::to_rgb)). It holds the decoder's buffer, not a copy, and can be
/// shared between threads.
pub struct Picture {
    pub(crate) frame: Frame,
}

impl std::fmt::Debug for Picture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Picture")
            .field("width", &self.frame.width())
            .field("height", &self.frame.height())
            .finish()
    }
}

impl Picture {
    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.frame.width() as usize
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.frame.height() as usize
    }

    /// Keeps the top-left `width` x `height` pixels: the frame of an odd-sized stream,
    /// which [`H264Encoder`](crate::H264Encoder) codes one pixel larger. A size larger than
    /// the picture is an error; no pixel is copied either way.
    pub fn crop(&mut self, width: usize, height: usize) -> Result<()> {
        if width == 0 || height == 0 || width > self.width() || height > self.height() {
            return Err(Error::InvalidInput(format!(
                "cannot crop a {}x{} picture to {width}x{height}",
                self.width(),
                self.height()
            )));
        }
        self.frame.set_width(width as u32);
        self.frame.set_height(height as u32);
        Ok(())
    }
}

impl Picture {
    /// The values of a single-channel picture of 9 to 16 bits (`gray12le` depth video,
    /// `gray16`), row-major, as coded: no scaling, no conversion. Other formats are refused.
    pub fn gray_values(&self) -> Result<Vec<u16>> {
        let (width, height) = (self.width(), self.height());
        let (stride, plane) = (self.frame.stride(0), self.frame.data(0));
        let read: fn([u8; 2]) -> u16 = match self.frame.format() {
            Pixel::GRAY9LE
            | Pixel::GRAY10LE
            | Pixel::GRAY12LE
            | Pixel::GRAY14LE
            | Pixel::GRAY16LE => u16::from_le_bytes,
            Pixel::GRAY9BE
            | Pixel::GRAY10BE
            | Pixel::GRAY12BE
            | Pixel::GRAY14BE
            | Pixel::GRAY16BE => u16::from_be_bytes,
            other => {
                return Err(Error::InvalidInput(format!(
                    "a {other:?} picture is not single-channel grey of more than 8 bits"
                )));
            }
        };
        let mut values = Vec::with_capacity(width * height);
        for y in 0..height {
            let row = &plane[y * stride..y * stride + width * 2];
            values.extend(row.chunks_exact(2).map(|b| read([b[0], b[1]])));
        }
        Ok(values)
    }
}
