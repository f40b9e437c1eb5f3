//! `reel-load`: run the loader over a manifest and report throughput, or dump batches as
//! an Arrow IPC stream.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_load_cli::run)
}
