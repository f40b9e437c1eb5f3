//! The rule for names that become one segment of an object key (batch keys, pipeline
//! versions, enricher names), so no name can reach outside its folder.

use crate::{Error, Result};

/// Names that become object-key segments: no separators, nothing hidden.
pub(crate) fn check_segment(what: &str, value: &str) -> Result<()> {
    let ok = !value.is_empty()
        && !value.starts_with('.')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'));
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "{what} `{value}` must be non-empty ASCII letters, digits, `.`, `_`, `-` or `+`, not starting with `.`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::check_segment;

    #[test]
    fn segments_cannot_leave_their_folder() {
        for good in ["b0", "plan-1.2_x+y", "motion_segments"] {
            assert!(check_segment("name", good).is_ok(), "{good}");
        }
        for bad in ["", "..", ".hidden", "a/b", "a\\b", "ü", "a b"] {
            assert!(check_segment("name", bad).is_err(), "{bad}");
        }
    }
}
