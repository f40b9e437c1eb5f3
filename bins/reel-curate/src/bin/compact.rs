//! `reel-compact`: write the warehouse's `episodes` view once, sorted, for fast curation.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_curate_cli::compact::run)
}
