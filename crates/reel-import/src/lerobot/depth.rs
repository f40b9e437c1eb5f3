//! LeRobot depth videos (features whose info says `is_depth_map`): 12-bit codes
//! (`gray12le`, HEVC, lossless by default) of a logarithmic or linear quantisation of depth
//! between `video.depth_min` and `video.depth_max` metres. Decoded and turned back into
//! millimetres as LeRobot's own reader does (`dequantize_depth`, in float32), they land as
//! Reel depth pictures (`16UC1`, millimetres), which ingest stores losslessly.

use reel_landing::{LandingImage, LandingImages};
use reel_video::{StreamDecoder, VideoSpan};

use super::Feature;

/// The largest 12-bit code.
const QMAX: f32 = 4095.0;

/// LeRobot's depth quantiser settings for one feature (its defaults where the feature's
/// info does not say).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Quantizer {
    depth_min_m: f64,
    depth_max_m: f64,
    shift_m: f64,
    use_log: bool,
}

impl Quantizer {
    pub(crate) fn of(feature: &Feature) -> Self {
        let info = feature.info.as_ref();
        let number = |key: &str, default: f64| {
            info.and_then(|i| i.get(key))
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(default)
        };
        Self {
            depth_min_m: number("video.depth_min", 0.01),
            depth_max_m: number("video.depth_max", 10.0),
            shift_m: number("video.shift", 3.5),
            use_log: info
                .and_then(|i| i.get("video.use_log"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(true),
        }
    }

    /// Depth in millimetres of one code, computed as LeRobot computes it (float32:
    /// `code * scale + offset`, `exp`, `- shift`, clamped, `* 1000`, rounded half to even).
    pub(crate) fn millimetres(&self, code: u16) -> u16 {
        let (scale, offset) = if self.use_log {
            let low = (self.depth_min_m + self.shift_m).ln();
            let high = (self.depth_max_m + self.shift_m).ln();
            ((high - low) / f64::from(QMAX), low)
        } else {
            (
                (self.depth_max_m - self.depth_min_m) / f64::from(QMAX),
                self.depth_min_m,
            )
        };
        let mut metres = f32::from(code) * scale as f32 + offset as f32;
        if self.use_log {
            metres = metres.exp() - self.shift_m as f32;
        }
        let metres = metres.clamp(self.depth_min_m as f32, self.depth_max_m as f32);
        (metres * 1000.0).round_ties_even().clamp(0.0, 65535.0) as u16
    }
}

/// Decodes a depth video's span (units in decode order) into depth pictures in
/// millimetres, frame `i` at `i * period_ns`.
pub(crate) fn depth_images(
    key: &str,
    span: &VideoSpan,
    quantizer: &Quantizer,
    period_ns: u64,
) -> reel_video::Result<LandingImages> {
    let mut decoder = StreamDecoder::new(span.codec)?;
    let mut pictures = Vec::with_capacity(span.units.len());
    for unit in &span.units {
        pictures.extend(decoder.push_pictures(&unit.data)?);
    }
    pictures.extend(decoder.finish_pictures()?);
    if pictures.len() != span.units.len() {
        return Err(reel_video::Error::NoPicture(format!(
            "{} pictures from {} access units",
            pictures.len(),
            span.units.len()
        )));
    }
    let frames = pictures
        .iter()
        .enumerate()
        .map(|(i, picture)| {
            let codes = picture.gray_values()?;
            Ok((
                i as u64 * period_ns,
                LandingImage::DepthMm {
                    width: picture.width(),
                    height: picture.height(),
                    data: codes
                        .into_iter()
                        .map(|c| quantizer.millimetres(c))
                        .collect(),
                },
            ))
        })
        .collect::<reel_video::Result<_>>()?;
    Ok(LandingImages {
        topic: format!("/{key}"),
        frame_id: key.to_owned(),
        frames,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_back_to_lerobots_range() {
        let q = Quantizer {
            depth_min_m: 0.01,
            depth_max_m: 10.0,
            shift_m: 3.5,
            use_log: true,
        };
        assert_eq!(q.millimetres(0), 10);
        assert_eq!(q.millimetres(4095), 10_000);
        // Monotonic, and finest near the camera.
        let near = q.millimetres(1) - q.millimetres(0);
        let far = q.millimetres(4095) - q.millimetres(4094);
        assert!(near < far, "{near} {far}");
        let linear = Quantizer {
            use_log: false,
            ..q
        };
        assert_eq!(linear.millimetres(4095), 10_000);
        assert_eq!(linear.millimetres(0), 10);
    }
}
