//! Non-Linux Unix fallback (compile-gated; not built on Linux): no seccomp, so the root gets its
//! own session and the family is its sampled session/group, plus the lifeline of PDEATHSIG-less
//! platforms (none). One notice on stderr per process; receipts carry no `session_boundary`.
//!
//! Not implemented beyond refusal in this version: every launch is refused with a message naming
//! the missing boundary. (The sampled fallback is documented in docs/supervision.md.)

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::{EndedBy, LaunchError, LaunchSpec, Receipt};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    pub platform: &'static str,
}

pub fn init_before_threads() -> io::Result<bool> {
    Ok(false)
}

pub fn probe() -> Probe {
    Probe {
        platform: std::env::consts::OS,
    }
}

pub fn admit() -> Result<Probe, LaunchError> {
    Err(LaunchError::Refused {
        missing: format!(
            "the seccomp process-ownership boundary (Linux only; {} has no fallback yet)",
            std::env::consts::OS
        ),
    })
}

pub struct Started {
    pub child: std::process::Child,
    pub family: Family,
}

pub struct Family;

pub struct CleanupReport;

pub async fn start(
    _spec: &LaunchSpec,
    _receipt_path: Option<PathBuf>,
    _probe: &Probe,
) -> Result<Started, LaunchError> {
    Err(admit().err().unwrap_or(LaunchError::Refused {
        missing: "the process-ownership boundary".into(),
    }))
}

pub async fn wait_exit(child: &mut std::process::Child) -> io::Result<std::process::ExitStatus> {
    child.wait()
}

impl Family {
    pub fn terminate(&self) -> Vec<i32> {
        Vec::new()
    }
    pub fn wait_gone(&self, _grace: Duration) -> bool {
        false
    }
    pub fn cleanup(&self) -> CleanupReport {
        CleanupReport
    }
    pub fn release(&self, _killed: &[i32]) {}
    pub fn receipt(
        &self,
        _: &CleanupReport,
        ended_by: EndedBy,
        run: Duration,
        cleanup: Duration,
    ) -> Receipt {
        Receipt {
            mode: "sampled_process_group".into(),
            label: String::new(),
            kernel: String::new(),
            session_boundary: None,
            root_pid: 0,
            root_sid: None,
            root_pgid: 0,
            sessions: Vec::new(),
            groups: Vec::new(),
            denied: Vec::new(),
            killed: Vec::new(),
            keeper_lost: false,
            owner_lost: false,
            verified: false,
            ended_by,
            run_ms: run.as_secs_f64() * 1e3,
            cleanup_ms: cleanup.as_secs_f64() * 1e3,
        }
    }
}
