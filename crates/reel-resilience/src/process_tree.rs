//! The trainer's whole process tree, including processes that left its process group.
//!
//! Killing the trainer's process group misses a child that called `setsid` (or
//! `setpgid`): a data-loader helper, a `torchrun` agent, a detached logger. Such a child
//! outlives the trainer, holds its GPU memory and files, and meets the restarted trainer.
//! So the supervisor also remembers every descendant of the trainer it has seen (from
//! `/proc`, refreshed at each poll) and signals each one that is still the same process
//! (same start time: a pid may be reused). A descendant whose parent died before a poll
//! saw it escapes; the `reel-supervise` binary makes itself a child subreaper, so such an
//! orphan is re-parented to it and is still seen as a descendant.

use std::collections::{HashMap, HashSet};

use rustix::process::{Pid, Signal};

/// `pid → (parent pid, start time in clock ticks since boot)` of every process now.
fn process_table() -> HashMap<i32, (i32, u64)> {
    let mut table = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return table;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(row) = parse_stat(&stat) {
            table.insert(pid, row);
        }
    }
    table
}

/// Parent pid and start time from a `/proc/<pid>/stat` line. The command name (field 2)
/// may hold spaces and parentheses, so the fields are counted after its last `)`.
fn parse_stat(stat: &str) -> Option<(i32, u64)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state, ppid, …; starttime is field 22 of the line, 20th after it.
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// The processes of one trainer run: its root and every descendant seen so far.
#[derive(Debug)]
pub(crate) struct ProcessTree {
    root: i32,
    /// Pid → start time of each process seen in the tree.
    seen: HashMap<i32, u64>,
}

impl ProcessTree {
    pub(crate) fn new(root: u32) -> Self {
        Self {
            root: root as i32,
            seen: HashMap::new(),
        }
    }

    /// Adds the descendants of the root, and of every process already seen, that are
    /// alive now; forgets the seen ones that are gone or whose pid now names another.
    pub(crate) fn refresh(&mut self) {
        let table = process_table();
        self.seen
            .retain(|pid, start| table.get(pid).is_some_and(|&(_, now)| now == *start));
        let mut parents: HashSet<i32> = self.seen.keys().copied().collect();
        parents.insert(self.root);
        loop {
            let children: Vec<(i32, u64)> = table
                .iter()
                .filter(|(pid, (ppid, _))| parents.contains(ppid) && !parents.contains(pid))
                .map(|(&pid, &(_, start))| (pid, start))
                .collect();
            if children.is_empty() {
                break;
            }
            for (pid, start) in children {
                parents.insert(pid);
                self.seen.insert(pid, start);
            }
        }
    }

    /// Sends `signal` to every descendant seen that is still the same process.
    pub(crate) fn signal(&mut self, signal: Signal) {
        self.refresh();
        for &pid in self.seen.keys() {
            if let Some(pid) = Pid::from_raw(pid) {
                // ESRCH: it ended meanwhile.
                let _ = rustix::process::kill_process(pid, signal);
            }
        }
    }

    /// Reaps the descendants that were re-parented to this process and have ended
    /// (nothing to do for the others: their own parents reap them).
    pub(crate) fn reap_orphans(&self) {
        for &pid in self.seen.keys() {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let line = "4242 (py (data) worker) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 \
                    3 0 987654 1000000 300 18446744073709551615";
        assert_eq!(parse_stat(line), Some((17, 987_654)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_in_the_table_under_its_parent() {
        let table = process_table();
        let me = std::process::id() as i32;
        let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
        assert_eq!(table.get(&me).map(|row| row.0), Some(parent));
    }
}
