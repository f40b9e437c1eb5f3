//! Available memory, from `/proc/meminfo`.

use std::path::Path;

use super::config::MemoryConfig;
use super::report::{Check, Status};

pub(super) fn check_memory(config: &MemoryConfig) -> Check {
    let check = Check::new("memory_available", Some(Path::new("/proc/meminfo")), "MiB");
    let text = match std::fs::read_to_string("/proc/meminfo") {
        Ok(t) => t,
        Err(e) => {
            return check.with(
                Status::Fail,
                None,
                None,
                format!("cannot read /proc/meminfo: {e}"),
            );
        }
    };
    match mem_available_kib(&text) {
        Some(kib) => check.at_least(
            kib as f64 / 1024.0,
            config.min_available_mib as f64,
            "MemAvailable".into(),
        ),
        None => check.with(
            Status::Fail,
            None,
            None,
            "no MemAvailable line in /proc/meminfo".into(),
        ),
    }
}

/// `MemAvailable` in KiB from the text of `/proc/meminfo`.
fn mem_available_kib(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemAvailable:")?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_kib() {
        let text = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   21000000 kB\n";
        assert_eq!(mem_available_kib(text), Some(21_000_000));
        assert_eq!(mem_available_kib("MemTotal: 1 kB\n"), None);
    }
}
