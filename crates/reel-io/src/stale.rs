//! Temporaries left by killed writers. Every local write in Reel goes to a hidden
//! temporary (`.name.tmp-<pid>-…` from [`Store`](crate::Store), `.name.<pid>.tmp` from the
//! manifest writer) and is renamed into place; a writer killed mid-write leaves its
//! temporary behind. The next run of the same writer removes the ones that are stale: the
//! writing process is gone and the file is older than [`STALE_AFTER_DEATH`], or the file is
//! older than [`STALE_ANYWAY`] (a pid can be reused, and a writer on another host of a
//! shared folder is not visible in this host's process table).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Age after which a temporary whose writer is not running here is removed.
pub const STALE_AFTER_DEATH: Duration = Duration::from_secs(10 * 60);
/// Age after which any temporary is removed: no Reel write takes this long.
pub const STALE_ANYWAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The writer's pid, if `file_name` is one of Reel's temporaries (of `of`, when given:
/// the file the temporary would have become).
pub fn temporary_pid(file_name: &str, of: Option<&str>) -> Option<u32> {
    let rest = file_name.strip_prefix('.')?;
    // `.name.tmp-<pid>-<nanos>-<n>`
    if let Some((name, tail)) = rest.rsplit_once(".tmp-") {
        let pid = tail.split('-').next()?.parse().ok()?;
        return of.is_none_or(|of| of == name).then_some(pid);
    }
    // `.name.<pid>.tmp`
    let (name, pid) = rest.strip_suffix(".tmp")?.rsplit_once('.')?;
    let pid = pid.parse().ok()?;
    of.is_none_or(|of| of == name).then_some(pid)
}

/// Whether a temporary written by `pid`, last modified at `modified`, is stale now.
fn is_stale(pid: u32, modified: SystemTime) -> bool {
    let age = SystemTime::now()
        .duration_since(modified)
        .unwrap_or_default();
    let running = Path::new(&format!("/proc/{pid}")).exists();
    age > STALE_ANYWAY || (!running && age > STALE_AFTER_DEATH)
}

/// Removes the stale temporaries directly in `dir` (of the file `of`, when given) and
/// returns their paths. A missing folder has none; a temporary that vanished meanwhile
/// (its writer renamed it, another cleaner removed it) is not an error.
pub fn remove_stale_temporaries(dir: &Path, of: Option<&str>) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| temporary_pid(n, of)) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_file() && meta.modified().is_ok_and(|m| is_stale(pid, m)) {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => removed.push(entry.path()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_both_kinds_of_temporary() {
        assert_eq!(temporary_pid(".x.json.tmp-4242-1700-3", None), Some(4242));
        assert_eq!(
            temporary_pid(".x.json.tmp-4242-1700-3", Some("x.json")),
            Some(4242)
        );
        assert_eq!(
            temporary_pid(".x.json.tmp-4242-1700-3", Some("y.json")),
            None
        );
        assert_eq!(
            temporary_pid(".m.arrow.977.tmp", Some("m.arrow")),
            Some(977)
        );
        for not_ours in [
            "x.json",
            ".hidden",
            ".m.arrow.tmp",
            ".a.b.tmp",
            "m.arrow.12.tmp",
        ] {
            assert_eq!(temporary_pid(not_ours, None), None, "{not_ours}");
        }
    }

    #[test]
    fn removes_only_stale_temporaries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = SystemTime::now() - STALE_AFTER_DEATH - Duration::from_secs(60);
        let ancient = SystemTime::now() - STALE_ANYWAY - Duration::from_secs(60);
        let me = std::process::id();
        // No process has pid 4194304 (above Linux's pid_max limit).
        let files = [
            (".a.json.tmp-4194304-1-0", old, true), // writer gone, old
            (".b.json.tmp-4194304-1-0", SystemTime::now(), false), // writer gone, fresh
            (&*format!(".c.json.tmp-{me}-1-0"), old, false), // writer running
            (&*format!(".m.arrow.{me}.tmp"), ancient, true), // running, but a day old
            ("d.json", ancient, false),             // not a temporary
        ];
        for (name, modified, _) in &files {
            let file = std::fs::File::create(dir.path().join(name)).expect("create");
            file.set_modified(*modified).expect("set mtime");
        }
        let mut removed = remove_stale_temporaries(dir.path(), None).expect("cleans");
        removed.sort();
        let mut expected: Vec<PathBuf> = files
            .iter()
            .filter(|f| f.2)
            .map(|f| dir.path().join(f.0))
            .collect();
        expected.sort();
        assert_eq!(removed, expected);
        for (name, _, stale) in &files {
            assert_eq!(dir.path().join(name).exists(), !stale, "{name}");
        }
        assert!(
            remove_stale_temporaries(&dir.path().join("missing"), None)
                .expect("no folder, nothing stale")
                .is_empty()
        );
    }
}
