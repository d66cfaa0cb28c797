//! Trees under test as git tree objects, in a private git directory (issue 13).
//!
//! A [`GitStore`] is a bare git directory of autocode's own (`<run>/git/`) whose object store
//! borrows the work tree's repository objects read-only (`objects/info/alternates`), so the
//! repository itself is never written: not its index, not its objects, not its refs. The tree
//! under test is written with a private index file as the stat cache (`git add -A`, then the
//! index's tree written in process, `index_tree.rs`, else by `git write-tree`: about the cost
//! of a warm `git status`), two trees are compared, listed
//! and composed in process where their objects are loose (`odb.rs`; else `git diff-tree`,
//! `ls-tree`, `update-index`), and a directory is brought to a tree with its own index
//! (`git read-tree --reset -u` then `git clean -ffdx`), so the writes are what changed.
//!
//! Every git command runs through the boundary with the repository's hooks, fsmonitor and
//! filters out of play: `core.hooksPath=/dev/null`, `core.fsmonitor=false`, the private
//! directory's `info/attributes` turns off `filter`, `text`, `ident` and
//! `working-tree-encoding` for every path (it outranks the tree's `.gitattributes`), and the
//! repository's own config is not read (it is not this git directory). What counts as ignored
//! is the tree's `.gitignore` files, the repository's `info/exclude` (copied here) and the
//! user's `core.excludesFile`, as for `git ls-files --exclude-standard`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::supervise::{self, Exit, LaunchSpec, StdinSource, StdioMode};

mod commit;
pub mod history;
mod index_file;
mod index_tree;
mod memo;
mod objects;
mod odb;
mod packs;
pub use commit::CommitId;
pub use objects::{BLOBS_BUDGET, ChangedEntry, Side};
pub mod watch;
pub use watch::{SnapshotPath, Watcher};

/// Configuration given to every git command of a store (`-c` pairs).
const CONFIG: [&str; 18] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.fileMode=true",
    "core.symlinks=true",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.ignoreCase=false",
    "core.precomposeUnicode=false",
    "core.sparseCheckout=false",
    "core.splitIndex=false",
    "core.trustctime=true",
    "core.checkStat=default",
    "core.quotePath=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.addEmbeddedRepo=false",
    "index.sparse=false",
    // A worker per core when a checkout writes many files (the first checkout of a tree).
    "checkout.workers=0",
];

/// Attributes that keep git from transforming content (a clean filter is a user program).
const ATTRIBUTES: &str = "* -filter -text -ident -working-tree-encoding\n";

/// The top-level directory a tree never holds (autocode's state).
pub const EXCLUDED: &str = ".autocode";

/// Directories an environment puts in the tree, at any depth: a Python virtual environment
/// (`python3 -m venv .venv` names it `.venv` or `venv`; its interpreter is a symlink out of the
/// tree), bytecode and pytest's cache. Where no ignore file names them and the repository does
/// not track them, they are still not the work: a tree under test and the run's commits leave
/// them out, and a replay's `prepare` steps make them again in its clean copy.
pub const ENVIRONMENT_DIRS: [&str; 4] = [".venv", "venv", "__pycache__", ".pytest_cache"];

#[derive(Debug, thiserror::Error)]
pub enum GitTreeError {
    #[error("git {args} failed in {dir}: {detail}")]
    Git {
        args: String,
        dir: PathBuf,
        detail: String,
    },
    #[error("cannot prepare {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("git printed {0:?} where a tree id was expected")]
    BadTreeId(String),
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> GitTreeError + '_ {
    move |source| GitTreeError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A git tree object id (hex: sha1 or sha256 repositories).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TreeId(String);

impl TreeId {
    pub fn parse(text: &str) -> Result<TreeId, GitTreeError> {
        let text = text.trim();
        if (text.len() == 40 || text.len() == 64)
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(TreeId(text.to_owned()))
        } else {
            Err(GitTreeError::BadTreeId(text.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TreeId {
    type Error = GitTreeError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        TreeId::parse(&value)
    }
}

impl From<TreeId> for String {
    fn from(value: TreeId) -> String {
        value.0
    }
}

impl fmt::Display for TreeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How an entry differs between two trees (`git diff-tree --name-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryChange {
    Added,
    Removed,
    /// Content, mode (executable bit), symlink target or type (file ↔ symlink) changed.
    Modified,
}

/// One entry of a tree (`git ls-tree -r`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Octal mode: `100644`, `100755`, `120000` (symlink), `160000` (gitlink).
    pub mode: String,
    pub path: String,
}

impl Entry {
    pub fn is_symlink(&self) -> bool {
        self.mode == "120000"
    }
}

/// autocode's private git directory for one run, bound to one repository's objects.
#[derive(Debug, Clone)]
pub struct GitStore {
    git_dir: PathBuf,
    /// The work tree's repository (`git rev-parse --git-common-dir`).
    repo_common_dir: PathBuf,
    /// The work tree's own index (the seed of a first private index: its stat data).
    repo_index: PathBuf,
    env: BTreeMap<String, String>,
    /// What git said about objects, shared by the store's clones (`memo.rs`).
    memo: memo::Memo,
    /// The loose objects read and written in process (`odb.rs`).
    odb: odb::Odb,
}

impl GitStore {
    /// Opens (creating it if needed) the private git directory `git_dir` for `work_tree`.
    /// `Ok(None)`: `work_tree` is not the top of a git work tree (callers fall back to files).
    pub async fn open(
        git_dir: &Path,
        work_tree: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Option<GitStore>, GitTreeError> {
        if !work_tree.join(".git").exists() {
            return Ok(None);
        }
        let env = clean_env(env);
        // Read in place when the repository is a plain one (no git process), else asked.
        if let Some(layout) = crate::gitrefs::layout(work_tree, &env)
            && fs::canonicalize(work_tree).ok().as_ref() == Some(&layout.top)
        {
            let store = GitStore {
                git_dir: git_dir.to_owned(),
                repo_common_dir: layout.common_dir.clone(),
                repo_index: layout.index(),
                env,
                memo: memo::Memo::default(),
                odb: odb::Odb::open(git_dir),
            };
            return store.init().map(Some);
        }
        let out = run_git(
            work_tree,
            &[
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir",
                "--git-path",
                "index",
            ],
            &env,
            None,
        )
        .await;
        let Ok(out) = out else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&out);
        let mut lines = text.lines();
        let (Some(common), Some(index)) = (lines.next(), lines.next()) else {
            return Ok(None);
        };
        let store = GitStore {
            git_dir: git_dir.to_owned(),
            repo_common_dir: PathBuf::from(common),
            repo_index: PathBuf::from(index),
            env,
            memo: memo::Memo::default(),
            odb: odb::Odb::open(git_dir),
        };
        store.init().map(Some)
    }

    /// Creates the bare directory by hand (no templates, no hooks), refreshes what it copies
    /// from the repository, and reads the object directories it then names.
    fn init(mut self) -> Result<GitStore, GitTreeError> {
        let dir = &self.git_dir;
        for sub in ["objects/info", "refs", "info"] {
            let path = dir.join(sub);
            fs::create_dir_all(&path).map_err(io_error(&path))?;
        }
        let head = dir.join("HEAD");
        if !head.exists() {
            fs::write(&head, "ref: refs/heads/none\n").map_err(io_error(&head))?;
        }
        let config = dir.join("config");
        if !config.exists() {
            fs::write(
                &config,
                "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
            )
            .map_err(io_error(&config))?;
        }
        write_if_changed(
            &dir.join("objects/info/alternates"),
            format!("{}\n", self.repo_common_dir.join("objects").display()).as_bytes(),
        )?;
        write_if_changed(&dir.join("info/attributes"), ATTRIBUTES.as_bytes())?;
        // autocode's own directory is never part of a tree: excluded here (a pathspec
        // exclusion would make `git add` fail when the user's ignore files name it too), and
        // removed from a seeded index when the repository tracks it. An environment's
        // directories are excluded too; a tracked file under one stays in the tree.
        let mut exclude = fs::read(self.repo_common_dir.join("info/exclude")).unwrap_or_default();
        exclude.extend_from_slice(format!("\n/{EXCLUDED}/\n").as_bytes());
        for dir in ENVIRONMENT_DIRS {
            exclude.extend_from_slice(format!("{dir}/\n").as_bytes());
        }
        write_if_changed(&dir.join("info/exclude"), &exclude)?;
        self.odb = odb::Odb::open(dir);
        Ok(self)
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    async fn git(
        &self,
        work_tree: Option<&Path>,
        index: Option<&Path>,
        args: &[&str],
        stdin: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, GitTreeError> {
        self.git_accepting(work_tree, index, args, stdin, &[0])
            .await
    }

    /// [`Self::git`] where each exit code of `ok` is a success.
    async fn git_accepting(
        &self,
        work_tree: Option<&Path>,
        index: Option<&Path>,
        args: &[&str],
        stdin: Option<Vec<u8>>,
        ok: &[i32],
    ) -> Result<Vec<u8>, GitTreeError> {
        let mut env = self.env.clone();
        env.insert(
            "GIT_DIR".into(),
            self.git_dir.to_string_lossy().into_owned(),
        );
        if let Some(index) = index {
            env.insert(
                "GIT_INDEX_FILE".into(),
                index.to_string_lossy().into_owned(),
            );
        }
        let cwd = match work_tree {
            Some(wt) => {
                env.insert("GIT_WORK_TREE".into(), wt.to_string_lossy().into_owned());
                wt
            }
            None => &self.git_dir,
        };
        run_git_accepting(cwd, args, &env, stdin, ok).await
    }

    /// Writes the tree of `work_tree` (tracked files and untracked files that are not ignored,
    /// never `.autocode/`), with `index` as the private stat cache. A first index is seeded from
    /// the repository's own (copied, its mtime kept so git's racy-entry rule still holds), else
    /// from `HEAD`'s tree, else empty.
    pub async fn write_tree(&self, work_tree: &Path, index: &Path) -> Result<TreeId, GitTreeError> {
        if !index.exists() {
            self.seed_index(work_tree, index).await;
        }
        let add = ["add", "-A"];
        if self
            .git(Some(work_tree), Some(index), &add, None)
            .await
            .is_err()
        {
            // A seed this git cannot use (a split index, a sparse one): start over, from HEAD.
            let _ = fs::remove_file(index);
            self.seed_from_head(work_tree, index).await;
            self.git(Some(work_tree), Some(index), &add, None).await?;
        }
        // The tree the index holds, written in process where it is git's plain case.
        if let Some(tree) = fs::read(index)
            .ok()
            .and_then(|bytes| index_tree::write(&self.odb, &bytes))
        {
            return Ok(tree);
        }
        let out = self
            .git(Some(work_tree), Some(index), &["write-tree"], None)
            .await?;
        TreeId::parse(&String::from_utf8_lossy(&out))
    }

    /// [`Self::write_tree`] behind the fast path of [`watch`]: when `watcher` proves that the
    /// work tree is as it was at the last tree it recorded, that tree id without launching git;
    /// otherwise `git add -A` + `git write-tree`, then a new watch state. The answer is exactly
    /// the tree [`Self::write_tree`] would give.
    pub async fn write_tree_watched(
        &self,
        work_tree: &Path,
        index: &Path,
        watcher: &mut Watcher,
    ) -> Result<(TreeId, SnapshotPath), GitTreeError> {
        if let Some(answer) = watcher.unchanged(work_tree, index) {
            return Ok(answer);
        }
        let since = watcher.start(&self.git_dir);
        let tree = self.write_tree(work_tree, index).await?;
        watcher.record(self, work_tree, index, &tree, since).await;
        Ok((tree, SnapshotPath::Written))
    }

    /// Which of `dirs` (relative to `work_tree`, `/`-separated, without a trailing `/`) git
    /// excludes as directories (`git check-ignore` with the private index): nothing untracked
    /// beneath them can enter a tree.
    async fn excluded_dirs(
        &self,
        work_tree: &Path,
        index: &Path,
        dirs: &[Vec<u8>],
    ) -> Result<std::collections::HashSet<Vec<u8>>, GitTreeError> {
        let mut stdin = Vec::new();
        for dir in dirs {
            stdin.extend_from_slice(dir);
            stdin.extend_from_slice(b"/\0");
        }
        let out = self
            .git_accepting(
                Some(work_tree),
                Some(index),
                &["check-ignore", "-z", "--stdin"],
                Some(stdin),
                &[0, 1],
            )
            .await?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| p.strip_suffix(b"/").unwrap_or(p).to_vec())
            .collect())
    }

    async fn seed_index(&self, work_tree: &Path, index: &Path) {
        if let Some(parent) = index.parent() {
            let _ = fs::create_dir_all(parent);
        }
        let copied = fs::metadata(&self.repo_index).ok().and_then(|meta| {
            fs::copy(&self.repo_index, index).ok()?;
            let file = fs::File::options().write(true).open(index).ok()?;
            file.set_modified(meta.modified().ok()?).ok()
        });
        if copied.is_some() {
            // A tracked `.autocode/` is not part of the tree either: removed by git when the
            // index (read in place) holds an entry there, or cannot be read.
            let holds_excluded = fs::read(index)
                .ok()
                .and_then(|bytes| crate::gitindex::entries(&bytes))
                .is_none_or(|entries| {
                    entries.iter().any(|e| {
                        e.path
                            .strip_prefix(EXCLUDED.as_bytes())
                            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
                    })
                });
            if !holds_excluded {
                return;
            }
            let rm = [
                "rm",
                "--cached",
                "-r",
                "-q",
                "--ignore-unmatch",
                "--",
                EXCLUDED,
            ];
            if self
                .git(Some(work_tree), Some(index), &rm, None)
                .await
                .is_ok()
            {
                return;
            }
            let _ = fs::remove_file(index);
        }
        self.seed_from_head(work_tree, index).await;
    }

    /// Fills a missing `index` with `HEAD`'s tree (tracked files that are ignored stay in).
    async fn seed_from_head(&self, work_tree: &Path, index: &Path) {
        let Ok(out) = run_git(
            work_tree,
            &["rev-parse", "-q", "--verify", "HEAD^{tree}"],
            &self.env,
            None,
        )
        .await
        else {
            return;
        };
        let Ok(head) = TreeId::parse(&String::from_utf8_lossy(&out)) else {
            return;
        };
        if self
            .git(
                Some(work_tree),
                Some(index),
                &["read-tree", head.as_str()],
                None,
            )
            .await
            .is_ok()
        {
            let _ = self
                .git(
                    Some(work_tree),
                    Some(index),
                    &[
                        "rm",
                        "--cached",
                        "-r",
                        "-q",
                        "--ignore-unmatch",
                        "--",
                        EXCLUDED,
                    ],
                    None,
                )
                .await;
        } else {
            let _ = fs::remove_file(index);
        }
    }

    /// The entries that differ from `old` to `new`, in path order (recursive, no rename
    /// detection: a rename is a removal and an addition; [`Self::diff_entries`] without sides).
    pub async fn diff(
        &self,
        old: &TreeId,
        new: &TreeId,
    ) -> Result<Vec<(String, EntryChange)>, GitTreeError> {
        if old == new {
            return Ok(Vec::new());
        }
        let entries = self.diff_entries(old, new).await?;
        Ok(entries
            .into_iter()
            .map(|c| {
                let kind = match (&c.old, &c.new) {
                    (None, _) => EntryChange::Added,
                    (_, None) => EntryChange::Removed,
                    _ => EntryChange::Modified,
                };
                (c.path, kind)
            })
            .collect())
    }

    /// Every entry of `tree`, recursively (submodules as gitlinks).
    pub async fn entries(&self, tree: &TreeId) -> Result<Vec<Entry>, GitTreeError> {
        if let Some(known) = self.memo.entries(tree) {
            return Ok(known.as_ref().clone());
        }
        if let Some(entries) = self.odb.entries(tree) {
            self.memo
                .put_entries(tree, std::sync::Arc::new(entries.clone()));
            return Ok(entries);
        }
        let entries = self.entries_by_git(tree).await?;
        self.memo
            .put_entries(tree, std::sync::Arc::new(entries.clone()));
        Ok(entries)
    }

    /// [`Self::entries`] by `git ls-tree`.
    async fn entries_by_git(&self, tree: &TreeId) -> Result<Vec<Entry>, GitTreeError> {
        let out = self
            .git(None, None, &["ls-tree", "-r", "-z", tree.as_str()], None)
            .await?;
        let entries: Vec<Entry> = out
            .split(|b| *b == 0)
            .filter_map(|line| {
                let tab = line.iter().position(|b| *b == b'\t')?;
                let meta = String::from_utf8_lossy(&line[..tab]);
                let mode = meta.split(' ').next()?.to_owned();
                Some(Entry {
                    mode,
                    path: String::from_utf8_lossy(&line[tab + 1..]).into_owned(),
                })
            })
            .collect();
        Ok(entries)
    }

    /// Brings `dir` to exactly `tree` with `index` as its stat cache: files that differ from
    /// the index are rewritten, and every file the index does not hold (untracked or ignored,
    /// whatever wrote it) is removed. If that fails, `dir` and `index` are removed and `tree`
    /// is checked out afresh.
    pub async fn checkout(
        &self,
        tree: &TreeId,
        dir: &Path,
        index: &Path,
    ) -> Result<(), GitTreeError> {
        let incremental =
            dir.is_dir() && index.exists() && self.sync(tree, dir, index).await.is_ok();
        if incremental {
            return Ok(());
        }
        remove_all(dir)?;
        let _ = fs::remove_file(index);
        fs::create_dir_all(dir).map_err(io_error(dir))?;
        self.sync(tree, dir, index).await
    }

    /// Puts `dir` back to what `index` holds (the tree it was last brought to), writing only
    /// what differs: tracked files whose stat no longer matches the index are checked out again,
    /// then every untracked or ignored file is removed. Cheaper than [`Self::checkout`] to the
    /// same tree (no tree is read). On failure the caller checks the tree out again.
    pub async fn restore(&self, dir: &Path, index: &Path) -> Result<(), GitTreeError> {
        let changed = self
            .git(
                Some(dir),
                Some(index),
                &["diff-files", "--name-only", "-z"],
                None,
            )
            .await?;
        if changed.iter().any(|b| *b != 0) {
            self.git(
                Some(dir),
                Some(index),
                &["checkout-index", "-f", "-u", "-z", "--stdin"],
                Some(changed),
            )
            .await?;
        }
        self.git(Some(dir), Some(index), &["clean", "-ffdxq"], None)
            .await?;
        Ok(())
    }

    async fn sync(&self, tree: &TreeId, dir: &Path, index: &Path) -> Result<(), GitTreeError> {
        self.git(
            Some(dir),
            Some(index),
            &["read-tree", "--reset", "-u", tree.as_str()],
            None,
        )
        .await?;
        self.git(Some(dir), Some(index), &["clean", "-ffdxq"], None)
            .await?;
        Ok(())
    }
}

/// Removes `dir` and everything in it, making read-only directories writable first
/// ([`crate::store::remove_tree`]).
pub fn remove_all(dir: &Path) -> Result<(), GitTreeError> {
    crate::store::remove_tree(dir).map_err(|source| GitTreeError::Io {
        path: dir.to_owned(),
        source,
    })
}

fn write_if_changed(path: &Path, content: &[u8]) -> Result<(), GitTreeError> {
    if fs::read(path).ok().as_deref() == Some(content) {
        return Ok(());
    }
    // Derived from the repository and rewritten at every open when it differs: atomic, not
    // synced (a crash leaves at worst an old or empty file, which the next open replaces).
    crate::store::write_atomic_as(path, content, crate::store::Durability::Derived).map_err(|e| {
        GitTreeError::Io {
            path: path.to_owned(),
            source: io::Error::other(e.to_string()),
        }
    })
}

/// The environment without git's own variables (a `GIT_DIR` or `GIT_INDEX_FILE` inherited from
/// the caller would redirect every command).
fn clean_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(k, _)| !k.starts_with("GIT_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Which of `paths` (relative to `work_tree`, `/`-separated) git ignores there: `git
/// check-ignore` with the repository's own index (a tracked file is never ignored), through the
/// same hardened invocation as every git call here.
pub async fn ignored_paths(
    work_tree: &Path,
    paths: &[String],
    env: &BTreeMap<String, String>,
) -> Result<std::collections::HashSet<String>, GitTreeError> {
    let mut stdin = Vec::new();
    for path in paths {
        stdin.extend_from_slice(path.as_bytes());
        stdin.push(0);
    }
    let out = run_git_accepting(
        work_tree,
        &["check-ignore", "-z", "--stdin"],
        &clean_env(env),
        Some(stdin),
        &[0, 1],
    )
    .await?;
    Ok(out
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

async fn run_git(
    cwd: &Path,
    args: &[&str],
    env: &BTreeMap<String, String>,
    stdin: Option<Vec<u8>>,
) -> Result<Vec<u8>, GitTreeError> {
    run_git_accepting(cwd, args, env, stdin, &[0]).await
}

/// [`run_git`] where each exit code of `ok` is a success (`git check-ignore` ends with 1 when
/// nothing is ignored).
async fn run_git_accepting(
    cwd: &Path,
    args: &[&str],
    env: &BTreeMap<String, String>,
    stdin: Option<Vec<u8>>,
    ok: &[i32],
) -> Result<Vec<u8>, GitTreeError> {
    let mut argv: Vec<OsString> = Vec::with_capacity(CONFIG.len() * 2 + args.len());
    for pair in CONFIG {
        argv.push("-c".into());
        argv.push(pair.into());
    }
    argv.extend(args.iter().map(OsString::from));
    let spec = LaunchSpec {
        label: format!("git {}", args.first().copied().unwrap_or_default()),
        program: OsString::from("git"),
        args: argv,
        env: env
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        cwd: cwd.to_owned(),
        stdin: stdin.map_or(StdinSource::Null, StdinSource::Bytes),
        stdio: StdioMode::Captured { limit: 256 << 20 },
        timeout: Some(Duration::from_secs(600)),
        room: None,
    };
    let failed = |detail: String| GitTreeError::Git {
        args: args.join(" "),
        dir: cwd.to_owned(),
        detail,
    };
    let finished = supervise::run(spec)
        .await
        .map_err(|e| failed(e.to_string()))?;
    match finished.exit {
        Exit::Code(code) if ok.contains(&code) => Ok(finished.stdout),
        other => Err(failed(format!(
            "{other:?}: {}",
            String::from_utf8_lossy(&finished.stderr).trim()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::run::workspace::git_test_env as env;

    #[tokio::test]
    async fn trees_diff_and_check_out_without_touching_the_repository() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        crate::run::workspace::git_init_for_tests(&ws).await;
        fs::write(ws.join("a.txt"), "a").unwrap();
        fs::write(ws.join(".gitignore"), "target/\n").unwrap();
        fs::create_dir_all(ws.join("target")).unwrap();
        fs::write(ws.join("target/out"), "built").unwrap();
        fs::create_dir_all(ws.join(".autocode")).unwrap();
        fs::write(ws.join(".autocode/x"), "x").unwrap();
        // An environment no ignore file names: a virtual environment, bytecode.
        fs::create_dir_all(ws.join("venv/bin")).unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", ws.join("venv/bin/python3")).unwrap();
        fs::create_dir_all(ws.join("pkg/__pycache__")).unwrap();
        fs::write(ws.join("pkg/__pycache__/m.pyc"), "pyc").unwrap();
        let store = GitStore::open(&dir.path().join("git"), &ws, &env())
            .await
            .unwrap()
            .unwrap();
        let index = dir.path().join("wt.index");
        let first = store.write_tree(&ws, &index).await.unwrap();
        assert_eq!(first, store.write_tree(&ws, &index).await.unwrap());
        let paths: Vec<String> = store
            .entries(&first)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, [".gitignore", "a.txt"]);
        assert!(
            !ws.join(".git/index").exists(),
            "the repository's index is untouched"
        );
        fs::write(ws.join("b.txt"), "b").unwrap();
        fs::remove_file(ws.join("a.txt")).unwrap();
        let second = store.write_tree(&ws, &index).await.unwrap();
        assert_eq!(
            store.diff(&first, &second).await.unwrap(),
            [
                ("a.txt".to_owned(), EntryChange::Removed),
                ("b.txt".to_owned(), EntryChange::Added)
            ]
        );
        let out = dir.path().join("out");
        let out_index = dir.path().join("out.index");
        store.checkout(&first, &out, &out_index).await.unwrap();
        assert!(out.join("a.txt").exists() && !out.join("b.txt").exists());
        fs::write(out.join("a.txt"), "changed by a check").unwrap();
        fs::create_dir_all(out.join("target")).unwrap();
        fs::write(out.join("target/cache"), "c").unwrap();
        store.checkout(&second, &out, &out_index).await.unwrap();
        assert!(!out.join("a.txt").exists() && out.join("b.txt").exists());
        assert!(!out.join("target").exists(), "ignored files are cleaned");
        store.checkout(&first, &out, &out_index).await.unwrap();
        assert_eq!(fs::read_to_string(out.join("a.txt")).unwrap(), "a");
    }
}
