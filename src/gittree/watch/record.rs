//! Recording a watch state after a snapshot git wrote (`super`): the index's entries by
//! directory, the directories a new file could enter the tree through (asking `git
//! check-ignore` which are excluded as a whole), and the ignore and config inputs, each trusted
//! only when it last changed before git started.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{
    Group, InputStat, MAX_IGNORE_ROUNDS, Stat, Unwatchable, Watch, Watcher, input_stat, lstat,
};
use crate::gitindex::{self, FLAG_ASSUME_VALID, IndexEntry};
use crate::gittree::{EXCLUDED, GitStore, GitTreeError, TreeId};

/// The config files git reads for the store and the excludes file they name.
#[derive(Debug, Clone)]
pub(super) struct ConfigInputs {
    files: Vec<(PathBuf, InputStat)>,
    /// `None`: no `core.excludesFile`, and no home to find the default one in.
    excludes_file: Option<PathBuf>,
}

impl ConfigInputs {
    fn unchanged(&self) -> bool {
        self.files
            .iter()
            .all(|(path, stat)| input_stat(path).ok().as_ref() == Some(stat))
    }
}

/// The entries of an index file by runs of the same directory, and every directory an entry
/// is beneath; an entry git would not compare by stat alone makes the index unwatchable.
fn group_entries(
    bytes: &[u8],
    work_tree: &Path,
) -> Result<(Vec<Group>, HashSet<Vec<u8>>), Unwatchable> {
    let parsed = gitindex::entries(bytes)
        .ok_or_else(|| Unwatchable::Index("not a plain SHA-1 index".into()))?;
    let mut indexed_dirs: HashSet<Vec<u8>> = HashSet::new();
    let mut groups: Vec<Group> = Vec::new();
    for entry in parsed {
        let whole = |entry: &IndexEntry| work_tree.join(OsStr::from_bytes(&entry.path));
        // No skip-worktree or intent-to-add flag (nor any other extended flag).
        let plain = entry.stage() == 0
            && entry.flags & FLAG_ASSUME_VALID == 0
            && entry.extended_flags == 0
            && matches!(entry.mode, 0o100644 | 0o100755 | 0o120000);
        if !plain {
            return Err(Unwatchable::Entry(whole(&entry)));
        }
        let mut end = entry.path.len();
        while let Some(slash) = entry.path[..end].iter().rposition(|b| *b == b'/') {
            if indexed_dirs.contains(&entry.path[..slash]) {
                break;
            }
            indexed_dirs.insert(entry.path[..slash].to_vec());
            end = slash;
        }
        let (dir, name) = match entry.path.iter().rposition(|b| *b == b'/') {
            Some(slash) => (&entry.path[..slash], &entry.path[slash + 1..]),
            None => (&[][..], &entry.path[..]),
        };
        let rel = if dir.is_empty() { &b"."[..] } else { dir };
        let name = CString::new(name).map_err(|_| Unwatchable::Entry(whole(&entry)))?;
        match groups.last_mut() {
            Some(group) if group.rel.as_bytes() == rel => group.entries.push((name, entry)),
            _ => groups.push(Group {
                dir: work_tree.join(OsStr::from_bytes(dir)),
                rel: CString::new(rel).map_err(|_| Unwatchable::Entry(whole(&entry)))?,
                stat: None,
                entries: vec![(name, entry)],
            }),
        }
    }
    Ok((groups, indexed_dirs))
}

/// What a directory held when it was listed: its subdirectories (names) and whether it has a
/// `.gitignore`, under the stat it had.
#[derive(Debug, Clone)]
pub(super) struct Listing {
    stat: Stat,
    subdirs: Vec<Vec<u8>>,
    gitignore: bool,
}

/// Lists `dir` (`top`: the work tree's top, where `.autocode` is not part of the tree).
fn list(dir: &Path, top: bool, stat: Stat) -> io::Result<Listing> {
    let mut listing = Listing {
        stat,
        subdirs: Vec::new(),
        gitignore: false,
    };
    for child in fs::read_dir(dir)? {
        let child = child?;
        let name = child.file_name();
        let name = name.as_bytes();
        if name == b".git" || (top && name == EXCLUDED.as_bytes()) {
            continue;
        }
        if name == b".gitignore" {
            listing.gitignore = true;
        }
        if child.file_type()?.is_dir() {
            listing.subdirs.push(name.to_vec());
        }
    }
    Ok(listing)
}

/// What `git check-ignore` answered at the last record, and what the answers depended on.
#[derive(Debug)]
pub(super) struct IgnoreAnswers {
    /// The global ignore and config inputs.
    globals: Vec<(PathBuf, InputStat)>,
    /// Every walked directory's `.gitignore` (`None`: it had none).
    gitignores: HashMap<Vec<u8>, Option<InputStat>>,
    /// Directory (relative) → excluded.
    excluded: HashMap<Vec<u8>, bool>,
}

impl IgnoreAnswers {
    /// The kept answer for `dir` when every ancestor's `.gitignore` is as it was then.
    fn answer(&self, dir: &[u8], now: &HashMap<Vec<u8>, Option<InputStat>>) -> Option<bool> {
        let answer = *self.excluded.get(dir)?;
        let mut ancestors = vec![&dir[..0]];
        ancestors.extend(
            dir.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'/')
                .map(|(at, _)| &dir[..at]),
        );
        ancestors
            .into_iter()
            .all(|a| matches!((self.gitignores.get(a), now.get(a)), (Some(x), Some(y)) if x == y))
            .then_some(answer)
    }
}

impl Watcher {
    pub(super) async fn build(
        &mut self,
        store: &GitStore,
        work_tree: &Path,
        index: &Path,
        tree: &TreeId,
        since: i128,
    ) -> Result<Watch, Unwatchable> {
        if tree.as_str().len() != 40 {
            return Err(Unwatchable::ObjectFormat);
        }
        let mut file = fs::File::open(index).map_err(|e| Unwatchable::Index(e.to_string()))?;
        let index_stat = Stat::of(
            &file
                .metadata()
                .map_err(|e| Unwatchable::Index(e.to_string()))?,
        );
        // The same index file (git rewrites it by renaming a new one over it): the same entries.
        let (mut groups, indexed_dirs) = match self.stale.take() {
            Some(stale)
                if stale.index_stat == index_stat
                    && stale.work_tree == work_tree
                    && stale.index == index =>
            {
                (stale.groups, stale.indexed_dirs)
            }
            _ => {
                let mut bytes = Vec::with_capacity(usize::try_from(index_stat.size).unwrap_or(0));
                file.read_to_end(&mut bytes)
                    .map_err(|e| Unwatchable::Index(e.to_string()))?;
                group_entries(&bytes, work_tree)?
            }
        };
        drop(file);

        // Every directory where a new file could enter the tree, and its `.gitignore`.
        let mut dirs = Vec::new();
        let mut inputs = Vec::new();
        let config = match self.config.take() {
            Some(config) if config.unchanged() => config,
            _ => config_inputs(store, work_tree)
                .await
                .map_err(|e| Unwatchable::Walk(e.to_string()))?,
        };
        let mut watched_inputs: Vec<PathBuf> = vec![
            store.git_dir.join("info/exclude"),
            store.git_dir.join("info/attributes"),
        ];
        watched_inputs.extend(config.excludes_file.clone());
        watched_inputs.extend(config.files.iter().map(|(p, _)| p.clone()));
        self.config = Some(config);
        for path in watched_inputs {
            let stat = input_stat(&path)
                .map_err(|e| Unwatchable::Walk(format!("{}: {e}", path.display())))?;
            inputs.push((path, stat));
        }
        // Whether a directory is excluded depends on these, the `.gitignore` files of its
        // ancestors and its path: an answer is kept while all of them are as they were.
        let globals = inputs.clone();
        let answers = self
            .answers
            .take()
            .filter(|answers| answers.globals == globals);
        let mut gitignores: HashMap<Vec<u8>, Option<InputStat>> = HashMap::new();
        let mut excluded_now: HashMap<Vec<u8>, bool> = HashMap::new();

        let mut frontier: Vec<Vec<u8>> = vec![Vec::new()];
        // A directory whose stat is what it was when last listed holds the same names.
        let previous = std::mem::take(&mut self.listings);
        let mut listings = std::collections::HashMap::new();
        for round in 0.. {
            let mut unknown = Vec::new();
            while let Some(rel) = frontier.pop() {
                let abs = work_tree.join(OsStr::from_bytes(&rel));
                let walk_error =
                    |e: io::Error| Unwatchable::Walk(format!("{}: {e}", abs.display()));
                let stat = match lstat(&abs).map_err(walk_error)? {
                    Some(stat) if stat.mode & libc::S_IFMT == libc::S_IFDIR => stat,
                    _ => return Err(Unwatchable::Racy(abs)),
                };
                dirs.push((abs.clone(), stat));
                let listing = match previous.get(&rel) {
                    Some(listing @ Listing { stat: then, .. }) if *then == stat => listing.clone(),
                    _ => list(&abs, rel.is_empty(), stat).map_err(walk_error)?,
                };
                let mut gitignore = None;
                if listing.gitignore {
                    let path = abs.join(".gitignore");
                    let stat = input_stat(&path).map_err(walk_error)?;
                    gitignore = Some(stat);
                    inputs.push((path, stat));
                }
                gitignores.insert(rel.clone(), gitignore);
                for name in &listing.subdirs {
                    let mut sub = rel.clone();
                    if !sub.is_empty() {
                        sub.push(b'/');
                    }
                    sub.extend_from_slice(name);
                    if indexed_dirs.contains(&sub) {
                        frontier.push(sub);
                    } else {
                        unknown.push(sub);
                    }
                }
                listings.insert(rel, listing);
            }
            if unknown.is_empty() {
                break;
            }
            if round == MAX_IGNORE_ROUNDS {
                return Err(Unwatchable::Walk("directories too deep to ask git".into()));
            }
            let (known, ask): (Vec<_>, Vec<_>) = unknown
                .into_iter()
                .map(|dir| {
                    let kept = answers
                        .as_ref()
                        .and_then(|answers| answers.answer(&dir, &gitignores));
                    (dir, kept)
                })
                .partition(|(_, kept)| kept.is_some());
            let ask: Vec<Vec<u8>> = ask.into_iter().map(|(dir, _)| dir).collect();
            let excluded = if ask.is_empty() {
                HashSet::new()
            } else {
                store
                    .excluded_dirs(work_tree, index, &ask)
                    .await
                    .map_err(|e| Unwatchable::Walk(e.to_string()))?
            };
            let answered = known
                .into_iter()
                .map(|(dir, kept)| (dir, kept == Some(true)))
                .chain(ask.into_iter().map(|dir| {
                    let is = excluded.contains(&dir);
                    (dir, is)
                }));
            for (dir, is_excluded) in answered {
                if !is_excluded {
                    frontier.push(dir.clone());
                }
                excluded_now.insert(dir, is_excluded);
            }
        }
        // Kept for the next record only when listed before `since` (not racy).
        self.listings = listings
            .into_iter()
            .filter(|(_, listing)| listing.stat.newest_ns() < since)
            .collect();

        // What changed at or after `since` may have changed after git looked at it; a store's
        // own input that reads as it did before git started is trusted by its content.
        let mut private = Vec::new();
        for (path, before) in std::mem::take(&mut self.private_before) {
            if inputs.iter().any(|(p, _)| *p == path) && super::read_private(&path) == before {
                private.push((path, before));
            }
        }
        let stats = dirs.iter().map(|(p, s)| (p, Some(s))).chain(
            inputs
                .iter()
                .filter(|(p, _)| !private.iter().any(|(known, _)| known == p))
                .flat_map(|(p, (own, target))| [(p, own.as_ref()), (p, target.as_ref())]),
        );
        for (path, stat) in stats {
            if stat.is_some_and(|s| s.newest_ns() >= since) {
                return Err(Unwatchable::Racy(path.clone()));
            }
        }
        // A directory holding entries is checked on the descriptor its group opens; the others
        // by lstat.
        let mut by_path: std::collections::HashMap<&Path, Stat> =
            dirs.iter().map(|(p, s)| (p.as_path(), *s)).collect();
        for group in &mut groups {
            group.stat = Some(
                *by_path
                    .get(group.dir.as_path())
                    .ok_or_else(|| Unwatchable::Racy(group.dir.clone()))?,
            );
        }
        for group in &groups {
            by_path.remove(group.dir.as_path());
        }
        let dirs: Vec<(PathBuf, Stat)> = dirs
            .iter()
            .filter(|(p, _)| by_path.contains_key(p.as_path()))
            .cloned()
            .collect();
        self.answers = Some(IgnoreAnswers {
            globals,
            gitignores,
            excluded: excluded_now,
        });
        Ok(Watch {
            id: super::WatchProof::next(),
            tree: tree.clone(),
            work_tree: work_tree.to_owned(),
            index: index.to_owned(),
            index_stat,
            index_mtime_sec: i64::try_from(index_stat.mtime_ns.div_euclid(1_000_000_000))
                .unwrap_or(i64::MAX),
            groups,
            indexed_dirs,
            dirs,
            inputs,
            private,
        })
    }
}

/// [`config_inputs`]' files and the excludes file they name (`None`: not named), read in
/// place. `None`: git's to say (not the plain case, or a value git expands by its own rules).
pub(super) fn config_in_place(
    store: &GitStore,
    home: Option<&Path>,
    work_tree: &Path,
) -> Option<(Vec<PathBuf>, Option<PathBuf>)> {
    let files = crate::gitconfig::files(&store.env, Some(&store.git_dir.join("config")))?;
    let entries = crate::gitconfig::read(&files)?;
    let excludes_file = match crate::gitconfig::last(&entries, "core.excludesfile") {
        None => None,
        Some(entry) => {
            let value = entry.value.as_deref().filter(|v| !v.is_empty())?;
            Some(match value.strip_prefix("~/") {
                Some(rest) => home?.join(rest),
                None if value.starts_with(['~', '%']) => return None,
                None => work_tree.join(value),
            })
        }
    };
    Some((files, excludes_file))
}

/// [`config_inputs`]' files and excludes file as `git config --show-origin --list` names them.
pub(super) async fn config_from_git(
    store: &GitStore,
    home: Option<&Path>,
    work_tree: &Path,
) -> Result<(Vec<PathBuf>, Option<PathBuf>), GitTreeError> {
    let expand = |value: &[u8], base: &Path| -> PathBuf {
        let value = Path::new(OsStr::from_bytes(value));
        match (value.strip_prefix("~"), home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => base.join(value),
        }
    };
    let path_var = store
        .env
        .get("PATH")
        .map(String::as_str)
        .unwrap_or_default();
    let system = crate::gitconfig::system_file(OsStr::new(path_var))
        .unwrap_or_else(|| PathBuf::from("/etc/gitconfig"));
    let mut files = vec![system, store.git_dir.join("config")];
    files.extend(crate::gitconfig::user_files(&store.env));
    let out = store
        .git(
            None,
            None,
            &["config", "-z", "--show-origin", "--list"],
            None,
        )
        .await?;
    let mut excludes_file = None;
    let mut items = out.split(|b| *b == 0);
    while let (Some(origin), Some(item)) = (items.next(), items.next()) {
        let origin_file = origin
            .strip_prefix(b"file:")
            .map(|p| store.git_dir.join(OsStr::from_bytes(p)));
        let (key, value) = match item.iter().position(|b| *b == b'\n') {
            Some(at) => (&item[..at], &item[at + 1..]),
            None => (item, &b""[..]),
        };
        let base = origin_file
            .as_deref()
            .and_then(Path::parent)
            .unwrap_or(work_tree)
            .to_owned();
        if let Some(file) = origin_file {
            files.push(file);
        }
        let key = key.to_ascii_lowercase();
        if key == b"core.excludesfile" {
            excludes_file = Some(expand(value, work_tree));
        } else if key.starts_with(b"include") && key.ends_with(b".path") {
            files.push(expand(value, &base));
        }
    }
    Ok((files, excludes_file))
}

/// The config files git reads with the store's environment (the system, global and XDG files,
/// the store's own, every file one of them includes) and the excludes file they name: read in
/// place where they are git's plain case (`crate::gitconfig`), else from `git config`.
async fn config_inputs(store: &GitStore, work_tree: &Path) -> Result<ConfigInputs, GitTreeError> {
    let home = store
        .env
        .get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let xdg = store
        .env
        .get("XDG_CONFIG_HOME")
        .filter(|x| !x.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let (mut files, excludes_file) = match config_in_place(store, home.as_deref(), work_tree) {
        Some(found) => found,
        None => config_from_git(store, home.as_deref(), work_tree).await?,
    };
    files.sort();
    files.dedup();
    let excludes_file = excludes_file.or_else(|| xdg.map(|xdg| xdg.join("git/ignore")));
    let files = files
        .into_iter()
        .map(|path| {
            let stat = input_stat(&path)?;
            Ok((path, stat))
        })
        .collect::<io::Result<_>>()
        .map_err(|source| GitTreeError::Io {
            path: work_tree.to_owned(),
            source,
        })?;
    Ok(ConfigInputs {
        files,
        excludes_file,
    })
}
