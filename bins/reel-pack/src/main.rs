//! `reel-pack`: landing MCAP → canonical episode MCAP.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_pack_cli::run)
}
