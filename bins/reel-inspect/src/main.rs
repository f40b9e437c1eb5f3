//! `reel-inspect`: the layout of any MCAP, as a table on stdout or one JSON line per file.

use anyhow::bail;
use clap::Parser;
use reel_io::{StoreOptions, open_object};

/// Show the layout of MCAP files: channels, schemas, topic groups, chunks per group (count,
/// sizes, time ranges, topics), GOP statistics and compression ratio.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// MCAP files (paths or s3:// URIs).
    #[arg(required = true)]
    files: Vec<String>,
    /// One JSON object per file (with every chunk) instead of a table.
    #[arg(long)]
    json: bool,
    /// Skip GOP statistics (they read every camera chunk).
    #[arg(long)]
    no_gops: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut failures = 0;
    for file in &args.files {
        let report = open_object(file, &StoreOptions::default())
            .map_err(reel_mcap::Error::from)
            .and_then(|source| reel_mcap::inspect(source, !args.no_gops));
        match report {
            Ok(report) if args.json => println!("{}", serde_json::to_string(&report)?),
            Ok(report) => println!("{}", report.to_table()),
            Err(e) => {
                failures += 1;
                eprintln!("error: {e}");
            }
        }
    }
    if failures > 0 {
        bail!("{failures} of {} files failed", args.files.len());
    }
    Ok(())
}
