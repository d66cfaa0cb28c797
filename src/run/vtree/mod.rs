//! The verification tree (issue 13): the one persistent per-run directory where autocode gives
//! the tester its throwaway copy, replays the tester's checks and the final gate's, and runs the
//! plan's checks on the base tree. The uses never overlap (the tester's family is dead, verified,
//! before any replay), and the directory keeps one path for the runner's life (a CLI binds its
//! session to its cwd). A replay that runs beside another, or beside the tester, has a tree of
//! its own, rooted in `ahead-N/` of the run's root (`run::runner::replays::TreeSlot`),
//! so two families never share a directory. The base tree itself is a git tree id
//! ([`BaseTree`]), read from the object store (`super::treediff::Comparison`), never checked out
//! to be read.
//!
//! The tree is brought to a git tree id (`crate::gittree`) with its own index as the stat cache —
//! back to the same tree, `git diff-files` + `git checkout-index` of what differs; else
//! `git read-tree --reset -u` — then `git clean -ffdx`, so what is written is what changed, and
//! whatever a previous check or the tester wrote there is gone. After that the tree is closed
//! like the copy it replaces (`super::replay`): every symlink of the tree (mode 120000) is
//! checked, lexically and then resolved, and one that leads outside is removed and reported with
//! the same words as the copy's. Git never records FIFOs, sockets or device nodes.
//!
//! A confined CLI tester and every confined replay do not use the checkout at all: they see the
//! tree under test as an overlay of the work tree mounted in their own mount namespace
//! ([`Layer`], `layer.rs`), which costs what differs from the work tree's snapshot, not what
//! the tree holds. The checkout is what every other use gets (`--unconfined`; autocode's own
//! runtime, which reads the tree itself; a host without overlays; a tree an overlay cannot
//! show; an `--in-place` replay during which the person's workspace moved).
//!
//! It lives outside the workspace, under `${XDG_CACHE_HOME:-~/.cache}/autocode/verify/`
//! ([`verification_root`]): no room grants that (HOME is read-only in every room; an in-place
//! builder's room is the whole workspace, `.autocode/` included), and no tool started in it
//! finds the user's repository above it, as none did in the temporary copies. The private git
//! directory with the trees' objects is `<run>/git/` (small: only content git did not already
//! have); the index (the stat cache, ~80 bytes a file) is beside the tree.

use std::path::{Path, PathBuf};

mod gitdir;
mod layer;
pub use layer::{Layer, LayerError, LowerView};

use serde::{Deserialize, Serialize};

use super::replay::{CopyReport, stays_inside};
use crate::gittree::{GitStore, GitTreeError, TreeId};

/// The directory name of the verification tree in its root.
const TREE: &str = "tree";

/// The directories an autocode before the single tree kept in the root (removed when seen).
const LEGACY_TREES: [&str; 3] = ["base", "tester", "replay"];

/// Where the base tree is: `<run>/base-tree.json`, tagged like every run record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseTree {
    pub tree: TreeId,
    /// Where an autocode before the single tree checked the base out (read by none now; kept so
    /// either record reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
}

pub const BASE_TREE_FILE: &str = "base-tree.json";

/// The run's base tree record, if the base was saved as a git tree (a run outside git, or of an
/// autocode before trees, has its base copied in `<run>/base/`).
pub fn base_record(run_dir: &Path) -> Option<BaseTree> {
    super::integrity::read_record(&run_dir.join(BASE_TREE_FILE)).ok()
}

/// The directory that holds a run's verification tree.
pub fn verification_root(workspace: &Path, run_id: &str) -> PathBuf {
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
    let key = crate::report::evidence::sha256_hex(workspace.to_string_lossy().as_bytes());
    verification_roots().join(&key[..16]).join(run_id)
}

/// The folder of every verification root: `${XDG_CACHE_HOME:-~/.cache}/autocode/verify/`.
fn verification_roots() -> PathBuf {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let cache = var("XDG_CACHE_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("autocode-cache-{}", nix::unistd::getuid()))
        });
    cache.join("autocode").join("verify")
}

/// The file in a verification root naming the run directory it serves.
const OWNER: &str = "run-dir";

/// Marks `root` as serving the run whose directory is `run_dir`, so that
/// [`sweep_orphan_roots`] can tell when that run is gone.
pub fn claim_root(root: &Path, run_dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let owner = root.join(OWNER);
    let named = run_dir.as_os_str().as_bytes();
    if std::fs::read(&owner).is_ok_and(|held| held == named) {
        return Ok(());
    }
    std::fs::create_dir_all(root)?;
    std::fs::write(owner, named)
}

/// Removes the verification roots whose run directory is gone (a deleted workspace or run,
/// a demo's or a test's temporary workspace): each is a cache of its run (a stat cache, a
/// checkout, an upper layer), rebuilt if that run ever comes back, so a root is removed only
/// when the directory its `run-dir` names does not exist. A root without that file (made by an
/// autocode before it, whose run never came back to claim it) goes once it has not changed for
/// [`UNCLAIMED_AGE`]. Returns how many were removed.
pub fn sweep_orphan_roots() -> usize {
    sweep_orphan_roots_in(&verification_roots())
}

/// How long a verification root without a `run-dir` file is kept unchanged (every use of a
/// root rewrites something in it, so its mtime moves).
const UNCLAIMED_AGE: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

fn sweep_orphan_roots_in(roots: &Path) -> usize {
    use std::os::unix::ffi::OsStringExt;
    let mut removed = 0;
    let Ok(workspaces) = std::fs::read_dir(roots) else {
        return 0;
    };
    for workspace in workspaces.flatten() {
        let Ok(runs) = std::fs::read_dir(workspace.path()) else {
            continue;
        };
        for run in runs.flatten() {
            let root = run.path();
            let gone = match std::fs::read(root.join(OWNER)) {
                Ok(owner) => {
                    let run_dir = PathBuf::from(std::ffi::OsString::from_vec(owner));
                    run_dir.is_absolute()
                        && matches!(
                            std::fs::symlink_metadata(&run_dir),
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound
                        )
                }
                Err(_) => std::fs::symlink_metadata(&root)
                    .and_then(|meta| meta.modified())
                    .ok()
                    .and_then(|changed| changed.elapsed().ok())
                    .is_some_and(|age| age > UNCLAIMED_AGE),
            };
            if gone && crate::gittree::remove_all(&root).is_ok() {
                removed += 1;
            }
        }
        // The workspace's folder goes too once its last root is gone.
        let _ = std::fs::remove_dir(workspace.path());
    }
    removed
}

/// Removes a run's verification tree (for `clean`). An absent tree is not an error.
pub fn remove_verification_trees(workspace: &Path, run_id: &str) -> std::io::Result<()> {
    let root = verification_root(workspace, run_id);
    crate::gittree::remove_all(&root).map_err(|e| std::io::Error::other(e.to_string()))?;
    // The workspace's folder goes too once its last run is gone.
    if let Some(parent) = root.parent() {
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyTreeError {
    #[error(transparent)]
    Git(#[from] GitTreeError),
}

/// A run's verification tree, bound to its private git directory and to the work tree whose
/// trees it shows (its `HEAD` and tags are what the tree's git metadata shows: `gitdir.rs`).
#[derive(Debug, Clone)]
pub struct VerifyTree {
    root: PathBuf,
    store: GitStore,
    work_tree: PathBuf,
}

impl VerifyTree {
    pub fn new(root: &Path, store: GitStore, work_tree: &Path) -> VerifyTree {
        VerifyTree {
            root: root.to_owned(),
            store,
            work_tree: work_tree.to_owned(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn store(&self) -> &GitStore {
        &self.store
    }

    /// The tree's directory: the tester's cwd and every replay's.
    pub fn dir(&self) -> PathBuf {
        self.root.join(TREE)
    }

    fn index(&self) -> PathBuf {
        self.root.join(format!("{TREE}.index"))
    }

    fn marker(&self) -> PathBuf {
        self.root.join(format!("{TREE}.tree"))
    }

    /// A scratch index for composing trees ([`GitStore::with_paths_from`]).
    pub fn scratch_index(&self) -> PathBuf {
        self.root.join("compose.index")
    }

    /// The tree the directory was last brought to, if that finished.
    pub fn current(&self) -> Option<TreeId> {
        let text = std::fs::read_to_string(self.marker()).ok()?;
        TreeId::parse(&text).ok()
    }

    fn links_file(&self) -> PathBuf {
        self.root.join(format!("{TREE}.links"))
    }

    /// How many entries `tree` has and its symlinks (every one is checked after each use).
    /// Read from the record of the last tree brought to, updated with `git diff-tree` from that
    /// tree (time proportional to what changed), else listed whole (`git ls-tree -r`).
    async fn links_of(&self, tree: &TreeId) -> Result<(usize, Vec<String>), GitTreeError> {
        let file = self.links_file();
        let known = std::fs::read(&file)
            .ok()
            .and_then(|bytes| parse_links(&bytes));
        let (files, links) = match known {
            Some((at, files, links)) if &at == tree => (files, links),
            Some((at, files, links)) => {
                let mut links: std::collections::BTreeSet<String> = links.into_iter().collect();
                let mut files = files as i64;
                for change in self.store.diff_entries(&at, tree).await? {
                    files += i64::from(change.old.is_none()) - i64::from(change.new.is_none());
                    if change.new.as_ref().is_some_and(|n| n.is_symlink()) {
                        links.insert(change.path);
                    } else {
                        links.remove(&change.path);
                    }
                }
                (files.max(0) as usize, links.into_iter().collect())
            }
            None => {
                let entries = self.store.entries(tree).await?;
                let links = entries
                    .iter()
                    .filter(|e| e.is_symlink())
                    .map(|e| e.path.clone())
                    .collect();
                (entries.len(), links)
            }
        };
        let mut record = format!("{tree}\n{files}\n").into_bytes();
        for link in &links {
            record.extend_from_slice(link.as_bytes());
            record.push(0);
        }
        crate::store::write_atomic(&file, &record).map_err(|e| GitTreeError::Io {
            path: file.clone(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok((files, links))
    }

    /// Removes the trees an autocode before the single tree kept beside it (a resumed run).
    pub fn remove_legacy_trees(&self) {
        for name in LEGACY_TREES {
            let dir = self.root.join(name);
            if dir.exists() {
                let _ = crate::gittree::remove_all(&dir);
            }
            let _ = std::fs::remove_file(self.root.join(format!("{name}.index")));
            let _ = std::fs::remove_file(self.root.join(format!("{name}.tree")));
            let _ = std::fs::remove_file(self.root.join(format!("{name}.links")));
        }
    }

    /// Brings the directory to exactly `tree`, then closes it: symlinks that lead outside are
    /// removed and named in the report (as `super::replay::clean_copy` names them). Its `.git`
    /// then shows it as a checkout of the tree's commit (`gitdir.rs`).
    pub async fn bring_to(&self, tree: &TreeId) -> Result<CopyReport, VerifyTreeError> {
        let marker = self.marker();
        std::fs::create_dir_all(&self.root).map_err(|source| GitTreeError::Io {
            path: self.root.clone(),
            source,
        })?;
        let same = self.current().as_ref() == Some(tree);
        let _ = std::fs::remove_file(&marker);
        let dir = self.dir();
        let index = self.index();
        // Back to the same tree: only what a check or the tester changed is written again.
        let restored = same && dir.is_dir() && self.store.restore(&dir, &index).await.is_ok();
        if !restored {
            self.store.checkout(tree, &dir, &index).await?;
        }
        let (files, links) = self.links_of(tree).await?;
        let links: Vec<&str> = links.iter().map(String::as_str).collect();
        let report = CopyReport {
            files,
            unclosed: close(&dir, &links),
        };
        let gitfile = self
            .show_as_checkout(tree, gitdir::IndexSeed::Copy(&index))
            .await?;
        gitdir::write_git_file(&dir, &gitfile)?;
        std::fs::write(&marker, tree.as_str()).map_err(|source| GitTreeError::Io {
            path: marker.clone(),
            source,
        })?;
        Ok(report)
    }
}

/// `<tree id>` LF `<entries>` LF then each symlink's path, NUL-terminated.
fn parse_links(bytes: &[u8]) -> Option<(TreeId, usize, Vec<String>)> {
    let mut lines = bytes.splitn(3, |b| *b == b'\n');
    let tree = TreeId::parse(std::str::from_utf8(lines.next()?).ok()?).ok()?;
    let files = std::str::from_utf8(lines.next()?).ok()?.parse().ok()?;
    let links = lines
        .next()?
        .split(|b| *b == 0)
        .filter(|l| !l.is_empty())
        .map(|l| String::from_utf8(l.to_vec()).ok())
        .collect::<Option<Vec<String>>>()?;
    Some((tree, files, links))
}

/// Removes the links among `links` (paths relative to `dir`) that lead outside `dir`, first
/// lexically, then as resolved through the links that remain, and says why for each.
fn close(dir: &Path, links: &[&str]) -> Vec<String> {
    let mut unclosed = Vec::new();
    let mut kept = Vec::new();
    for rel in links {
        let path = dir.join(rel);
        let Ok(target) = std::fs::read_link(&path) else {
            continue;
        };
        if stays_inside(rel, &target) {
            kept.push(*rel);
        } else {
            unclosed.push(format!(
                "`{rel}` is a symlink to {} (outside the tree)",
                target.display()
            ));
            let _ = std::fs::remove_file(&path);
        }
    }
    let Ok(root) = std::fs::canonicalize(dir) else {
        return unclosed;
    };
    for rel in kept {
        let path = dir.join(rel);
        if let Ok(resolved) = std::fs::canonicalize(&path)
            && !resolved.starts_with(&root)
        {
            unclosed.push(format!(
                "`{rel}` resolves to {} (outside the tree)",
                resolved.display()
            ));
            let _ = std::fs::remove_file(&path);
        }
    }
    unclosed
}

/// Where the work tree as it was before any stage ran (the base tree) is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseSource {
    /// The closed copy in `<run>/base/` (outside git, and runs of an autocode before trees).
    Dir(std::path::PathBuf),
    /// A tree in the run's private object store (`<run>/base-tree.json`): never checked out
    /// for reading; a replay on the base brings the verification tree to it.
    GitTree(crate::gittree::TreeId),
}

/// The base tree of the run in `run_dir` with `verification`, `None` until it is saved.
pub fn base_source(
    verification: &crate::verify::Verification,
    run_dir: &std::path::Path,
) -> Option<BaseSource> {
    if !verification.base_saved {
        return None;
    }
    Some(match base_record(run_dir) {
        Some(record) => BaseSource::GitTree(record.tree),
        None => BaseSource::Dir(base_copy_dir(run_dir)),
    })
}

/// Where the base tree is copied outside git.
pub fn base_copy_dir(run_dir: &std::path::Path) -> std::path::PathBuf {
    run_dir.join("base")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::run::workspace::git_test_env as env;

    /// A verification root goes once the run directory it names is gone (with a work directory
    /// an overlay left unreadable in it); a root whose run is there stays. A root without an
    /// owner stays until it has not changed for a week.
    #[test]
    fn roots_of_runs_that_are_gone_are_swept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let roots = dir.path().join("verify");
        let live_run = dir.path().join("ws/.autocode/runs/live");
        fs::create_dir_all(&live_run).unwrap();
        let gone_run = dir.path().join("deleted/.autocode/runs/gone");
        let live = roots.join("aaaa/live");
        let gone = roots.join("bbbb/gone");
        let beside = roots.join("aaaa/beside");
        let legacy = roots.join("cccc/legacy");
        let abandoned = roots.join("cccc/abandoned");
        claim_root(&live, &live_run).unwrap();
        claim_root(&gone, &gone_run).unwrap();
        claim_root(&beside, &gone_run).unwrap();
        fs::create_dir_all(&legacy).unwrap();
        fs::create_dir_all(&abandoned).unwrap();
        let eight_days_ago =
            std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 86400);
        fs::File::open(&abandoned)
            .unwrap()
            .set_modified(eight_days_ago)
            .unwrap();
        let work = gone.join("layer/work/work");
        fs::create_dir_all(&work).unwrap();
        fs::set_permissions(&work, fs::Permissions::from_mode(0o000)).unwrap();
        // Claimed again as it is: nothing is written.
        claim_root(&live, &live_run).unwrap();
        assert_eq!(sweep_orphan_roots_in(&roots), 3);
        assert!(live.join(OWNER).exists());
        assert!(legacy.exists());
        assert!(!abandoned.exists());
        assert!(!gone.exists() && !beside.exists());
        assert!(
            !roots.join("bbbb").exists(),
            "an emptied workspace folder goes"
        );
        assert!(roots.join("aaaa").exists());
        assert_eq!(sweep_orphan_roots_in(&roots), 0);
    }

    #[tokio::test]
    async fn a_verification_tree_is_exact_and_closed_after_each_use() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("src")).unwrap();
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join("src/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("src/a.txt", ws.join("inside")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", ws.join("abs")).unwrap();
        std::os::unix::fs::symlink("../../elsewhere", ws.join("src/up")).unwrap();
        let (trees, tree) = snapshot_and_trees(dir.path(), &ws).await;
        let report = trees.bring_to(&tree).await.unwrap();
        assert_eq!(
            report.unclosed,
            [
                "`abs` is a symlink to /etc/hostname (outside the tree)",
                "`src/up` is a symlink to ../../elsewhere (outside the tree)"
            ]
        );
        let out = trees.dir();
        assert!(out.join("inside").is_symlink() && !out.join("abs").is_symlink());
        assert_eq!(trees.current(), Some(tree.clone()));
        // A check writes, modifies, chmods and plants a link: the next use sees none of it.
        fs::write(out.join("src/a.txt"), "tampered").unwrap();
        fs::write(out.join("new.txt"), "n").unwrap();
        std::os::unix::fs::symlink("/etc", out.join("planted")).unwrap();
        let report = trees.bring_to(&tree).await.unwrap();
        assert_eq!(report.unclosed.len(), 2);
        assert_eq!(fs::read_to_string(out.join("src/a.txt")).unwrap(), "a");
        // A tracked directory replaced by a link out of the tree is a directory again.
        let elsewhere = dir.path().join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::remove_dir_all(out.join("src")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join("src")).unwrap();
        trees.bring_to(&tree).await.unwrap();
        assert!(!out.join("src").is_symlink() && out.join("src").is_dir());
        assert_eq!(fs::read_to_string(out.join("src/a.txt")).unwrap(), "a");
        assert!(
            fs::read_dir(&elsewhere).unwrap().next().is_none(),
            "nothing written outside"
        );
        assert!(!out.join("new.txt").exists() && !out.join("planted").is_symlink());
        // Another tree: its links are the last tree's updated with what changed.
        std::os::unix::fs::symlink("/etc", ws.join("added")).unwrap();
        fs::remove_file(ws.join("abs")).unwrap();
        let other = trees
            .store()
            .write_tree(&ws, &dir.path().join("wt.index"))
            .await
            .unwrap();
        let report = trees.bring_to(&other).await.unwrap();
        assert_eq!(
            report.unclosed,
            [
                "`added` is a symlink to /etc (outside the tree)",
                "`src/up` is a symlink to ../../elsewhere (outside the tree)"
            ]
        );
        assert_eq!(report.files, 4);
        assert!(!out.join("abs").exists() && !out.join("added").is_symlink());
        let report = trees.bring_to(&tree).await.unwrap();
        assert_eq!(report.unclosed.len(), 2);
        assert!(report.unclosed[0].starts_with("`abs`"), "{report:?}");
        assert_eq!(report.files, 4);
        remove_verification_trees(dir.path(), "nothing-here").unwrap();
    }

    /// A record written before the single tree (it named the base's checkout) still reads, a
    /// new one names none, and the trees such a run left beside the root go when it resumes.
    #[tokio::test]
    async fn an_older_runs_record_reads_and_its_trees_are_removed() {
        let id = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let old: BaseTree =
            serde_json::from_str(&format!(r#"{{"tree":"{id}","dir":"/x/verify/base"}}"#)).unwrap();
        assert_eq!(old.tree.as_str(), id);
        let new = BaseTree {
            tree: old.tree.clone(),
            dir: None,
        };
        assert_eq!(
            serde_json::to_string(&new).unwrap(),
            format!(r#"{{"tree":"{id}"}}"#)
        );
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        crate::run::workspace::git_init_for_tests(&ws).await;
        let store = GitStore::open(&dir.path().join("git"), &ws, &env())
            .await
            .unwrap()
            .unwrap();
        let root = dir.path().join("verify");
        for name in ["base", "tester", "replay"] {
            fs::create_dir_all(root.join(name).join("sub")).unwrap();
            fs::write(root.join(format!("{name}.index")), "i").unwrap();
            fs::write(root.join(format!("{name}.tree")), id).unwrap();
        }
        let tree = VerifyTree::new(&root, store, &ws);
        fs::create_dir_all(tree.dir()).unwrap();
        tree.remove_legacy_trees();
        let left: Vec<String> = fs::read_dir(&root)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["tree"]);
    }

    /// The snapshot of `ws` (a tree in a private store in `dir`) and a verification tree in
    /// `dir/verify` over the same store.
    async fn snapshot_and_trees(dir: &Path, ws: &Path) -> (VerifyTree, TreeId) {
        let store = GitStore::open(&dir.join("git"), ws, &env())
            .await
            .unwrap()
            .unwrap();
        let tree = store.write_tree(ws, &dir.join("wt.index")).await.unwrap();
        (VerifyTree::new(&dir.join("verify"), store, ws), tree)
    }

    async fn checks_in(dir: &Path, commands: &[String]) -> Vec<bool> {
        crate::run::replay::run_checks_in(
            dir,
            crate::run::replay::Restore::default(),
            commands,
            &env(),
            std::time::Duration::from_secs(30),
            crate::run::replay::ReplayConfinement::Unconfined,
            None,
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.passed())
        .collect()
    }

    /// The checkout is a checkout to the tools that read git: a dirty work tree shows as
    /// autocode's commit over the repository's `HEAD` (its tags reachable, `git status` clean);
    /// a tree that is `HEAD`'s is `HEAD` itself; nothing of the repository is written, and what
    /// a check did to `.git` is undone at the next use.
    #[tokio::test]
    async fn a_verification_tree_is_a_checkout_of_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join("a.txt"), "a\n").unwrap();
        let commit = |message: &str| {
            format!(
                "git add -A && git -c user.name=t -c user.email=t@t -c commit.gpgSign=false commit -qm {message}"
            )
        };
        let setup = [format!("{} && git tag -a v1.0 -m v1.0", commit("first"))];
        assert_eq!(checks_in(&ws, &setup).await, [true]);
        fs::write(ws.join("a.txt"), "changed\n").unwrap();
        fs::write(ws.join("new.txt"), "untracked\n").unwrap();
        let listing = |ws: &Path| {
            let mut files: Vec<(PathBuf, Vec<u8>)> = walk(&ws.join(".git"))
                .into_iter()
                .map(|p| (p.clone(), fs::read(&p).unwrap_or_default()))
                .collect();
            files.sort();
            files
        };
        let before = listing(&ws);
        let (trees, tree) = snapshot_and_trees(dir.path(), &ws).await;
        trees.bring_to(&tree).await.unwrap();
        let out = trees.dir();
        let checks: Vec<String> = [
            "git describe --tags | grep -q '^v1.0-1-g'",
            "git describe --always --dirty | grep -vq dirty",
            "test \"$(git log -1 --format=%an)\" = autocode",
            "git log --format=%s | grep -qx first",
            "git ls-files | grep -qx new.txt",
            "test -z \"$(git status --porcelain --untracked-files=all)\"",
            &format!("test \"$(git rev-parse HEAD^{{tree}})\" = {tree}"),
            "test \"$(git rev-parse --show-toplevel)\" = \"$(pwd -P)\"",
            "echo more >> a.txt && git status --porcelain | grep -q '^ M a.txt'",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(checks_in(&out, &checks).await, [true; 9]);
        assert_eq!(listing(&ws), before, "the repository is not written");
        // The same tree again is the same commit; a `.git` a check replaced is a file again.
        let head = checks_in_output(&out, "git rev-parse HEAD").await;
        fs::remove_file(out.join(".git")).unwrap();
        fs::create_dir_all(out.join(".git/objects")).unwrap();
        trees.bring_to(&tree).await.unwrap();
        assert!(out.join(".git").is_file());
        assert_eq!(checks_in_output(&out, "git rev-parse HEAD").await, head);
        assert_eq!(checks_in(&out, &checks[..8]).await, [true; 8]);
        // Committed: the tree is `HEAD`'s, and the checkout is `HEAD` itself.
        assert_eq!(checks_in(&ws, &[commit("second")]).await, [true]);
        let user_head = checks_in_output(&ws, "git rev-parse HEAD").await;
        let committed = trees
            .store()
            .write_tree(&ws, &dir.path().join("wt.index"))
            .await
            .unwrap();
        assert_eq!(committed, tree);
        trees.bring_to(&committed).await.unwrap();
        assert_eq!(
            checks_in_output(&out, "git rev-parse HEAD").await,
            user_head
        );
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }

    async fn checks_in_output(dir: &Path, command: &str) -> String {
        crate::run::replay::run_checks_in(
            dir,
            crate::run::replay::Restore::default(),
            &[command.to_owned()],
            &env(),
            std::time::Duration::from_secs(30),
            crate::run::replay::ReplayConfinement::Unconfined,
            None,
        )
        .await
        .unwrap()[0]
            .output_tail
            .trim()
            .to_owned()
    }

    /// What an agent leaves behind — an ignored build artifact, an ignored cache, an untracked
    /// note, an escaping link — reaches a replay in the verification tree exactly as it reached
    /// the copy, and what a check writes is gone at the next replay.
    #[tokio::test]
    async fn a_replay_in_the_tree_sees_what_the_copy_saw_and_nothing_a_check_left() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join(".gitignore"), "target/\n__pycache__/\n").unwrap();
        fs::write(ws.join("main.py"), "print(1)\n").unwrap();
        fs::create_dir_all(ws.join("target")).unwrap();
        fs::write(ws.join("target/artifact"), "built").unwrap();
        fs::create_dir_all(ws.join("__pycache__")).unwrap();
        fs::write(ws.join("__pycache__/main.pyc"), "cached").unwrap();
        fs::write(ws.join("notes.txt"), "untracked, not ignored").unwrap();
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, "x").unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("esc.txt")).unwrap();
        let commands: Vec<String> = [
            "test -e main.py",
            "test -e target/artifact",
            "test -e __pycache__/main.pyc",
            "test -e notes.txt",
            "test -e esc.txt",
            "test -L esc.txt",
        ]
        .map(String::from)
        .to_vec();
        // Today's copy.
        let copy = tempfile::tempdir().unwrap();
        let copied = crate::run::replay::clean_copy(&ws, copy.path(), &env())
            .await
            .unwrap();
        let in_copy = checks_in(copy.path(), &commands).await;
        // The verification tree.
        let (trees, tree) = snapshot_and_trees(dir.path(), &ws).await;
        let report = trees.bring_to(&tree).await.unwrap();
        let out = trees.dir();
        let in_tree = checks_in(&out, &commands).await;
        assert_eq!(in_tree, in_copy);
        assert_eq!(in_tree, [true, false, false, true, false, false]);
        assert_eq!(report.unclosed, copied.unclosed);
        // A check writes a build output, a cache and a file in the tree, and deletes one.
        let writes = [
            "mkdir -p target __pycache__ && echo x > target/out && echo y > __pycache__/c.pyc && echo z > made.txt && rm main.py && chmod -w . "
                .to_owned(),
        ];
        assert_eq!(checks_in(&out, &writes).await, [true]);
        let report = trees.bring_to(&tree).await.unwrap();
        assert_eq!(report.unclosed, copied.unclosed);
        let after: Vec<String> = [
            "test ! -e target",
            "test ! -e __pycache__",
            "test ! -e made.txt",
            "test -e main.py",
            "test -w .",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(checks_in(&out, &after).await, [true; 5]);
    }
}
