//! The process-ownership boundary: the only place in autocode that starts processes.
//!
//! Theory of operation (details and diagram in `docs/supervision.md`): every launch's root is
//! forked by one long-lived spawner thread, put in its own session (or group, when it needs the
//! terminal), stripped of the capabilities that could defeat the boundary, and given a seccomp
//! filter whose listener notifies setsid, setpgid and seccomp(NEW_LISTENER). A keeper process
//! (forked by [`init_before_threads`]) answers those notifications, recording every new session
//! or group before it exists. When the root exits, times out, goes idle or is cancelled, the
//! whole family (root session/group + every recorded one) is killed until the kernel reports,
//! by POLLHUP on the listener, that no process carries the filter any more: only then is the
//! receipt `verified`.
//!
//! Invariants: nothing else in the crate forks or execs (a test greps `src/`); the environment
//! is exactly `LaunchSpec::env`; stdout and stderr are drained concurrently and a survivor
//! holding a pipe is killed, never waited for; every launch yields one [`Receipt`]; unverified
//! cleanup is reported (`verified: false`), never hidden.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

#[cfg_attr(target_os = "linux", path = "linux/mod.rs")]
#[cfg_attr(not(target_os = "linux"), path = "fallback.rs")]
mod platform;

mod command;
mod ledger_file;
pub mod net;
mod room;

pub use command::supervise_command;
pub use ledger_file::words_sha256;
pub use platform::{Probe, has_overlay_xattr, overlay_opaque, whiteout};
pub use room::{
    CutArg, LedgerEntry, LedgerExit, Overlay, PrivateViews, RealPath, Room, RoomReceipt,
};

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
    /// The room the family is confined to; `None` runs it unconfined (ownership boundary only).
    pub room: Option<Room>,
}

#[derive(Debug, Clone)]
pub enum StdinSource {
    Null,
    Bytes(Vec<u8>),
    /// The terminal (interactive commands such as a provider's login). The root then keeps
    /// autocode's session in its own process group instead of a new session.
    Inherit,
    /// A pipe autocode writes while the family runs ([`Running::stdin`], a protocol spoken on
    /// stdin such as ACP); closed when the writer is dropped.
    Pipe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioMode {
    /// Captured, each stream kept up to the given number of bytes.
    Captured { limit: usize },
    /// Attached to autocode's own stdout and stderr.
    Terminal,
}

/// Extra knobs of a launch; `Default` is what [`run`] uses.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Tee of stdout (created/truncated), cut at `log_limit` with a marker line.
    pub stdout_log: Option<PathBuf>,
    /// Tee of stderr (created/truncated), cut at `log_limit` with a marker line.
    pub stderr_log: Option<PathBuf>,
    pub log_limit: u64,
    /// No output on stdout or stderr for this long ends the stage like a timeout.
    pub idle_timeout: Option<Duration>,
    /// Between SIGTERM to the family and the SIGKILL loop.
    pub grace: Duration,
    /// Where the keeper writes the receipt if autocode dies mid-launch.
    pub receipt_path: Option<PathBuf>,
    /// Where the exec ledger is written (JSON lines, one [`LedgerEntry`] each).
    pub ledger_path: Option<PathBuf>,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        Self {
            stdout_log: None,
            stderr_log: None,
            log_limit: 64 * 1024 * 1024,
            idle_timeout: None,
            grace: Duration::from_secs(3),
            receipt_path: None,
            ledger_path: None,
        }
    }
}

/// How the launched process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// The stage timeout or the idle timeout ran out (the receipt's `ended_by` says which).
    TimedOut,
}

/// Why the boundary ended the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// The root exited on its own; the rest of the family was cleaned up.
    RootExit,
    Timeout,
    IdleTimeout,
    Cancelled,
    /// autocode died; the keeper ended the family (receipt written by the keeper).
    OwnerLost,
}

/// The outcome of a launch run to completion.
#[derive(Debug, Clone)]
pub struct Finished {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub receipt: Receipt,
    /// Every exec of the family, attested by the kernel (empty where no ledger is kept).
    pub ledger: Vec<LedgerEntry>,
}

/// A call the boundary refused, as the receipt lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeniedCall {
    pub syscall: String,
    pub pid: i32,
    pub reason: String,
}

/// What the boundary can say about the family after the launch (one per launch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// `seccomp_keeper`, `seccomp_in_process` (no keeper was started), or
    /// `sampled_process_group` (non-Linux fallback).
    pub mode: String,
    pub label: String,
    pub kernel: String,
    /// Absent on the non-Linux fallback: no kernel proof of family extinction there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_boundary: Option<String>,
    pub root_pid: u32,
    pub root_sid: Option<i32>,
    pub root_pgid: i32,
    /// Sessions and groups the family created (recorded before they existed).
    pub sessions: Vec<i32>,
    pub groups: Vec<i32>,
    pub denied: Vec<DeniedCall>,
    pub killed: Vec<i32>,
    pub keeper_lost: bool,
    pub owner_lost: bool,
    /// The kernel reported that no process carries this launch's filter any more.
    pub verified: bool,
    pub ended_by: EndedBy,
    pub run_ms: f64,
    pub cleanup_ms: f64,
    /// The room the family ran in; absent when it ran unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<RoomReceipt>,
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
    /// The host lacks a feature of the process-ownership boundary; nothing was started.
    #[error("refusing to launch: this host lacks {missing}")]
    Refused { missing: String },
}

/// Forks the keeper process. Call it first thing in `main`, before any thread (the tokio
/// runtime included) exists. Returns whether a keeper runs; with threads already present it
/// does nothing and launches are serviced in-process (mode `seccomp_in_process`).
pub fn init_before_threads() -> bool {
    platform::init_before_threads().unwrap_or(false)
}

/// At the end of `main`: lets the keeper go and reaps it, so it does not outlive autocode as a
/// zombie of a subreaper parent (another autocode running this one). Bounded; does nothing while
/// a launch still runs.
pub fn release_keeper() {
    platform::release_keeper()
}

/// The boundary's view of this host (for `autocode doctor`).
pub fn probe() -> Probe {
    platform::probe()
}

/// Runs `spec` to completion and returns its exit, its captured output and the receipt.
pub async fn run(spec: LaunchSpec) -> Result<Finished, LaunchError> {
    run_with(spec, LaunchOptions::default()).await
}

/// [`run`] with options (logs, idle timeout, grace, receipt path).
pub async fn run_with(spec: LaunchSpec, options: LaunchOptions) -> Result<Finished, LaunchError> {
    let (started, label) = (std::time::Instant::now(), spec.label.clone());
    let finished = spawn_inner(spec, options, false)
        .await?
        .finish_inner()
        .await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::debug!(label = %label, ms, "supervised launch finished");
    finished
}

/// Starts `spec` and returns at once; read stdout from [`Running::stdout`] line by line, then
/// call [`Running::finish`].
pub async fn spawn(spec: LaunchSpec, options: LaunchOptions) -> Result<Running, LaunchError> {
    spawn_inner(spec, options, true).await
}

/// Stdout of a running stage: read it (e.g. `BufReader::new(out).lines()`) or drop it.
pub type StageStdout = tokio::io::DuplexStream;

/// Stdin of a running stage launched with [`StdinSource::Pipe`]; dropping it closes the pipe.
pub type StageStdin = tokio::net::unix::pipe::Sender;

/// A launch in progress.
pub struct Running {
    root_pid: u32,
    stdout: Option<StageStdout>,
    stdin: Option<StageStdin>,
    cancel: Canceller,
    idle: IdleHolder,
    driver: Option<JoinHandle<Result<Finished, LaunchError>>>,
}

/// Cancels a running launch from anywhere (SIGTERM, grace, kill loop).
#[derive(Debug, Clone)]
pub struct Canceller(Arc<tokio::sync::watch::Sender<bool>>);

impl Canceller {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}

impl Running {
    pub fn root_pid(&self) -> u32 {
        self.root_pid
    }

    /// Takes the stdout stream (once). Unread output is backpressure on the agent; drop the
    /// stream if you do not want it.
    pub fn stdout(&mut self) -> Option<StageStdout> {
        self.stdout.take()
    }

    /// Takes the stdin pipe (once; only with [`StdinSource::Pipe`]).
    pub fn stdin(&mut self) -> Option<StageStdin> {
        self.stdin.take()
    }

    pub fn canceller(&self) -> Canceller {
        self.cancel.clone()
    }

    /// Holds the idle timer while work for this launch runs elsewhere ([`IdleHolder`]).
    pub fn idle_holder(&self) -> IdleHolder {
        self.idle.clone()
    }

    /// Waits for the end (root exit, timeout, idle timeout or cancellation) and the verified
    /// cleanup of the whole family.
    pub async fn finish(mut self) -> Result<Finished, LaunchError> {
        self.finish_inner().await
    }

    async fn finish_inner(&mut self) -> Result<Finished, LaunchError> {
        // Stdout nobody took is still drained (into `Finished::stdout`, capped); a stdin pipe
        // nobody took is closed.
        self.stdout = None;
        self.stdin = None;
        let Some(driver) = self.driver.take() else {
            return Err(LaunchError::Io {
                label: "launch".into(),
                source: io::Error::other("finish called twice"),
            });
        };
        driver.await.map_err(|error| LaunchError::Io {
            label: "launch".into(),
            source: io::Error::other(error.to_string()),
        })?
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.driver.is_some() {
            // Dropped without finish: the family is ended in the background.
            self.cancel.cancel();
        }
    }
}

/// Milliseconds since the launch started at which output was last seen, and how many
/// [`IdleHold`]s say the launch is busy without output.
struct Activity {
    origin: Instant,
    last_ms: AtomicU64,
    held: std::sync::atomic::AtomicU32,
}

impl Activity {
    fn touch(&self) {
        let now = self.origin.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }
    fn last(&self) -> Instant {
        self.origin + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// Holds a launch's idle timer while work done on its behalf runs elsewhere (an ACP agent
/// waiting on a command in autocode's terminal writes nothing meanwhile). The stage timeout
/// still applies; the idle timer restarts when the last hold ends.
#[derive(Clone)]
pub struct IdleHolder(Arc<Activity>);

/// One hold; dropping it releases it (and counts as activity).
pub struct IdleHold(Arc<Activity>);

impl IdleHolder {
    pub fn hold(&self) -> IdleHold {
        self.0.held.fetch_add(1, Ordering::SeqCst);
        self.0.touch();
        IdleHold(self.0.clone())
    }
}

impl std::fmt::Debug for IdleHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdleHolder")
    }
}

impl Drop for IdleHold {
    fn drop(&mut self) {
        self.0.touch();
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A log file capped at `limit` bytes, with a marker where it was cut.
struct LogTee {
    file: tokio::fs::File,
    written: u64,
    limit: u64,
    cut: bool,
}

impl LogTee {
    async fn open(path: &Path, limit: u64) -> io::Result<Self> {
        Ok(Self {
            file: tokio::fs::File::create(path).await?,
            written: 0,
            limit,
            cut: false,
        })
    }

    async fn write(&mut self, bytes: &[u8]) {
        if self.cut {
            return;
        }
        let room = self.limit.saturating_sub(self.written) as usize;
        let keep = bytes.len().min(room);
        if let Some(kept) = bytes.get(..keep)
            && self.file.write_all(kept).await.is_ok()
        {
            self.written += keep as u64;
        }
        if keep < bytes.len() {
            self.cut = true;
            let marker = format!("\n[autocode: log cut at {} bytes]\n", self.limit);
            let _ = self.file.write_all(marker.as_bytes()).await;
        }
    }

    async fn close(mut self) {
        let _ = self.file.flush().await;
    }
}

/// Drains one pipe: tee to the log, forward to the stream, keep up to `limit` bytes.
async fn pump(
    mut pipe: tokio::net::unix::pipe::Receiver,
    mut log: Option<LogTee>,
    mut forward: Option<tokio::io::DuplexStream>,
    limit: usize,
    activity: Arc<Activity>,
) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        activity.touch();
        let Some(chunk) = buf.get(..n) else { break };
        let room = limit.saturating_sub(kept.len());
        kept.extend_from_slice(chunk.get(..n.min(room)).unwrap_or_default());
        if let Some(log) = log.as_mut() {
            log.write(chunk).await;
        }
        if let Some(stream) = forward.as_mut()
            && stream.write_all(chunk).await.is_err()
        {
            // The reader dropped the stream: keep draining into the log only.
            forward = None;
        }
    }
    if let Some(log) = log {
        log.close().await;
    }
    kept
}

fn pipe_receiver(
    fd: Option<impl Into<std::os::fd::OwnedFd>>,
) -> io::Result<Option<tokio::net::unix::pipe::Receiver>> {
    fd.map(|fd| tokio::net::unix::pipe::Receiver::from_owned_fd(fd.into()))
        .transpose()
}

async fn spawn_inner(
    spec: LaunchSpec,
    options: LaunchOptions,
    stream_stdout: bool,
) -> Result<Running, LaunchError> {
    let probe = platform::admit()?;
    let io_err = |source| LaunchError::Io {
        label: spec.label.clone(),
        source,
    };
    let open_log = |path: Option<PathBuf>| async move {
        match path {
            Some(path) => LogTee::open(&path, options.log_limit).await.map(Some),
            None => Ok(None),
        }
    };
    let stdout_log = open_log(options.stdout_log.clone()).await.map_err(io_err)?;
    let stderr_log = open_log(options.stderr_log.clone()).await.map_err(io_err)?;
    let receipt_path = options
        .receipt_path
        .as_ref()
        .map(|path| std::path::absolute(path).unwrap_or_else(|_| path.clone()));
    let started_at = Instant::now();
    let platform::Started { mut child, family } =
        platform::start(&spec, receipt_path, options.ledger_path.clone(), &probe).await?;
    let root_pid = child.id();
    let activity = Arc::new(Activity {
        origin: started_at,
        last_ms: AtomicU64::new(0),
        held: std::sync::atomic::AtomicU32::new(0),
    });
    let limit = match spec.stdio {
        StdioMode::Captured { limit } => limit,
        StdioMode::Terminal => 0,
    };
    let mut stdin_pipe = None;
    let stdin_task = match (&spec.stdin, child.stdin.take()) {
        (StdinSource::Pipe, Some(pipe)) => {
            stdin_pipe =
                Some(tokio::net::unix::pipe::Sender::from_owned_fd(pipe.into()).map_err(io_err)?);
            None
        }
        (StdinSource::Bytes(bytes), Some(pipe)) => {
            let bytes = bytes.clone();
            let pipe =
                tokio::net::unix::pipe::Sender::from_owned_fd(pipe.into()).map_err(io_err)?;
            Some(tokio::spawn(async move {
                let mut pipe = pipe;
                // A child that exits without reading its stdin is not an error of ours.
                let _ = pipe.write_all(&bytes).await;
            }))
        }
        _ => None,
    };
    let (stream_reader, stream_writer) = if stream_stdout {
        let (reader, writer) = tokio::io::duplex(256 * 1024);
        (Some(reader), Some(writer))
    } else {
        (None, None)
    };
    let stdout_pipe = pipe_receiver(child.stdout.take()).map_err(io_err)?;
    let stderr_pipe = pipe_receiver(child.stderr.take()).map_err(io_err)?;
    let stdout_task = stdout_pipe.map(|pipe| {
        tokio::spawn(pump(
            pipe,
            stdout_log,
            stream_writer,
            limit,
            activity.clone(),
        ))
    });
    let stderr_task =
        stderr_pipe.map(|pipe| tokio::spawn(pump(pipe, stderr_log, None, limit, activity.clone())));
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let idle = IdleHolder(activity.clone());
    let driver = tokio::spawn(drive(Drive {
        child,
        family,
        timeout: spec.timeout,
        idle_timeout: options.idle_timeout,
        grace: options.grace,
        cancelled: cancel_rx,
        activity,
        started_at,
        stdin_task,
        stdout_task,
        stderr_task,
    }));
    Ok(Running {
        root_pid,
        stdout: stream_reader,
        stdin: stdin_pipe,
        cancel: Canceller(Arc::new(cancel_tx)),
        idle,
        driver: Some(driver),
    })
}

struct Drive {
    child: std::process::Child,
    family: platform::Family,
    timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    grace: Duration,
    cancelled: tokio::sync::watch::Receiver<bool>,
    activity: Arc<Activity>,
    started_at: Instant,
    stdin_task: Option<JoinHandle<()>>,
    stdout_task: Option<JoinHandle<Vec<u8>>>,
    stderr_task: Option<JoinHandle<Vec<u8>>>,
}

async fn wait_idle(activity: &Activity, idle: Option<Duration>) {
    let Some(idle) = idle else {
        return std::future::pending().await;
    };
    loop {
        if activity.held.load(Ordering::SeqCst) > 0 {
            // Busy elsewhere: idle only counts from the end of the last hold.
            activity.touch();
        }
        let due = activity.last() + idle;
        if Instant::now() >= due {
            return;
        }
        tokio::time::sleep_until(due.into()).await;
    }
}

async fn wait_deadline(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// How long pipes may stay open after the family is verified gone (a descriptor passed to a
/// process outside the family): then the drain is abandoned, never waited for.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

async fn collect(task: Option<JoinHandle<Vec<u8>>>) -> Vec<u8> {
    let Some(mut task) = task else {
        return Vec::new();
    };
    match tokio::time::timeout(DRAIN_LIMIT, &mut task).await {
        Ok(Ok(kept)) => kept,
        Ok(Err(_)) => Vec::new(),
        Err(_) => {
            task.abort();
            Vec::new()
        }
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(-1),
    }
}

async fn drive(mut drive: Drive) -> Result<Finished, LaunchError> {
    let deadline = drive.timeout.map(|timeout| drive.started_at + timeout);
    let family = Arc::new(drive.family);
    let mut root_exit = std::pin::pin!(platform::wait_exit(&mut drive.child));
    let mut status = None;
    let ended_by = tokio::select! {
        waited = &mut root_exit => {
            status = waited.ok();
            EndedBy::RootExit
        }
        () = wait_deadline(deadline) => EndedBy::Timeout,
        () = wait_idle(&drive.activity, drive.idle_timeout) => EndedBy::IdleTimeout,
        _ = drive.cancelled.wait_for(|cancelled| *cancelled) => EndedBy::Cancelled,
    };
    let run_time = drive.started_at.elapsed();
    let cleanup_started = Instant::now();
    if ended_by != EndedBy::RootExit {
        let (terminating, grace) = (family.clone(), drive.grace);
        let _ = tokio::task::spawn_blocking(move || {
            terminating.terminate();
            terminating.wait_gone(grace)
        })
        .await;
    }
    let cleaning = family.clone();
    let report = tokio::task::spawn_blocking(move || cleaning.cleanup())
        .await
        .map_err(|error| LaunchError::Io {
            label: "cleanup".into(),
            source: io::Error::other(error.to_string()),
        })?;
    if status.is_none() {
        // The family is dead (or cleanup gave up); the root's status is there to collect.
        status = tokio::time::timeout(DRAIN_LIMIT, &mut root_exit)
            .await
            .ok()
            .and_then(Result::ok);
    }
    let cleanup_time = cleanup_started.elapsed();
    // Before release: the keeper link still routes this launch's ledger messages.
    let settling = family.clone();
    let ledger = tokio::task::spawn_blocking(move || settling.ledger())
        .await
        .unwrap_or_default();
    family.release(&report.killed);
    if let Some(task) = drive.stdin_task.take() {
        task.abort();
    }
    let stdout = collect(drive.stdout_task.take()).await;
    let stderr = collect(drive.stderr_task.take()).await;
    let exit = match ended_by {
        EndedBy::Timeout | EndedBy::IdleTimeout => Exit::TimedOut,
        _ => status.map_or(Exit::Signal(libc::SIGKILL), exit_of),
    };
    let receipt = family.receipt(&report, ended_by, run_time, cleanup_time);
    Ok(Finished {
        exit,
        stdout,
        stderr,
        receipt,
        ledger,
    })
}

pub use room::Attestation;

/// Reads a ledger file (its format: `ledger_file`; files of the earlier format, whole
/// [`LedgerEntry`] lines, read the same). A line cut by a crash mid-write is skipped.
pub fn read_ledger(path: &Path) -> io::Result<Vec<LedgerEntry>> {
    let text = crate::bounded_read::read_to_string(path, crate::bounded_read::RECORD_CAP)?;
    Ok(ledger_file::read(&text))
}

/// Writes a receipt atomically (`.partial` then rename).
pub fn write_receipt(path: &Path, receipt: &Receipt) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(receipt).map_err(io::Error::other)?;
    // A receipt replaces a regular file atomically (temp file, rename). Anything else that
    // already exists there (`/dev/null`, `/dev/stdout`, a FIFO, a terminal) is written into,
    // never replaced: a rename would put a regular file in its place, and as root that
    // destroys the device for the whole machine.
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
            return io::Write::write_all(&mut file, &bytes);
        }
        _ => {}
    }
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut partial = target.as_os_str().to_owned();
    partial.push(".partial");
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, &target)
}

/// What a command started inside the caller's own family returned.
#[derive(Debug, Clone)]
pub struct InFamilyOutput {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Starts a command as an ordinary child of this process, like [`run_in_current_family`], and
/// hands it back running: stdin closed, stdout piped, stderr to `stderr` (the caller's log),
/// not killed when the handle is dropped. Only for autocode itself: the `autocode exec` / `resume --jsonl` children
/// of `autocode mcp` (each the boundary of the agents it starts), which the server follows and
/// may stop, and which finish their run if the server goes away: each starts a session of its
/// own (`setsid`), so a signal to the server's process group, or the hangup of its terminal,
/// does not cut a run off mid-stage (a stage's SIGINT still pauses it, sent by pid).
pub fn spawn_in_current_family(
    program: &OsString,
    args: &[OsString],
    cwd: &Path,
    stderr: std::process::Stdio,
) -> Result<tokio::process::Child, LaunchError> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(false);
    #[cfg(unix)]
    // SAFETY: the closure runs in the forked child before exec and calls only `setsid(2)`,
    // which is async-signal-safe; it allocates nothing and touches no lock.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    command.spawn().map_err(|source| LaunchError::Spawn {
        program: program.clone(),
        source,
    })
}

/// Runs a command as an ordinary child of this process, inside whatever family this process
/// already belongs to, without a boundary of its own. Only for commands autocode runs *on an
/// agent's behalf from inside that agent's family* (`autocode capture`: the agent's boundary
/// already owns the child, and a nested listener would be refused), for autocode itself
/// (`scenario run --jobs` children and the dashboard's decisions, each the boundary of the
/// agents it starts), and for `dashboard --open`'s `xdg-open` (the person's browser, which must
/// outlive it: a boundary would end it). The
/// environment is inherited from the caller; stdin is closed; output is captured up to `limit`
/// bytes per stream; the child is killed if the caller drops the future.
pub async fn run_in_current_family(
    program: &OsString,
    args: &[OsString],
    cwd: &Path,
    limit: usize,
) -> Result<InFamilyOutput, LaunchError> {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| LaunchError::Spawn {
            program: program.clone(),
            source,
        })?;
    async fn read_capped(pipe: Option<impl tokio::io::AsyncRead + Unpin>, limit: usize) -> Vec<u8> {
        let mut kept = Vec::new();
        if let Some(mut pipe) = pipe {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = limit.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
        }
        kept
    }
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (out, err, status) = tokio::join!(
        read_capped(stdout, limit),
        read_capped(stderr, limit),
        child.wait()
    );
    let status = status.map_err(|source| LaunchError::Io {
        label: "capture".into(),
        source,
    })?;
    use std::os::unix::process::ExitStatusExt;
    let exit = match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(-1),
    };
    Ok(InFamilyOutput {
        exit,
        stdout: out,
        stderr: err,
    })
}

#[cfg(test)]
mod tests;
