//! Object keys confined to their store: a key read from a manifest, a plan or any other
//! file names an object *inside* the store it is resolved against, never `../elsewhere`,
//! an absolute path, or another store's URI. Every [`Store`](crate::Store) operation checks
//! its key here, so no reader of untrusted keys can reach outside its store root.

use crate::{Error, Result};

/// Checks that `key` stays inside the store it is resolved against: relative, no `..`
/// segment, no URI scheme, no control character. Returns it unchanged when it does;
/// otherwise [`Error::OutsideStore`] says why.
///
/// ```
/// assert!(reel_io::confine_key("canonical/ep-1.mcap").is_ok());
/// for bad in ["../outside/x.mcap", "/etc/passwd", "s3://other/x.mcap", "a/../../b"] {
///     assert!(reel_io::confine_key(bad).is_err(), "{bad}");
/// }
/// ```
pub fn confine_key(key: &str) -> Result<&str> {
    let refuse = |reason: &str| {
        Err(Error::OutsideStore {
            key: crate::redact(key).into_owned(),
            reason: reason.to_owned(),
        })
    };
    if key.starts_with('/') || key.starts_with('\\') {
        return refuse("an absolute path; keys are relative to the store root");
    }
    if key.contains("://") || key.split('/').next().is_some_and(|s| s.ends_with(':')) {
        return refuse("a URI of its own; keys are relative to the store root");
    }
    if key.split(['/', '\\']).any(|segment| segment == "..") {
        return refuse("a `..` segment would leave the store root");
    }
    if key.chars().any(char::is_control) {
        return refuse("a control character");
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kinded;

    #[test]
    fn keys_stay_inside_their_store() {
        for good in [
            "",
            "x.mcap",
            "canonical/ep.mcap",
            "a/./b",
            "episodes/",
            "a..b/c",
        ] {
            assert_eq!(confine_key(good).ok(), Some(good), "{good}");
        }
        for bad in [
            "../outside/x.mcap",
            "/tmp/x.mcap",
            "/etc/passwd",
            "canonical/../../x",
            "..",
            "s3://other-bucket/x.mcap",
            "file:///etc/passwd",
            "c:/windows",
            "a\\..\\b",
            "a\0b",
        ] {
            let err = confine_key(bad).expect_err("refused");
            assert_eq!(err.kind(), crate::ErrorKind::BadInput, "{bad}");
        }
    }
}
