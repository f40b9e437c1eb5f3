//! Depth frames of a synthetic depth camera: a table plane receding with the rows, a
//! gripper-sized disc circling above it, a few millimetres of per-pixel noise (what a
//! stereo or time-of-flight camera measures at a metre), and the speckle of pixels with
//! no return every such camera shows (0, "no reading", per REP 118).

/// A depth frame in millimetres at time `t` (seconds), rows top to bottom.
pub fn depth_frame(width: u32, height: u32, t: f64, seed: u64) -> Vec<u16> {
    let (w, h) = (width as f64, height as f64);
    let (cx, cy) = (
        w * (0.5 + 0.3 * (t * 0.9).cos()),
        h * (0.5 + 0.2 * (t * 1.3).sin()),
    );
    let radius = 0.15 * w.min(h);
    let frame = (t * 1000.0) as u64;
    let mut out = Vec::with_capacity((width * height) as usize);
    for y in 0..height {
        for x in 0..width {
            let draw = speckle(seed ^ frame.wrapping_mul(0x9e37_79b9), x, y);
            let noise = (draw >> 8) % 7;
            let d2 = (x as f64 - cx).powi(2) + (y as f64 - cy).powi(2);
            let mm = if draw.is_multiple_of(61) {
                0.0
            } else if d2 < radius * radius {
                450.0 - 80.0 * (1.0 - d2 / (radius * radius)) + noise as f64 - 3.0
            } else {
                700.0 + 400.0 * (y as f64 / h) + noise as f64 - 3.0
            };
            out.push(mm.round() as u16);
        }
    }
    out
}

fn speckle(seed: u64, x: u32, y: u32) -> u64 {
    let mut z = seed ^ (u64::from(x) << 32 | u64::from(y)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 31)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_has_the_plane_the_disc_and_holes() {
        let d = depth_frame(64, 48, 0.0, 1);
        assert_eq!(d.len(), 64 * 48);
        let holes = d.iter().filter(|&&v| v == 0).count();
        assert!((10..200).contains(&holes), "{holes}");
        assert!(d.iter().any(|&v| (367..=453).contains(&v)), "disc");
        assert!(d.iter().any(|&v| v >= 1000), "far rows");
        assert_eq!(d, depth_frame(64, 48, 0.0, 1));
        assert_ne!(d, depth_frame(64, 48, 0.5, 1));
    }
}
