//! The runs `autocode mcp` starts: each an `autocode exec` or `autocode resume --jsonl` child
//! (the same code path as the command line), in a session of its own so that it finishes its
//! run when the server goes away (a signal to the server's process group or terminal does not
//! reach it). The server reads its `autocode-exec/1` lines until the run is under way (the run
//! exists: its id is known) or ended, then keeps draining them in the background. The server
//! remembers which process works on which run (to stop it) and how a child that ended without
//! settling its run (a failure) ended.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::exec::{ExecLine, ResultLine};

/// How long a launch may take to be under way (preflight included) before the tool answers
/// that it is still starting.
const UNDER_WAY: Duration = Duration::from_secs(120);

/// The runs this server started: the process working on each (run id → pid), and the result
/// line of the last child of each that ended.
#[derive(Debug, Default, Clone)]
pub struct Children(Arc<Mutex<Known>>);

#[derive(Debug, Default)]
struct Known {
    working: BTreeMap<String, u32>,
    ended: BTreeMap<String, ResultLine>,
}

impl Children {
    pub fn pid(&self, run: &str) -> Option<u32> {
        self.0.lock().ok()?.working.get(run).copied()
    }

    /// The runs a child of this server works on.
    pub fn working_runs(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|known| known.working.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// How the last child of this server that worked on `run` ended, once none works on it.
    pub fn ended(&self, run: &str) -> Option<ResultLine> {
        let known = self.0.lock().ok()?;
        if known.working.contains_key(run) {
            return None;
        }
        known.ended.get(run).cloned()
    }

    fn set(&self, run: &str, pid: Option<u32>) {
        if let Ok(mut known) = self.0.lock() {
            match pid {
                Some(pid) => {
                    known.ended.remove(run);
                    known.working.insert(run.to_owned(), pid)
                }
                None => known.working.remove(run),
            };
        }
    }

    fn set_ended(&self, run: &str, result: ResultLine) {
        if let Ok(mut known) = self.0.lock() {
            known.ended.insert(run.to_owned(), result);
        }
    }
}

/// How a launch stands when the tool answers.
#[derive(Debug)]
pub enum Launched {
    /// The run exists and works (`run_id` from the meta line).
    UnderWay { run_id: String },
    /// The child ended first (paused, complete, failed or refused): its result line.
    Ended { result: Box<ResultLine> },
    /// Neither within [`UNDER_WAY`] (preflight still runs): it goes on.
    Starting,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Spawn(#[from] crate::supervise::LaunchError),
    #[error("cannot open the launch's log {}: {source}", path.display())]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("autocode ended without a result line; its standard error ({}) ends:\n{tail}", log.display())]
    NoResult { log: PathBuf, tail: String },
}

/// Where the children's standard error goes: `mcp-logs/` in autocode's state directory
/// (`$XDG_STATE_HOME/autocode`, which no agent can read), one file a launch, the newest
/// [`LOGS_KEPT`] kept: what a child says before its run exists, or when it fails, is never lost.
const LOG_DIR: &str = "mcp-logs";
const LOGS_KEPT: usize = 20;

/// How much of a failed child's standard error the refusal quotes.
const TAIL_BYTES: u64 = 2048;

/// The directory of the launches' logs.
fn log_dir() -> PathBuf {
    crate::run::integrity::key_dir()
        .unwrap_or_else(|_| std::env::temp_dir().join("autocode"))
        .join(LOG_DIR)
}

/// A fresh log file for a launch in `dir`, the oldest beyond [`LOGS_KEPT`] removed.
fn open_log(dir: &Path) -> Result<(PathBuf, std::fs::File), LaunchError> {
    use std::os::unix::fs::DirBuilderExt;
    let failed = |path: &Path, source| LaunchError::Log {
        path: path.to_owned(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| failed(dir, e))?;
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    while logs.len() >= LOGS_KEPT {
        let _ = std::fs::remove_file(logs.remove(0));
    }
    static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        "{}-{}-{}.log",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ"),
        std::process::id(),
        SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let path = dir.join(name);
    let file = std::fs::File::create(&path).map_err(|e| failed(&path, e))?;
    Ok((path, file))
}

/// The last [`TAIL_BYTES`] of `log`.
fn tail_of(log: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(log) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)));
    let mut bytes = Vec::new();
    let _ = file.take(TAIL_BYTES).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

/// When a launch counts as under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnderWay {
    /// When the run exists (a new run: `exec`).
    Opened,
    /// When a stage started (a decision on an existing run, which is refused before any stage
    /// when it does not apply).
    StageStarted,
}

/// Starts `autocode ARGS` in `cwd` and waits until its run is under way or ended.
pub async fn launch(
    exe: &Path,
    args: Vec<OsString>,
    cwd: &Path,
    children: &Children,
    under_way: UnderWay,
) -> Result<Launched, LaunchError> {
    launch_logged(exe, args, cwd, children, under_way, &log_dir()).await
}

/// [`launch`], the child's standard error in a new file of `logs`.
async fn launch_logged(
    exe: &Path,
    args: Vec<OsString>,
    cwd: &Path,
    children: &Children,
    under_way: UnderWay,
    logs: &Path,
) -> Result<Launched, LaunchError> {
    let (log, log_file) = open_log(logs)?;
    let mut child = crate::supervise::spawn_in_current_family(
        &exe.as_os_str().to_owned(),
        &args,
        cwd,
        log_file.into(),
    )?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ExecLine>();
    let registry = children.clone();
    tokio::spawn(async move {
        let mut run_id: Option<String> = None;
        if let Some(stdout) = stdout {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(line) = serde_json::from_str::<ExecLine>(&line) else {
                    continue;
                };
                if let ExecLine::Meta(meta) = &line
                    && let Some(id) = &meta.run_id
                {
                    run_id = Some(id.as_str().to_owned());
                    registry.set(id.as_str(), pid);
                }
                if let (ExecLine::Result(result), Some(id)) = (&line, &run_id) {
                    registry.set_ended(id, (**result).clone());
                }
                let _ = tx.send(line);
            }
        }
        let _ = child.wait().await;
        if let Some(id) = run_id {
            registry.set(&id, None);
        }
    });
    let deadline = tokio::time::Instant::now() + UNDER_WAY;
    let mut run_id = None;
    loop {
        let line = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => return Ok(Launched::Starting),
            Ok(None) => {
                return Err(LaunchError::NoResult {
                    tail: tail_of(&log),
                    log,
                });
            }
            Ok(Some(line)) => line,
        };
        match line {
            ExecLine::Meta(meta) => {
                run_id = meta.run_id.map(|id| id.as_str().to_owned());
                if let (UnderWay::Opened, Some(id)) = (under_way, &run_id) {
                    return Ok(Launched::UnderWay { run_id: id.clone() });
                }
            }
            ExecLine::StageStart(_) => {
                if let Some(id) = &run_id {
                    return Ok(Launched::UnderWay { run_id: id.clone() });
                }
            }
            ExecLine::Result(result) => return Ok(Launched::Ended { result }),
            _ => {}
        }
    }
}

/// Runs `autocode ARGS` to its end and returns its stdout, stderr and exit code (for `apply`).
pub async fn run_to_end(
    exe: &Path,
    args: Vec<OsString>,
    cwd: &Path,
) -> Result<(String, String, Option<i32>), LaunchError> {
    let out =
        crate::supervise::run_in_current_family(&exe.as_os_str().to_owned(), &args, cwd, 1 << 20)
            .await?;
    let code = match out.exit {
        crate::supervise::Exit::Code(code) => Some(code),
        _ => None,
    };
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        code,
    ))
}

/// The autocode binary the children run: this one.
pub fn current_exe() -> Result<PathBuf, std::io::Error> {
    std::env::current_exe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_child_that_ends_without_a_result_is_quoted_from_its_log() {
        let logs = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        for _ in 0..LOGS_KEPT + 2 {
            open_log(logs.path()).unwrap();
        }
        let launched = launch_logged(
            Path::new("/bin/sh"),
            vec![
                "-c".into(),
                "echo 'error: the workspace is not a git repository' >&2; exit 2".into(),
            ],
            cwd.path(),
            &Children::default(),
            UnderWay::Opened,
            logs.path(),
        )
        .await;
        let Err(LaunchError::NoResult { log, tail }) = launched else {
            panic!("{launched:?}");
        };
        assert_eq!(tail, "error: the workspace is not a git repository");
        assert!(log.starts_with(logs.path()));
        let kept = std::fs::read_dir(logs.path()).unwrap().count();
        assert_eq!(kept, LOGS_KEPT, "the oldest logs go");
    }
}
