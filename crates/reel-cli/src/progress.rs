//! Progress bars on stderr that `-q/--quiet` silences.

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar of `len` steps drawn on stderr with the indicatif `template`, or a hidden
/// one when `quiet`. indicatif draws nothing when stderr is not a terminal either, so logs
/// of batch jobs stay clean without `--quiet`. A template that does not parse (a
/// programming error) falls back to indicatif's default bar rather than failing the run.
pub fn progress_bar(len: u64, template: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(len).with_style(style)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_bars_are_hidden_and_count_anyway() {
        let bar = progress_bar(10, "{bar:40} {pos}/{len}", true);
        assert!(bar.is_hidden());
        bar.inc(3);
        assert_eq!(bar.position(), 3);
        assert_eq!(
            progress_bar(10, "{bar:40} {pos}/{len}", false).length(),
            Some(10)
        );
    }
}
