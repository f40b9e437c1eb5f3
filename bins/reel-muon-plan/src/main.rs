//! `reel-muon-plan`: predict sharded Muon step times (global vs hybrid) and pick one.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_muon_plan_cli::run)
}
