//! Step 2: every stream onto one time grid per episode.
//!
//! The grid has one origin per episode (the earliest log time of any stream); stream `s`
//! is sampled at `origin + k * period_s` for every `k` between its first and last message.
//! Numeric streams are interpolated linearly between the two landing samples around a grid
//! point; cameras take the nearest previous frame. A grid point whose landing neighbours
//! are further apart than `max_gap_periods` landing periods lies in a gap: it is left out
//! and the gap recorded, never filled in.

use reel_landing::{LandingCamera, LandingEpisode};
use reel_mcap::records::median_period_ns;
use reel_mcap::{Sample, SignalKind};
use serde::{Deserialize, Serialize};

/// Target rates and the gap bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResampleConfig {
    /// Camera grid rate, Hz.
    pub camera_hz: f64,
    /// Joint-state grid rate, Hz.
    pub state_hz: f64,
    /// Action grid rate, Hz.
    pub action_hz: f64,
    /// Hand-pose (and other pose) grid rate, Hz.
    pub hand_hz: f64,
    /// Rate of other numeric streams, Hz.
    pub signal_hz: f64,
    /// A silence longer than this many landing periods (the stream's median interval) is
    /// a gap: not interpolated across, and flagged by the quality checks.
    pub max_gap_periods: f64,
    /// Where streams are written: on the grid (`resampled`, the default), or at their
    /// recorded times (`as_recorded`, what `reel-pack` writes). Left out of the settings
    /// digest while `resampled`.
    #[serde(skip_serializing_if = "Grid::is_resampled")]
    pub grid: Grid,
}

/// Where the streams of a canonical episode are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grid {
    /// On one time grid per episode: numeric streams interpolated, cameras
    /// nearest-previous, derived signals added.
    #[default]
    Resampled,
    /// Every message at its recorded times, as `reel-pack` writes it: no interpolation,
    /// no derived signals.
    AsRecorded,
}

impl Grid {
    fn is_resampled(&self) -> bool {
        *self == Self::Resampled
    }
}

impl Default for ResampleConfig {
    fn default() -> Self {
        Self {
            camera_hz: 30.0,
            state_hz: 200.0,
            action_hz: 50.0,
            hand_hz: 30.0,
            signal_hz: 50.0,
            // Jitter of ±10 % plus two lost messages in a row stays below 3.5 periods.
            max_gap_periods: 3.5,
            grid: Grid::Resampled,
        }
    }
}

impl ResampleConfig {
    /// Grid rate of a numeric stream of `kind`.
    pub fn rate_of(&self, kind: SignalKind) -> f64 {
        match kind {
            SignalKind::State => self.state_hz,
            SignalKind::Action => self.action_hz,
            SignalKind::Pose => self.hand_hz,
            SignalKind::Signal => self.signal_hz,
        }
    }

    /// Checks rates and bound.
    pub fn validate(&self) -> crate::Result<()> {
        let rates = [
            self.camera_hz,
            self.state_hz,
            self.action_hz,
            self.hand_hz,
            self.signal_hz,
        ];
        if rates
            .iter()
            .any(|r| !(r.is_finite() && *r > 0.0 && *r <= 100_000.0))
        {
            return Err(crate::Error::Config(
                "resample rates must be in (0, 100000] Hz".into(),
            ));
        }
        if !(self.max_gap_periods.is_finite() && self.max_gap_periods >= 1.0) {
            return Err(crate::Error::Config(
                "max_gap_periods must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// A numeric stream on its grid.
#[derive(Debug, Clone)]
pub struct GridSignal {
    /// Topic.
    pub topic: String,
    /// What it measures.
    pub kind: SignalKind,
    /// Value names.
    pub fields: Vec<String>,
    /// Landing schema.
    pub source_schema: String,
    /// Grid period, ns.
    pub period_ns: u64,
    /// Interpolated samples at grid times (log time = stamp = grid time).
    pub samples: Vec<Sample>,
    /// Grid points between the first and last landing sample.
    pub grid_points: u64,
    /// Landing samples left out because a value was NaN or infinite.
    pub invalid_samples: u64,
    /// Gaps in the landing stream longer than the bound, as (last before, first after).
    pub gaps: Vec<(u64, u64)>,
}

/// A camera on its grid: which landing frame each grid point shows.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraGrid {
    /// Topic.
    pub topic: String,
    /// Grid period, ns.
    pub period_ns: u64,
    /// `(grid time, index of the landing frame shown)`, in time order.
    pub picks: Vec<(u64, usize)>,
    /// Grid points between the first and last landing frame.
    pub grid_points: u64,
    /// Grid points that repeat the previous grid point's frame.
    pub duplicated: u64,
    /// Landing frames no grid point shows.
    pub dropped: u64,
    /// Gaps in the landing stream longer than the bound, as (last before, first after).
    pub gaps: Vec<(u64, u64)>,
}

/// An episode's streams on the common grid.
#[derive(Debug, Clone)]
pub struct Resampled {
    /// Grid origin: earliest log time of any stream.
    pub origin_ns: u64,
    /// Numeric streams.
    pub signals: Vec<GridSignal>,
    /// Cameras.
    pub cameras: Vec<CameraGrid>,
}

/// A stream's period by Reel's one rule ([`median_period_ns`]), 0 when it has none.
pub(crate) fn median_period(times: impl Iterator<Item = u64>) -> u64 {
    median_period_ns(times).unwrap_or(0)
}

/// Silences longer than `bound` between consecutive times, as (last before, first after).
pub(crate) fn gaps_of(times: &[u64], bound: u64) -> Vec<(u64, u64)> {
    times
        .windows(2)
        .filter(|w| w[1].saturating_sub(w[0]) > bound)
        .map(|w| (w[0], w[1]))
        .collect()
}

fn period_ns(hz: f64) -> u64 {
    ((1e9 / hz).round() as u64).max(1)
}

/// Grid times of a stream spanning `first..=last`: `origin + k * period`.
fn grid(origin: u64, period: u64, first: u64, last: u64) -> impl Iterator<Item = u64> {
    let k0 = (first - origin).div_ceil(period);
    let k1 = (last - origin) / period;
    (k0..=k1)
        .map(move |k| origin + k * period)
        .take_while(move |&t| t <= last)
}

fn gap_bound(median: u64, config: &ResampleConfig) -> u64 {
    (median as f64 * config.max_gap_periods) as u64
}

/// The episode's time origin: the earliest first log time of any stream.
pub fn episode_origin(episode: &LandingEpisode) -> u64 {
    episode
        .cameras
        .iter()
        .filter_map(|c| c.frames.first().map(|f| f.log_time))
        .chain(
            episode
                .signals
                .iter()
                .filter_map(|s| s.samples.first().map(|s| s.log_time)),
        )
        .min()
        .unwrap_or(0)
}

/// Resamples every stream of `episode` onto the episode's grid.
pub fn resample(episode: &LandingEpisode, config: &ResampleConfig) -> Resampled {
    let origin = episode_origin(episode);
    let signals = episode
        .signals
        .iter()
        .map(|s| {
            resample_signal(
                &s.topic, s.kind, &s.fields, &s.schema, &s.samples, origin, config,
            )
        })
        .collect();
    let cameras = episode
        .cameras
        .iter()
        .map(|c| resample_camera(c, origin, config))
        .collect();
    Resampled {
        origin_ns: origin,
        signals,
        cameras,
    }
}

/// Every stream of `episode` on the grid of its own recorded times, for the summary of an
/// episode written as recorded ([`Grid::AsRecorded`]): each sample and frame kept, with
/// the stream's median period (0 for a stream of one message) and its gaps.
pub fn recorded_grid(episode: &LandingEpisode, config: &ResampleConfig) -> Resampled {
    let signals = episode
        .signals
        .iter()
        .map(|s| {
            let times: Vec<u64> = s.samples.iter().map(|x| x.log_time).collect();
            let median = median_period(times.iter().copied());
            let finite = |x: &&Sample| x.values.iter().all(|v| v.is_finite());
            GridSignal {
                topic: s.topic.clone(),
                kind: s.kind,
                fields: s.fields.clone(),
                source_schema: s.schema.clone(),
                period_ns: median,
                samples: s.samples.clone(),
                grid_points: times.len() as u64,
                invalid_samples: (times.len() - s.samples.iter().filter(finite).count()) as u64,
                gaps: gaps_of(&times, gap_bound(median, config)),
            }
        })
        .collect();
    let cameras = episode
        .cameras
        .iter()
        .map(|c| {
            let times: Vec<u64> = c.frames.iter().map(|f| f.log_time).collect();
            let median = median_period(times.iter().copied());
            CameraGrid {
                topic: c.topic.clone(),
                period_ns: median,
                picks: times.iter().copied().zip(0..).collect(),
                grid_points: times.len() as u64,
                duplicated: 0,
                dropped: 0,
                gaps: gaps_of(&times, gap_bound(median, config)),
            }
        })
        .collect();
    Resampled {
        origin_ns: episode_origin(episode),
        signals,
        cameras,
    }
}

fn resample_signal(
    topic: &str,
    kind: SignalKind,
    fields: &[String],
    schema: &str,
    landing: &[Sample],
    origin: u64,
    config: &ResampleConfig,
) -> GridSignal {
    let period = period_ns(config.rate_of(kind));
    // Only finite samples take part; a run of NaN becomes a gap.
    let valid: Vec<&Sample> = landing
        .iter()
        .filter(|s| s.values.iter().all(|v| v.is_finite()))
        .collect();
    let invalid_samples = (landing.len() - valid.len()) as u64;
    let median = median_period(landing.iter().map(|s| s.log_time));
    let bound = gap_bound(median, config);
    let times: Vec<u64> = valid.iter().map(|s| s.log_time).collect();
    let gaps = gaps_of(&times, bound);
    let mut samples = Vec::new();
    let mut grid_points = 0;
    if let (Some(first), Some(last)) = (valid.first(), valid.last()) {
        let mut right = 0;
        for t in grid(origin, period, first.log_time, last.log_time) {
            grid_points += 1;
            // First landing sample at or after t.
            while right < valid.len() && valid[right].log_time < t {
                right += 1;
            }
            let Some(after) = valid.get(right) else { break };
            let values = if after.log_time == t {
                after.values.clone()
            } else {
                let Some(before) = right.checked_sub(1).map(|i| valid[i]) else {
                    continue;
                };
                if after.log_time - before.log_time > bound {
                    continue;
                }
                let w = (t - before.log_time) as f64 / (after.log_time - before.log_time) as f64;
                before
                    .values
                    .iter()
                    .zip(&after.values)
                    .map(|(a, b)| a + (b - a) * w)
                    .collect()
            };
            samples.push(Sample {
                log_time: t,
                publish_time: t,
                stamp_ns: t,
                values,
            });
        }
    }
    GridSignal {
        topic: topic.to_owned(),
        kind,
        fields: fields.to_vec(),
        source_schema: schema.to_owned(),
        period_ns: period,
        samples,
        grid_points,
        invalid_samples,
        gaps,
    }
}

fn resample_camera(camera: &LandingCamera, origin: u64, config: &ResampleConfig) -> CameraGrid {
    let period = period_ns(config.camera_hz);
    let times: Vec<u64> = camera.frames.iter().map(|f| f.log_time).collect();
    let median = median_period(times.iter().copied());
    let bound = gap_bound(median, config);
    let gaps = gaps_of(&times, bound);
    let mut picks: Vec<(u64, usize)> = Vec::new();
    let mut grid_points = 0;
    let mut shown = vec![false; times.len()];
    if let (Some(&first), Some(&last)) = (times.first(), times.last()) {
        let mut next = 0;
        for t in grid(origin, period, first, last) {
            grid_points += 1;
            while next < times.len() && times[next] <= t {
                next += 1;
            }
            // Nearest previous frame; inside a gap the grid point shows nothing.
            let Some(index) = next.checked_sub(1) else {
                continue;
            };
            let inside_gap = times
                .get(next)
                .is_some_and(|&after| after - times[index] > bound);
            if inside_gap && t - times[index] > median {
                continue;
            }
            shown[index] = true;
            picks.push((t, index));
        }
    }
    let duplicated = picks.windows(2).filter(|w| w[0].1 == w[1].1).count() as u64;
    let dropped = shown.iter().filter(|s| !**s).count() as u64;
    CameraGrid {
        topic: camera.topic.clone(),
        period_ns: period,
        picks,
        grid_points,
        duplicated,
        dropped,
        gaps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_landing::{ImageEncoding, LandingFrame, LandingSignal};

    fn sample(t: u64, v: f64) -> Sample {
        Sample {
            log_time: t,
            publish_time: t,
            stamp_ns: t,
            values: vec![v, -v],
        }
    }

    fn signal(samples: Vec<Sample>) -> LandingSignal {
        LandingSignal {
            topic: "/joint_states".into(),
            schema: "sensor_msgs/msg/JointState".into(),
            kind: SignalKind::State,
            fields: vec!["j.position".into(), "k.position".into()],
            samples,
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn interpolates_linearly_on_the_grid() {
        // 100 Hz landing ramp v = t (in ms), jittered, resampled to 200 Hz.
        let times = [0, 11, 19, 30, 41, 50];
        let episode = LandingEpisode {
            signals: vec![signal(
                times
                    .iter()
                    .map(|&t| sample(1000 * MS + t * MS, t as f64))
                    .collect(),
            )],
            ..Default::default()
        };
        let r = resample(&episode, &ResampleConfig::default());
        assert_eq!(r.origin_ns, 1000 * MS);
        let s = &r.signals[0];
        assert_eq!(s.period_ns, 5 * MS);
        assert_eq!(s.grid_points, 11);
        assert_eq!(s.samples.len(), 11);
        for (k, sample) in s.samples.iter().enumerate() {
            let t_ms = 5.0 * k as f64;
            assert_eq!(sample.log_time, 1000 * MS + 5 * MS * k as u64);
            assert!(
                (sample.values[0] - t_ms).abs() < 1e-9,
                "{k}: {:?}",
                sample.values
            );
            assert!((sample.values[1] + t_ms).abs() < 1e-9);
        }
        assert!(s.gaps.is_empty());
    }

    #[test]
    fn gaps_are_flagged_not_filled_and_nan_is_a_gap() {
        let mut samples: Vec<Sample> = (0..100).map(|i| sample(i * 10 * MS, i as f64)).collect();
        // Silence from 200 ms to 500 ms; NaN from 700 ms to 800 ms.
        samples.retain(|s| !(200 * MS < s.log_time && s.log_time < 500 * MS));
        for s in &mut samples {
            if (700 * MS..=800 * MS).contains(&s.log_time) {
                s.values[0] = f64::NAN;
            }
        }
        let episode = LandingEpisode {
            signals: vec![signal(samples)],
            ..Default::default()
        };
        let s = &resample(&episode, &ResampleConfig::default()).signals[0];
        assert_eq!(s.gaps, vec![(200 * MS, 500 * MS), (690 * MS, 810 * MS)]);
        assert_eq!(s.invalid_samples, 11);
        assert!(
            s.samples
                .iter()
                .all(|x| x.values.iter().all(|v| v.is_finite()))
        );
        let inside = |t: u64| (200 * MS < t && t < 500 * MS) || (690 * MS < t && t < 810 * MS);
        assert!(s.samples.iter().all(|x| !inside(x.log_time)));
        // Everything outside the gaps is on the grid.
        let outside = (0..=990 / 5).filter(|k| !inside(k * 5 * MS)).count();
        assert_eq!(s.samples.len(), outside);
    }

    #[test]
    fn cameras_take_the_previous_frame_and_count_duplicates_and_drops() {
        let frame = |t: u64| LandingFrame {
            log_time: t,
            publish_time: t,
            stamp_ns: t,
            encoding: ImageEncoding::Jpeg,
            data: Default::default(),
        };
        // 20 Hz landing camera (50 ms) onto a 30 Hz grid (33.3 ms): every other grid
        // point repeats a frame; then a 60 Hz burst, where frames are dropped.
        let mut times: Vec<u64> = (0..10).map(|i| i * 50 * MS).collect();
        times.extend((1..=12).map(|i| 450 * MS + i * 16_666_667));
        let camera = LandingCamera {
            topic: "/cam".into(),
            schema: "sensor_msgs/msg/CompressedImage".into(),
            frame_id: "cam".into(),
            frames: times.iter().map(|&t| frame(t)).collect(),
        };
        let episode = LandingEpisode {
            cameras: vec![camera],
            ..Default::default()
        };
        let g = &resample(&episode, &ResampleConfig::default()).cameras[0];
        for &(t, i) in &g.picks {
            assert!(times[i] <= t);
            assert!(times.get(i + 1).is_none_or(|&n| n > t));
        }
        let shown: std::collections::BTreeSet<usize> = g.picks.iter().map(|p| p.1).collect();
        assert_eq!(g.dropped, (times.len() - shown.len()) as u64);
        assert!(g.dropped > 0 && g.duplicated > 0);
        assert_eq!(g.picks.len() as u64, g.grid_points);
    }
}
