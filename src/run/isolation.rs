//! Where a run's agents work, decided before anything is created: a git worktree of the
//! repository's top level on the run's own branch, or — only when asked with `--in-place` —
//! the workspace itself. Nothing goes in place silently: a directory that is not in a git
//! repository, or a repository without a commit, is refused with the fix. A subdirectory of a
//! repository gets a worktree of the top level, and the agents (and the run's checks) work in
//! the same subdirectory within it. One run at a time works in place in a directory
//! ([`lock_in_place`]); the second gets `PAUSED_RUN_BUSY`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::workspace::{self, WorkspaceError, git};
use crate::ids::RunId;
use crate::store::{RunLock, StoreError};

/// Where the run's agents work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Isolation {
    /// A git worktree on its own branch; the user's working tree is untouched.
    Worktree { path: PathBuf, branch: String },
    /// The workspace itself (`--in-place`, or not a git repository).
    InPlace,
}

/// Where a new run will work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A worktree of the repository at `top`; the agents work in `subdir` (relative, empty at
    /// the top level) within it.
    Worktree { top: PathBuf, subdir: PathBuf },
    /// The workspace itself (`--in-place`).
    InPlace,
}

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error(
        "{workspace} is not in a git repository: autocode works in a git worktree on its own branch so your files stay untouched; nothing was created"
    )]
    NotGit { workspace: PathBuf },
    #[error(
        "the git repository {top} has no commit yet: a run's worktree starts from a commit; nothing was created"
    )]
    NoCommit { top: PathBuf },
    #[error(transparent)]
    Git(#[from] WorkspaceError),
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl IsolationError {
    /// The fix, for the hint line.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NotGit { .. } | Self::NoCommit { .. } => Some(
                "`git init && git add -A && git commit -m init` (then run again: the result comes back as commits on autocode/<run-id>), or pass --in-place to let the agents work in this directory itself".into(),
            ),
            _ => None,
        }
    }
}

/// Decides where a new run works. `in_place` is `--in-place`.
pub async fn decide(
    workspace: &Path,
    in_place: bool,
    env: &BTreeMap<String, String>,
) -> Result<Placement, IsolationError> {
    if in_place {
        return Ok(Placement::InPlace);
    }
    // A plain repository is read in place (`crate::gitrefs`): no git process.
    if let Some(layout) = crate::gitrefs::layout(workspace, env)
        && let Some(head) = crate::gitrefs::head(&layout)
    {
        let top = layout.top;
        if head.is_none() {
            return Err(IsolationError::NoCommit { top });
        }
        let canonical = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
        let subdir = canonical
            .strip_prefix(&top)
            .or_else(|_| workspace.strip_prefix(&top))
            .map(Path::to_owned)
            .unwrap_or_default();
        return Ok(Placement::Worktree { top, subdir });
    }
    let Ok(top) = git(workspace, &["rev-parse", "--show-toplevel"], env).await else {
        return Err(IsolationError::NotGit {
            workspace: workspace.to_owned(),
        });
    };
    let top = PathBuf::from(top.trim_end_matches('\n'));
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    if git(
        workspace,
        &["rev-parse", "--verify", "--quiet", "HEAD"],
        env,
    )
    .await
    .is_err()
    {
        return Err(IsolationError::NoCommit { top });
    }
    let subdir = workspace
        .strip_prefix(&top)
        .map(Path::to_owned)
        .unwrap_or_default();
    Ok(Placement::Worktree { top, subdir })
}

/// Creates the run's worktree for `placement` (`Worktree` only) and returns the isolation and
/// the directory the agents work in.
pub async fn create(
    workspace: &Path,
    run_id: &RunId,
    subdir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(Isolation, PathBuf), IsolationError> {
    let (path, branch) = workspace::create_worktree(workspace, run_id, env).await?;
    // `join("")` would add a trailing separator: the top level is the worktree itself.
    let work_tree = if subdir.as_os_str().is_empty() {
        path.clone()
    } else {
        path.join(subdir)
    };
    // A subdirectory that HEAD does not have (new, or holding only untracked files) is created
    // in the worktree, so the agents start where the user is.
    std::fs::create_dir_all(&work_tree).map_err(|source| IsolationError::Create {
        path: work_tree.clone(),
        source,
    })?;
    Ok((Isolation::Worktree { path, branch }, work_tree))
}

/// Whether `work_tree` is `worktree` or a plain subdirectory of it (no `..`, no root).
pub fn within_worktree(work_tree: &Path, worktree: &Path) -> bool {
    work_tree
        .strip_prefix(worktree)
        .is_ok_and(|rest| rest.components().all(|c| matches!(c, Component::Normal(_))))
}

/// Held while a run works in place in a directory.
pub struct InPlaceLock {
    _lock: RunLock,
}

/// Another run works in place in this directory.
#[derive(Debug)]
pub struct InPlaceBusy {
    /// The run holding the directory, when it could be read.
    pub holder: Option<RunId>,
}

fn lock_paths(workspace: &Path) -> (PathBuf, PathBuf) {
    let dir = workspace.join(".autocode");
    (dir.join("in-place.lock"), dir.join("in-place.run"))
}

/// Takes the in-place lock of `workspace` for `run_id` (held until dropped).
pub fn lock_in_place(workspace: &Path, run_id: &RunId) -> Result<InPlaceLock, LockError> {
    let (lock_path, holder_path) = lock_paths(workspace);
    match RunLock::acquire(&lock_path) {
        Ok(lock) => {
            crate::store::write_json(&holder_path, &run_id.as_str())?;
            Ok(InPlaceLock { _lock: lock })
        }
        Err(StoreError::Busy { .. }) => {
            let holder = crate::bounded_read::read_capped(&holder_path, 1024)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<String>(&bytes).ok())
                .and_then(|id| RunId::new(id).ok());
            Err(LockError::Busy(InPlaceBusy { holder }))
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another run works in place in this directory")]
    Busy(InPlaceBusy),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        [
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", std::env::temp_dir().to_string_lossy().into_owned()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
            ("GIT_AUTHOR_NAME", "t".into()),
            ("GIT_AUTHOR_EMAIL", "t@example.invalid".into()),
            ("GIT_COMMITTER_NAME", "t".into()),
            ("GIT_COMMITTER_EMAIL", "t@example.invalid".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    #[tokio::test]
    async fn no_repository_and_no_commit_are_refused_and_a_subdirectory_is_placed() {
        let env = env();
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        assert!(matches!(
            decide(&ws, false, &env).await,
            Err(IsolationError::NotGit { .. })
        ));
        assert_eq!(decide(&ws, true, &env).await.unwrap(), Placement::InPlace);
        git(&ws, &["init", "-q", "-b", "main"], &env).await.unwrap();
        assert!(matches!(
            decide(&ws, false, &env).await,
            Err(IsolationError::NoCommit { .. })
        ));
        std::fs::create_dir_all(ws.join("pkg/inner")).unwrap();
        std::fs::write(ws.join("pkg/inner/a"), "a").unwrap();
        git(&ws, &["add", "."], &env).await.unwrap();
        git(&ws, &["commit", "-qm", "seed"], &env).await.unwrap();
        let sub = ws.join("pkg/inner");
        assert_eq!(
            decide(&sub, false, &env).await.unwrap(),
            Placement::Worktree {
                top: ws.clone(),
                subdir: PathBuf::from("pkg/inner")
            }
        );
        let run = RunId::new("20261130-s").unwrap();
        let (isolation, work_tree) = create(&sub, &run, Path::new("pkg/inner"), &env)
            .await
            .unwrap();
        let Isolation::Worktree { path, .. } = isolation else {
            panic!("a worktree")
        };
        assert_eq!(work_tree, path.join("pkg/inner"));
        assert!(work_tree.join("a").exists());
        assert!(within_worktree(&work_tree, &path));
        assert!(!within_worktree(&path.join("../x"), &path));
    }

    #[test]
    fn one_run_at_a_time_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let a = RunId::new("20261130-a").unwrap();
        let b = RunId::new("20261130-b").unwrap();
        let held = lock_in_place(dir.path(), &a).unwrap();
        match lock_in_place(dir.path(), &b) {
            Err(LockError::Busy(busy)) => assert_eq!(busy.holder, Some(a.clone())),
            other => panic!("expected busy, got {:?}", other.err()),
        }
        drop(held);
        lock_in_place(dir.path(), &b).unwrap();
    }
}
