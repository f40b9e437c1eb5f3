//! Turning a binary's outcome into one line on stderr and an exit status.

use std::process::ExitCode;

/// Parses the arguments of `A`, calls `run` and exits with what it returns.
///
/// An error is printed as one line, `<name>: error: <error>: <cause>: …` (`name` is the
/// clap command's name), and the process exits 1. No backtrace is printed, even with
/// `RUST_BACKTRACE=1`: an ordinary error (a missing file, bad input) is the user's to fix
/// and a backtrace would only bury the message. Panics are left to Rust's default hook, so
/// bugs keep their full report. A closed stdout (`| head`) ends the run quietly, as it
/// ends any Unix tool: by SIGPIPE (exit status 141 in a shell), never a panic of
/// `println!`; a reader that stops early is not an error. Credentials inside URIs never
/// reach the error line ([`reel_io::redact_secrets`]).
pub fn run_main<A: clap::Parser>(run: impl FnOnce(A) -> anyhow::Result<ExitCode>) -> ExitCode {
    restore_sigpipe();
    let name = A::command().get_name().to_owned();
    let args = A::parse();
    match run(args) {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", error_line(&name, &error));
            ExitCode::FAILURE
        }
    }
}

/// The one line [`run_main`] prints for `error`: the error and each of its causes joined
/// by `: `, with any line breaks inside a message folded into spaces.
pub fn error_line(name: &str, error: &anyhow::Error) -> String {
    let chain = format!("{error:#}");
    let folded: Vec<&str> = chain
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let line = folded.join(" ");
    format!("{name}: error: {}", reel_io::redact_secrets(&line))
}

/// Rust ignores SIGPIPE, so a write to a closed pipe fails and `println!` panics; a CLI
/// in a shell pipeline wants the default instead: killed quietly when its reader leaves.
fn restore_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL installs no handler code; it is
    // done once, before any thread that writes to stdout starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn an_error_and_its_causes_make_one_line() {
        let error = std::fs::read("/nonexistent/reel/plan.json")
            .context("reading plan /nonexistent/reel/plan.json")
            .context("multi\nline")
            .expect_err("the file does not exist");
        let line = error_line("reel-ingest", &error);
        assert!(
            line.starts_with(
                "reel-ingest: error: multi line: reading plan /nonexistent/reel/plan.json: "
            ),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn a_closed_stdout_is_not_an_error() {
        let error = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing a JSON line");
        assert!(is_broken_pipe(&error));
        assert!(!is_broken_pipe(&anyhow::anyhow!("no such file")));
    }
}
