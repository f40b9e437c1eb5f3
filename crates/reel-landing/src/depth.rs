//! Landing depth cameras to canonical depth streams: every frame decoded to 16-bit values
//! (one rule for all of `16UC1`, `mono16`, `32FC1` and `compressedDepth`), nothing lossy.

use reel_mcap::{DepthFrame, DepthStream, Error, Result};
use reel_video::ImageDecoder;

use crate::episode::LandingCamera;

/// A depth camera converted, with what it cost.
#[derive(Debug, Clone)]
pub struct ConvertedDepth {
    /// The canonical stream.
    pub stream: DepthStream,
    /// Frames dropped because they did not decode or changed size (with `skip_bad_frames`).
    pub bad_frames: u64,
    /// Landing image bytes read.
    pub image_bytes: u64,
}

/// Converts a landing depth camera (one of [`crate::LandingEpisode::depths`]) for
/// [`reel_mcap::CanonicalEpisode::depths`]. A frame that does not decode, or whose size or
/// unit differs from the stream's first, fails the camera unless `skip_bad_frames`.
pub fn convert_depth(
    name: &str,
    camera: &LandingCamera,
    group: String,
    skip_bad_frames: bool,
) -> Result<ConvertedDepth> {
    let mut decoder = ImageDecoder::new();
    let mut frames = Vec::with_capacity(camera.frames.len());
    let mut shape = None;
    let mut bad_frames = 0;
    let mut image_bytes = 0;
    for frame in &camera.frames {
        image_bytes += frame.data.len() as u64;
        let image = match frame.encoding.to_depth(&mut decoder, &frame.data) {
            Ok(image) => image,
            Err(_) if skip_bad_frames => {
                bad_frames += 1;
                continue;
            }
            Err(source) => {
                return Err(Error::CorruptFrame {
                    name: name.into(),
                    topic: camera.topic.clone(),
                    log_time: frame.log_time,
                    source,
                });
            }
        };
        let this = (image.width, image.height, image.unit);
        let first = *shape.get_or_insert(this);
        if this != first {
            if skip_bad_frames {
                bad_frames += 1;
                continue;
            }
            return Err(Error::BadMessage {
                name: name.into(),
                topic: camera.topic.clone(),
                log_time: frame.log_time,
                reason: format!(
                    "depth frame is {}x{} ({}), the stream started at {}x{} ({})",
                    this.0,
                    this.1,
                    this.2.as_str(),
                    first.0,
                    first.1,
                    first.2.as_str()
                ),
            });
        }
        frames.push(DepthFrame {
            log_time: frame.log_time,
            publish_time: frame.publish_time,
            stamp_ns: frame.stamp_ns,
            data: image.data,
        });
    }
    let (width, height, unit) = shape.unwrap_or((0, 0, reel_video::DepthUnit::Millimetres));
    let source_encoding = camera.source_encoding();
    Ok(ConvertedDepth {
        stream: DepthStream {
            topic: camera.topic.clone(),
            group,
            frame_id: camera.frame_id.clone(),
            width,
            height,
            unit,
            source_encoding,
            frames,
        },
        bad_frames,
        image_bytes,
    })
}
