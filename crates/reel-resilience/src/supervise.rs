//! Runs a trainer as a child process and restarts it from the last complete checkpoint
//! when it crashes or hangs.
//!
//! The trainer runs in its own process group, so the supervisor can stop it together
//! with whatever it started (data-loader workers, compilers). It is judged
//!
//! - **crashed** when it exits non-zero or is killed by a signal;
//! - **hung** when its heartbeat file has not changed for `hang_after` (its
//!   modification time is polled; the trainer writes or touches it as it makes
//!   progress). A hung trainer gets `SIGTERM`, then `SIGKILL` after `kill_grace`.
//!
//! Either way the whole group is killed, with every other process of the trainer's tree
//! (children that left the group with `setsid` included: see `process_tree.rs`), and after an exponential backoff the trainer is
//! started again with the environment telling it where to resume:
//!
//! | variable | value |
//! |---|---|
//! | `REEL_CHECKPOINT_DIR` | the checkpoint folder (when one is configured) |
//! | `REEL_RESUME_STEP` | the step of the newest complete, verified checkpoint; absent when there is none |
//! | `REEL_RESTART_COUNT` | 0 on the first start, then 1, 2, ... |
//! | `REEL_HEARTBEAT_FILE` | the heartbeat file (when hang detection is on) |
//!
//! The resume step comes from [`CheckpointDir::latest`](crate::checkpoint::CheckpointDir::latest),
//! which verifies every file's checksum: a partial or damaged checkpoint is reported and
//! passed over, never resumed from. An existing checkpoint is used on the first start too,
//! so a supervisor that is itself requeued resumes where the last one stopped.
//!
//! Signals are the caller's business (a library installs no handlers): the caller passes
//! an `AtomicUsize` that its handler sets to the signal number (what
//! `signal_hook::flag::register_usize` does). When it becomes non-zero the supervisor
//! forwards that signal to the trainer's group, waits `kill_grace` for it to exit, kills
//! what is left and returns [`Outcome::Interrupted`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use serde::Serialize;

use crate::checkpoint::{CheckpointDir, Problem};
use crate::preflight::{self, PreflightConfig, Report, Target};
use crate::process_tree::ProcessTree;

/// Environment variable naming the checkpoint folder.
pub const ENV_CHECKPOINT_DIR: &str = "REEL_CHECKPOINT_DIR";
/// Environment variable holding the step to resume from.
pub const ENV_RESUME_STEP: &str = "REEL_RESUME_STEP";
/// Environment variable holding how many times the trainer was restarted.
pub const ENV_RESTART_COUNT: &str = "REEL_RESTART_COUNT";
/// Environment variable naming the heartbeat file.
pub const ENV_HEARTBEAT_FILE: &str = "REEL_HEARTBEAT_FILE";

/// How to run and watch the trainer.
#[derive(Debug, Clone)]
pub struct SuperviseConfig {
    /// The trainer's program and arguments.
    pub command: Vec<OsString>,
    /// Restarts allowed before giving up.
    pub max_restarts: u32,
    /// Delay before the first restart; it doubles with each further restart.
    pub backoff: Duration,
    /// Longest delay between restarts.
    pub max_backoff: Duration,
    /// Heartbeat file; `None` turns hang detection off.
    pub heartbeat: Option<PathBuf>,
    /// How long the heartbeat may stay unchanged before the trainer counts as hung.
    pub hang_after: Duration,
    /// Checkpoint folder to resume from; `None` always starts fresh.
    pub checkpoints: Option<PathBuf>,
    /// Time between `SIGTERM` and `SIGKILL` when stopping the trainer.
    pub kill_grace: Duration,
    /// How often the child and the heartbeat are looked at.
    pub poll_interval: Duration,
    /// Node checks to pass before the first start.
    pub preflight: Option<(Target, PreflightConfig)>,
    /// Run the node checks again before every restart (a crash may come from the node).
    pub preflight_on_restart: bool,
    /// Send the trainer's stdout to the supervisor's stderr, keeping the supervisor's
    /// stdout for its own machine-readable events.
    pub trainer_stdout_to_stderr: bool,
}

impl SuperviseConfig {
    /// Defaults for `command`: 3 restarts, 1 s backoff doubling up to 60 s, no heartbeat,
    /// no checkpoints, 10 s kill grace, 100 ms polls, no preflight, stdout inherited.
    pub fn new(command: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            max_restarts: 3,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            heartbeat: None,
            hang_after: Duration::from_secs(300),
            checkpoints: None,
            kill_grace: Duration::from_secs(10),
            poll_interval: Duration::from_millis(100),
            preflight: None,
            preflight_on_restart: false,
            trainer_stdout_to_stderr: false,
        }
    }

    /// The delay before restart number `restart` (1-based).
    pub fn backoff_for(&self, restart: u32) -> Duration {
        let factor = 1u32
            .checked_shl(restart.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// Something the supervisor did or saw; one JSON object per event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The node checks ran.
    Preflight {
        passed: bool,
        /// `name: reason` of each failed check.
        failed: Vec<String>,
    },
    /// A checkpoint was passed over when choosing where to resume.
    CheckpointSkipped {
        path: PathBuf,
        step: Option<u64>,
        problem: Problem,
    },
    /// The trainer was started.
    Start {
        restart_count: u32,
        pid: u32,
        resume_step: Option<u64>,
    },
    /// The trainer exited by itself.
    Exit {
        restart_count: u32,
        pid: u32,
        code: Option<i32>,
        signal: Option<i32>,
        runtime_s: f64,
    },
    /// The heartbeat stopped; the trainer is being killed.
    Hang {
        restart_count: u32,
        pid: u32,
        silent_s: f64,
    },
    /// The trainer will be started again after `backoff_ms`.
    Restart {
        restart_count: u32,
        reason: String,
        backoff_ms: u64,
    },
    /// No restarts left.
    GiveUp { restarts: u32, reason: String },
    /// The trainer finished (exit 0).
    Done { restarts: u32, runtime_s: f64 },
    /// A signal to the supervisor was forwarded to the trainer.
    Signal { signal: i32 },
}

/// How supervision ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The trainer exited 0.
    Done { restarts: u32 },
    /// The trainer crashed or hung more often than allowed.
    GaveUp { restarts: u32, reason: String },
    /// The node checks failed; the trainer was not started (again).
    PreflightFailed(Box<Report>),
    /// The supervisor was told to stop by this signal.
    Interrupted { signal: i32 },
}

/// Errors that stop supervision outright.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SuperviseError {
    /// No trainer command given.
    #[error("no trainer command given")]
    NoCommand,
    /// The trainer could not be started (not found, not executable).
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// Waiting for or signalling the trainer failed.
    #[error("watching the trainer (pid {pid}): {source}")]
    Wait {
        pid: u32,
        #[source]
        source: std::io::Error,
    },
    /// The checkpoint folder cannot be listed.
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
}

/// A trainer that cannot be started or watched keeps its I/O kind; a missing command is
/// the caller's setting, the environment's.
impl reel_io::Kinded for SuperviseError {
    fn kind(&self) -> reel_io::ErrorKind {
        use reel_io::ErrorKind;
        match self {
            Self::NoCommand => ErrorKind::Environment,
            Self::Spawn { source, .. } | Self::Wait { source, .. } => ErrorKind::of_io(source),
            Self::Checkpoint(e) => e.kind(),
        }
    }
}

/// Why one run of the trainer ended.
enum RunEnd {
    Exited(ExitStatus),
    Hung,
    Interrupted(i32),
}

/// Supervises `config.command` until it finishes, gives up or is interrupted through
/// `stop` (a signal number, 0 for none), reporting every event to `on_event`.
pub fn supervise(
    config: &SuperviseConfig,
    stop: &AtomicUsize,
    mut on_event: impl FnMut(&Event),
) -> Result<Outcome, SuperviseError> {
    if config.command.is_empty() {
        return Err(SuperviseError::NoCommand);
    }
    let checkpoints = config
        .checkpoints
        .as_deref()
        .map(CheckpointDir::open)
        .transpose()?;
    let started = Instant::now();
    let mut restarts = 0u32;
    loop {
        if (restarts == 0 || config.preflight_on_restart)
            && let Some((target, thresholds)) = &config.preflight
        {
            let report = preflight::run(target, thresholds);
            on_event(&Event::Preflight {
                passed: report.passed,
                failed: report
                    .failures()
                    .map(|c| format!("{}: {}", c.name, c.reason))
                    .collect(),
            });
            if !report.passed {
                return Ok(Outcome::PreflightFailed(Box::new(report)));
            }
        }

        let resume_step = match &checkpoints {
            Some(dir) => {
                let latest = dir.latest()?;
                for skipped in latest.skipped {
                    on_event(&Event::CheckpointSkipped {
                        path: skipped.path,
                        step: skipped.step,
                        problem: skipped.problem,
                    });
                }
                latest.checkpoint.map(|c| c.step)
            }
            None => None,
        };

        let mut child = spawn(config, restarts, resume_step)?;
        let pid = child.id();
        on_event(&Event::Start {
            restart_count: restarts,
            pid,
            resume_step,
        });
        let run_started = Instant::now();
        let reason = match watch(config, &mut child, stop, &mut on_event, restarts)? {
            RunEnd::Exited(status) => {
                on_event(&Event::Exit {
                    restart_count: restarts,
                    pid,
                    code: status.code(),
                    signal: std::os::unix::process::ExitStatusExt::signal(&status),
                    runtime_s: run_started.elapsed().as_secs_f64(),
                });
                if status.success() {
                    on_event(&Event::Done {
                        restarts,
                        runtime_s: started.elapsed().as_secs_f64(),
                    });
                    return Ok(Outcome::Done { restarts });
                }
                format!("trainer crashed ({status})")
            }
            RunEnd::Hung => format!("no heartbeat for {:.1} s", config.hang_after.as_secs_f64()),
            RunEnd::Interrupted(signal) => return Ok(Outcome::Interrupted { signal }),
        };

        if restarts >= config.max_restarts {
            on_event(&Event::GiveUp {
                restarts,
                reason: reason.clone(),
            });
            return Ok(Outcome::GaveUp { restarts, reason });
        }
        restarts += 1;
        let backoff = config.backoff_for(restarts);
        on_event(&Event::Restart {
            restart_count: restarts,
            reason,
            backoff_ms: backoff.as_millis() as u64,
        });
        let until = Instant::now() + backoff;
        while Instant::now() < until {
            let signal = stop.load(Ordering::SeqCst) as i32;
            if signal != 0 {
                return Ok(Outcome::Interrupted { signal });
            }
            std::thread::sleep(config.poll_interval.min(until - Instant::now()));
        }
    }
}

/// Makes this process a child subreaper (Linux): a descendant orphaned by its parent's
/// death is re-parented here rather than to init, so [`supervise`] still sees it as part
/// of the trainer's tree and ends it with the rest. Process-wide, so it is for a
/// supervisor binary's `main` to call, never for a library.
pub fn adopt_orphans() -> std::io::Result<()> {
    Ok(rustix::process::set_child_subreaper(Some(
        rustix::process::getpid(),
    ))?)
}

fn spawn(
    config: &SuperviseConfig,
    restarts: u32,
    resume_step: Option<u64>,
) -> Result<Child, SuperviseError> {
    use std::os::unix::process::CommandExt;

    let program = &config.command[0];
    let mut command = Command::new(program);
    command.args(&config.command[1..]).process_group(0);
    command.env(ENV_RESTART_COUNT, restarts.to_string());
    match resume_step {
        Some(step) => command.env(ENV_RESUME_STEP, step.to_string()),
        None => command.env_remove(ENV_RESUME_STEP),
    };
    match &config.checkpoints {
        Some(dir) => command.env(ENV_CHECKPOINT_DIR, dir),
        None => command.env_remove(ENV_CHECKPOINT_DIR),
    };
    match &config.heartbeat {
        Some(file) => command.env(ENV_HEARTBEAT_FILE, file),
        None => command.env_remove(ENV_HEARTBEAT_FILE),
    };
    let spawn_error = |source| SuperviseError::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    };
    if config.trainer_stdout_to_stderr {
        use std::os::fd::AsFd;
        let stderr = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(spawn_error)?;
        command.stdout(stderr);
    }
    command.spawn().map_err(spawn_error)
}

/// Watches one run until it exits, hangs or the supervisor is told to stop. On return
/// the child is reaped and its process group is gone.
fn watch(
    config: &SuperviseConfig,
    child: &mut Child,
    stop: &AtomicUsize,
    on_event: &mut impl FnMut(&Event),
    restarts: u32,
) -> Result<RunEnd, SuperviseError> {
    let pid = child.id();
    let group = Pid::from_child(child);
    let mut tree = ProcessTree::new(pid);
    let mut last_beat = config.heartbeat.as_deref().and_then(mtime);
    let mut last_progress = Instant::now();
    loop {
        tree.refresh();
        if exited(group).map_err(|source| SuperviseError::Wait { pid, source })? {
            // Kill what the trainer left behind, in its group or out of it, before
            // reaping it, so the group id cannot have been reused.
            kill_group(group, Signal::KILL);
            tree.signal(Signal::KILL);
            let status = child
                .wait()
                .map_err(|source| SuperviseError::Wait { pid, source })?;
            tree.reap_orphans();
            return Ok(RunEnd::Exited(status));
        }
        let signal = stop.load(Ordering::SeqCst) as i32;
        if signal != 0 {
            on_event(&Event::Signal { signal });
            if let Some(sig) = Signal::from_named_raw(signal) {
                kill_group(group, sig);
                tree.signal(sig);
            }
            stop_group(config, child, group, &mut tree)?;
            return Ok(RunEnd::Interrupted(signal));
        }
        if let Some(file) = &config.heartbeat {
            let beat = mtime(file);
            if beat != last_beat {
                last_beat = beat;
                last_progress = Instant::now();
            } else if last_progress.elapsed() > config.hang_after {
                on_event(&Event::Hang {
                    restart_count: restarts,
                    pid,
                    silent_s: last_progress.elapsed().as_secs_f64(),
                });
                kill_group(group, Signal::TERM);
                tree.signal(Signal::TERM);
                stop_group(config, child, group, &mut tree)?;
                return Ok(RunEnd::Hung);
            }
        }
        std::thread::sleep(config.poll_interval);
    }
}

/// Gives the group `kill_grace` to exit after a signal, then kills it and every other
/// process of the trainer's tree, and reaps the child.
fn stop_group(
    config: &SuperviseConfig,
    child: &mut Child,
    group: Pid,
    tree: &mut ProcessTree,
) -> Result<(), SuperviseError> {
    let pid = child.id();
    let deadline = Instant::now() + config.kill_grace;
    while Instant::now() < deadline {
        if exited(group).map_err(|source| SuperviseError::Wait { pid, source })? {
            break;
        }
        std::thread::sleep(config.poll_interval.min(Duration::from_millis(20)));
    }
    kill_group(group, Signal::KILL);
    tree.signal(Signal::KILL);
    child
        .wait()
        .map_err(|source| SuperviseError::Wait { pid, source })?;
    tree.reap_orphans();
    Ok(())
}

/// Whether the child has exited, without reaping it (its pid stays reserved).
fn exited(child: Pid) -> std::io::Result<bool> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    Ok(rustix::process::waitid(WaitId::Pid(child), options)?.is_some())
}

fn kill_group(group: Pid, signal: Signal) {
    // ESRCH (nobody left in the group) is the usual, good case.
    let _ = rustix::process::kill_process_group(group, signal);
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
