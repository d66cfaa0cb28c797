//! The process-ownership boundary: the only place in autocode that starts processes.
//!
//! (Interim implementation: a process group with a timeout. The seccomp user-notification
//! boundary replaces the internals behind this same surface.)

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Everything needed to start one process. The environment is complete: nothing is inherited.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// What this launch is for, e.g. `version probe` or `stage 003-builder-1` (receipts, logs).
    pub label: String,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: BTreeMap<OsString, OsString>,
    pub cwd: PathBuf,
    pub stdin: StdinSource,
    /// Whether stdout and stderr are captured or attached to autocode's terminal.
    pub stdio: StdioMode,
    /// Wall-clock limit; the whole family is killed when it runs out.
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone)]
pub enum StdinSource {
    Null,
    Bytes(Vec<u8>),
    /// The terminal (interactive commands such as a provider's login).
    Inherit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioMode {
    /// Captured, each stream kept up to the given number of bytes.
    Captured { limit: usize },
    /// Attached to autocode's own stdout and stderr.
    Terminal,
}

/// How the launched process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    TimedOut,
}

/// The outcome of a launch run to completion.
#[derive(Debug, Clone)]
pub struct Finished {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub receipt: Receipt,
}

/// What the boundary can say about the family after the launch.
#[derive(Debug, Clone, Serialize)]
pub struct Receipt {
    pub mode: String,
    pub root_pid: u32,
    pub verified: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        program: OsString,
        #[source]
        source: std::io::Error,
    },
    #[error("i/o with {label}: {source}")]
    Io {
        label: String,
        #[source]
        source: std::io::Error,
    },
}

/// Runs `spec` to completion and returns its exit, its captured output and the receipt.
pub async fn run(spec: LaunchSpec) -> Result<Finished, LaunchError> {
    let mut command = tokio::process::Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(&spec.env)
        .current_dir(&spec.cwd)
        .process_group(0)
        .kill_on_drop(true);
    command.stdin(match spec.stdin {
        StdinSource::Null => Stdio::null(),
        StdinSource::Bytes(_) => Stdio::piped(),
        StdinSource::Inherit => Stdio::inherit(),
    });
    let limit = match spec.stdio {
        StdioMode::Captured { limit } => {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
            limit
        }
        StdioMode::Terminal => {
            command.stdout(Stdio::inherit()).stderr(Stdio::inherit());
            0
        }
    };
    let mut child = command.spawn().map_err(|source| LaunchError::Spawn {
        program: spec.program.clone(),
        source,
    })?;
    let root_pid = child.id().unwrap_or(0);
    let io_err = |source| LaunchError::Io {
        label: spec.label.clone(),
        source,
    };
    let stdin_task = match (spec.stdin, child.stdin.take()) {
        (StdinSource::Bytes(bytes), Some(mut pipe)) => Some(tokio::spawn(async move {
            // A child that exits without reading its stdin is not an error of ours.
            let _ = pipe.write_all(&bytes).await;
        })),
        _ => None,
    };
    let stdout = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_capped(s, limit)));
    let stderr = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_capped(s, limit)));
    let waited = match spec.timeout {
        Some(limit) => tokio::time::timeout(limit, child.wait()).await.ok(),
        None => Some(child.wait().await),
    };
    let exit = match waited {
        Some(status) => {
            let status = status.map_err(io_err)?;
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(signal)) => Exit::Signal(signal),
                (None, None) => Exit::Code(-1),
            }
        }
        None => Exit::TimedOut,
    };
    // The whole group goes, whatever the root did.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(root_pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    let _ = child.wait().await;
    if let Some(task) = stdin_task {
        let _ = task.await;
    }
    let stdout = match stdout {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    let stderr = match stderr {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(Finished {
        exit,
        stdout,
        stderr,
        receipt: Receipt {
            mode: "process_group".into(),
            root_pid,
            verified: false,
        },
    })
}

async fn read_capped(mut reader: impl tokio::io::AsyncRead + Unpin, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    kept
}
