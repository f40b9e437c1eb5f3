//! `reel-curate`: one SQL query over the episode warehouse into a training manifest.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_curate_cli::curate::run)
}
