//! `reel-plan`: bin-pack a landing folder or prefix into balanced ingest batches.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_plan_cli::run)
}
