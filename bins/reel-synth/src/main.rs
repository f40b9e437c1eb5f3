//! `reel-synth`: write realistic synthetic landing episodes.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_synth_cli::run)
}
