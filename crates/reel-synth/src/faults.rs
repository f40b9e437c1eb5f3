//! Fault injection and its ground-truth sidecar (`<episode>.faults.json`).
//!
//! Faults are placed in non-overlapping spans (with a margin) so each one is
//! unambiguous for the quality checks that must find it.

use rand::{
    Rng,
    seq::{IndexedRandom, SliceRandom},
};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The kinds of fault a recorder or sensor really produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A camera delivers near-black frames (lens cap, exposure failure).
    CameraBlackout,
    /// A camera repeats the same frame (stuck driver).
    FrozenFrames,
    /// One JPEG frame is truncated and overwritten: undecodable.
    CorruptFrame,
    /// One joint-state sample spikes by a large angle and returns.
    JointJump,
    /// Joint positions stair-step and jitter (encoder or bus trouble).
    ChoppyJoints,
    /// A hand-pose stream goes missing or reports NaN.
    HandPoseDropout,
    /// The recorder stalls: no topic publishes for a while.
    TimestampGap,
}

impl FaultKind {
    /// Every kind, in a fixed order.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::CameraBlackout,
        FaultKind::FrozenFrames,
        FaultKind::CorruptFrame,
        FaultKind::JointJump,
        FaultKind::ChoppyJoints,
        FaultKind::HandPoseDropout,
        FaultKind::TimestampGap,
    ];

    /// The snake_case name used in the sidecar and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::CameraBlackout => "camera_blackout",
            FaultKind::FrozenFrames => "frozen_frames",
            FaultKind::CorruptFrame => "corrupt_frame",
            FaultKind::JointJump => "joint_jump",
            FaultKind::ChoppyJoints => "choppy_joints",
            FaultKind::HandPoseDropout => "hand_pose_dropout",
            FaultKind::TimestampGap => "timestamp_gap",
        }
    }

    /// Parses [`FaultKind::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// How long a fault of this kind lasts, in seconds (min, max).
    fn duration_range(self) -> (f64, f64) {
        match self {
            // Long enough for FFmpeg-style detectors (≥ 2 s) to call them.
            FaultKind::CameraBlackout | FaultKind::FrozenFrames => (2.0, 3.0),
            FaultKind::CorruptFrame | FaultKind::JointJump => (0.0, 0.0),
            FaultKind::ChoppyJoints => (0.5, 1.5),
            FaultKind::HandPoseDropout => (0.5, 1.5),
            FaultKind::TimestampGap => (0.3, 1.0),
        }
    }
}

/// How a hand-pose dropout shows up in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropoutMode {
    /// No messages at all during the span.
    Missing,
    /// Messages keep coming with NaN positions.
    Nan,
}

/// One injected fault: what, where (topic, joint) and when.
///
/// Times are absolute log times in nanoseconds, `start_ns..=end_ns`
/// inclusive; instantaneous faults have `start_ns == end_ns` and hit the one
/// message logged at that time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    /// The affected topic, or `"*"` for every topic.
    pub topic: String,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The affected joint (joint faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joint: Option<String>,
    /// Spike size in radians (joint jumps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub magnitude: Option<f64>,
    /// Missing or NaN (hand-pose dropouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<DropoutMode>,
}

/// The ground truth written beside each episode.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FaultLog {
    pub episode_id: String,
    pub faults: Vec<Fault>,
    /// Messages dropped at random (ordinary transport loss, not a fault), per topic.
    pub dropped_messages: BTreeMap<String, u64>,
}

/// Expected faults per minute of episode, for each kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultRates {
    pub per_minute: BTreeMap<FaultKind, f64>,
}

impl FaultRates {
    /// No faults (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// The same rate for every kind.
    pub fn uniform(per_minute: f64) -> Self {
        Self {
            per_minute: FaultKind::ALL
                .into_iter()
                .map(|k| (k, per_minute))
                .collect(),
        }
    }

    /// Sets one kind's rate.
    pub fn with(mut self, kind: FaultKind, per_minute: f64) -> Self {
        self.per_minute.insert(kind, per_minute);
        self
    }

    /// True when no fault can be injected.
    pub fn is_off(&self) -> bool {
        self.per_minute.values().all(|r| *r <= 0.0)
    }
}

/// A fault before it is bound to concrete message times.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedFault {
    pub kind: FaultKind,
    pub start: f64,
    pub end: f64,
    pub camera: usize,
    pub joint: usize,
    pub hand: usize,
    pub magnitude: f64,
    pub mode: DropoutMode,
}

impl PlannedFault {
    pub fn covers(&self, t: f64) -> bool {
        t >= self.start && t <= self.end
    }
}

/// Chooses faults for an episode of `seconds`: a Poisson-distributed count
/// per kind, placed in spans that do not overlap (0.3 s margin). A fault that
/// finds no free span after a few tries is not injected (and so not listed).
pub(crate) fn plan_faults(
    rng: &mut ChaCha8Rng,
    rates: &FaultRates,
    seconds: f64,
    cameras: usize,
    joints: usize,
) -> Vec<PlannedFault> {
    const MARGIN: f64 = 0.3;
    // Keep the first and last half second clean: detectors need context.
    let (lo, hi) = (0.5, seconds - 0.5);
    let mut wanted: Vec<FaultKind> = Vec::new();
    for (&kind, &rate) in &rates.per_minute {
        if rate > 0.0 && hi > lo {
            wanted.extend(std::iter::repeat_n(
                kind,
                poisson(rng, rate * seconds / 60.0),
            ));
        }
    }
    // Long faults first (they need the most room), in random order within a
    // length, so that no kind crowds out the others.
    wanted.shuffle(rng);
    wanted.sort_by(|a, b| b.duration_range().1.total_cmp(&a.duration_range().1));
    let mut planned: Vec<PlannedFault> = Vec::new();
    for kind in wanted {
        let (dmin, dmax) = kind.duration_range();
        for _attempt in 0..20 {
            let duration = if dmax > dmin {
                rng.random_range(dmin..dmax)
            } else {
                dmin
            };
            if hi - lo <= duration {
                break;
            }
            let start = rng.random_range(lo..hi - duration);
            let end = start + duration;
            let clear = planned
                .iter()
                .all(|f| end + MARGIN < f.start || start > f.end + MARGIN);
            if clear {
                planned.push(PlannedFault {
                    kind,
                    start,
                    end,
                    camera: rng.random_range(0..cameras.max(1)),
                    joint: rng.random_range(0..joints.max(1)),
                    hand: rng.random_range(0..2),
                    magnitude: *[0.35, 0.5, 0.8].choose(rng).unwrap_or(&0.5),
                    mode: if rng.random_bool(0.5) {
                        DropoutMode::Missing
                    } else {
                        DropoutMode::Nan
                    },
                });
                break;
            }
        }
    }
    planned.sort_by(|a, b| a.start.total_cmp(&b.start));
    planned
}

/// Knuth's Poisson sampler; fine for the small means used here.
fn poisson(rng: &mut ChaCha8Rng, mean: f64) -> usize {
    if mean <= 0.0 {
        return 0;
    }
    let limit = (-mean).exp();
    let mut product = rng.random::<f64>();
    let mut count = 0;
    while product > limit && count < 10_000 {
        product *= rng.random::<f64>();
        count += 1;
    }
    count
}
