//! `reel-inspect`: the layout of any MCAP, its health (`doctor`) and its messages (`cat`).

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_inspect_cli::run)
}
