//! `reel-export`: a curated manifest's episodes out of Reel.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_export_cli::run)
}
