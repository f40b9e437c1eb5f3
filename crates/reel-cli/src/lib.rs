//! The command-line surface Reel's binaries share.
//!
//! Every Reel binary is a thin `main` over a library: it parses its clap arguments, calls
//! one `run` function and lets this crate turn the outcome into an exit status. Sharing
//! that surface keeps the binaries alike:
//!
//! * [`run_main`] reports an ordinary error (bad input, a missing file) as one line on
//!   stderr, `<binary>: error: <error>: <cause>: …`, and exits 1, never with a stack
//!   backtrace, whatever `RUST_BACKTRACE` says. Panics are bugs and keep Rust's own report.
//! * [`parse_size`] reads byte counts with units (`512`, `64KiB`, `1.5GiB`, `10MB`, `2G`)
//!   for clap's `value_parser`.
//! * [`batch_index`] is the plan batch a worker runs: `--batch`, else its index in a
//!   Kubernetes Indexed Job or a Slurm array.
//! * [`progress_bar`] draws on stderr unless `-q/--quiet` was given.
//! * [`read_input`] and [`read_text_input`] read a small input (plan, spec, config) from a
//!   local path or a store URI (`s3://bucket/key?endpoint=…`) in one fetch;
//!   [`local_manifest`] does the same for a manifest, once per node.
//! * [`write_completions`] and [`write_man_pages`] generate shell completions and man pages
//!   from the clap definitions, so they never drift from `--help`.
//!
//! This is the one library that speaks `anyhow`: it is the binaries' shared `main`, and
//! their `run` functions return `anyhow::Result`. Its own failures are typed.
//!
//! ```
//! use reel_cli::parse_size;
//!
//! assert_eq!(parse_size("64KiB")?, 64 * 1024);
//! assert_eq!(parse_size("2G")?, 2 << 30);
//! assert_eq!(parse_size("10MB")?, 10_000_000);
//! assert_eq!(parse_size("1.5GiB")?, 3 << 29);
//! assert!(parse_size("12 parsecs").is_err());
//! # Ok::<(), reel_cli::SizeError>(())
//! ```

mod array;
mod docs;
mod input;
mod progress;
mod report;
mod size;

pub use array::batch_index;
pub use docs::{ManPageError, Shell, write_completions, write_man_pages};
pub use input::{InputError, ManifestInputError, local_manifest, read_input, read_text_input};
pub use progress::progress_bar;
pub use report::{error_line, run_main};
pub use size::{SizeError, parse_size};
