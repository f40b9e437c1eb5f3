//! `reel-ingest`: run the ingest DAG over one batch of a plan, or one episode, against a
//! store.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_ingest_cli::run)
}
