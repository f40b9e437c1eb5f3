//! The `reel` umbrella's integration tests, one binary: every subcommand's help,
//! completions, man pages and error report, and what damaged or hostile input cannot make
//! the CLIs do.

#![allow(clippy::unwrap_used)] // Tests fail loudly by design.

mod cli;
mod hostile;
