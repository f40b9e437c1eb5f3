//! Clock sanity: the wall clock past a known date, the monotonic clock advancing, and skew
//! against the time a shared filesystem's server stamps on a file.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::RemoveOnDrop;
use super::config::ClockConfig;
use super::report::{Check, Status};

pub(super) fn check_clock(config: &ClockConfig) -> [Check; 3] {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let wall = Check::new("clock_wall", None, "s since epoch").at_least(
        now,
        config.not_before_unix_s as f64,
        "system time".into(),
    );

    // A monotonic clock that does not move breaks every timeout and heartbeat.
    let pause = Duration::from_millis(20);
    let before = Instant::now();
    std::thread::sleep(pause);
    let advanced = before.elapsed();
    let monotonic = Check::new("clock_monotonic", None, "ms").at_least(
        advanced.as_secs_f64() * 1e3,
        pause.as_secs_f64() * 1e3,
        format!(
            "monotonic clock advance across a {} ms sleep",
            pause.as_millis()
        ),
    );

    let skew = match &config.reference_dir {
        None => Check::new("clock_skew", None, "s").skipped("no clock.reference_dir configured"),
        Some(dir) => check_skew(dir, config.max_skew_s),
    };
    [wall, monotonic, skew]
}

fn check_skew(dir: &Path, max_skew_s: f64) -> Check {
    let check = Check::new("clock_skew", Some(dir), "s");
    let path = dir.join(format!(".reel-preflight-clock-{}", std::process::id()));
    let _guard = RemoveOnDrop(path.clone());
    let result = (|| {
        let before = SystemTime::now();
        let mut file = File::create(&path)?;
        file.write_all(b"clock")?;
        file.sync_all()?;
        let after = SystemTime::now();
        let stamped = std::fs::metadata(&path)?.modified()?;
        let secs = |t: SystemTime| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0)
        };
        Ok::<_, std::io::Error>(secs(stamped) - (secs(before) + secs(after)) / 2.0)
    })();
    match result {
        Ok(skew) => {
            let status = if skew.abs() <= max_skew_s {
                Status::Pass
            } else {
                Status::Fail
            };
            let reason = format!(
                "file time stamped by the reference filesystem minus local time: {skew:+.3} s (limit ±{max_skew_s} s)"
            );
            check.with(status, Some(skew), Some(max_skew_s), reason)
        }
        Err(e) => check.with(
            Status::Fail,
            None,
            Some(max_skew_s),
            format!("cannot write a file there: {e}"),
        ),
    }
}
