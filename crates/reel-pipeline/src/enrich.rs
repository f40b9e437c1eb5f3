//! Step 7: enrichment. An [`Enricher`] reads a canonical episode and produces a
//! [`LabelSet`] (time segments, scalar labels, a caption); the engine stores it as
//! `labels/<enricher>/<episode_id>.json`, stamped with provenance. Performance labellers,
//! captioners and segmenters plug in here; [`MotionSegments`] is the built-in one.

use std::collections::BTreeMap;

use reel_io::ByteSource;
use reel_mcap::EpisodeReader;
use serde::{Deserialize, Serialize};

use crate::canonical::{EpisodeSummary, Provenance};
use crate::derive::VELOCITY_TOPIC;
use crate::{Error, Result};

/// A labelled time span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Label.
    pub label: String,
    /// First log time (ns).
    pub start_ns: u64,
    /// Last log time (ns).
    pub end_ns: u64,
}

/// What an enricher says about one episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LabelSet {
    /// Episode.
    pub episode_id: String,
    /// Enricher name.
    pub enricher: String,
    /// Enricher version.
    pub enricher_version: String,
    /// What produced the canonical episode and this label set.
    pub provenance: Provenance,
    /// Time segments.
    #[serde(default)]
    pub segments: Vec<Segment>,
    /// Scalar labels (performance scores, fractions…).
    #[serde(default)]
    pub values: BTreeMap<String, f64>,
    /// Free-text caption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
}

/// A labeller of canonical episodes.
pub trait Enricher: Send + Sync + std::fmt::Debug {
    /// Name, used as the artifact folder (`labels/<name>/`).
    fn name(&self) -> &str;
    /// Version: a change re-labels every episode.
    fn version(&self) -> &str;
    /// Labels one episode. `summary` carries the episode's id, time range and streams.
    fn label(
        &self,
        episode: &EpisodeReader<&dyn ByteSource>,
        summary: &EpisodeSummary,
    ) -> Result<LabelSet>;
}

/// Idle and motion segments from the derived joint velocities: the mean joint speed,
/// smoothed over `smooth_s`, against `idle_rad_s`; segments shorter than `min_segment_s`
/// are merged into their neighbours.
#[derive(Debug, Clone, PartialEq)]
pub struct MotionSegments {
    /// Mean joint speed below which the arm is idle, rad/s.
    pub idle_rad_s: f64,
    /// Smoothing window, seconds.
    pub smooth_s: f64,
    /// Shortest segment kept, seconds.
    pub min_segment_s: f64,
}

impl Default for MotionSegments {
    fn default() -> Self {
        Self {
            idle_rad_s: 0.05,
            smooth_s: 0.1,
            min_segment_s: 0.3,
        }
    }
}

impl MotionSegments {
    /// Segments of a speed series (`times` in ns, one speed per time).
    pub fn segment(&self, times: &[u64], speed: &[f64]) -> Vec<Segment> {
        if times.is_empty() {
            return Vec::new();
        }
        // Moving average over a centred window of `smooth_s`.
        let half = (self.smooth_s * 1e9 / 2.0) as u64;
        let mut prefix = vec![0.0; speed.len() + 1];
        for (i, s) in speed.iter().enumerate() {
            prefix[i + 1] = prefix[i] + s;
        }
        let (mut lo, mut hi) = (0usize, 0usize);
        let mut labels: Vec<bool> = Vec::with_capacity(times.len());
        for &t in times {
            while times[lo] + half < t {
                lo += 1;
            }
            while hi < times.len() && times[hi] <= t + half {
                hi += 1;
            }
            let mean = (prefix[hi] - prefix[lo]) / (hi - lo).max(1) as f64;
            labels.push(mean >= self.idle_rad_s);
        }
        let mut runs: Vec<(bool, usize, usize)> = Vec::new();
        for (i, &moving) in labels.iter().enumerate() {
            match runs.last_mut() {
                Some(run) if run.0 == moving => run.2 = i,
                _ => runs.push((moving, i, i)),
            }
        }
        // Merge short runs into the previous one (or the next, at the start).
        let min_ns = (self.min_segment_s * 1e9) as u64;
        let mut merged: Vec<(bool, usize, usize)> = Vec::new();
        for run in runs {
            let short = times[run.2] - times[run.1] < min_ns;
            match merged.last_mut() {
                Some(last) if short || last.0 == run.0 => last.2 = run.2,
                _ => merged.push(run),
            }
        }
        if merged.len() > 1 && times[merged[0].2] - times[merged[0].1] < min_ns {
            let first = merged.remove(0);
            merged[0].1 = first.1;
        }
        merged
            .into_iter()
            .map(|(moving, a, b)| Segment {
                label: if moving { "motion" } else { "idle" }.into(),
                start_ns: times[a],
                end_ns: times[b],
            })
            .collect()
    }
}

impl Enricher for MotionSegments {
    fn name(&self) -> &str {
        "motion_segments"
    }

    fn version(&self) -> &str {
        "1"
    }

    fn label(
        &self,
        episode: &EpisodeReader<&dyn ByteSource>,
        summary: &EpisodeSummary,
    ) -> Result<LabelSet> {
        let mut set = LabelSet {
            episode_id: summary.episode_id.clone(),
            enricher: self.name().into(),
            enricher_version: self.version().into(),
            provenance: summary.provenance.clone(),
            ..LabelSet::default()
        };
        if episode.channel(VELOCITY_TOPIC).is_err() {
            return Ok(set); // no joint states, nothing to segment
        }
        let window = summary.start_ns..summary.end_ns.saturating_add(1);
        let velocities = episode.signals(&[VELOCITY_TOPIC], window)?;
        let Some(v) = velocities.first() else {
            return Ok(set);
        };
        let joints = v.fields.len().max(1);
        if v.values.len() != v.log_times.len() * joints {
            return Err(Error::Landing {
                name: summary.canonical_key.clone(),
                reason: format!("{VELOCITY_TOPIC}: values do not match its fields"),
            });
        }
        let speed: Vec<f64> = v
            .values
            .chunks_exact(joints)
            .map(|row| row.iter().map(|x| x.abs()).sum::<f64>() / joints as f64)
            .collect();
        set.segments = self.segment(&v.log_times, &speed);
        let idle: u64 = set
            .segments
            .iter()
            .filter(|s| s.label == "idle")
            .map(|s| s.end_ns - s.start_ns)
            .sum();
        let total = v.log_times.last().unwrap_or(&0) - v.log_times.first().unwrap_or(&0);
        if total > 0 {
            set.values
                .insert("idle_fraction".into(), idle as f64 / total as f64);
        }
        set.values.insert(
            "motion_segments".into(),
            set.segments.iter().filter(|s| s.label == "motion").count() as f64,
        );
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_motion_idle_with_noise_and_a_blip() {
        let ms = 1_000_000u64;
        let times: Vec<u64> = (0..600).map(|i| i * 5 * ms).collect(); // 3 s at 200 Hz
        let speed: Vec<f64> = times
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let noise = if i % 2 == 0 { 0.02 } else { 0.0 };
                let moving = (1000 * ms..2000 * ms).contains(&t);
                let blip = (2500 * ms..2520 * ms).contains(&t); // 20 ms twitch
                noise
                    + if moving {
                        0.8
                    } else if blip {
                        2.0
                    } else {
                        0.0
                    }
            })
            .collect();
        let segments = MotionSegments::default().segment(&times, &speed);
        let labels: Vec<&str> = segments.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["idle", "motion", "idle"]);
        assert!(
            segments[1].start_ns.abs_diff(1000 * ms) <= 60 * ms,
            "{segments:?}"
        );
        assert!(
            segments[1].end_ns.abs_diff(2000 * ms) <= 60 * ms,
            "{segments:?}"
        );
        assert_eq!(segments[0].start_ns, 0);
        assert_eq!(segments[2].end_ns, 2995 * ms);
    }
}
