//! Workspace isolation: a run works in a git worktree on its own branch, so the user's working
//! tree is untouched (`--in-place` opts out; where a run works is decided in `run::isolation`).
//! Uncommitted changes in the workspace are named (the worktree starts from HEAD and does not
//! see them), never silently left behind. `autocode clean` removes a run's worktree and branch
//! (`run::clean` decides when that is safe).
//!
//! Every git command goes through the boundary's launch function.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ids::RunId;

mod spare;
use crate::supervise::{self, Exit, LaunchSpec, StdinSource, StdioMode};
pub use spare::{SPARE_MIN_FILES, settle as settle_spares};

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("`git {args}` failed in {dir}: {detail}")]
    Git {
        args: String,
        dir: PathBuf,
        detail: String,
    },
    #[error("cannot lock {path} (autocode's worktree changes in this repository): {source}")]
    Lock {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Options given to every git command autocode runs itself: the repository is the user's (or a
/// cloned stranger's), so its hooks and its fsmonitor command must never run in autocode's name;
/// nor does a commit or merge of autocode's start git's automatic maintenance (`git maintenance
/// run --auto --detach`, or `gc --auto` before git 2.29), a detached process that would outlive
/// the command: the repository's upkeep stays with the person's own git commands.
pub const SAFE_GIT_ARGS: [&str; 8] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "maintenance.auto=false",
    "-c",
    "gc.auto=0",
];

/// The environment unit tests run git with: `PATH` and `HOME` only.
#[cfg(test)]
pub(crate) fn git_test_env() -> BTreeMap<String, String> {
    ["PATH", "HOME"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_owned(), v)))
        .collect()
}

/// What a test's git run gave: whether it exited 0, its stdout and its stderr.
#[cfg(test)]
pub(crate) struct GitOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// `git args…` in `dir` with exactly `env` (no [`SAFE_GIT_ARGS`]), through the boundary, for
/// unit tests that hold an in-process answer against git's own.
#[cfg(test)]
pub(crate) fn git_as_is(dir: &Path, args: &[&str], env: &BTreeMap<String, String>) -> GitOutput {
    let spec = git_spec(dir, args.iter().copied(), env);
    let finished = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(crate::supervise::run(spec))
        .expect("git runs");
    GitOutput {
        success: finished.exit == crate::supervise::Exit::Code(0),
        stdout: String::from_utf8_lossy(&finished.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&finished.stderr).into_owned(),
    }
}

/// `git init` of `dir` (made first), for unit tests.
#[cfg(test)]
pub(crate) async fn git_init_for_tests(dir: &Path) {
    std::fs::create_dir_all(dir).expect("create the repository's folder");
    git(dir, &["init", "-q"], &git_test_env())
        .await
        .expect("git init");
}

/// Runs git with `args` in `dir` and returns its stdout.
pub async fn git(
    dir: &Path,
    args: &[&str],
    env: &BTreeMap<String, String>,
) -> Result<String, WorkspaceError> {
    let label = format!("git {}", args.first().copied().unwrap_or_default());
    let mut spec = git_spec(dir, SAFE_GIT_ARGS.iter().chain(args).copied(), env);
    spec.label = label;
    let failed = |detail: String| WorkspaceError::Git {
        args: args.join(" "),
        dir: dir.to_owned(),
        detail,
    };
    let finished = supervise::run(spec)
        .await
        .map_err(|e| failed(e.to_string()))?;
    match finished.exit {
        Exit::Code(0) => Ok(String::from_utf8_lossy(&finished.stdout).into_owned()),
        other => Err(failed(format!(
            "{other:?}: {}",
            String::from_utf8_lossy(&finished.stderr).trim()
        ))),
    }
}

/// `git args…` in `dir` with `env`, its output captured (16 MiB), two minutes at most.
pub(crate) fn git_spec<'a>(
    dir: &Path,
    args: impl Iterator<Item = &'a str>,
    env: &BTreeMap<String, String>,
) -> LaunchSpec {
    LaunchSpec {
        label: "git".into(),
        program: OsString::from("git"),
        args: args.map(OsString::from).collect(),
        env: env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        cwd: dir.to_owned(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 16 << 20 },
        timeout: Some(Duration::from_secs(120)),
        room: None,
    }
}

/// Uncommitted changes (`git status --porcelain`), excluding autocode's own directory.
pub async fn uncommitted_changes(
    dir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Vec<String>, WorkspaceError> {
    let out = git(
        dir,
        &["status", "--porcelain", "--untracked-files=all"],
        env,
    )
    .await?;
    Ok(out
        .lines()
        .filter(|l| l.len() > 3 && !l[3..].starts_with(".autocode/"))
        .map(str::to_owned)
        .collect())
}

/// The worktree path and branch of a run.
pub fn worktree_location(workspace: &Path, run_id: &RunId) -> (PathBuf, String) {
    (
        workspace.join(".autocode/worktrees").join(run_id.as_str()),
        format!("autocode/{run_id}"),
    )
}

/// Held while autocode changes the repository's worktrees: `git worktree add` reads every entry
/// of `.git/worktrees/` and fails on one that another `add` is creating at that moment (two runs
/// started together in one repository), so autocode's own adds and removals take turns.
struct WorktreeLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

async fn lock_worktrees(workspace: &Path) -> Result<WorktreeLock, WorkspaceError> {
    let path = workspace.join(".autocode/worktrees.lock");
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |source: std::io::Error| WorkspaceError::Lock { path, source }
    };
    // Not followed if the repository planted a link there.
    let file = crate::store::open_owned(
        &path,
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true),
        true,
    )
    .map_err(|e| failed(&path)(std::io::Error::other(e)))?;
    // A blocking flock, on a thread of its own: the other run holds it for one git command.
    let locked = tokio::task::spawn_blocking(move || {
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, errno)| std::io::Error::from(errno))
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|locked| locked)
    .map_err(failed(&path))?;
    Ok(WorktreeLock { _lock: locked })
}

/// How many workers `git worktree add` checks out with: one per core, and at least 8.
fn checkout_workers() -> usize {
    std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .max(8)
}

/// Creates the run's worktree on a new branch from HEAD: the workspace's spare checkout when it
/// has one, else checked out afresh; a large workspace then starts making the next run's spare.
pub async fn create_worktree(
    workspace: &Path,
    run_id: &RunId,
    env: &BTreeMap<String, String>,
) -> Result<(PathBuf, String), WorkspaceError> {
    let (path, branch) = worktree_location(workspace, run_id);
    let _turn = lock_worktrees(workspace).await?;
    let path_text = path.to_string_lossy().into_owned();
    // Parallel checkout: a checkout of many small files is several times faster with several
    // workers, and more workers than cores still help while they wait on the disk (a cold
    // object store: docs/performance.md, "Large workspaces").
    let workers = format!("checkout.workers={}", checkout_workers());
    // A large repository's spare checkout, moved to HEAD by the change (`spare.rs`).
    if !spare::take(workspace, &path, &branch, env).await {
        git(
            workspace,
            &[
                "-c", &workers, "worktree", "add", "--quiet", "-b", &branch, &path_text, "HEAD",
            ],
            env,
        )
        .await?;
    }
    drop(_turn);
    spare::replenish(workspace, env);
    Ok((path, branch))
}

/// Removes a run's worktree and branch (both may already be gone).
pub async fn remove_worktree(
    workspace: &Path,
    run_id: &RunId,
    env: &BTreeMap<String, String>,
) -> Result<(), WorkspaceError> {
    let (path, branch) = worktree_location(workspace, run_id);
    let _turn = lock_worktrees(workspace).await?;
    if path.exists() {
        let path_text = path.to_string_lossy().into_owned();
        git(
            workspace,
            &["worktree", "remove", "--force", &path_text],
            env,
        )
        .await?;
    }
    git(workspace, &["worktree", "prune"], env).await?;
    let listed = git(workspace, &["branch", "--list", &branch], env).await?;
    if !listed.trim().is_empty() {
        git(workspace, &["branch", "-D", &branch], env).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = [
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("GIT_AUTHOR_NAME", "t".into()),
            ("GIT_AUTHOR_EMAIL", "t@example.invalid".into()),
            ("GIT_COMMITTER_NAME", "t".into()),
            ("GIT_COMMITTER_EMAIL", "t@example.invalid".into()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.insert(
            "HOME".into(),
            std::env::temp_dir().to_string_lossy().into_owned(),
        );
        env
    }

    #[tokio::test]
    async fn worktree_lifecycle_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let env = env();
        git(ws, &["init", "-q", "-b", "main"], &env).await.unwrap();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        git(ws, &["add", "."], &env).await.unwrap();
        git(ws, &["commit", "-qm", "seed"], &env).await.unwrap();
        std::fs::write(ws.join("dirty.txt"), "d").unwrap();
        let dirty = uncommitted_changes(ws, &env).await.unwrap();
        assert_eq!(dirty, vec!["?? dirty.txt".to_string()]);

        let run = RunId::new("20261129-x").unwrap();
        let (path, branch) = create_worktree(ws, &run, &env).await.unwrap();
        assert!(path.join("a.txt").exists());
        assert!(!path.join("dirty.txt").exists());
        assert_eq!(branch, "autocode/20261129-x");
        remove_worktree(ws, &run, &env).await.unwrap();
        assert!(!path.exists());
        let branches = git(ws, &["branch", "--list", "autocode/*"], &env)
            .await
            .unwrap();
        assert!(branches.trim().is_empty());
        // Idempotent.
        remove_worktree(ws, &run, &env).await.unwrap();
    }
}
