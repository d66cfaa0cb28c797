//! Non-Linux Unix fallback (compile-gated): no seccomp, so no kernel proof that every
//! descendant exited. The root gets its own session (or group, when it keeps the terminal) and
//! the family is what its process group shows when sampled: SIGTERM/SIGKILL go to the group
//! until it is observed empty. One notice on stderr per process; receipts carry no
//! `session_boundary`, which is how callers tell sampled cleanup from the Linux boundary.
//!
//! A launch with a room is refused: there is no Landlock here.
//!
//! Known gap (documented): a descendant that calls setsid() and reparents between samples can
//! outlive the run here.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{EndedBy, LaunchError, LaunchSpec, Receipt, StdinSource, StdioMode};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    pub platform: &'static str,
    pub session_boundary: bool,
}

impl Probe {
    /// One line for people (`autocode doctor`).
    pub fn summary(&self) -> String {
        format!(
            "{} fallback: process-group sampling, no kernel proof that every descendant exited",
            self.platform
        )
    }

    /// One line about the agent's room (`autocode doctor`).
    pub fn room_summary(&self) -> String {
        format!(
            "unavailable (missing {}): launches with a room are refused",
            self.room_missing().join("; ")
        )
    }

    /// What a room needs that this platform lacks: the room is Landlock, Linux only.
    pub fn room_missing(&self) -> Vec<String> {
        vec![format!(
            "Landlock (Linux only; {} has no equivalent here)",
            self.platform
        )]
    }

    /// Read-only holes are mounts in a private mount namespace: Linux only.
    pub fn read_only_holes_missing(&self) -> Option<String> {
        Some(format!(
            "a private mount namespace for read-only holes (Linux only; {} has none)",
            self.platform
        ))
    }

    /// A room's overlay is a mount in a private mount namespace: Linux only.
    pub fn overlay_missing(&self) -> Option<String> {
        Some(format!(
            "an overlay mount (Linux only; {} has none)",
            self.platform
        ))
    }

    /// A room's overlay is a mount in a private mount namespace: Linux only.
    pub fn overlay_missing_in(&self, _parent: &std::path::Path) -> Option<String> {
        self.overlay_missing()
    }

    /// Nothing refuses an unconfined launch on the fallback (it prints a notice instead).
    pub fn missing(&self) -> Vec<&'static str> {
        Vec::new()
    }
}

/// Overlays are Linux only: no layer is read here.
pub fn has_overlay_xattr(_path: &std::path::Path) -> bool {
    true
}

/// Overlays are Linux only: no layer is read here.
pub fn overlay_opaque(_path: &std::path::Path) -> bool {
    false
}

/// Overlays are Linux only (`Probe::overlay_missing`): no whiteout is made here.
pub fn whiteout(_path: &std::path::Path) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "overlay whiteouts are Linux only",
    ))
}

pub fn init_before_threads() -> io::Result<bool> {
    Ok(false)
}

pub fn release_keeper() {}

pub fn probe() -> Probe {
    Probe {
        platform: std::env::consts::OS,
        session_boundary: false,
    }
}

pub fn admit() -> Result<Probe, LaunchError> {
    static NOTICE: AtomicBool = AtomicBool::new(false);
    if !NOTICE.swap(true, Ordering::SeqCst) {
        crate::term_text::say_line(&format!(
            "autocode: {} has no seccomp: processes are owned by sampled process groups only, without kernel proof that every descendant exited; use Linux when that matters",
            std::env::consts::OS
        ));
    }
    Ok(probe())
}

pub struct Started {
    pub child: std::process::Child,
    pub family: Family,
}

pub struct Family {
    root_pid: i32,
    new_session: bool,
    label: String,
}

pub struct CleanupReport {
    pub killed: Vec<i32>,
    pub verified: bool,
}

pub async fn start(
    spec: &LaunchSpec,
    _receipt_path: Option<PathBuf>,
    _ledger_path: Option<PathBuf>,
    probe: &Probe,
) -> Result<Started, LaunchError> {
    if spec.room.is_some() {
        return Err(LaunchError::Refused {
            missing: probe.room_missing().join("; "),
        });
    }
    let new_session =
        !matches!(spec.stdin, StdinSource::Inherit) && spec.stdio != StdioMode::Terminal;
    let mut command = std::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(&spec.env)
        .current_dir(&spec.cwd);
    command.stdin(match spec.stdin {
        StdinSource::Null => Stdio::null(),
        StdinSource::Bytes(_) | StdinSource::Pipe => Stdio::piped(),
        StdinSource::Inherit => Stdio::inherit(),
    });
    match spec.stdio {
        StdioMode::Captured { .. } => command.stdout(Stdio::piped()).stderr(Stdio::piped()),
        StdioMode::Terminal => command.stdout(Stdio::inherit()).stderr(Stdio::inherit()),
    };
    // SAFETY: setsid/setpgid are async-signal-safe raw calls on no shared data.
    unsafe {
        command.pre_exec(move || {
            let rc = if new_session {
                libc::setsid()
            } else {
                libc::setpgid(0, 0)
            };
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        });
    }
    let child = command.spawn().map_err(|source| LaunchError::Spawn {
        program: spec.program.clone(),
        source,
    })?;
    let root_pid = child.id() as i32;
    Ok(Started {
        child,
        family: Family {
            root_pid,
            new_session,
            label: spec.label.clone(),
        },
    })
}

pub async fn wait_exit(child: &mut std::process::Child) -> io::Result<std::process::ExitStatus> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Family {
    fn signal_group(&self, signal: i32) -> bool {
        // SAFETY: killpg(2) with integer arguments.
        unsafe { libc::killpg(self.root_pid, signal) == 0 }
    }

    /// No exec ledger without the seccomp boundary.
    pub fn ledger(&self) -> Vec<crate::supervise::LedgerEntry> {
        Vec::new()
    }

    pub fn terminate(&self) -> Vec<i32> {
        self.signal_group(libc::SIGTERM);
        Vec::new()
    }

    pub fn wait_gone(&self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        while self.signal_group(0) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    pub fn cleanup(&self) -> CleanupReport {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut killed = Vec::new();
        while self.signal_group(libc::SIGKILL) {
            if killed.is_empty() {
                killed.push(self.root_pid);
            }
            if Instant::now() >= deadline {
                return CleanupReport {
                    killed,
                    verified: false,
                };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        CleanupReport {
            killed,
            verified: true,
        }
    }

    pub fn release(&self, _killed: &[i32]) {}

    pub fn receipt(
        &self,
        report: &CleanupReport,
        ended_by: EndedBy,
        run: Duration,
        cleanup: Duration,
    ) -> Receipt {
        Receipt {
            mode: "sampled_process_group".into(),
            label: self.label.clone(),
            kernel: std::env::consts::OS.into(),
            session_boundary: None,
            root_pid: self.root_pid.max(0) as u32,
            root_sid: self.new_session.then_some(self.root_pid),
            root_pgid: self.root_pid,
            sessions: Vec::new(),
            groups: Vec::new(),
            denied: Vec::new(),
            killed: report.killed.clone(),
            keeper_lost: false,
            owner_lost: false,
            verified: report.verified,
            ended_by,
            run_ms: run.as_secs_f64() * 1e3,
            cleanup_ms: cleanup.as_secs_f64() * 1e3,
            room: None,
        }
    }
}
