//! Shell completions and man pages, generated from the clap definitions so they always
//! match `--help`.

use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

/// Why man pages could not be written.
#[derive(Debug, thiserror::Error)]
#[error("writing {path}")]
pub struct ManPageError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// Writes the completion script of `command` for `shell` to `out`.
pub fn write_completions(command: &mut clap::Command, shell: Shell, out: &mut dyn std::io::Write) {
    let name = command.get_name().to_owned();
    clap_complete::generate(shell, command, name, out);
}

/// Writes a man page (section 1) for `command` and one for each of its subcommands,
/// named as `man` looks them up (`reel.1`, `reel-pack.1`, `reel-inspect-doctor.1`), into
/// `dir` (created if missing). Returns the pages written.
pub fn write_man_pages(command: &clap::Command, dir: &Path) -> Result<Vec<PathBuf>, ManPageError> {
    std::fs::create_dir_all(dir).map_err(|source| ManPageError {
        path: dir.to_owned(),
        source,
    })?;
    let mut command = command.clone();
    command.build();
    let mut written = Vec::new();
    write_page(&command, command.get_name(), dir, &mut written)?;
    Ok(written)
}

fn write_page(
    command: &clap::Command,
    page_name: &str,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), ManPageError> {
    let path = dir.join(format!("{page_name}.1"));
    let mut text = Vec::new();
    // The page's title is its file name, so `man reel-pack` shows `reel-pack(1)`.
    clap_mangen::Man::new(command.clone())
        .title(page_name)
        .render(&mut text)
        .and_then(|()| std::fs::write(&path, &text))
        .map_err(|source| ManPageError {
            path: path.clone(),
            source,
        })?;
    written.push(path);
    for sub in command.get_subcommands() {
        if sub.get_name() == "help" || sub.is_hide_set() {
            continue;
        }
        write_page(
            sub,
            &format!("{page_name}-{}", sub.get_name()),
            dir,
            written,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> clap::Command {
        clap::Command::new("demo")
            .about("A demo")
            .subcommand(
                clap::Command::new("pack")
                    .about("Pack")
                    .arg(clap::Arg::new("file")),
            )
            .subcommand(clap::Command::new("inspect").about("Inspect"))
    }

    #[test]
    fn completions_name_the_subcommands() {
        let mut out = Vec::new();
        write_completions(&mut command(), Shell::Bash, &mut out);
        let script = String::from_utf8_lossy(&out);
        assert!(script.contains("demo") && script.contains("pack") && script.contains("inspect"));
    }

    #[test]
    fn one_page_per_command() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let pages = write_man_pages(&command(), dir.path())?;
        let names: Vec<String> = pages
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect();
        assert_eq!(names, ["demo.1", "demo-pack.1", "demo-inspect.1"]);
        let page = std::fs::read_to_string(&pages[1])?;
        assert!(page.contains(".TH demo-pack 1"), "{page}");
        Ok(())
    }
}
