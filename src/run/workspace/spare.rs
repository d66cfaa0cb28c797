//! A cached base checkout per workspace (issue 29, item 6): in a large repository, creating a
//! run's worktree is writing every file of `HEAD` (6 s at 100,000 files). A spare checkout,
//! `.autocode/worktrees/.spare` (detached, never any run's), is made in the background while a
//! run works; the next run takes it instead of checking out afresh: `git worktree move` (a
//! rename) then `git checkout --force -b autocode/<run-id> <HEAD>`, which writes only the files
//! that differ between the spare's commit and the workspace's `HEAD` (git compares the others by
//! their stat data in the spare's own index). The run's worktree is then what `git worktree add
//! -b` gives: the same branch, the same files, its own index; the spare was never given to an
//! agent, so no run's files reach another. One spare per workspace; its making holds the
//! worktrees lock (a run starting meanwhile waits for it) and the run awaits it before it
//! returns ([`settle`]); a half-made spare (the process was killed) is removed by the next one.
//!
//! The spare's index is written again a second after its checkout ([`settle_racy_entries`]), so
//! that neither the move nor the run's first snapshot hashes the files git counts as racily clean.
//!
//! Repositories under [`SPARE_MIN_FILES`] tracked files get no spare: their checkout is cheaper
//! than the processes a spare costs.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{WorkspaceError, checkout_workers, git, lock_worktrees};

/// The spare checkout's directory name under `.autocode/worktrees/` (a run id starts with a
/// digit, so no run's worktree is ever named so).
const SPARE: &str = ".spare";
/// Where a spare is made before it is moved into place.
const SPARE_NEW: &str = ".spare-new";

/// Tracked files from which a workspace keeps a spare checkout.
pub const SPARE_MIN_FILES: u32 = 10_000;

/// The spares being made by this process.
static PENDING: Mutex<Vec<tokio::task::JoinHandle<()>>> = Mutex::new(Vec::new());

fn spare_dir(workspace: &Path, name: &str) -> PathBuf {
    workspace.join(".autocode/worktrees").join(name)
}

/// How many entries the workspace's index holds (its header, read in place).
fn tracked_files(workspace: &Path, env: &BTreeMap<String, String>) -> Option<u32> {
    let layout = crate::gitrefs::layout(workspace, env)?;
    let mut header = [0u8; 12];
    std::fs::File::open(layout.index())
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    (header[..4] == *b"DIRC")
        .then(|| u32::from_be_bytes([header[8], header[9], header[10], header[11]]))
}

/// The commit the workspace's `HEAD` names (in place when the repository is plain).
async fn head(workspace: &Path, env: &BTreeMap<String, String>) -> Option<String> {
    if let Some(head) =
        crate::gitrefs::layout(workspace, env).and_then(|layout| crate::gitrefs::head(&layout))
    {
        return head;
    }
    git(
        workspace,
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        env,
    )
    .await
    .ok()
    .map(|out| out.trim().to_owned())
}

/// Removes a spare (or a worktree made from one) that cannot be used, and its registration.
async fn discard(workspace: &Path, dir: &Path, env: &BTreeMap<String, String>) {
    let text = dir.to_string_lossy().into_owned();
    if git(workspace, &["worktree", "remove", "--force", &text], env)
        .await
        .is_err()
    {
        let _ = crate::store::remove_tree(dir);
    }
    let _ = git(workspace, &["worktree", "prune"], env).await;
}

/// Makes the workspace's spare the worktree at `path` on a new `branch` from `HEAD`; called
/// with the worktrees lock held. `false`: no spare, or it could not be used (then it is gone
/// and the caller checks out afresh).
pub(super) async fn take(
    workspace: &Path,
    path: &Path,
    branch: &str,
    env: &BTreeMap<String, String>,
) -> bool {
    let spare = spare_dir(workspace, SPARE);
    if !spare.join(".git").is_file() {
        return false;
    }
    let Some(head) = head(workspace, env).await else {
        return false;
    };
    let (from, to) = (
        spare.to_string_lossy().into_owned(),
        path.to_string_lossy().into_owned(),
    );
    if let Err(e) = git(workspace, &["worktree", "move", &from, &to], env).await {
        tracing::warn!("the spare checkout cannot be moved, checking out afresh: {e}");
        discard(workspace, &spare, env).await;
        return false;
    }
    let workers = format!("checkout.workers={}", checkout_workers());
    let checkout = [
        "-c", &workers, "checkout", "--quiet", "--force", "-b", branch, &head,
    ];
    if let Err(e) = git(path, &checkout, env).await {
        tracing::warn!("the spare checkout cannot be moved to HEAD, checking out afresh: {e}");
        discard(workspace, path, env).await;
        return false;
    }
    true
}

/// Starts making a spare in the background when the workspace is large and has none.
pub(super) fn replenish(workspace: &Path, env: &BTreeMap<String, String>) {
    if tracked_files(workspace, env).is_none_or(|n| n < SPARE_MIN_FILES)
        || spare_dir(workspace, SPARE).exists()
    {
        return;
    }
    let (workspace, env) = (workspace.to_owned(), env.clone());
    let handle = tokio::spawn(async move {
        if let Err(e) = make(&workspace, &env).await {
            tracing::warn!("no spare checkout for the next run: {e}");
        }
    });
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(handle);
}

/// Makes the spare: a detached checkout of `HEAD`, moved into place when complete.
pub(super) async fn make(
    workspace: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(), WorkspaceError> {
    let _turn = lock_worktrees(workspace).await?;
    let spare = spare_dir(workspace, SPARE);
    if spare.exists() {
        return Ok(());
    }
    let new = spare_dir(workspace, SPARE_NEW);
    if new.exists() {
        discard(workspace, &new, env).await;
    }
    let Some(head) = head(workspace, env).await else {
        return Ok(());
    };
    let (new_text, spare_text) = (
        new.to_string_lossy().into_owned(),
        spare.to_string_lossy().into_owned(),
    );
    let workers = format!("checkout.workers={}", checkout_workers());
    git(
        workspace,
        &[
            "-c", &workers, "worktree", "add", "--quiet", "--detach", &new_text, &head,
        ],
        env,
    )
    .await?;
    settle_racy_entries(&new, env).await;
    git(
        workspace,
        &["worktree", "move", &new_text, &spare_text],
        env,
    )
    .await?;
    Ok(())
}

/// Rewrites a new checkout's index once the clock has left the second it was written in.
///
/// git (built without `USE_NSEC`, as Debian's is) counts an entry whose mtime falls in the same
/// second as the index file's as racily clean, and hashes its file at every read of that index
/// until the index is written again in a later second. Nothing writes the spare's index before
/// the next run takes it, so after `worktree add` of 100,000 files that run hashed most of the
/// last second's files (61,499 measured here) on its way to its first stage: in the spare's move
/// and in its first snapshot, whose private index is a copy of the worktree's. Refreshed and
/// written (forced, whatever the refresh finds) a second later, every entry's mtime is older
/// than the index: the hashing is paid once, here, in the background. A git without
/// `--force-write-index` keeps the index as it was.
async fn settle_racy_entries(checkout: &Path, env: &BTreeMap<String, String>) {
    let Some(index) = crate::gitrefs::layout(checkout, env).map(|layout| layout.index()) else {
        return;
    };
    if racy_entries(&index) == 0 {
        return;
    }
    let written = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    // Into the next second (and a little past it: the file system's clock is the kernel's
    // coarse one, a tick behind).
    let wait = std::time::Duration::from_secs(1).saturating_sub(std::time::Duration::from_nanos(
        u64::from(written.subsec_nanos()),
    )) + std::time::Duration::from_millis(20);
    tokio::time::sleep(wait).await;
    let refresh = ["update-index", "-q", "--refresh", "--force-write-index"];
    if let Err(e) = git(checkout, &refresh, env).await {
        tracing::debug!("the spare's index is kept as checked out: {e}");
    }
}

/// How many entries of `index` git counts as racily clean: an mtime in the index file's own
/// second or later (whole seconds, as git built without `USE_NSEC` compares them).
fn racy_entries(index: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(index) else {
        return 0;
    };
    let Some(entries) = std::fs::read(index)
        .ok()
        .and_then(|bytes| crate::gitindex::entries(&bytes))
    else {
        return 0;
    };
    entries
        .iter()
        .filter(|entry| i64::from(entry.mtime.sec) >= meta.mtime())
        .count()
}

/// Waits for the spares this process is making (a run awaits them before it returns, so the
/// process never ends in the middle of one).
pub async fn settle() {
    let pending = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    for handle in pending {
        let _ = handle.await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{create_worktree, remove_worktree};
    use super::*;
    use crate::ids::RunId;

    fn env() -> BTreeMap<String, String> {
        let mut env = crate::run::workspace::git_test_env();
        for (k, v) in [
            ("GIT_AUTHOR_NAME", "t"),
            ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
            ("GIT_COMMITTER_NAME", "t"),
            ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
        ] {
            env.insert(k.into(), v.into());
        }
        env
    }

    #[tokio::test]
    async fn a_run_takes_the_spare_moved_to_head_and_gets_what_worktree_add_gives() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let env = env();
        git(&ws, &["init", "-q", "-b", "main"], &env).await.unwrap();
        std::fs::write(ws.join(".gitignore"), "build/\n").unwrap();
        for name in ["a.txt", "b.txt", "gone.txt"] {
            std::fs::write(ws.join(name), name).unwrap();
        }
        git(&ws, &["add", "-A"], &env).await.unwrap();
        git(&ws, &["commit", "-qm", "one"], &env).await.unwrap();
        make(&ws, &env).await.unwrap();
        let spare = spare_dir(&ws, SPARE);
        assert!(spare.join("a.txt").is_file());
        // Its files were written in the second its index was: the index was written again a
        // second later, so no read of it hashes them.
        let index = crate::gitrefs::layout(&spare, &env).unwrap().index();
        assert_eq!(racy_entries(&index), 0);
        // The workspace moves on: the run starts from the new HEAD, by the change.
        std::fs::write(ws.join("b.txt"), "changed").unwrap();
        std::fs::remove_file(ws.join("gone.txt")).unwrap();
        std::fs::write(ws.join("new.txt"), "new").unwrap();
        git(&ws, &["add", "-A"], &env).await.unwrap();
        git(&ws, &["commit", "-qm", "two"], &env).await.unwrap();
        let run = RunId::new("20261202-x").unwrap();
        let (path, branch) = create_worktree(&ws, &run, &env).await.unwrap();
        assert!(!spare.exists(), "the spare was taken");
        assert_eq!(
            std::fs::read_to_string(path.join("b.txt")).unwrap(),
            "changed"
        );
        assert!(!path.join("gone.txt").exists() && path.join("new.txt").is_file());
        let status = git(
            &path,
            &["status", "--porcelain", "--untracked-files=all"],
            &env,
        )
        .await
        .unwrap();
        assert_eq!(status, "", "the worktree is clean at HEAD");
        let at = git(&path, &["rev-parse", "HEAD", "--abbrev-ref", "HEAD"], &env)
            .await
            .unwrap();
        let head = git(&ws, &["rev-parse", "HEAD"], &env).await.unwrap();
        assert_eq!(at, format!("{head}{branch}\n"));
        // The worktree is git's as any other: removed with its branch, nothing left.
        remove_worktree(&ws, &run, &env).await.unwrap();
        let listed = git(&ws, &["worktree", "list", "--porcelain"], &env)
            .await
            .unwrap();
        assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
        // Without a spare, a run checks out afresh; a small repository makes none.
        let second = RunId::new("20261202-y").unwrap();
        let (path, _) = create_worktree(&ws, &second, &env).await.unwrap();
        assert!(path.join("new.txt").is_file());
        settle().await;
        assert!(!spare.exists(), "under SPARE_MIN_FILES no spare is made");
        // A half-made spare (a killed process) is removed by the next making.
        std::fs::create_dir_all(spare_dir(&ws, SPARE_NEW)).unwrap();
        make(&ws, &env).await.unwrap();
        assert!(spare.join("new.txt").is_file() && !spare_dir(&ws, SPARE_NEW).exists());
    }
}
