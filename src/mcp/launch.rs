//! The runs `autocode mcp` starts: each an `autocode exec` or `autocode resume --jsonl` child
//! (the same code path as the command line), whose `autocode-exec/1` lines the server reads
//! until the run is under way (its first stage started) or ended, then keeps draining in the
//! background. The server remembers which process works on which run, to stop it.

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

/// The runs this server started and the process working on each (run id → pid).
#[derive(Debug, Default, Clone)]
pub struct Children(Arc<Mutex<BTreeMap<String, u32>>>);

impl Children {
    pub fn pid(&self, run: &str) -> Option<u32> {
        self.0.lock().ok()?.get(run).copied()
    }

    fn set(&self, run: &str, pid: Option<u32>) {
        if let Ok(mut map) = self.0.lock() {
            match pid {
                Some(pid) => map.insert(run.to_owned(), pid),
                None => map.remove(run),
            };
        }
    }
}

/// How a launch stands when the tool answers.
#[derive(Debug)]
pub enum Launched {
    /// A stage started: the run works (`run_id` from the meta line).
    UnderWay { run_id: String },
    /// The child ended first (paused, complete, failed or refused): its result line.
    Ended { result: Box<ResultLine> },
    /// Neither within [`UNDER_WAY`]: it goes on.
    Starting { run_id: Option<String> },
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Spawn(#[from] crate::supervise::LaunchError),
    #[error("autocode ended without a result line")]
    NoResult,
}

/// Starts `autocode ARGS` in `cwd` and waits until its run is under way or ended.
pub async fn launch(
    exe: &Path,
    args: Vec<OsString>,
    cwd: &Path,
    children: &Children,
) -> Result<Launched, LaunchError> {
    let mut child =
        crate::supervise::spawn_in_current_family(&exe.as_os_str().to_owned(), &args, cwd)?;
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
                let _ = tx.send(line);
            }
        }
        let _ = child.wait().await;
        if let Some(id) = run_id {
            registry.set(&id, None);
        }
    });
    let mut run_id = None;
    let deadline = tokio::time::Instant::now() + UNDER_WAY;
    loop {
        let line = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => return Ok(Launched::Starting { run_id }),
            Ok(None) => return Err(LaunchError::NoResult),
            Ok(Some(line)) => line,
        };
        match line {
            ExecLine::Meta(meta) => run_id = meta.run_id.map(|r| r.as_str().to_owned()),
            ExecLine::StageStart(_) => {
                if let Some(run_id) = run_id {
                    return Ok(Launched::UnderWay { run_id });
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
