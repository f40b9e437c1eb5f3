//! Smooth bimanual arm motion with idle periods, and the hand poses it implies.
//!
//! Each joint follows a sum of slow sinusoids of a task phase `s(t)`; the
//! phase advances at an activity level in [0, 1] that ramps smoothly between
//! idle (start, pauses, end) and motion, as teleoperated episodes do.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Joints per arm: six revolute joints and a gripper.
pub const JOINTS_PER_ARM: usize = 7;
/// Two arms.
pub const JOINTS: usize = 2 * JOINTS_PER_ARM;

/// Joint names, left arm then right.
pub fn joint_names() -> Vec<String> {
    ["left", "right"]
        .iter()
        .flat_map(|side| {
            (1..JOINTS_PER_ARM)
                .map(move |j| format!("{side}_joint{j}"))
                .chain(std::iter::once(format!("{side}_gripper")))
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Wave {
    amplitude: f64,
    omega: f64,
    phase: f64,
}

/// The motion of both arms over one episode.
#[derive(Debug, Clone)]
pub struct ArmMotion {
    /// Phase `s` sampled every `GRID_DT` seconds.
    phase: Vec<f64>,
    activity: Vec<f64>,
    base: [f64; JOINTS],
    waves: Vec<Vec<Wave>>,
}

const GRID_DT: f64 = 0.002;

fn smoothstep(x: f64) -> f64 {
    let x = x.clamp(0.0, 1.0);
    x * x * (3.0 - 2.0 * x)
}

impl ArmMotion {
    /// Motion for an episode of `seconds`.
    pub fn new(rng: &mut ChaCha8Rng, seconds: f64) -> Self {
        // Idle spans: the start, one or two pauses, the end.
        // The first span starts before t = 0 so the episode opens fully idle.
        let mut idle = vec![
            (-1.0, rng.random_range(0.6..1.1)),
            (seconds - rng.random_range(0.3..0.6), seconds + 1.0),
        ];
        let pauses = if seconds > 6.0 {
            rng.random_range(1..3)
        } else {
            0
        };
        for _ in 0..pauses {
            let start = rng.random_range(1.5..(seconds - 2.5).max(1.6));
            idle.push((start, start + rng.random_range(0.6..1.2)));
        }
        let steps = (seconds / GRID_DT).ceil() as usize + 2;
        let ramp = 0.25;
        let mut activity = Vec::with_capacity(steps);
        let mut phase = Vec::with_capacity(steps);
        let mut s = 0.0;
        for i in 0..steps {
            let t = i as f64 * GRID_DT;
            // Distance into the nearest idle span, ramped at both edges.
            let a = idle
                .iter()
                .map(|&(a, b)| 1.0 - smoothstep(((t - a) / ramp).min((b - t) / ramp)))
                .fold(1.0f64, f64::min);
            activity.push(a);
            phase.push(s);
            s += a * GRID_DT;
        }
        let base = std::array::from_fn(|j| {
            if j % JOINTS_PER_ARM == JOINTS_PER_ARM - 1 {
                0.04
            } else {
                rng.random_range(-0.8..0.8)
            }
        });
        let waves = (0..JOINTS)
            .map(|j| {
                let gripper = j % JOINTS_PER_ARM == JOINTS_PER_ARM - 1;
                (0..3)
                    .map(|k| Wave {
                        amplitude: if gripper {
                            0.012
                        } else {
                            rng.random_range(0.15..0.5) / (k + 1) as f64
                        },
                        omega: rng.random_range(0.5..2.0) * (k + 1) as f64,
                        phase: rng.random_range(0.0..std::f64::consts::TAU),
                    })
                    .collect()
            })
            .collect();
        Self {
            phase,
            activity,
            base,
            waves,
        }
    }

    fn sample(&self, grid: &[f64], t: f64) -> f64 {
        let x = (t / GRID_DT).max(0.0);
        let i = (x.floor() as usize).min(grid.len() - 2);
        let f = (x - i as f64).min(1.0);
        grid[i] * (1.0 - f) + grid[i + 1] * f
    }

    /// Activity level in [0, 1] at `t` (0 = idle).
    pub fn activity(&self, t: f64) -> f64 {
        self.sample(&self.activity, t)
    }

    /// Joint positions (rad; grippers in metres of opening) at `t`.
    pub fn positions(&self, t: f64) -> [f64; JOINTS] {
        let s = self.sample(&self.phase, t);
        std::array::from_fn(|j| {
            self.base[j]
                + self.waves[j]
                    .iter()
                    .map(|w| w.amplitude * (w.omega * s + w.phase).sin())
                    .sum::<f64>()
        })
    }

    /// Joint velocities at `t`: dq/dt = dq/ds · ds/dt.
    pub fn velocities(&self, t: f64) -> [f64; JOINTS] {
        let s = self.sample(&self.phase, t);
        let a = self.activity(t);
        std::array::from_fn(|j| {
            a * self.waves[j]
                .iter()
                .map(|w| w.amplitude * w.omega * (w.omega * s + w.phase).cos())
                .sum::<f64>()
        })
    }

    /// Hand pose (position in metres, orientation quaternion xyzw) of `hand`
    /// (0 left, 1 right) at `t`: a smooth function of that arm's joints.
    pub fn hand_pose(&self, hand: usize, t: f64) -> ([f64; 3], [f64; 4]) {
        let q = self.positions(t);
        let j = &q[hand * JOINTS_PER_ARM..(hand + 1) * JOINTS_PER_ARM];
        let side = if hand == 0 { 1.0 } else { -1.0 };
        let position = [
            0.35 + 0.15 * j[1].sin() + 0.05 * j[2].cos(),
            side * 0.25 + 0.12 * j[0].sin(),
            0.20 + 0.10 * j[2].sin() - 0.05 * j[3].cos(),
        ];
        let (yaw, pitch, roll) = (j[3], 0.5 * j[4], 0.5 * j[5]);
        let (cy, sy) = ((yaw / 2.0).cos(), (yaw / 2.0).sin());
        let (cp, sp) = ((pitch / 2.0).cos(), (pitch / 2.0).sin());
        let (cr, sr) = ((roll / 2.0).cos(), (roll / 2.0).sin());
        let orientation = [
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy,
        ];
        (position, orientation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn motion_is_smooth_and_has_idle_periods() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let m = ArmMotion::new(&mut rng, 10.0);
        assert!(m.activity(0.1) < 0.01, "episodes start idle");
        let dt = 0.005;
        let mut max_step = 0.0f64;
        let mut moving = 0;
        for i in 0..2000 {
            let t = i as f64 * dt;
            let (a, b) = (m.positions(t), m.positions(t + dt));
            for j in 0..JOINTS {
                max_step = max_step.max((a[j] - b[j]).abs());
            }
            if m.activity(t) > 0.99 {
                moving += 1;
            }
        }
        assert!(
            max_step < 0.05,
            "a 200 Hz step of {max_step} rad is not smooth"
        );
        assert!(moving > 1000, "the arm should move most of the episode");
    }

    #[test]
    fn velocities_match_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let m = ArmMotion::new(&mut rng, 8.0);
        let t = 3.0;
        let h = 1e-4;
        let (a, b, v) = (m.positions(t - h), m.positions(t + h), m.velocities(t));
        for j in 0..JOINTS {
            let fd = (b[j] - a[j]) / (2.0 * h);
            assert!(
                (fd - v[j]).abs() < 0.05,
                "joint {j}: analytic {} vs numeric {fd}",
                v[j]
            );
        }
    }

    #[test]
    fn hand_orientation_is_a_unit_quaternion() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let m = ArmMotion::new(&mut rng, 4.0);
        let (_, q) = m.hand_pose(1, 2.0);
        let norm: f64 = q.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-9);
        assert_eq!(joint_names().len(), JOINTS);
        assert_eq!(joint_names()[6], "left_gripper");
    }
}
