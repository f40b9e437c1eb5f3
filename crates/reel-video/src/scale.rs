//! Pixel-format conversion and resizing through swscale, with the context kept between calls.

use ffmpeg_next::format::Pixel;
use ffmpeg_next::software::scaling::{Context, Flags};
use ffmpeg_next::util::frame::Video as Frame;

use crate::{Result, RgbImage, ffmpeg_err};

/// How decoded YUV pictures become RGB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RgbConversion {
    /// Full-resolution chroma interpolation with accurate rounding: the reference
    /// conversion (quality checks, PSNR measurements).
    #[default]
    Accurate,
    /// swscale's SIMD YUV→RGB path (chroma upsampled without interpolation), several
    /// times cheaper; what a training loader wants. Differences from `Accurate` are a few
    /// levels at chroma edges (`tests/video.rs` measures them).
    Fast,
}

/// A swscale context rebuilt only when the input or output geometry changes.
#[derive(Default)]
pub(crate) struct Scaler {
    context: Option<(Key, Context)>,
    conversion: RgbConversion,
}

type Key = (Pixel, u32, u32, Pixel, u32, u32);

impl Scaler {
    pub(crate) fn with_conversion(conversion: RgbConversion) -> Self {
        Self {
            context: None,
            conversion,
        }
    }

    pub(crate) fn run(&mut self, src: &Frame, dst: &mut Frame) -> Result<()> {
        let key = (
            src.format(),
            src.width(),
            src.height(),
            dst.format(),
            dst.width(),
            dst.height(),
        );
        self.context(key)?
            .run(src, dst)
            .map_err(ffmpeg_err("scaling"))
    }

    /// The context for `key`, made when the geometry changed.
    fn context(&mut self, key: Key) -> Result<&mut Context> {
        if self.context.as_ref().is_none_or(|(k, _)| *k != key) {
            let flags = match self.conversion {
                RgbConversion::Accurate => {
                    Flags::BILINEAR
                        | Flags::ACCURATE_RND
                        | Flags::FULL_CHR_H_INT
                        | Flags::FULL_CHR_H_INP
                }
                RgbConversion::Fast => Flags::BILINEAR,
            };
            let ctx = Context::get(key.0, key.1, key.2, key.3, key.4, key.5, flags)
                .map_err(ffmpeg_err("creating the scaler"))?;
            self.context = Some((key, ctx));
        }
        match &mut self.context {
            Some((_, ctx)) => Ok(ctx),
            None => Err(crate::Error::InvalidInput("no scaler context".into())),
        }
    }

    /// Converts a decoded picture to packed RGB at `size` (or its own size).
    pub(crate) fn convert_to_rgb(
        &mut self,
        src: &Frame,
        size: Option<(usize, usize)>,
    ) -> Result<RgbImage> {
        let (w, h) = size.unwrap_or((src.width() as usize, src.height() as usize));
        let mut dst = Frame::new(Pixel::RGB24, w as u32, h as u32);
        self.run(src, &mut dst)?;
        Ok(RgbImage::new(w, h, packed_rows(&dst, w * 3, h)))
    }

    /// Converts a decoded picture to packed RGB at `size` (or its own size) straight into
    /// `dst`, which must hold exactly its `width * height * 3` bytes. Where swscale can
    /// write rows of that length in place (16-byte aligned, as its SIMD paths want) it
    /// does, with no intermediate picture; otherwise through one, copied row by row.
    pub(crate) fn convert_to_rgb_into(
        &mut self,
        src: &Frame,
        size: Option<(usize, usize)>,
        dst: &mut [u8],
    ) -> Result<()> {
        let (w, h) = size.unwrap_or((src.width() as usize, src.height() as usize));
        let row_bytes = w * 3;
        if dst.len() != row_bytes * h {
            return Err(crate::Error::InvalidInput(format!(
                "a {w}x{h} RGB picture needs {} bytes, not {}",
                row_bytes * h,
                dst.len()
            )));
        }
        let in_place = row_bytes.is_multiple_of(16) && (dst.as_ptr() as usize).is_multiple_of(16);
        let (Ok(stride), Ok(rows)) = (i32::try_from(row_bytes), i32::try_from(src.height())) else {
            return Err(crate::Error::InvalidInput(format!(
                "a {w}x{h} picture is too large"
            )));
        };
        if !in_place {
            let image = self.convert_to_rgb(src, size)?;
            dst.copy_from_slice(&image.data);
            return Ok(());
        }
        let key = (
            src.format(),
            src.width(),
            src.height(),
            Pixel::RGB24,
            w as u32,
            h as u32,
        );
        let context = self.context(key)?;
        let planes: [*mut u8; 4] = [
            dst.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        ];
        let strides: [i32; 4] = [stride, 0, 0, 0];
        // SAFETY: the context was made for `src`'s format and geometry and an RGB24 output
        // of `w`x`h`; `dst` holds exactly `h` rows of `stride` bytes, the one plane RGB24
        // has; `src`'s planes and line sizes are its own, valid while it is borrowed.
        let written = unsafe {
            let frame = src.as_ptr();
            ffmpeg_next::ffi::sws_scale(
                context.as_mut_ptr(),
                (*frame).data.as_ptr() as *const *const u8,
                (*frame).linesize.as_ptr(),
                0,
                rows,
                planes.as_ptr(),
                strides.as_ptr(),
            )
        };
        if written < 0 {
            return Err(crate::Error::InvalidInput(format!(
                "swscale failed converting a {w}x{h} picture ({written})"
            )));
        }
        Ok(())
    }
}

/// Copies plane 0 of `frame` without its row padding.
pub(crate) fn packed_rows(frame: &Frame, row_bytes: usize, rows: usize) -> Vec<u8> {
    let stride = frame.stride(0);
    let data = frame.data(0);
    let mut out = Vec::with_capacity(row_bytes * rows);
    for y in 0..rows {
        out.extend_from_slice(&data[y * stride..y * stride + row_bytes]);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rgb_yuv420_round_trip_of_smooth_colours_is_close() {
        let (w, h) = (64usize, 32usize);
        let data: Vec<u8> = (0..w * h)
            .flat_map(|p| [(p % w * 3) as u8, 80, (p / w * 6) as u8])
            .collect();
        let mut rgb = Frame::new(Pixel::RGB24, w as u32, h as u32);
        let stride = rgb.stride(0);
        for y in 0..h {
            rgb.data_mut(0)[y * stride..y * stride + w * 3]
                .copy_from_slice(&data[y * w * 3..(y + 1) * w * 3]);
        }
        let mut yuv = Frame::new(Pixel::YUV420P, w as u32, h as u32);
        let mut s = Scaler::default();
        s.run(&rgb, &mut yuv).unwrap();
        let mut back = Scaler::default();
        let out = back.convert_to_rgb(&yuv, None).unwrap();
        let q = crate::quality::psnr(&data, &out.data);
        assert!(q > 40.0, "{q}");
    }
}
