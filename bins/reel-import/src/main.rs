//! `reel-import`: existing datasets into a Reel store.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_import_cli::run)
}
