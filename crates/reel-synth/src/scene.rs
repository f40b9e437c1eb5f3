//! Procedural camera footage that compresses like real footage.
//!
//! Flat colours and smooth gradients make every codec figure meaningless, so a
//! scene here is a large textured world (fractal noise, boxes with hard edges,
//! fine grain) seen through a moving camera: pan, zoom, roll and hand-held
//! shake, with textured objects moving across it, lighting that drifts in
//! brightness and colour temperature, vignetting and per-pixel sensor noise.
//!
//! [`SceneRenderer::render`] is a pure function of time, so the same instant
//! always gives the same pixels: benchmarks can compare a codec's output
//! against the exact raw frame.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How strongly the camera moves: a fixed overhead camera barely moves, a
/// wrist camera swings and shakes with the arm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CameraMotion {
    /// Pan amplitude as a fraction of the frame width.
    pub pan: f32,
    /// Relative zoom amplitude (0.1 = ±10 %).
    pub zoom: f32,
    /// Roll amplitude in radians.
    pub roll: f32,
    /// Hand-held shake amplitude in output pixels.
    pub shake: f32,
}

impl CameraMotion {
    /// A fixed scene camera: slow drift and a little vibration.
    pub const FIXED: Self = Self {
        pan: 0.15,
        zoom: 0.05,
        roll: 0.01,
        shake: 0.6,
    };
    /// A wrist camera: large, fast motion.
    pub const WRIST: Self = Self {
        pan: 0.6,
        zoom: 0.2,
        roll: 0.12,
        shake: 2.5,
    };
}

/// A textured object that moves through the world on a Lissajous path.
#[derive(Debug, Clone)]
struct Sprite {
    texture: Texture,
    /// Half extents in world pixels.
    half_w: f32,
    half_h: f32,
    elliptic: bool,
    centre: (f32, f32),
    amplitude: (f32, f32),
    frequency: (f32, f32),
    phase: (f32, f32),
    spin: f32,
}

/// An RGB texture sampled with bilinear filtering and wrap-around.
#[derive(Debug, Clone)]
struct Texture {
    width: usize,
    height: usize,
    rgb: Vec<f32>,
}

impl Texture {
    #[inline]
    fn sample(&self, x: f32, y: f32) -> [f32; 3] {
        let (w, h) = (self.width as f32, self.height as f32);
        let x = x.rem_euclid(w);
        let y = y.rem_euclid(h);
        let x0 = x.floor();
        let y0 = y.floor();
        let fx = x - x0;
        let fy = y - y0;
        let x0 = x0 as usize % self.width;
        let y0 = y0 as usize % self.height;
        let x1 = (x0 + 1) % self.width;
        let y1 = (y0 + 1) % self.height;
        let at = |xx: usize, yy: usize| (yy * self.width + xx) * 3;
        let (a, b, c, d) = (at(x0, y0), at(x1, y0), at(x0, y1), at(x1, y1));
        let mut out = [0.0; 3];
        for (ch, o) in out.iter_mut().enumerate() {
            let top = self.rgb[a + ch] * (1.0 - fx) + self.rgb[b + ch] * fx;
            let bottom = self.rgb[c + ch] * (1.0 - fx) + self.rgb[d + ch] * fx;
            *o = top * (1.0 - fy) + bottom * fy;
        }
        out
    }
}

/// Fractal value noise in [0, 1] over a `width` × `height` tile that wraps.
fn fractal_noise(
    rng: &mut ChaCha8Rng,
    width: usize,
    height: usize,
    base_cell: usize,
    octaves: usize,
) -> Vec<f32> {
    let mut out = vec![0.0f32; width * height];
    let mut amplitude = 1.0f32;
    let mut total = 0.0f32;
    let mut cell = base_cell.max(1);
    for _ in 0..octaves {
        let gw = width.div_ceil(cell).max(1);
        let gh = height.div_ceil(cell).max(1);
        let grid: Vec<f32> = (0..gw * gh).map(|_| rng.random::<f32>()).collect();
        for y in 0..height {
            let gy = y as f32 / cell as f32;
            let y0 = gy.floor() as usize % gh;
            let y1 = (y0 + 1) % gh;
            let ty = smooth(gy.fract());
            for x in 0..width {
                let gx = x as f32 / cell as f32;
                let x0 = gx.floor() as usize % gw;
                let x1 = (x0 + 1) % gw;
                let tx = smooth(gx.fract());
                let top = grid[y0 * gw + x0] * (1.0 - tx) + grid[y0 * gw + x1] * tx;
                let bottom = grid[y1 * gw + x0] * (1.0 - tx) + grid[y1 * gw + x1] * tx;
                out[y * width + x] += amplitude * (top * (1.0 - ty) + bottom * ty);
            }
        }
        total += amplitude;
        amplitude *= 0.55;
        cell = (cell / 2).max(1);
    }
    for v in &mut out {
        *v /= total;
    }
    out
}

fn smooth(t: f32) -> f32 {
    t * t * (3.0 - 2.0 * t)
}

fn random_colour(rng: &mut ChaCha8Rng) -> [f32; 3] {
    [
        rng.random_range(20.0..235.0),
        rng.random_range(20.0..235.0),
        rng.random_range(20.0..235.0),
    ]
}

/// A noise texture blended between two colours, with fine grain on top.
fn noise_texture(rng: &mut ChaCha8Rng, width: usize, height: usize, base_cell: usize) -> Texture {
    let low = random_colour(rng);
    let high = random_colour(rng);
    let noise = fractal_noise(rng, width, height, base_cell, 5);
    let mut rgb = Vec::with_capacity(width * height * 3);
    for &n in &noise {
        let grain = rng.random_range(-6.0f32..6.0);
        for ch in 0..3 {
            rgb.push(low[ch] + (high[ch] - low[ch]) * n + grain);
        }
    }
    Texture { width, height, rgb }
}

/// The static world: a noise background with boxes, discs and stripes drawn on it.
fn world_texture(rng: &mut ChaCha8Rng, width: usize, height: usize) -> Texture {
    let mut world = noise_texture(rng, width, height, 96);
    let shapes = (width * height / 12_000).max(12);
    for _ in 0..shapes {
        let patch = noise_texture(rng, 64, 64, 16);
        let cx = rng.random_range(0.0..width as f32);
        let cy = rng.random_range(0.0..height as f32);
        let hw = rng.random_range(8.0..(width as f32 / 10.0).max(9.0));
        let hh = rng.random_range(8.0..(height as f32 / 10.0).max(9.0));
        let disc = rng.random_bool(0.35);
        let striped = rng.random_bool(0.3);
        let border = rng.random_range(0.0..40.0f32);
        let x0 = (cx - hw - 2.0).max(0.0) as usize;
        let x1 = ((cx + hw + 2.0) as usize).min(width);
        let y0 = (cy - hh - 2.0).max(0.0) as usize;
        let y1 = ((cy + hh + 2.0) as usize).min(height);
        for y in y0..y1 {
            for x in x0..x1 {
                let u = (x as f32 - cx) / hw;
                let v = (y as f32 - cy) / hh;
                let inside = if disc {
                    u * u + v * v
                } else {
                    u.abs().max(v.abs())
                };
                if inside > 1.0 {
                    continue;
                }
                let edge = inside > 1.0 - 2.0 / hw.min(hh);
                let mut c = patch.sample(x as f32, y as f32);
                if striped && ((x as f32 + y as f32 * 0.5) / 6.0).floor() as i64 % 2 == 0 {
                    for ch in &mut c {
                        *ch *= 0.75;
                    }
                }
                let px = &mut world.rgb[(y * width + x) * 3..(y * width + x) * 3 + 3];
                for ch in 0..3 {
                    px[ch] = if edge { border } else { c[ch] };
                }
            }
        }
    }
    world
}

/// Renders one camera's view of a procedural scene; see the module docs.
#[derive(Debug, Clone)]
pub struct SceneRenderer {
    width: usize,
    height: usize,
    seed: u64,
    world: Texture,
    sprites: Vec<Sprite>,
    motion: CameraMotion,
    /// Frequencies and phases of the camera path and lighting.
    wave: [(f32, f32); 8],
    vignette: Vec<f32>,
}

impl SceneRenderer {
    /// A scene for a fixed camera, `width` × `height` RGB output.
    pub fn new(seed: u64, width: u32, height: u32) -> Self {
        Self::with_motion(seed, width, height, CameraMotion::FIXED)
    }

    /// A scene whose camera moves as `motion` says.
    pub fn with_motion(seed: u64, width: u32, height: u32, motion: CameraMotion) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5ce4_e5ce_4e5c_e000);
        let (w, h) = (width.max(1) as usize, height.max(1) as usize);
        let world = world_texture(&mut rng, (w * 3).max(64), (h * 3).max(64));
        let sprite_count = rng.random_range(3..6);
        let sprites = (0..sprite_count)
            .map(|_| Sprite {
                texture: noise_texture(&mut rng, 48, 48, 12),
                half_w: rng.random_range(0.06..0.16) * w as f32,
                half_h: rng.random_range(0.06..0.16) * h as f32,
                elliptic: rng.random_bool(0.5),
                centre: (
                    rng.random_range(0.3..0.7) * world.width as f32,
                    rng.random_range(0.3..0.7) * world.height as f32,
                ),
                amplitude: (
                    rng.random_range(0.1..0.6) * w as f32,
                    rng.random_range(0.1..0.6) * h as f32,
                ),
                frequency: (rng.random_range(0.2..1.2), rng.random_range(0.2..1.2)),
                phase: (rng.random_range(0.0..6.3), rng.random_range(0.0..6.3)),
                spin: rng.random_range(-0.8..0.8),
            })
            .collect();
        let wave =
            std::array::from_fn(|_| (rng.random_range(0.15..0.9), rng.random_range(0.0..6.3)));
        let vignette = (0..w * h)
            .map(|i| {
                let x = (i % w) as f32 / w as f32 - 0.5;
                let y = (i / w) as f32 / h as f32 - 0.5;
                1.0 - 0.9 * (x * x + y * y)
            })
            .collect();
        Self {
            width: w,
            height: h,
            seed,
            world,
            sprites,
            motion,
            wave,
            vignette,
        }
    }

    /// Output width in pixels.
    pub fn width(&self) -> u32 {
        self.width as u32
    }

    /// Output height in pixels.
    pub fn height(&self) -> u32 {
        self.height as u32
    }

    fn wave(&self, i: usize, t: f32) -> f32 {
        let (f, p) = self.wave[i];
        (std::f32::consts::TAU * f * t + p).sin()
    }

    /// The frame at `t_seconds`, as packed RGB24 (`width * height * 3` bytes).
    pub fn render(&self, t_seconds: f64) -> Vec<u8> {
        let t = t_seconds as f32;
        let (w, h) = (self.width as f32, self.height as f32);
        let m = self.motion;
        // Camera path: slow pan, breathing zoom, roll, and shake made of
        // incommensurate fast sinusoids (deterministic in t).
        let shake_x = m.shake * ((t * 37.1).sin() * 0.6 + (t * 53.7 + 1.3).sin() * 0.4);
        let shake_y = m.shake * ((t * 41.3 + 0.7).sin() * 0.6 + (t * 61.1 + 2.1).sin() * 0.4);
        let cx =
            self.world.width as f32 / 2.0 + m.pan * w * self.wave(0, t) + 0.02 * w * t + shake_x;
        let cy = self.world.height as f32 / 2.0 + 0.5 * m.pan * h * self.wave(1, t) + shake_y;
        let zoom = 1.0 + m.zoom * self.wave(2, t);
        let roll = m.roll * self.wave(3, t);
        let (sin_r, cos_r) = (roll.sin() / zoom, roll.cos() / zoom);
        // Lighting: brightness drift and a colour-temperature swing.
        let gain = 1.0 + 0.12 * self.wave(4, t) + 0.05 * self.wave(5, 0.37 * t);
        let warm = 0.06 * self.wave(6, t);
        let channel_gain = [gain * (1.0 + warm), gain, gain * (1.0 - warm)];

        let mut frame = vec![0.0f32; self.width * self.height * 3];
        for y in 0..self.height {
            let dy = y as f32 - h / 2.0;
            for x in 0..self.width {
                let dx = x as f32 - w / 2.0;
                let wx = cx + cos_r * dx - sin_r * dy;
                let wy = cy + sin_r * dx + cos_r * dy;
                let c = self.world.sample(wx, wy);
                let o = (y * self.width + x) * 3;
                frame[o..o + 3].copy_from_slice(&c);
            }
        }
        for sprite in &self.sprites {
            self.draw_sprite(&mut frame, sprite, t, (cx, cy), (cos_r, sin_r));
        }

        let mut noise = NoiseStream::new(self.seed ^ t_seconds.to_bits());
        let mut out = Vec::with_capacity(frame.len());
        for (i, px) in frame.chunks_exact(3).enumerate() {
            let v = self.vignette[i];
            for ch in 0..3 {
                let value = px[ch] * channel_gain[ch] * v + noise.gaussian() * 2.5;
                out.push(value.round().clamp(0.0, 255.0) as u8);
            }
        }
        out
    }

    fn draw_sprite(
        &self,
        frame: &mut [f32],
        s: &Sprite,
        t: f32,
        centre: (f32, f32),
        rot: (f32, f32),
    ) {
        let tau = std::f32::consts::TAU;
        let sx = s.centre.0 + s.amplitude.0 * (tau * s.frequency.0 * t + s.phase.0).sin();
        let sy = s.centre.1 + s.amplitude.1 * (tau * s.frequency.1 * t + s.phase.1).sin();
        let angle = s.spin * t;
        let (sa, ca) = angle.sin_cos();
        let (cos_r, sin_r) = rot;
        let (w, h) = (self.width as f32, self.height as f32);
        // World → screen is the inverse of the camera's screen → world map.
        let det = cos_r * cos_r + sin_r * sin_r;
        let (rx, ry) = (sx - centre.0, sy - centre.1);
        let screen_x = (cos_r * rx + sin_r * ry) / det + w / 2.0;
        let screen_y = (-sin_r * rx + cos_r * ry) / det + h / 2.0;
        let reach = (s.half_w.max(s.half_h) * 1.5) / det.sqrt();
        let x0 = (screen_x - reach).max(0.0) as usize;
        let x1 = ((screen_x + reach).max(0.0) as usize).min(self.width);
        let y0 = (screen_y - reach).max(0.0) as usize;
        let y1 = ((screen_y + reach).max(0.0) as usize).min(self.height);
        for y in y0..y1 {
            let dy = y as f32 - h / 2.0;
            for x in x0..x1 {
                let dx = x as f32 - w / 2.0;
                let wx = centre.0 + cos_r * dx - sin_r * dy - sx;
                let wy = centre.1 + sin_r * dx + cos_r * dy - sy;
                let u = (ca * wx + sa * wy) / s.half_w;
                let v = (-sa * wx + ca * wy) / s.half_h;
                let r = if s.elliptic {
                    (u * u + v * v).sqrt()
                } else {
                    u.abs().max(v.abs())
                };
                if r > 1.0 {
                    continue;
                }
                // Soft one-pixel anti-aliased edge, darker rim like a shadow.
                let alpha = ((1.0 - r) * s.half_w.min(s.half_h)).clamp(0.0, 1.0);
                let c = s.texture.sample(u * 24.0 + 24.0, v * 24.0 + 24.0);
                let shade = if r > 0.9 { 0.6 } else { 1.0 };
                let o = (y * self.width + x) * 3;
                for ch in 0..3 {
                    frame[o + ch] = frame[o + ch] * (1.0 - alpha) + c[ch] * shade * alpha;
                }
            }
        }
    }
}

/// A small, fast, deterministic noise source (SplitMix64 + Box–Muller-free
/// approximation: sum of uniforms), seeded per frame.
struct NoiseStream(u64);

impl NoiseStream {
    fn new(seed: u64) -> Self {
        Self(seed)
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Approximately standard normal: the sum of four uniforms, rescaled.
    #[inline]
    fn gaussian(&mut self) -> f32 {
        let r = self.next_u64();
        let sum: u32 = (0..4).map(|i| ((r >> (i * 16)) & 0xffff) as u32).sum();
        // Four U(0, 65535) sum to mean 131070, variance 4 * 65536² / 12.
        (sum as f32 - 131_070.0) / 37_837.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_is_a_pure_function_of_time() {
        let scene = SceneRenderer::new(7, 64, 48);
        assert_eq!(scene.render(1.25), scene.render(1.25));
        assert_ne!(scene.render(1.25), scene.render(1.2833));
        assert_eq!(scene.render(0.0).len(), 64 * 48 * 3);
    }

    #[test]
    fn frames_are_textured_not_flat() {
        let scene = SceneRenderer::new(3, 96, 72);
        let frame = scene.render(0.5);
        // Mean absolute difference between horizontal neighbours: flat or
        // gradient images score near zero, real footage several levels.
        let mut diff = 0u64;
        let mut n = 0u64;
        for row in frame.chunks_exact(96 * 3) {
            for x in 3..row.len() {
                diff += (row[x] as i32 - row[x - 3] as i32).unsigned_abs() as u64;
                n += 1;
            }
        }
        let mean = diff as f64 / n as f64;
        assert!(
            mean > 4.0,
            "neighbour difference {mean} too small for realistic texture"
        );
        let distinct: std::collections::HashSet<&[u8]> = frame.chunks_exact(3).collect();
        assert!(
            distinct.len() > 1000,
            "only {} distinct colours",
            distinct.len()
        );
    }

    #[test]
    fn camera_moves_between_frames() {
        let scene = SceneRenderer::with_motion(11, 64, 48, CameraMotion::WRIST);
        let a = scene.render(0.0);
        let b = scene.render(0.5);
        let mad: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (*x as i32 - *y as i32).unsigned_abs() as f64)
            .sum::<f64>()
            / a.len() as f64;
        assert!(
            mad > 10.0,
            "frames half a second apart differ by only {mad}"
        );
    }
}
