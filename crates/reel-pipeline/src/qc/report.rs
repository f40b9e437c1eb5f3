//! What the quality checks report: findings (a kind, a topic and a time span), the
//! metrics behind them, and the flags the warehouse keeps.

use std::collections::BTreeMap;

use reel_warehouse::episodes::QcSummary;
use serde::{Deserialize, Serialize};

/// What a finding is. The names match the fault kinds of `reel-synth`'s sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// A camera delivered black frames.
    CameraBlackout,
    /// A camera repeated the same frame.
    FrozenFrames,
    /// Frames that do not decode.
    CorruptFrame,
    /// A joint sample jumped and came back.
    JointJump,
    /// Joint positions stair-step and jitter.
    ChoppyJoints,
    /// A hand pose went missing or NaN.
    HandPoseDropout,
    /// A stream (`*`: every stream) fell silent.
    TimestampGap,
    /// A stream ran below its target rate.
    RateShortfall,
    /// A stream started late or ended early: it does not cover the whole episode.
    StreamCoverage,
    /// Landing messages that did not decode (counted per topic; the rest were read).
    UndecodedMessages,
    /// Chunks of the landing file that repeated an earlier one byte for byte (read once).
    DuplicateChunks,
}

impl CheckKind {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::CameraBlackout => "camera_blackout",
            Self::FrozenFrames => "frozen_frames",
            Self::CorruptFrame => "corrupt_frame",
            Self::JointJump => "joint_jump",
            Self::ChoppyJoints => "choppy_joints",
            Self::HandPoseDropout => "hand_pose_dropout",
            Self::TimestampGap => "timestamp_gap",
            Self::RateShortfall => "rate_shortfall",
            Self::StreamCoverage => "stream_coverage",
            Self::UndecodedMessages => "undecoded_messages",
            Self::DuplicateChunks => "duplicate_chunks",
        }
    }
}

/// One problem found: what, where, when (log times, inclusive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What.
    pub kind: CheckKind,
    /// Topic, or `*` for every topic.
    pub topic: String,
    /// First affected log time (ns). For silences: the last message before.
    pub start_ns: u64,
    /// Last affected log time (ns). For silences: the first message after.
    pub end_ns: u64,
    /// Joint name, dropout mode (`missing`/`nan`), measured rate…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Metrics behind the flags.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QcMetrics {
    /// Landing camera frames, all cameras.
    pub frames: u64,
    /// Share of frames judged black.
    pub dark_frame_ratio: f64,
    /// Share of frames judged repeats of the previous one.
    pub frozen_frame_ratio: f64,
    /// Frames that did not decode.
    pub corrupt_frames: u64,
    /// Largest change of a joint between consecutive samples, radians.
    pub max_joint_step_rad: f64,
    /// Largest joint second difference, radians.
    pub max_joint_jerk_rad: f64,
    /// Hand-pose samples with NaN or infinite values.
    pub nan_hand_samples: u64,
    /// Measured rate of each stream outside flagged gaps, Hz.
    pub rates_hz: BTreeMap<String, f64>,
}

/// The outcome of all checks on one episode.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QcReport {
    /// Findings in time order.
    pub findings: Vec<Finding>,
    /// Metrics.
    pub metrics: QcMetrics,
}

impl QcReport {
    /// Whether any finding is of `kind`.
    pub fn has(&self, kind: CheckKind) -> bool {
        self.findings.iter().any(|f| f.kind == kind)
    }

    /// The warehouse's flags and metrics.
    pub fn summary(&self) -> QcSummary {
        QcSummary {
            camera_blackout: self.has(CheckKind::CameraBlackout),
            frozen_frames: self.has(CheckKind::FrozenFrames),
            // Messages that do not decode are corrupt input, whatever the topic.
            corrupt_frames: self.has(CheckKind::CorruptFrame)
                || self.has(CheckKind::UndecodedMessages)
                || self.has(CheckKind::DuplicateChunks),
            choppy_joints: self.has(CheckKind::ChoppyJoints) || self.has(CheckKind::JointJump),
            hand_dropout: self.has(CheckKind::HandPoseDropout),
            // A stream silent at the episode's edges is a gap of that stream too.
            timestamp_gap: self.has(CheckKind::TimestampGap) || self.has(CheckKind::StreamCoverage),
            rate_shortfall: self.has(CheckKind::RateShortfall),
            dark_frame_ratio: self.metrics.dark_frame_ratio,
            frozen_frame_ratio: self.metrics.frozen_frame_ratio,
            max_joint_step_rad: self.metrics.max_joint_step_rad,
        }
    }
}
