//! `reel`: every Reel command under one binary, in the manner of the `mcap` CLI:
//! `reel pack`, `reel ingest`, `reel inspect doctor`, … Each subcommand is the standalone
//! binary of the same name (`reel pack` is `reel-pack`): the same arguments, output and
//! exit status, from the same library. `reel completions <shell>` and `reel man <dir>`
//! generate shell completions and man pages from these definitions.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use reel_cli::Shell;

const EXAMPLES: &str = "\
Examples:
  reel synth -o landing/ --episodes 100 --seconds 60 --fault-rate 1 > landing.jsonl
  reel plan landing/ -o plan.json --batches 4
  reel ingest --plan plan.json --batch 0 --store store/
  reel import lerobot ~/datasets/pusht --store store/
  reel inspect doctor store/canonical/*.mcap
  reel curate --warehouse store/ --sql \"SELECT * FROM episodes WHERE qc_pass\" -o train.arrow
  reel export lerobot --manifest train.arrow --store store/ -o my_dataset
  reel completions bash > ~/.local/share/bash-completion/completions/reel
  reel man ~/.local/share/man/man1";

/// Reel: robot-learning data from the landing bucket to the GPU. Every stage is a
/// subcommand; `reel <command> --help` shows its flags and examples.
#[derive(Debug, Parser)]
#[command(name = "reel", version, after_help = EXAMPLES, subcommand_required = true, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Synth(reel_synth_cli::Args),
    Pack(reel_pack_cli::Args),
    Plan(reel_plan_cli::Args),
    Ingest(reel_ingest_cli::Cli),
    Import(reel_import_cli::Cli),
    Export(reel_export_cli::Cli),
    Compact(reel_curate_cli::compact::Args),
    Curate(reel_curate_cli::curate::Args),
    Cdc(reel_cdc_cli::Args),
    Inspect(reel_inspect_cli::Args),
    Warm(reel_warm_cli::Args),
    Load(reel_load_cli::Args),
    Preflight(reel_preflight_cli::Args),
    Supervise(reel_supervise_cli::Args),
    MuonPlan(reel_muon_plan_cli::Args),
    /// Print a shell completion script for `reel` on stdout.
    #[command(after_help = "\
Examples:
  reel completions bash > ~/.local/share/bash-completion/completions/reel
  reel completions zsh > ~/.zfunc/_reel
  reel completions fish > ~/.config/fish/completions/reel.fish")]
    Completions {
        /// The shell.
        shell: Shell,
    },
    /// Write man pages for `reel` and every subcommand (reel.1, reel-pack.1, …) into a
    /// folder.
    #[command(after_help = "\
Examples:
  reel man ~/.local/share/man/man1 && man reel-inspect-doctor
  reel man target/man")]
    Man {
        /// Folder for the pages (created if missing).
        dir: PathBuf,
    },
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Synth(args) => reel_synth_cli::run(args),
        Command::Pack(args) => reel_pack_cli::run(args),
        Command::Plan(args) => reel_plan_cli::run(args),
        Command::Ingest(args) => reel_ingest_cli::run(args),
        Command::Import(args) => reel_import_cli::run(args),
        Command::Export(args) => reel_export_cli::run(args),
        Command::Compact(args) => reel_curate_cli::compact::run(args),
        Command::Curate(args) => reel_curate_cli::curate::run(args),
        Command::Cdc(args) => reel_cdc_cli::run(args),
        Command::Inspect(args) => reel_inspect_cli::run(args),
        Command::Warm(args) => reel_warm_cli::run(args),
        Command::Load(args) => reel_load_cli::run(args),
        Command::Preflight(args) => reel_preflight_cli::run(args),
        Command::Supervise(args) => reel_supervise_cli::run(args),
        Command::MuonPlan(args) => reel_muon_plan_cli::run(args),
        Command::Completions { shell } => {
            reel_cli::write_completions(&mut Cli::command(), shell, &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            let pages = reel_cli::write_man_pages(&Cli::command(), &dir)?;
            eprintln!("reel: wrote {} man pages to {}", pages.len(), dir.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    reel_cli::run_main(run)
}
