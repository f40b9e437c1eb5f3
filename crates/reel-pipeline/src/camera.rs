//! Step 4a: one pass over a camera — decode every landing frame once, measure it for the
//! quality checks, and encode the frames the grid shows to H.264.
//!
//! One pass keeps memory at two decoded frames whatever the episode length, and decodes
//! each JPEG exactly once, so ingest costs little more than the encoder alone.

use reel_landing::{
    CameraEncoder, CameraFrames, DecodedFrame, EncodeConfig, FrameTimes, LandingCamera,
};
use reel_mcap::{CameraStream, CameraWindows, VideoOrigin};

use crate::resample::CameraGrid;
use crate::{Error, Result};

/// What one landing frame looked like.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameStat {
    /// Log time of the landing frame.
    pub log_time: u64,
    /// Whether it decoded (and had the stream's size).
    pub decoded: bool,
    /// Mean luma, 0–255 (0 when not decoded).
    pub mean_luma: f32,
    /// Share of pixels whose luma is below the black-pixel threshold.
    pub black_ratio: f32,
    /// Mean squared error against the previous decoded frame, 0–255² (None for the first).
    pub mse_to_previous: Option<f32>,
}

/// A camera after its pass.
#[derive(Debug, Clone)]
pub struct CameraOutput {
    /// The canonical stream (H.264 access units at grid times).
    pub stream: CameraStream,
    /// One entry per landing frame, in order.
    pub stats: Vec<FrameStat>,
    /// Grid points that showed an earlier frame because the picked one did not decode.
    pub substituted: u64,
}

/// Luma statistics of a frame: (mean luma, share of pixels with luma below `black_luma`).
/// BT.601 weights in integers; every pixel counts.
pub(crate) fn luma_stats(rgb: &[u8], black_luma: f32) -> (f32, f32) {
    let threshold = (black_luma * 256.0) as u32;
    let (mut sum, mut black, mut n) = (0u64, 0u64, 0u64);
    for p in rgb.chunks_exact(3) {
        // 77/150/29 ≈ 0.299/0.587/0.114 in 1/256ths.
        let y = 77 * p[0] as u32 + 150 * p[1] as u32 + 29 * p[2] as u32;
        sum += y as u64;
        black += (y < threshold) as u64;
        n += 1;
    }
    if n == 0 {
        return (0.0, 0.0);
    }
    (
        (sum as f64 / n as f64 / 256.0) as f32,
        (black as f64 / n as f64) as f32,
    )
}

fn mse(a: &[u8], b: &[u8]) -> f32 {
    let sum: u64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = x as i32 - y as i32;
            (d * d) as u64
        })
        .sum();
    (sum as f64 / a.len().max(1) as f64) as f32
}

/// Decodes every frame of `camera`, measures it, and encodes the frames `grid` picks,
/// forcing a keyframe at the start of each of `windows`, so every camera's first frame in
/// a chunk window is a keyframe. A camera kept as recorded (`video` is
/// [`VideoOrigin::Kept`]) is decoded for its measurements only and its recorded stream
/// is the output. `black_luma` is the luma (0–255) below which a pixel counts as black.
pub fn encode_camera(
    name: &str,
    camera: &LandingCamera,
    grid: &CameraGrid,
    windows: CameraWindows,
    video: VideoOrigin,
    config: &EncodeConfig,
    black_luma: f32,
) -> Result<CameraOutput> {
    let video_err = |source| Error::Video {
        name: name.to_owned(),
        topic: camera.topic.clone(),
        source,
    };
    let fps = (1e9 / grid.period_ns as f64).round() as u32;
    let mut pictures = CameraFrames::new(camera);
    let mut encoder = CameraEncoder::new(name, &camera.topic, windows, config.encoder(fps));
    let mut size: Option<(usize, usize)> = None;
    let mut stats: Vec<FrameStat> = Vec::with_capacity(camera.frames.len());
    let mut last_good: Option<(usize, DecodedFrame)> = None;
    let mut substituted = 0;

    let mut decode_through =
        |index: usize,
         stats: &mut Vec<FrameStat>,
         last_good: &mut Option<(usize, DecodedFrame)>| {
            while stats.len() <= index {
                let Some((at, decoded)) = pictures.next_decoded() else {
                    break;
                };
                let frame = &camera.frames[at];
                let decoded = decoded.ok().filter(|d| {
                    let img = &d.rgb;
                    *size.get_or_insert((img.width, img.height)) == (img.width, img.height)
                });
                let stat = match decoded.as_ref().map(|d| &d.rgb) {
                    Some(img) => {
                        let (mean_luma, black_ratio) = luma_stats(&img.data, black_luma);
                        FrameStat {
                            log_time: frame.log_time,
                            decoded: true,
                            mean_luma,
                            black_ratio,
                            mse_to_previous: last_good
                                .as_ref()
                                .map(|(_, prev)| mse(&prev.rgb.data, &img.data)),
                        }
                    }
                    None => FrameStat {
                        log_time: frame.log_time,
                        decoded: false,
                        mean_luma: 0.0,
                        black_ratio: 0.0,
                        mse_to_previous: None,
                    },
                };
                stats.push(stat);
                if let Some(decoded) = decoded {
                    *last_good = Some((stats.len() - 1, decoded));
                }
            }
        };

    if video == VideoOrigin::Kept {
        if !camera.frames.is_empty() {
            decode_through(camera.frames.len() - 1, &mut stats, &mut last_good);
        }
        let stream = reel_landing::keep_recorded_video(camera, config.camera_group.clone())
            .map_err(video_err)?;
        return Ok(CameraOutput {
            stream,
            stats,
            substituted: 0,
        });
    }
    for &(t, index) in &grid.picks {
        decode_through(index, &mut stats, &mut last_good);
        let Some((shown, decoded)) = &last_good else {
            continue; // nothing decodable yet
        };
        if *shown != index {
            substituted += 1;
        }
        encoder.push(decoded, FrameTimes::at(t))?;
    }
    if !camera.frames.is_empty() {
        decode_through(camera.frames.len() - 1, &mut stats, &mut last_good);
    }
    let frames = encoder.finish()?;
    let (width, height) = size.unwrap_or((0, 0));
    Ok(CameraOutput {
        stream: CameraStream {
            topic: camera.topic.clone(),
            group: config.camera_group.clone(),
            frame_id: camera.frame_id.clone(),
            width,
            height,
            source_encoding: camera.source_encoding(),
            video,
            frames,
        },
        stats,
        substituted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luma_of_black_white_and_grey() {
        let black = vec![0u8; 30];
        let white = vec![255u8; 30];
        assert_eq!(luma_stats(&black, 25.5), (0.0, 1.0));
        let (y, b) = luma_stats(&white, 25.5);
        assert!((y - 255.0).abs() < 1.0 && b == 0.0);
        let half: Vec<u8> = [0u8, 0, 0, 200, 200, 200].repeat(5);
        let (y, b) = luma_stats(&half, 25.5);
        assert!((y - 100.0).abs() < 1.0 && (b - 0.5).abs() < 1e-6);
        assert_eq!(mse(&[0, 10], &[3, 6]), 12.5);
    }
}
