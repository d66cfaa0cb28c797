//! Which paths a plain git repository's index tracks under a directory, read from the index file
//! in place instead of by starting git (`status`, `resume` and `clean` ask whether a run
//! directory is tracked; a supervised git launch is most of their time in a repository).
//!
//! Only the plain case is read: a repository found through a `.git` directory, or a `.git` file
//! naming a git directory (a linked worktree, a submodule), in the directory or an ancestor; a
//! SHA-1 object format; index versions 2, 3 and 4 (prefix-compressed paths); no split index
//! (`link` extension), no sparse index (`sdir`), no `core.worktree` and no per-worktree config.
//! Anything else — or anything that does not parse exactly — answers [`Answer::AskGit`], and the
//! caller runs git as before. The format: git's `Documentation/gitformat-index.txt`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What the index says, or that git must be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The tracked paths under the directory, relative to it (`/`-separated).
    Tracked(BTreeSet<String>),
    /// Not a case this reader takes: run git.
    AskGit,
}

/// The repository `dir` is in, as git would find it from `dir` without discovery variables:
/// its work-tree top and its git directory. `None`: not a plain case (or no repository).
pub(crate) fn discover(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    for top in dir.ancestors() {
        let dot_git = top.join(".git");
        let meta = match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A bare repository or a git directory itself: not read here.
                if top.join("HEAD").exists() {
                    return None;
                }
                continue;
            }
            Err(_) => return None,
        };
        if meta.is_dir() {
            return Some((top.to_owned(), dot_git));
        }
        if meta.is_file() {
            let text = crate::bounded_read::read(&dot_git, crate::bounded_read::CONFIG_CAP).ok()?;
            let text = String::from_utf8(text).ok()?;
            let target = text
                .strip_prefix("gitdir: ")?
                .trim_end_matches(['\n', '\r']);
            let git_dir = std::fs::canonicalize(top.join(target)).ok()?;
            return git_dir.is_dir().then(|| (top.to_owned(), git_dir));
        }
        return None;
    }
    None
}

/// Whether a git config file says something this reader does not take into account (another
/// work tree, another object format, per-worktree config): then git is asked.
pub(crate) fn config_is_plain(git_dir: &Path) -> bool {
    let common = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim_end_matches(['\n', '\r'])),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => git_dir.to_owned(),
        Err(_) => return false,
    };
    for config in [common.join("config"), git_dir.join("config.worktree")] {
        match crate::bounded_read::read(&config, crate::bounded_read::CONFIG_CAP) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
                if [
                    "worktree",
                    "objectformat",
                    "include",
                    "splitindex",
                    "sparse",
                    "refstorage",
                ]
                .iter()
                .any(|word| text.contains(word))
                {
                    return false;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => return false,
        }
    }
    true
}

/// The paths the index of the repository holding `dir` tracks beneath `dir` (canonical),
/// relative to `dir`.
pub fn tracked_under(dir: &Path) -> Answer {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return Answer::AskGit;
    };
    let dir = dir.as_path();
    let Some((top, git_dir)) = discover(dir) else {
        return Answer::AskGit;
    };
    if !config_is_plain(&git_dir) {
        return Answer::AskGit;
    }
    let Ok(relative) = dir.strip_prefix(&top) else {
        return Answer::AskGit;
    };
    let Some(relative) = relative.to_str() else {
        return Answer::AskGit;
    };
    let prefix = if relative.is_empty() {
        String::new()
    } else {
        format!("{relative}/")
    };
    let bytes = match std::fs::read(git_dir.join("index")) {
        Ok(bytes) => bytes,
        // A repository without an index tracks nothing yet.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Answer::Tracked(BTreeSet::new());
        }
        Err(_) => return Answer::AskGit,
    };
    match paths_with_prefix(&bytes, prefix.as_bytes()) {
        Some(paths) => Answer::Tracked(paths),
        None => Answer::AskGit,
    }
}

/// SHA-1 object ids (the only format [`config_is_plain`] lets through).
pub const OID_LEN: usize = 20;
/// ctime, mtime (seconds and nanoseconds each), dev, ino, mode, uid, gid, size: ten 32-bit words.
const STAT_LEN: usize = 40;
const FLAG_EXTENDED: u16 = 0x4000;
const NAME_MASK: u16 = 0x0fff;

/// Every entry path of an index file that starts with `prefix`, the prefix cut off (`None`: the
/// file is not one this reader takes, or does not parse).
pub fn paths_with_prefix(index: &[u8], prefix: &[u8]) -> Option<BTreeSet<String>> {
    let mut found = BTreeSet::new();
    for entry in entries(index)? {
        if let Some(rest) = entry.path.strip_prefix(prefix) {
            found.insert(String::from_utf8(rest.to_vec()).ok()?);
        }
    }
    Some(found)
}

/// A 32-bit timestamp of an index entry, as git stores it (seconds truncated to 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexTime {
    pub sec: u32,
    pub nsec: u32,
}

/// One entry of an index file: its stat data as git recorded it (each field truncated to 32
/// bits, as git compares them), its mode, object id, flags and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub ctime: IndexTime,
    pub mtime: IndexTime,
    pub dev: u32,
    pub ino: u32,
    /// `0o100644`, `0o100755`, `0o120000` (symlink) or `0o160000` (gitlink).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u32,
    /// A SHA-1 object id.
    pub oid: [u8; OID_LEN],
    pub flags: u16,
    /// The second flag word of a version 3+ entry (0 when absent).
    pub extended_flags: u16,
    /// `/`-separated, relative to the work tree.
    pub path: Vec<u8>,
}

/// `assume-unchanged`: git does not look at the file.
pub const FLAG_ASSUME_VALID: u16 = 0x8000;
/// Extended flags: the entry is outside the sparse checkout.
pub const EXTENDED_SKIP_WORKTREE: u16 = 0x4000;
/// Extended flags: `git add -N`.
pub const EXTENDED_INTENT_TO_ADD: u16 = 0x2000;

impl IndexEntry {
    /// The merge stage (0: a normal entry).
    pub fn stage(&self) -> u16 {
        (self.flags >> 12) & 0x3
    }
}

/// Every entry of an index file, in index order (`None`: the file is not one this reader
/// takes: not versions 2–4, a split or sparse index, or anything that does not parse exactly).
pub fn entries(index: &[u8]) -> Option<Vec<IndexEntry>> {
    entries_and_extensions(index).map(|(entries, _)| entries)
}

/// An index extension: its signature (`TREE`, `REUC`, …) and its body.
pub type Extension<'a> = ([u8; 4], &'a [u8]);

/// [`entries`], and the extensions after them.
pub fn entries_and_extensions(index: &[u8]) -> Option<(Vec<IndexEntry>, Vec<Extension<'_>>)> {
    let be32 = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(index.get(at..at + 4)?.try_into().ok()?))
    };
    if index.get(..4)? != b"DIRC" || index.len() < 12 + OID_LEN {
        return None;
    }
    let version = be32(4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(8)? as usize;
    let end = index.len() - OID_LEN;
    let mut at = 12;
    // Each entry takes at least 62 bytes: a count past that is a damaged file.
    let mut found = Vec::with_capacity(count.min(index.len() / 62));
    for _ in 0..count {
        let start = at;
        let flags_at = start + STAT_LEN + OID_LEN;
        let flags = u16::from_be_bytes(index.get(flags_at..flags_at + 2)?.try_into().ok()?);
        let mut name_at = flags_at + 2;
        let mut extended_flags = 0;
        if flags & FLAG_EXTENDED != 0 {
            if version < 3 {
                return None;
            }
            extended_flags = u16::from_be_bytes(index.get(name_at..name_at + 2)?.try_into().ok()?);
            name_at += 2;
        }
        let path: Vec<u8> = if version == 4 {
            let (strip, used) = varint(index.get(name_at..end)?)?;
            let suffix_at = name_at + used;
            let nul = index.get(suffix_at..end)?.iter().position(|&b| b == 0)?;
            let previous: &[u8] = found.last().map_or(&[], |e: &IndexEntry| &e.path);
            let keep = previous.len().checked_sub(usize::try_from(strip).ok()?)?;
            let mut path = previous[..keep].to_vec();
            path.extend_from_slice(&index[suffix_at..suffix_at + nul]);
            at = suffix_at + nul + 1;
            path
        } else {
            let nul = index.get(name_at..end)?.iter().position(|&b| b == 0)?;
            let name_len = usize::from(flags & NAME_MASK);
            if name_len != usize::from(NAME_MASK) && name_len != nul {
                return None;
            }
            let path = index[name_at..name_at + nul].to_vec();
            // Entries are padded with 1–8 NUL bytes to a multiple of eight.
            let unpadded = name_at + nul - start;
            at = start + (unpadded + 8) / 8 * 8;
            if index.get(name_at + nul..at)?.iter().any(|&b| b != 0) {
                return None;
            }
            path
        };
        if at > end {
            return None;
        }
        let word = |n: usize| be32(start + 4 * n);
        found.push(IndexEntry {
            ctime: IndexTime {
                sec: word(0)?,
                nsec: word(1)?,
            },
            mtime: IndexTime {
                sec: word(2)?,
                nsec: word(3)?,
            },
            dev: word(4)?,
            ino: word(5)?,
            mode: word(6)?,
            uid: word(7)?,
            gid: word(8)?,
            size: word(9)?,
            oid: index
                .get(start + STAT_LEN..start + STAT_LEN + OID_LEN)?
                .try_into()
                .ok()?,
            flags,
            extended_flags,
            path,
        });
    }
    // Extensions: a split index keeps its entries elsewhere, a sparse index folds directories.
    let mut extensions = Vec::new();
    while at < end {
        let signature: [u8; 4] = index.get(at..at + 4)?.try_into().ok()?;
        if &signature == b"link" || &signature == b"sdir" {
            return None;
        }
        let size = be32(at + 4)? as usize;
        let body = at.checked_add(8)?;
        at = body.checked_add(size)?;
        extensions.push((signature, index.get(body..at)?));
    }
    (at == end).then_some((found, extensions))
}

/// git's offset varint (`varint.c`): seven bits a byte, big-endian, each continuation adding one.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut used = 0;
    let mut byte = *bytes.get(used)?;
    used += 1;
    let mut value = u64::from(byte & 0x7f);
    while byte & 0x80 != 0 {
        byte = *bytes.get(used)?;
        used += 1;
        value = value.checked_add(1)?.checked_mul(128)? | u64::from(byte & 0x7f);
    }
    Some((value, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// git through the boundary, as autocode runs it (`run::workspace::git`).
    fn git(dir: &Path, args: &[&str]) -> String {
        let env = crate::run::workspace::git_test_env();
        let mut all = vec!["-c", "user.name=t", "-c", "user.email=t@t"];
        all.extend_from_slice(args);
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(crate::run::workspace::git(dir, &all, &env))
            .unwrap_or_else(|e| panic!("git {args:?}: {e}"))
    }

    /// What `git ls-files` says, the way `run::integrity` asks it.
    fn git_says(dir: &Path) -> BTreeSet<String> {
        git(dir, &["ls-files", "-z", "--", "."])
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    }

    fn repo(with_long_path: bool) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("repo");
        std::fs::create_dir_all(&root).unwrap();
        git(&root, &["init", "-q"]);
        for path in [
            "a.txt",
            "sub/b.txt",
            "sub/deeper/c.txt",
            ".autocode/runs/r1/run.json",
            ".autocode/runs/r2/stages/x",
            "z/ü.txt",
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        git(&root, &["add", "-A"]);
        // A path past 0xfff bytes (the flags' length field saturates), longer than a file
        // system path may be: an index entry only.
        if !with_long_path {
            return (dir, root);
        }
        let blob = git(&root, &["hash-object", "-w", "a.txt"]);
        let long = format!("sub/{}", vec!["l".repeat(250); 17].join("/"));
        git(
            &root,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("100644,{},{long}", blob.trim()),
            ],
        );
        (dir, root)
    }

    #[test]
    fn every_index_version_reads_as_git_lists_it() {
        let (_dir, root) = repo(true);
        std::fs::write(root.join("intent.txt"), "y").unwrap();
        for version in ["2", "3", "4"] {
            git(&root, &["update-index", "--index-version", version]);
            if version == "3" {
                // An intent-to-add entry carries the extended flags.
                git(&root, &["add", "-N", "intent.txt"]);
            }
            for dir in [root.clone(), root.join("sub"), root.join(".autocode/runs")] {
                assert_eq!(
                    tracked_under(&dir),
                    Answer::Tracked(git_says(&dir)),
                    "version {version} in {}",
                    dir.display()
                );
            }
        }
        git(&root, &["commit", "-qm", "x"]);
        assert_eq!(tracked_under(&root), Answer::Tracked(git_says(&root)));
    }

    #[test]
    fn entries_carry_the_stat_data_flags_and_ids_git_stored() {
        use std::os::unix::fs::MetadataExt;
        let (_dir, root) = repo(false);
        std::fs::write(root.join("intent.txt"), "y").unwrap();
        git(&root, &["update-index", "--index-version", "3"]);
        git(&root, &["add", "-N", "intent.txt"]);
        let index = std::fs::read(root.join(".git/index")).unwrap();
        let all = entries(&index).unwrap();
        let sub = all.iter().find(|e| e.path == b"sub/b.txt").unwrap();
        let meta = std::fs::symlink_metadata(root.join("sub/b.txt")).unwrap();
        assert_eq!(
            (sub.mtime.sec, sub.mtime.nsec, sub.ino, sub.size, sub.mode),
            (
                meta.mtime() as u32,
                meta.mtime_nsec() as u32,
                meta.ino() as u32,
                meta.size() as u32,
                0o100644
            )
        );
        assert_eq!((sub.ctime.sec, sub.uid), (meta.ctime() as u32, meta.uid()));
        let blob = git(&root, &["rev-parse", ":sub/b.txt"]);
        let hex: String = sub.oid.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, blob.trim());
        let intent = all.iter().find(|e| e.path == b"intent.txt").unwrap();
        assert_ne!(intent.extended_flags & EXTENDED_INTENT_TO_ADD, 0);
        assert_eq!((intent.stage(), sub.extended_flags, sub.stage()), (0, 0, 0));
        git(&root, &["update-index", "--assume-unchanged", "a.txt"]);
        let index = std::fs::read(root.join(".git/index")).unwrap();
        let a = entries(&index)
            .unwrap()
            .into_iter()
            .find(|e| e.path == b"a.txt")
            .unwrap();
        assert_ne!(a.flags & FLAG_ASSUME_VALID, 0);
    }

    #[test]
    fn a_linked_worktree_reads_its_own_index() {
        let (_dir, root) = repo(false);
        git(&root, &["commit", "-qm", "x"]);
        let linked = root.parent().unwrap().join("linked");
        git(&root, &["worktree", "add", "-q", linked.to_str().unwrap()]);
        git(&linked, &["rm", "-q", "--cached", "a.txt"]);
        assert_eq!(tracked_under(&linked), Answer::Tracked(git_says(&linked)));
        assert!(matches!(tracked_under(&linked), Answer::Tracked(t) if !t.contains("a.txt")));
    }

    #[test]
    fn what_this_reader_does_not_take_asks_git() {
        let (_dir, root) = repo(true);
        git(&root, &["update-index", "--split-index"]);
        assert_eq!(tracked_under(&root), Answer::AskGit);
        git(&root, &["update-index", "--no-split-index"]);
        git(&root, &["config", "core.worktree", "/elsewhere"]);
        assert_eq!(tracked_under(&root), Answer::AskGit);
        let bare = root.parent().unwrap().join("bare.git");
        std::fs::create_dir_all(&bare).unwrap();
        git(&bare, &["init", "-q", "--bare"]);
        assert_eq!(tracked_under(&bare), Answer::AskGit);
    }

    #[test]
    fn a_fresh_repository_tracks_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        git(&root, &["init", "-q"]);
        assert_eq!(tracked_under(&root), Answer::Tracked(BTreeSet::new()));
    }

    #[test]
    fn damaged_indexes_ask_git() {
        let (_dir, root) = repo(true);
        let index = std::fs::read(root.join(".git/index")).unwrap();
        assert!(paths_with_prefix(&index, b"").is_some());
        for cut in [0, 4, 11, 40, 100, index.len() - 21] {
            assert_eq!(paths_with_prefix(&index[..cut], b""), None, "cut at {cut}");
        }
        let mut wrong = index.clone();
        wrong[8..12].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(paths_with_prefix(&wrong, b""), None);
    }

    #[test]
    fn varints_decode_as_git_writes_them() {
        assert_eq!(varint(&[0x00]), Some((0, 1)));
        assert_eq!(varint(&[0x7f]), Some((127, 1)));
        assert_eq!(varint(&[0x80, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x80, 0x7f]), Some((255, 2)));
        assert_eq!(varint(&[0x81, 0x00]), Some((256, 2)));
        assert_eq!(varint(&[0x80]), None);
    }
}
