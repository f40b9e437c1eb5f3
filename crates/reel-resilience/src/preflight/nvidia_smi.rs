//! Running `nvidia-smi --query-gpu` with a timeout and parsing its CSV rows.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Query of `nvidia-smi --query-gpu`; the fallback drops the row-remapping fields, which
/// drivers before row remapping (pre-Ampere) do not know.
const GPU_QUERY: &str =
    "index,name,ecc.errors.uncorrected.volatile.total,remapped_rows.pending,remapped_rows.failure";
const GPU_QUERY_FALLBACK: &str = "index,name,ecc.errors.uncorrected.volatile.total";

/// One row of `nvidia-smi --query-gpu` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GpuRow {
    pub(super) index: u32,
    pub(super) name: String,
    pub(super) ecc_uncorrected: Option<u64>,
    pub(super) remap_pending: Option<bool>,
    pub(super) remap_failure: Option<bool>,
}

/// Why `nvidia-smi` gave no rows.
#[derive(Debug, thiserror::Error)]
pub(super) enum SmiError {
    /// It could not be started or waited for.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It did not exit in time (a hung query is itself a symptom of a GPU that fell off
    /// the bus).
    #[error("no answer within {:.0} s", .0.as_secs_f64())]
    Timeout(Duration),
    /// It exited with an error; its output says why.
    #[error("{output} ({status})")]
    Failed { output: String, status: ExitStatus },
}

/// Queries every GPU with `smi`, falling back to the query without row remapping where the
/// driver refuses the full one; the error is the full query's.
pub(super) fn query(smi: &Path, timeout: Duration) -> Result<Vec<GpuRow>, SmiError> {
    let text = match run_query(smi, GPU_QUERY, timeout) {
        Ok(text) => text,
        Err(first) => run_query(smi, GPU_QUERY_FALLBACK, timeout).map_err(|_| first)?,
    };
    Ok(parse_gpu_rows(&text))
}

/// Parses `--format=csv,noheader,nounits` rows of [`GPU_QUERY`] or [`GPU_QUERY_FALLBACK`].
/// Fields a GPU does not support read `[N/A]` or `[Not Supported]` and become `None`.
fn parse_gpu_rows(text: &str) -> Vec<GpuRow> {
    let known = |s: &str| {
        let s = s.trim();
        (!s.is_empty() && !s.starts_with('[') && s != "N/A").then(|| s.to_owned())
    };
    let yes_no = |s: Option<&str>| {
        s.and_then(known)
            .and_then(|v| match v.to_ascii_lowercase().as_str() {
                "yes" | "1" => Some(true),
                "no" | "0" => Some(false),
                _ => None,
            })
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            Some(GpuRow {
                index: fields.first()?.parse().ok()?,
                name: fields.get(1).copied().unwrap_or_default().to_owned(),
                ecc_uncorrected: fields
                    .get(2)
                    .copied()
                    .and_then(known)
                    .and_then(|v| v.parse().ok()),
                remap_pending: yes_no(fields.get(3).copied()),
                remap_failure: yes_no(fields.get(4).copied()),
            })
        })
        .collect()
}

fn run_query(smi: &Path, fields: &str, timeout: Duration) -> Result<String, SmiError> {
    let mut child = Command::new(smi)
        .arg(format!("--query-gpu={fields}"))
        .arg("--format=csv,noheader,nounits")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + timeout;
    while child.try_wait()?.is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SmiError::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output()?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        Err(SmiError::Failed {
            output: text.trim().to_owned(),
            status: output.status,
        })
    }
}

/// The executable `program` on `PATH`, if any.
pub(super) fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_rows_parse_with_unsupported_fields() {
        let text = "0, NVIDIA H200, 0, No, No\n1, NVIDIA H200, 3, Yes, No\n2, Tesla V100-SXM2-32GB, [N/A], [Not Supported], [Not Supported]\n";
        let rows = parse_gpu_rows(text);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].ecc_uncorrected, Some(3));
        assert_eq!(rows[1].remap_pending, Some(true));
        assert_eq!(rows[2].name, "Tesla V100-SXM2-32GB");
        assert_eq!(rows[2].ecc_uncorrected, None);
        assert_eq!(rows[2].remap_failure, None);
        // The fallback query has three fields.
        let short = parse_gpu_rows("0, NVIDIA A100-SXM4-80GB, 0\n");
        assert_eq!(short[0].remap_pending, None);
    }
}
