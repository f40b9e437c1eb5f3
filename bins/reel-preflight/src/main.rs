//! `reel-preflight`: check a node before a job starts.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_preflight_cli::run)
}
