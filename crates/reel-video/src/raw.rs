//! Uncompressed landing pixels (`sensor_msgs/Image`, `foxglove.RawImage`) to packed RGB:
//! every 8-bit colour layout robots record, any row stride and padding.

use crate::{Error, Result, RgbImage};

/// The 2x2 colour-filter order of a Bayer sensor, top-left first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BayerPattern {
    /// Red, green / green, blue.
    Rggb,
    /// Blue, green / green, red.
    Bggr,
    /// Green, blue / red, green.
    Gbrg,
    /// Green, red / blue, green.
    Grbg,
}

impl BayerPattern {
    /// Colour (0 red, 1 green, 2 blue) of the sensor pixel at (x, y).
    fn colour(self, x: usize, y: usize) -> usize {
        let order = match self {
            Self::Rggb => [0, 1, 1, 2],
            Self::Bggr => [2, 1, 1, 0],
            Self::Gbrg => [1, 2, 0, 1],
            Self::Grbg => [1, 0, 2, 1],
        };
        order[(y % 2) * 2 + x % 2]
    }
}

/// How the pixels of an uncompressed 8-bit image are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PixelLayout {
    /// `rgb8`.
    Rgb8,
    /// `bgr8`.
    Bgr8,
    /// `rgba8` (alpha dropped).
    Rgba8,
    /// `bgra8` (alpha dropped).
    Bgra8,
    /// `mono8` / `8UC1`.
    Mono8,
    /// `yuv422_yuy2` / `yuyv`: Y0 U Y1 V, BT.601 limited range.
    Yuyv,
    /// `yuv422` / `uyvy`: U Y0 V Y1, BT.601 limited range.
    Uyvy,
    /// `bayer_*8`: one colour per pixel, demosaicked.
    Bayer(BayerPattern),
}

impl PixelLayout {
    /// The layout of a ROS 2 / Foxglove encoding name, or `None` for one this does not
    /// convert (16-bit and float images are depth, not colour).
    pub fn from_name(encoding: &str) -> Option<Self> {
        Some(match encoding.to_ascii_lowercase().as_str() {
            "rgb8" => Self::Rgb8,
            "bgr8" => Self::Bgr8,
            "rgba8" => Self::Rgba8,
            "bgra8" => Self::Bgra8,
            "mono8" | "8uc1" => Self::Mono8,
            "yuv422_yuy2" | "yuyv" => Self::Yuyv,
            "yuv422" | "uyvy" => Self::Uyvy,
            "bayer_rggb8" => Self::Bayer(BayerPattern::Rggb),
            "bayer_bggr8" => Self::Bayer(BayerPattern::Bggr),
            "bayer_gbrg8" => Self::Bayer(BayerPattern::Gbrg),
            "bayer_grbg8" => Self::Bayer(BayerPattern::Grbg),
            _ => return None,
        })
    }

    /// Bytes of one row of `width` pixels, without padding.
    pub fn row_bytes(self, width: usize) -> usize {
        width
            * match self {
                Self::Rgb8 | Self::Bgr8 => 3,
                Self::Rgba8 | Self::Bgra8 => 4,
                Self::Yuyv | Self::Uyvy => 2,
                Self::Mono8 | Self::Bayer(_) => 1,
            }
    }
}

/// A raw image's geometry checked against its bytes: `Ok` when `data` holds `height` rows
/// of `step` bytes, each with room for `width` pixels (the last row may omit its padding).
pub fn check_raw(
    layout: PixelLayout,
    width: usize,
    height: usize,
    step: usize,
    data_len: usize,
) -> Result<()> {
    if matches!(layout, PixelLayout::Yuyv | PixelLayout::Uyvy) && width % 2 == 1 && height > 0 {
        return Err(Error::InvalidInput(format!(
            "4:2:2 image has an odd width {width}"
        )));
    }
    check_rows(layout.row_bytes(width), width, height, step, data_len)
}

/// `Ok` when `data_len` bytes hold `height` rows `step` apart, each of `row` bytes.
pub(crate) fn check_rows(
    row: usize,
    width: usize,
    height: usize,
    step: usize,
    data_len: usize,
) -> Result<()> {
    let needed = step
        .checked_mul(height.saturating_sub(1))
        .and_then(|n| n.checked_add(row));
    let bad = |reason: String| Err(Error::InvalidInput(reason));
    if width == 0 || height == 0 {
        return bad(format!("raw image is {width}x{height}"));
    }
    if step < row {
        return bad(format!(
            "raw image {width}x{height}: step {step} is shorter than a row of {row} bytes"
        ));
    }
    match needed {
        Some(n) if n <= data_len => Ok(()),
        _ => bad(format!(
            "raw image {width}x{height} with step {step} needs {} bytes, the message holds {data_len}",
            needed.map_or_else(|| "more than usize".to_owned(), |n| n.to_string())
        )),
    }
}

/// Converts raw pixels to packed RGB.
pub fn raw_to_rgb(
    layout: PixelLayout,
    width: usize,
    height: usize,
    step: usize,
    data: &[u8],
) -> Result<RgbImage> {
    check_raw(layout, width, height, step, data.len())?;
    let row_bytes = layout.row_bytes(width);
    let rows = (0..height).map(|y| &data[y * step..y * step + row_bytes]);
    let mut rgb = Vec::with_capacity(width * height * 3);
    match layout {
        PixelLayout::Rgb8 => rows.for_each(|r| rgb.extend_from_slice(r)),
        PixelLayout::Bgr8 => rows.for_each(|r| {
            rgb.extend(r.chunks_exact(3).flat_map(|p| [p[2], p[1], p[0]]));
        }),
        PixelLayout::Rgba8 => rows.for_each(|r| {
            rgb.extend(r.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]));
        }),
        PixelLayout::Bgra8 => rows.for_each(|r| {
            rgb.extend(r.chunks_exact(4).flat_map(|p| [p[2], p[1], p[0]]));
        }),
        PixelLayout::Mono8 => rows.for_each(|r| rgb.extend(r.iter().flat_map(|&v| [v, v, v]))),
        PixelLayout::Yuyv | PixelLayout::Uyvy => rows.for_each(|r| {
            for m in r.chunks_exact(4) {
                let (y0, u, y1, v) = match layout {
                    PixelLayout::Yuyv => (m[0], m[1], m[2], m[3]),
                    _ => (m[1], m[0], m[3], m[2]),
                };
                rgb.extend(yuv_to_rgb(y0, u, v));
                rgb.extend(yuv_to_rgb(y1, u, v));
            }
        }),
        PixelLayout::Bayer(pattern) => {
            let rows: Vec<&[u8]> = rows.collect();
            demosaic(pattern, width, height, &rows, &mut rgb);
        }
    }
    Ok(RgbImage::new(width, height, rgb))
}

/// BT.601 limited range, as cv_bridge and FFmpeg convert 4:2:2 camera output.
fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [u8; 3] {
    let c = (f32::from(y) - 16.0) * 1.164;
    let d = f32::from(u) - 128.0;
    let e = f32::from(v) - 128.0;
    let clamp = |x: f32| x.round().clamp(0.0, 255.0) as u8;
    [
        clamp(c + 1.596 * e),
        clamp(c - 0.392 * d - 0.813 * e),
        clamp(c + 2.017 * d),
    ]
}

/// Each output channel the mean of that colour's sensor pixels in the 3x3 neighbourhood
/// (bilinear demosaicking; a flat colour comes back exactly).
fn demosaic(pattern: BayerPattern, width: usize, height: usize, rows: &[&[u8]], rgb: &mut Vec<u8>) {
    for y in 0..height {
        for x in 0..width {
            let mut sum = [0u32; 3];
            let mut count = [0u32; 3];
            let (y0, x0) = (y.saturating_sub(1), x.saturating_sub(1));
            for (ny, row) in rows.iter().enumerate().take(y + 2).skip(y0) {
                for (nx, &value) in row.iter().enumerate().take((x + 2).min(width)).skip(x0) {
                    let c = pattern.colour(nx, ny);
                    sum[c] += u32::from(value);
                    count[c] += 1;
                }
            }
            for (s, n) in sum.into_iter().zip(count) {
                // Every 2x2 Bayer tile has all three colours, so a 3x3 window (2x2 at a
                // corner) always counts each at least once.
                rgb.push((s + n / 2).checked_div(n).unwrap_or(0) as u8);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests fail loudly by design.
mod tests {
    use super::*;

    #[test]
    fn every_colour_layout_gives_the_same_pixels_with_padding() {
        let (w, h, pad) = (3, 2, 5);
        let rgb: Vec<[u8; 3]> = (0..w * h)
            .map(|i| [i as u8 * 10, 100 + i as u8, 200 - i as u8])
            .collect();
        let pack = |layout: PixelLayout, pixel: &dyn Fn([u8; 3]) -> Vec<u8>| {
            let step = layout.row_bytes(w) + pad;
            let mut data = Vec::new();
            for row in rgb.chunks(w) {
                data.extend(row.iter().flat_map(|&p| pixel(p)));
                data.extend(std::iter::repeat_n(0xEE, pad));
            }
            raw_to_rgb(layout, w, h, step, &data).unwrap().data
        };
        let expected: Vec<u8> = rgb.iter().flatten().copied().collect();
        assert_eq!(pack(PixelLayout::Rgb8, &|p| p.to_vec()), expected);
        assert_eq!(
            pack(PixelLayout::Bgr8, &|p| vec![p[2], p[1], p[0]]),
            expected
        );
        assert_eq!(
            pack(PixelLayout::Rgba8, &|p| vec![p[0], p[1], p[2], 7]),
            expected
        );
        assert_eq!(
            pack(PixelLayout::Bgra8, &|p| vec![p[2], p[1], p[0], 7]),
            expected
        );
        let mono = pack(PixelLayout::Mono8, &|p| vec![p[0]]);
        assert_eq!(mono[3..6], [10, 10, 10]);
    }

    #[test]
    fn yuv_grey_and_bayer_flat_colours_come_back() {
        // Y=126 U=V=128 is mid grey: (126-16)*1.164 = 128.
        for layout in [PixelLayout::Yuyv, PixelLayout::Uyvy] {
            let data = [126u8, 128, 126, 128].repeat(2);
            let data = if layout == PixelLayout::Uyvy {
                [128u8, 126].repeat(4)
            } else {
                data
            };
            let out = raw_to_rgb(layout, 2, 2, 4, &data).unwrap();
            assert!(
                out.data.iter().all(|&v| v == 128),
                "{layout:?}: {:?}",
                out.data
            );
        }
        for pattern in [
            BayerPattern::Rggb,
            BayerPattern::Bggr,
            BayerPattern::Gbrg,
            BayerPattern::Grbg,
        ] {
            let (w, h) = (5, 3);
            let colour = [200u8, 90, 30];
            let data: Vec<u8> = (0..h)
                .flat_map(|y| (0..w).map(move |x| colour[pattern.colour(x, y)]))
                .collect();
            let out = raw_to_rgb(PixelLayout::Bayer(pattern), w, h, w, &data).unwrap();
            assert_eq!(out.data, colour.repeat(w * h), "{pattern:?}");
        }
    }

    #[test]
    fn a_step_that_does_not_match_the_size_is_refused() {
        let err = raw_to_rgb(PixelLayout::Rgb8, 4, 4, 10, &[0; 48]).unwrap_err();
        assert!(
            err.to_string()
                .contains("step 10 is shorter than a row of 12"),
            "{err}"
        );
        let err = raw_to_rgb(PixelLayout::Rgb8, 4, 4, 12, &[0; 40]).unwrap_err();
        assert!(
            err.to_string()
                .contains("needs 48 bytes, the message holds 40"),
            "{err}"
        );
        assert!(raw_to_rgb(PixelLayout::Yuyv, 3, 2, 6, &[0; 12]).is_err());
        assert!(PixelLayout::from_name("16UC1").is_none());
    }
}
