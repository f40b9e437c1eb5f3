//! `reel-cdc`: capture the metadata database's changes into the warehouse.

fn main() -> std::process::ExitCode {
    reel_cli::run_main(reel_cdc_cli::run)
}
