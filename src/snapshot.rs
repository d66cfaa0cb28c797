//! Workspace snapshots: what a read-only stage must not change, and what a builder did change.
//!
//! A snapshot covers tracked files and untracked files that are not ignored (`git ls-files -co
//! --exclude-standard`, and not in an environment's directory such as `.venv/`:
//! `crate::gittree::ENVIRONMENT_DIRS`; a plain directory walk outside git), always excluding
//! `.autocode/` and `.git/`. Content is hashed with sha256, but a [`StatCache`] keyed by (size,
//! mtime, ctime, inode) lets an unchanged large tree be snapshotted again without reading it. A
//! file whose mtime is too close to the moment it was hashed is not trusted from the cache (the
//! "racy git" problem: a write in the same timestamp tick would be invisible).
//!
//! A [`Snapshotter`] is what the run uses (issue 13): in a git work tree a snapshot is the id of
//! the tree `git add -A` + `git write-tree` make of it with a private index in autocode's own git
//! directory (`crate::gittree`; the same files as above, at the cost of a warm `git status`),
//! and two snapshots are compared with `git diff-tree`. Outside git it falls back to the file
//! walk and hashes above. Either way what a stage stores is a [`SnapshotRecord`]: a digest and
//! the list of changes, never every file's hash.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::gittree::watch::{WatchClock, Watcher};
use crate::gittree::{EntryChange, GitStore, SnapshotPath, TreeId};
use crate::supervise::{self, Exit, StdioMode};

pub const SNAPSHOT_FORMAT: u32 = 1;
/// The format of a stored [`SnapshotRecord`].
pub const RECORD_FORMAT: u32 = 2;

/// Directories never part of a snapshot.
const EXCLUDED_DIRS: [&str; 2] = [".autocode", ".git"];

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot list the files of {root}: {reason}")]
    Listing { root: PathBuf, reason: String },
    #[error(transparent)]
    Git(#[from] crate::gittree::GitTreeError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The state of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileState {
    File {
        size: u64,
        sha256: String,
        executable: bool,
    },
    Symlink {
        target: String,
    },
    /// Listed (tracked) but absent from disk.
    Missing,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub format_version: u32,
    /// Paths relative to the workspace, `/`-separated.
    pub files: BTreeMap<String, FileState>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct StatKey {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    mode: u32,
}

/// Hashes of files keyed by their stat data, kept between snapshots of the same tree.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StatCache {
    entries: HashMap<String, (StatKey, String)>,
    #[serde(skip)]
    pub hits: u64,
    #[serde(skip)]
    pub misses: u64,
}

/// How a file differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Removed,
    Modified,
}

/// Lists the files a snapshot covers. Git workspaces ask git (through the boundary); other
/// directories are walked.
pub async fn list_files(
    root: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Vec<String>, SnapshotError> {
    if !root.join(".git").exists() {
        let mut out = Vec::new();
        walk(root, root, &mut out).map_err(|source| SnapshotError::Read {
            path: root.to_owned(),
            source,
        })?;
        out.sort();
        return Ok(out);
    }
    // An environment's directories no ignore file names are left out as untracked files
    // (`crate::gittree::ENVIRONMENT_DIRS`); tracked files under them stay.
    let environments: Vec<String> = crate::gittree::ENVIRONMENT_DIRS
        .iter()
        .map(|dir| format!("--exclude={dir}/"))
        .collect();
    let mut spec = crate::run::workspace::git_spec(
        root,
        crate::run::workspace::SAFE_GIT_ARGS
            .into_iter()
            .chain(["ls-files", "-z", "-c", "-o", "--exclude-standard"])
            .chain(environments.iter().map(String::as_str)),
        env,
    );
    spec.label = "snapshot listing".into();
    // A listing of a large tree is far more than a command's output.
    spec.stdio = StdioMode::Captured { limit: 256 << 20 };
    let listing_error = |reason: String| SnapshotError::Listing {
        root: root.to_owned(),
        reason,
    };
    let finished = supervise::run(spec)
        .await
        .map_err(|e| listing_error(e.to_string()))?;
    if finished.exit != Exit::Code(0) {
        return Err(listing_error(format!(
            "git ls-files ended with {:?}: {}",
            finished.exit,
            String::from_utf8_lossy(&finished.stderr).trim()
        )));
    }
    let mut out: Vec<String> = finished
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| !is_excluded(p))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

fn is_excluded(rel: &str) -> bool {
    EXCLUDED_DIRS
        .iter()
        .any(|dir| rel == *dir || rel.starts_with(&format!("{dir}/")))
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if is_excluded(&rel) {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else {
            out.push(rel);
        }
    }
    Ok(())
}

/// Takes a snapshot of `files` under `root`, reusing `cache` for files whose stat is unchanged.
pub fn take(
    root: &Path,
    files: &[String],
    cache: &mut StatCache,
) -> Result<Snapshot, SnapshotError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    take_at(root, files, cache, now)
}

/// [`take`] with the clock given (nanoseconds since the epoch), so the settle rule is testable.
fn take_at(
    root: &Path,
    files: &[String],
    cache: &mut StatCache,
    now: i128,
) -> Result<Snapshot, SnapshotError> {
    let mut out = BTreeMap::new();
    for rel in files {
        let path = root.join(rel);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                out.insert(rel.clone(), FileState::Missing);
                continue;
            }
            Err(source) => return Err(SnapshotError::Read { path, source }),
        };
        let state = if meta.file_type().is_symlink() {
            let target = fs::read_link(&path).map_err(|source| SnapshotError::Read {
                path: path.clone(),
                source,
            })?;
            FileState::Symlink {
                target: target.to_string_lossy().into_owned(),
            }
        } else if meta.is_file() {
            let key = StatKey {
                size: meta.size(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
                ino: meta.ino(),
                mode: meta.mode(),
            };
            // A file changed within the last two seconds may change again in the same tick.
            let settled = now - key.mtime_ns.max(key.ctime_ns) > 2_000_000_000;
            let cached = cache
                .entries
                .get(rel)
                .filter(|(k, _)| *k == key && settled)
                .map(|(_, sha)| sha.clone());
            let sha256 = match cached {
                Some(sha) => {
                    cache.hits += 1;
                    sha
                }
                None => {
                    cache.misses += 1;
                    let sha = hash_file(&path)?;
                    cache.entries.insert(rel.clone(), (key, sha.clone()));
                    sha
                }
            };
            FileState::File {
                size: meta.size(),
                sha256,
                executable: meta.mode() & 0o111 != 0,
            }
        } else {
            continue;
        };
        out.insert(rel.clone(), state);
    }
    cache.entries.retain(|path, _| out.contains_key(path));
    Ok(Snapshot {
        format_version: SNAPSHOT_FORMAT,
        files: out,
    })
}

fn hash_file(path: &Path) -> Result<String, SnapshotError> {
    // Non-blocking and regular only: a FIFO the agent left in the tree must not hang the hash.
    let mut file =
        crate::bounded_read::open_regular(path).map_err(|source| SnapshotError::Read {
            path: path.to_owned(),
            source,
        })?;
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher).map_err(|source| SnapshotError::Read {
        path: path.to_owned(),
        source,
    })?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The changes from `before` to `after`, in path order. A listed-but-missing file counts as absent.
pub fn diff(before: &Snapshot, after: &Snapshot) -> Vec<Change> {
    let present =
        |s: &Snapshot, p: &str| matches!(s.files.get(p), Some(st) if *st != FileState::Missing);
    let mut paths: Vec<&String> = before.files.keys().chain(after.files.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| {
            let kind = match (present(before, path), present(after, path)) {
                (false, true) => ChangeKind::Added,
                (true, false) => ChangeKind::Removed,
                (true, true) if before.files.get(path) != after.files.get(path) => {
                    ChangeKind::Modified
                }
                _ => return None,
            };
            Some(Change {
                path: path.clone(),
                kind,
            })
        })
        .collect()
}

/// A snapshot as the run takes it: a git tree id, or (outside git) every file's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    Tree(TreeId),
    Files(Snapshot),
}

impl Taken {
    /// A digest of what was seen: the tree id, or the sha256 of the compact file map.
    pub fn digest(&self) -> String {
        match self {
            Taken::Tree(tree) => tree.to_string(),
            Taken::Files(snapshot) => {
                let bytes = serde_json::to_vec(&snapshot.files).unwrap_or_default();
                let mut hasher = Sha256::new();
                hasher.update(&bytes);
                hasher
                    .finalize()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            }
        }
    }

    /// What a stage stores: the digest, and the changes when they are known.
    pub fn record<'a>(&self, changes: Option<&'a [Change]>) -> SnapshotRecord<'a> {
        SnapshotRecord {
            format_version: RECORD_FORMAT,
            kind: match self {
                Taken::Tree(_) => SnapshotKind::GitTree,
                Taken::Files(_) => SnapshotKind::FileHashes,
            },
            digest: self.digest(),
            changes,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotKind {
    /// A git tree id (`git write-tree` of a private index).
    GitTree,
    /// The sha256 of every file's state (a workspace outside git).
    FileHashes,
}

/// `snapshot-before.json` / `snapshot-after.json`: small whatever the tree's size.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotRecord<'a> {
    pub format_version: u32,
    pub kind: SnapshotKind,
    pub digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<&'a [Change]>,
}

/// Takes and compares snapshots of one work tree, keeping its stat cache between them.
#[derive(Debug)]
pub struct Snapshotter {
    root: PathBuf,
    store: Option<GitStore>,
    index: PathBuf,
    cache: StatCache,
    env: BTreeMap<String, String>,
    /// The fast path of a git snapshot (`crate::gittree::watch`).
    watcher: Watcher,
    last_path: Option<SnapshotPath>,
}

impl Snapshotter {
    /// `git_dir`: autocode's private git directory for the run; `index`: the private index of
    /// this work tree (kept between snapshots: it is the stat cache). A work tree that is not
    /// the top of a git work tree is snapshotted file by file.
    pub async fn open(
        root: &Path,
        git_dir: &Path,
        index: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Snapshotter, SnapshotError> {
        let store = GitStore::open(git_dir, root, env).await?;
        Ok(Snapshotter {
            root: root.to_owned(),
            store,
            index: index.to_owned(),
            cache: StatCache::default(),
            env: env.clone(),
            watcher: Watcher::default(),
            last_path: None,
        })
    }

    /// Where the racy rule of the fast path takes its clock from (tests pass a fixed time).
    pub fn set_watch_clock(&mut self, clock: WatchClock) {
        self.watcher = Watcher::new(clock);
    }

    /// How the last git snapshot was found (`None` outside git, or before the first).
    pub fn last_path(&self) -> Option<SnapshotPath> {
        self.last_path
    }

    /// Drops the fast path's state: the next git snapshot is written by git (benches).
    pub fn forget_watch(&mut self) {
        self.watcher.forget();
    }

    /// The watch state the last git snapshot recorded or was proven unchanged from
    /// ([`crate::gittree::watch::WatchProof`]).
    pub fn watch_proof(&self) -> Option<crate::gittree::watch::WatchProof> {
        self.watcher.proof()
    }

    /// The fast path's counters and its last doubt.
    pub fn watcher(&self) -> &Watcher {
        &self.watcher
    }

    /// The git store, when the work tree is in git.
    pub fn store(&self) -> Option<&GitStore> {
        self.store.as_ref()
    }

    pub async fn take(&mut self) -> Result<Taken, SnapshotError> {
        match &self.store {
            Some(store) => {
                let (tree, path) = store
                    .write_tree_watched(&self.root, &self.index, &mut self.watcher)
                    .await?;
                self.last_path = Some(path);
                Ok(Taken::Tree(tree))
            }
            None => {
                let files = list_files(&self.root, &self.env).await?;
                Ok(Taken::Files(take(&self.root, &files, &mut self.cache)?))
            }
        }
    }

    /// The changes from `before` to `after`, in path order.
    pub async fn diff(&self, before: &Taken, after: &Taken) -> Result<Vec<Change>, SnapshotError> {
        match (before, after, &self.store) {
            (Taken::Tree(old), Taken::Tree(new), Some(store)) => Ok(store
                .diff(old, new)
                .await?
                .into_iter()
                .map(|(path, change)| Change {
                    path,
                    kind: match change {
                        EntryChange::Added => ChangeKind::Added,
                        EntryChange::Removed => ChangeKind::Removed,
                        EntryChange::Modified => ChangeKind::Modified,
                    },
                })
                .collect()),
            (Taken::Files(old), Taken::Files(new), _) => Ok(diff(old, new)),
            _ => Err(SnapshotError::Listing {
                root: self.root.clone(),
                reason: "the two snapshots were not taken the same way".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(root: &Path, cache: &mut StatCache) -> Snapshot {
        let mut files = Vec::new();
        walk(root, root, &mut files).unwrap();
        files.sort();
        take(root, &files, cache).unwrap()
    }

    #[test]
    fn detects_added_removed_and_modified_files_but_not_autocode_state() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a.txt"), "a").unwrap();
        fs::write(root.join("b.txt"), "b").unwrap();
        fs::create_dir_all(root.join(".autocode/runs")).unwrap();
        let mut cache = StatCache::default();
        let before = snap(root, &mut cache);
        assert_eq!(before.files.len(), 2);
        fs::write(root.join("a.txt"), "changed").unwrap();
        fs::remove_file(root.join("b.txt")).unwrap();
        fs::write(root.join("c.txt"), "c").unwrap();
        fs::write(root.join(".autocode/runs/x.json"), "{}").unwrap();
        let after = snap(root, &mut cache);
        let changes = diff(&before, &after);
        let summary: Vec<(String, ChangeKind)> =
            changes.into_iter().map(|c| (c.path, c.kind)).collect();
        assert_eq!(
            summary,
            vec![
                ("a.txt".into(), ChangeKind::Modified),
                ("b.txt".into(), ChangeKind::Removed),
                ("c.txt".into(), ChangeKind::Added),
            ]
        );
        assert!(diff(&after, &after).is_empty());
    }

    #[test]
    fn a_same_size_rewrite_is_seen_even_with_a_warm_cache() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a.txt"), "aaaa").unwrap();
        let mut cache = StatCache::default();
        let before = snap(root, &mut cache);
        fs::write(root.join("a.txt"), "bbbb").unwrap();
        let after = snap(root, &mut cache);
        assert_eq!(diff(&before, &after).len(), 1);
    }

    #[test]
    fn settled_files_come_from_the_cache_and_a_restored_mtime_does_not_hide_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a.txt"), "aaaa").unwrap();
        fs::write(root.join("b.txt"), "bbbb").unwrap();
        let mut files = Vec::new();
        walk(root, root, &mut files).unwrap();
        files.sort();
        let later = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i128
            + 10_000_000_000;
        let mut cache = StatCache::default();
        let first = take_at(root, &files, &mut cache, later).unwrap();
        assert_eq!((cache.hits, cache.misses), (0, 2));
        let second = take_at(root, &files, &mut cache, later).unwrap();
        assert_eq!((cache.hits, cache.misses), (2, 2));
        assert_eq!(first, second);
        // Same size, mtime put back: ctime still moves, so the cache is not fooled.
        let path = root.join("a.txt");
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        fs::write(&path, "zzzz").unwrap();
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let third = take_at(root, &files, &mut cache, later + 10_000_000_000).unwrap();
        assert_eq!(diff(&first, &third).len(), 1);
    }

    use crate::run::workspace::git_test_env as env;

    /// The same changes are seen in git (tree ids) and outside git (file hashes), and a mode
    /// change or a symlink retarget is as visible as a content change.
    #[tokio::test]
    async fn a_mode_change_and_a_symlink_retarget_are_changes_in_and_out_of_git() {
        use std::os::unix::fs::PermissionsExt;
        for in_git in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let ws = dir.path().join("ws");
            fs::create_dir_all(&ws).unwrap();
            if in_git {
                crate::run::workspace::git_init_for_tests(&ws).await;
            }
            fs::write(ws.join("run.sh"), "echo hi\n").unwrap();
            fs::write(ws.join("a.txt"), "a").unwrap();
            fs::write(ws.join("b.txt"), "b").unwrap();
            std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
            fs::create_dir_all(ws.join(".autocode")).unwrap();
            let mut snapshotter = Snapshotter::open(
                &ws,
                &dir.path().join("git"),
                &dir.path().join("wt.index"),
                &env(),
            )
            .await
            .unwrap();
            assert_eq!(snapshotter.store().is_some(), in_git);
            let before = snapshotter.take().await.unwrap();
            let again = snapshotter.take().await.unwrap();
            assert!(snapshotter.diff(&before, &again).await.unwrap().is_empty());
            fs::set_permissions(ws.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
            fs::remove_file(ws.join("link")).unwrap();
            std::os::unix::fs::symlink("b.txt", ws.join("link")).unwrap();
            fs::write(ws.join(".autocode/state"), "not part of it").unwrap();
            let after = snapshotter.take().await.unwrap();
            let changes: Vec<(String, ChangeKind)> = snapshotter
                .diff(&before, &after)
                .await
                .unwrap()
                .into_iter()
                .map(|c| (c.path, c.kind))
                .collect();
            assert_eq!(
                changes,
                [
                    ("link".to_owned(), ChangeKind::Modified),
                    ("run.sh".to_owned(), ChangeKind::Modified)
                ],
                "in git: {in_git}"
            );
            // A file replaced by a symlink, a new and a deleted file.
            fs::remove_file(ws.join("a.txt")).unwrap();
            std::os::unix::fs::symlink("b.txt", ws.join("a.txt")).unwrap();
            fs::remove_file(ws.join("b.txt")).unwrap();
            fs::write(ws.join("c.txt"), "c").unwrap();
            let last = snapshotter.take().await.unwrap();
            let changes: Vec<(String, ChangeKind)> = snapshotter
                .diff(&after, &last)
                .await
                .unwrap()
                .into_iter()
                .map(|c| (c.path, c.kind))
                .collect();
            assert_eq!(
                changes,
                [
                    ("a.txt".to_owned(), ChangeKind::Modified),
                    ("b.txt".to_owned(), ChangeKind::Removed),
                    ("c.txt".to_owned(), ChangeKind::Added)
                ],
                "in git: {in_git}"
            );
            let record = serde_json::to_vec(&last.record(Some(&[]))).unwrap();
            assert!(record.len() < 300, "{}", String::from_utf8_lossy(&record));
        }
    }
}
