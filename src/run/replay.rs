//! autocode's own replay of the checks a tester reported passing, in a clean copy of the tree.
//!
//! The copy holds exactly the files a snapshot covers (tracked and untracked-not-ignored, never
//! `.autocode/` or `.git/`), so build outputs and caches the agents left behind cannot make a
//! check pass. Each check runs as `sh -c CHECK` through the boundary, with the credential-free
//! environment, a timeout and no stdin, in a room whose only writable places are the copy and a
//! private temporary directory (`TMPDIR`) unless the run is unconfined. A check passes only if it exits 0 there, whatever the
//! tester said.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::confine;
use crate::snapshot;
use crate::supervise::{self, Exit, LaunchSpec, Receipt, StdinSource, StdioMode};

/// The result of replaying one check.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    pub command: String,
    pub exit: Exit,
    /// The last part of stdout and stderr, for the finding shown to the builder.
    pub output_tail: String,
    pub duration_ms: u64,
    pub receipt: Receipt,
}

impl Replayed {
    pub fn passed(&self) -> bool {
        self.exit == Exit::Code(0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot prepare the clean copy: {0}")]
    Copy(#[source] io::Error),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error("cannot launch check {command:?}: {source}")]
    Launch {
        command: String,
        #[source]
        source: supervise::LaunchError,
    },
}

/// Copies the snapshot-covered files of `work_tree` into `dest`.
pub async fn clean_copy(
    work_tree: &Path,
    dest: &Path,
    env: &BTreeMap<String, String>,
) -> Result<usize, ReplayError> {
    let files = snapshot::list_files(work_tree, env).await?;
    for rel in &files {
        let from = work_tree.join(rel);
        let to = dest.join(rel);
        let meta = match fs::symlink_metadata(&from) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ReplayError::Copy(e)),
        };
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(ReplayError::Copy)?;
        }
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&from).map_err(ReplayError::Copy)?;
            std::os::unix::fs::symlink(target, &to).map_err(ReplayError::Copy)?;
        } else if meta.is_file() {
            fs::copy(&from, &to).map_err(ReplayError::Copy)?;
        }
    }
    Ok(files.len())
}

/// Whether replayed checks run in a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayConfinement {
    /// Writable: the copy and a private temporary directory; HOME and the rest read-only.
    Room,
    /// The run was started `--unconfined`: the ownership boundary only.
    Unconfined,
}

/// Replays `commands` one by one in a fresh clean copy of `work_tree`.
pub async fn replay_checks(
    work_tree: &Path,
    commands: &[String],
    env: &BTreeMap<String, String>,
    timeout: Duration,
    confinement: ReplayConfinement,
) -> Result<Vec<Replayed>, ReplayError> {
    let copy = tempfile::Builder::new()
        .prefix("autocode-replay-")
        .tempdir()
        .map_err(ReplayError::Copy)?;
    clean_copy(work_tree, copy.path(), env).await?;
    let tmpdir = tempfile::Builder::new()
        .prefix("autocode-replay-tmp-")
        .tempdir()
        .map_err(ReplayError::Copy)?;
    let room = (confinement == ReplayConfinement::Room)
        .then(|| confine::replay_room(copy.path(), tmpdir.path(), env));
    let mut env = env.clone();
    env.insert(
        "TMPDIR".into(),
        tmpdir.path().to_string_lossy().into_owned(),
    );
    let mut results = Vec::with_capacity(commands.len());
    for command in commands {
        let started = Instant::now();
        let spec = LaunchSpec {
            label: format!("check replay: {command}"),
            program: OsString::from("sh"),
            args: vec![OsString::from("-c"), OsString::from(command)],
            env: env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            cwd: copy.path().to_owned(),
            stdin: StdinSource::Null,
            stdio: StdioMode::Captured { limit: 1 << 20 },
            timeout: Some(timeout),
            room: room.clone(),
        };
        let finished = supervise::run(spec)
            .await
            .map_err(|source| ReplayError::Launch {
                command: command.clone(),
                source,
            })?;
        let mut output = String::from_utf8_lossy(&finished.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&finished.stderr));
        results.push(Replayed {
            command: command.clone(),
            exit: finished.exit,
            output_tail: tail(&output, 2000),
            duration_ms: started.elapsed().as_millis() as u64,
            receipt: finished.receipt,
        });
    }
    Ok(results)
}

fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())]
            .into_iter()
            .collect()
    }

    #[tokio::test]
    async fn replays_in_a_copy_without_untracked_leftovers_of_autocode() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        fs::write(ws.join("ok.sh"), "exit 0\n").unwrap();
        fs::create_dir_all(ws.join(".autocode")).unwrap();
        fs::write(ws.join(".autocode/marker"), "x").unwrap();
        let commands = vec![
            "sh ok.sh".to_owned(),
            "test -e .autocode/marker".to_owned(),
            "echo boom >&2; exit 7".to_owned(),
        ];
        let results = replay_checks(
            ws,
            &commands,
            &env(),
            Duration::from_secs(30),
            ReplayConfinement::Unconfined,
        )
        .await
        .unwrap();
        assert!(results[0].passed());
        assert!(!results[1].passed(), "the copy must not contain .autocode/");
        assert_eq!(results[2].exit, Exit::Code(7));
        assert!(results[2].output_tail.contains("boom"));
    }

    #[test]
    fn tails_respect_char_boundaries() {
        assert_eq!(tail("abc", 5), "abc");
        assert_eq!(tail("ééé", 3), "…é");
    }
}
