//! The report: one [`Check`] per thing measured, each with a [`Status`], and the helpers
//! every check builds its result with.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Within its threshold.
    Pass,
    /// Worth a look, but the job may start.
    Warn,
    /// The node should not run the job.
    Fail,
    /// Does not apply here; the reason says why.
    Skipped,
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What was checked (`cache_write_throughput`, `gpu_ecc_uncorrected`, ...).
    pub name: String,
    /// The folder, file or device checked, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    pub status: Status,
    /// The measured value, in `unit`.
    pub value: Option<f64>,
    /// The threshold it was held against, in `unit`.
    pub threshold: Option<f64>,
    pub unit: String,
    /// What was measured and why it passed or not.
    pub reason: String,
}

impl Check {
    pub(super) fn new(name: &str, subject: Option<&Path>, unit: &str) -> Self {
        Self {
            name: name.to_owned(),
            subject: subject.map(|p| p.display().to_string()),
            status: Status::Skipped,
            value: None,
            threshold: None,
            unit: unit.to_owned(),
            reason: String::new(),
        }
    }

    pub(super) fn with(
        mut self,
        status: Status,
        value: Option<f64>,
        threshold: Option<f64>,
        reason: String,
    ) -> Self {
        self.status = status;
        self.value = value;
        self.threshold = threshold;
        self.reason = reason;
        self
    }

    pub(super) fn skipped(self, reason: impl Into<String>) -> Self {
        self.with(Status::Skipped, None, None, reason.into())
    }

    /// Pass when `value >= min`, fail otherwise.
    pub(super) fn at_least(self, value: f64, min: f64, what: String) -> Self {
        let (status, verb) = if value >= min {
            (Status::Pass, "at least")
        } else {
            (Status::Fail, "below")
        };
        let reason = format!("{what}: {value:.1} {}, {verb} {min:.1}", self.unit);
        self.with(status, Some(value), Some(min), reason)
    }
}

/// Every check of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The node's host name.
    pub host: String,
    /// False when any check failed (warnings do not fail).
    pub passed: bool,
    pub checks: Vec<Check>,
}

impl Report {
    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.status == Status::Fail)
    }
}
