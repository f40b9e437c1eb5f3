//! `reel-warm`: fetch a manifest's working set into the node-local block cache before
//! training starts, and pin it there.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_warm_cli::run)
}
