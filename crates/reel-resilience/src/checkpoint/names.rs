//! The names inside a checkpoint folder: `step-<NNNNNNNNNN>` directories, the hidden
//! temporary directories a save fills first, and the completion marker's file name.

/// Name of the completion marker inside a checkpoint directory, written last.
pub const MARKER: &str = "COMPLETE";

pub(super) const STEP_PREFIX: &str = "step-";
/// Temporary directories start with this; `step-…` names only ever appear by rename.
pub(super) const TEMP_PREFIX: &str = ".step-";

/// The directory name of a step's checkpoint.
pub fn step_dir_name(step: u64) -> String {
    format!("{STEP_PREFIX}{step:010}")
}

/// The step a checkpoint directory's name tells ([`step_dir_name`]'s inverse).
pub fn step_of_dir_name(name: &str) -> Option<u64> {
    name.strip_prefix(STEP_PREFIX).and_then(parse_step)
}

pub(super) fn parse_step(digits: &str) -> Option<u64> {
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}
