//! What the messages hold: joint states and commands, and camera JPEGs, with the faults
//! that cover them applied (frozen, dark and corrupt frames; jumps and choppy joints).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::active_fault::ActiveFault;
use crate::config::{Flavor, SynthConfig};
use crate::error::SynthError;
use crate::faults::FaultKind;
use crate::motion::ArmMotion;
use crate::scene::SceneRenderer;
use crate::stream::Tick;
use crate::{foxglove, ros2};

pub(crate) fn joint_payload(
    flavor: Flavor,
    stamp: u64,
    names: &[String],
    p: &[f64],
    v: &[f64],
    e: &[f64],
) -> Vec<u8> {
    match flavor {
        Flavor::Ros2 => ros2::joint_state(stamp, names, p, v, e),
        Flavor::Foxglove => foxglove::joint_state_json(stamp, names, p, v, e),
    }
}

pub(crate) fn joint_sample(
    motion: &ArmMotion,
    tick: &Tick,
    rng: &mut ChaCha8Rng,
    faults: &mut [ActiveFault],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut sample_time = tick.t;
    let mut extra_noise = 0.0;
    for f in faults.iter_mut() {
        if f.plan.kind == FaultKind::ChoppyJoints && f.plan.covers(tick.t) {
            // Stair-steps at 10 Hz plus jitter: what a failing bus looks like.
            sample_time = (tick.t * 10.0).floor() / 10.0;
            extra_noise = 0.03;
            f.touch(tick.log_time);
        }
    }
    let q = motion.positions(sample_time);
    let dq = motion.velocities(sample_time);
    let mut position: Vec<f64> = q
        .iter()
        .map(|x| x + rng.random_range(-3e-4..3e-4))
        .collect();
    if extra_noise > 0.0 {
        for p in &mut position {
            *p += rng.random_range(-extra_noise..extra_noise);
        }
    }
    for f in faults.iter_mut() {
        if f.plan.kind == FaultKind::JointJump && f.touched.is_none() && tick.t >= f.plan.start {
            position[f.plan.joint] += f.plan.magnitude;
            f.touch(tick.log_time);
        }
    }
    let velocity: Vec<f64> = dq
        .iter()
        .map(|x| x + rng.random_range(-2e-3..2e-3))
        .collect();
    let effort: Vec<f64> = q
        .iter()
        .zip(&dq)
        .map(|(q, v)| 2.0 * q.cos() + 0.3 * v + rng.random_range(-0.02..0.02))
        .collect();
    (position, velocity, effort)
}

pub(crate) fn camera_frame(
    config: &SynthConfig,
    renderer: &SceneRenderer,
    camera: usize,
    tick: &Tick,
    faults: &mut [ActiveFault],
    previous: &Option<Vec<u8>>,
) -> Result<Vec<u8>, SynthError> {
    for f in faults.iter_mut().filter(|f| f.plan.camera == camera) {
        match f.plan.kind {
            FaultKind::FrozenFrames if f.plan.covers(tick.t) => {
                if f.frozen_jpeg.is_none() {
                    f.frozen_jpeg = match previous {
                        Some(jpeg) => Some(jpeg.clone()),
                        None => Some(encode_jpeg(config, &renderer.render(tick.t))?),
                    };
                }
                f.touch(tick.log_time);
                return Ok(f.frozen_jpeg.clone().unwrap_or_default());
            }
            FaultKind::CameraBlackout if f.plan.covers(tick.t) => {
                let dark: Vec<u8> = renderer
                    .render(tick.t)
                    .iter()
                    .map(|&v| (v as f32 * 0.04 + 2.0) as u8)
                    .collect();
                f.touch(tick.log_time);
                return encode_jpeg(config, &dark);
            }
            FaultKind::CorruptFrame if f.touched.is_none() && tick.t >= f.plan.start => {
                let mut jpeg = encode_jpeg(config, &renderer.render(tick.t))?;
                corrupt_jpeg(&mut jpeg, tick.log_time);
                f.touch(tick.log_time);
                return Ok(jpeg);
            }
            _ => {}
        }
    }
    encode_jpeg(config, &renderer.render(tick.t))
}

fn encode_jpeg(config: &SynthConfig, rgb: &[u8]) -> Result<Vec<u8>, SynthError> {
    let mut out = Vec::with_capacity(rgb.len() / 8);
    let encoder = jpeg_encoder::Encoder::new(&mut out, config.jpeg_quality);
    encoder.encode(
        rgb,
        config.width as u16,
        config.height as u16,
        jpeg_encoder::ColorType::Rgb,
    )?;
    Ok(out)
}

/// Keeps the start-of-image marker, overwrites the headers and the first
/// part of the scan with noise and cuts the rest: no decoder can recover it.
fn corrupt_jpeg(jpeg: &mut Vec<u8>, salt: u64) {
    let keep = (jpeg.len() * 3 / 5).max(64).min(jpeg.len());
    jpeg.truncate(keep);
    let mut state = salt | 1;
    for byte in jpeg.iter_mut().skip(2) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Never write 0xFF: no accidental markers.
        *byte = (state % 255) as u8;
    }
}
