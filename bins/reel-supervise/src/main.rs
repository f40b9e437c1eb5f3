//! `reel-supervise`: run a trainer and restart it from the last complete checkpoint when
//! it crashes or hangs.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_supervise_cli::run)
}
