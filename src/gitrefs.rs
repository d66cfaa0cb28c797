//! A plain repository's layout and refs, read in place instead of by starting git (issue 29:
//! a git process per question was most of the orchestrator's processes): where the repository
//! of a work tree is (`git rev-parse --show-toplevel`, `--git-common-dir`, `--git-path index`),
//! the commit `HEAD` names (`git rev-parse -q --verify HEAD^{commit}`), and the repository's
//! tags (`git for-each-ref refs/tags/`).
//!
//! Only the plain case is read, as [`crate::gitindex`] reads it: a `.git` directory, or a `.git`
//! file naming a git directory (a linked worktree), found from the directory or an ancestor, with
//! a config that names no other work tree, object format, ref storage or include; both owned by
//! this user (git's `safe.directory` rule); no variable in the environment that changes how git
//! finds a repository (`GIT_DIR`, `GIT_CEILING_DIRECTORIES`, …). Refs are loose files (the
//! per-worktree ones in the worktree's own git directory) over `packed-refs`, as git's files
//! backend keeps them (`Documentation/gitrepository-layout.txt`). Anything else, or anything that
//! does not parse exactly, answers `None`, and the caller runs git as before.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::gitindex::OID_LEN;

/// Where a work tree's repository is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The top of the work tree (canonical).
    pub top: PathBuf,
    /// The work tree's own git directory (a linked worktree's `.git/worktrees/<name>`).
    pub git_dir: PathBuf,
    /// The repository's common directory (objects, shared refs, `packed-refs`).
    pub common_dir: PathBuf,
}

impl Layout {
    /// The work tree's index file (`git rev-parse --git-path index`).
    pub fn index(&self) -> PathBuf {
        self.git_dir.join("index")
    }
}

/// How deep symbolic refs are followed (git's `SYMREF_MAXDEPTH`).
const SYMREF_DEPTH: usize = 5;

/// Whether git, started with `env`, could find another repository or read other refs than
/// the plain search does (a variable that names a directory, a namespace, or config).
fn env_is_plain(env: &BTreeMap<String, String>) -> bool {
    const REDIRECTING: [&str; 11] = [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "GIT_INDEX_FILE",
        "GIT_NAMESPACE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_DEFAULT_REF_FORMAT",
    ];
    !env.keys().any(|key| {
        REDIRECTING.contains(&key.as_str())
            || key.starts_with("GIT_CONFIG")
            || key.starts_with("GIT_TEST_")
            || key.starts_with("GIT_REF")
    })
}

/// The repository of `dir` (the directory or an ancestor holds its `.git`), read in place.
/// `None`: not a plain case; ask git.
pub fn layout(dir: &Path, env: &BTreeMap<String, String>) -> Option<Layout> {
    if !env_is_plain(env) {
        return None;
    }
    let dir = std::fs::canonicalize(dir).ok()?;
    let (top, git_dir) = crate::gitindex::discover(&dir)?;
    if !crate::gitindex::config_is_plain(&git_dir) {
        return None;
    }
    let git_dir = std::fs::canonicalize(git_dir).ok()?;
    let common_dir = match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => {
            std::fs::canonicalize(git_dir.join(text.trim_end_matches(['\n', '\r']))).ok()?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => git_dir.clone(),
        Err(_) => return None,
    };
    // git refuses a repository another user owns (`safe.directory`): so does this reader.
    let me = nix::unistd::geteuid().as_raw();
    for path in [&top, &git_dir, &common_dir] {
        if std::fs::metadata(path).ok()?.uid() != me {
            return None;
        }
    }
    // A bare or unusual HEAD is git's to read.
    git_dir.join("HEAD").is_file().then_some(Layout {
        top,
        git_dir,
        common_dir,
    })
}

/// A 40-digit lowercase hex object id, trimmed of one trailing newline.
fn oid(text: &[u8]) -> Option<String> {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    (text.len() == OID_LEN * 2
        && text
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)))
    .then(|| String::from_utf8_lossy(text).into_owned())
}

/// A ref name git would accept (`check-ref-format`, conservatively: anything unusual is git's).
fn name_is_plain(name: &str) -> bool {
    name.starts_with("refs/")
        && name.split('/').all(|part| {
            !part.is_empty()
                && !part.starts_with('.')
                && !part.ends_with(".lock")
                && !part.contains("..")
                && !part.contains("@{")
                && part
                    .bytes()
                    .all(|b| b > 0x20 && b != 0x7f && !b" ~^:?*[\\".contains(&b))
        })
        && !name.ends_with('.')
}

/// What a ref file says: an object id, or another ref.
enum RefValue {
    Oid(String),
    Symbolic(String),
}

fn parse_ref_file(bytes: &[u8]) -> Option<RefValue> {
    if let Some(target) = bytes.strip_prefix(b"ref: ") {
        let target = std::str::from_utf8(target.strip_suffix(b"\n").unwrap_or(target)).ok()?;
        return (target == "HEAD" || name_is_plain(target))
            .then(|| RefValue::Symbolic(target.to_owned()));
    }
    oid(bytes).map(RefValue::Oid)
}

/// `packed-refs`: each ref name and its object id (peeled lines skipped). `None`: a line this
/// reader does not take.
fn packed_refs(common_dir: &Path) -> Option<HashMap<String, String>> {
    let bytes = match std::fs::read(common_dir.join("packed-refs")) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(HashMap::new()),
        Err(_) => return None,
    };
    let mut refs = HashMap::new();
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if line.starts_with(b"#") || line.starts_with(b"^") {
            continue;
        }
        let space = line.iter().position(|b| *b == b' ')?;
        let id = oid(&line[..space])?;
        let name = std::str::from_utf8(&line[space + 1..]).ok()?;
        if !name_is_plain(name) {
            return None;
        }
        refs.insert(name.to_owned(), id);
    }
    Some(refs)
}

/// Whether `name` lives in each worktree's own git directory rather than the common one.
fn per_worktree(name: &str) -> bool {
    !name.contains('/')
        || ["refs/worktree/", "refs/bisect/", "refs/rewritten/"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// The object `name` resolves to: `Some(None)` when it does not exist (an unborn branch);
/// `None` when this reader cannot tell.
fn resolve(layout: &Layout, name: &str) -> Option<Option<String>> {
    let mut name = name.to_owned();
    let mut packed: Option<HashMap<String, String>> = None;
    for _ in 0..SYMREF_DEPTH {
        let dir = if per_worktree(&name) {
            &layout.git_dir
        } else {
            &layout.common_dir
        };
        let value = match std::fs::read(dir.join(&name)) {
            Ok(bytes) => Some(parse_ref_file(&bytes)?),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound) => None,
            // A directory where a ref would be: no such ref (a loose ref `refs/heads/a/b` makes
            // `refs/heads/a` a directory).
            Err(_) if dir.join(&name).is_dir() => None,
            Err(_) => return None,
        };
        match value {
            Some(RefValue::Oid(id)) => return Some(Some(id)),
            Some(RefValue::Symbolic(target)) => name = target,
            None if per_worktree(&name) && !name.starts_with("refs/") => return Some(None),
            None => {
                if packed.is_none() {
                    packed = Some(packed_refs(&layout.common_dir)?);
                }
                return Some(packed.as_ref()?.get(&name).cloned());
            }
        }
    }
    None
}

/// The commit `HEAD` names: `Some(None)` on an unborn branch; `None` when git must be asked.
/// (`HEAD` holds a commit: git refuses to point it at anything else.)
pub fn head(layout: &Layout) -> Option<Option<String>> {
    resolve(layout, "HEAD")
}

/// The commit the short branch name `name` names as git reads it in a revision
/// (`refs/heads/<name>`), when nothing git would read first shadows it (`$GIT_DIR/<name>`,
/// `refs/<name>`, `refs/tags/<name>`). `None`: no such branch, or git must be asked.
pub fn branch(layout: &Layout, name: &str) -> Option<String> {
    let full = format!("refs/heads/{name}");
    if !name_is_plain(&full) || layout.git_dir.join(name).exists() {
        return None;
    }
    for shadow in [format!("refs/{name}"), format!("refs/tags/{name}")] {
        if resolve(layout, &shadow)?.is_some() {
            return None;
        }
    }
    resolve(layout, &full)?
}

/// Whether the repository changes what commits say (replace refs, grafts, a shallow boundary):
/// `None` when this reader cannot tell. A history walk in process is git's only without them.
pub fn history_is_rewritten(layout: &Layout) -> Option<bool> {
    let common = &layout.common_dir;
    if common.join("shallow").exists() || common.join("info/grafts").exists() {
        return Some(true);
    }
    match std::fs::read_dir(common.join("refs/replace")) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Some(true);
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    Some(
        packed_refs(common)?
            .keys()
            .any(|name| name.starts_with("refs/replace/")),
    )
}

/// The repository's tags as `git for-each-ref --format='%(objectname) %(refname)' refs/tags/`
/// prints them: `<object> refs/tags/<name>` lines in ref name order, loose refs over packed
/// ones. `None`: git must be asked (a symbolic tag, a name or file this reader does not take).
pub fn tags(layout: &Layout) -> Option<Vec<u8>> {
    let mut tags: BTreeMap<String, String> = packed_refs(&layout.common_dir)?
        .into_iter()
        .filter(|(name, _)| name.starts_with("refs/tags/"))
        .collect();
    let mut pending = vec![layout.common_dir.join("refs/tags")];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        for entry in entries {
            let entry = entry.ok()?;
            let kind = entry.file_type().ok()?;
            if kind.is_dir() {
                pending.push(entry.path());
                continue;
            }
            let path = entry.path();
            let name = path
                .strip_prefix(&layout.common_dir)
                .ok()?
                .to_str()?
                .to_owned();
            if !kind.is_file() || !name_is_plain(&name) {
                return None;
            }
            match parse_ref_file(&std::fs::read(&path).ok()?)? {
                RefValue::Oid(id) => tags.insert(name, id),
                RefValue::Symbolic(_) => return None,
            };
        }
    }
    let mut out = Vec::new();
    for (name, id) in tags {
        out.extend_from_slice(format!("{id} {name}\n").as_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        crate::run::workspace::git_test_env()
    }

    async fn git(dir: &Path, args: &[&str]) -> String {
        let mut all = vec!["-c", "user.name=t", "-c", "user.email=t@t"];
        all.extend_from_slice(args);
        crate::run::workspace::git(dir, &all, &env())
            .await
            .unwrap_or_else(|e| panic!("git {args:?}: {e}"))
    }

    /// What this reader says against what git says, in the main work tree and a linked one.
    async fn agrees(top: &Path, linked: &Path) {
        for dir in [top, linked] {
            let layout = layout(dir, &env()).expect("a plain case");
            let git_says = git(
                dir,
                &[
                    "rev-parse",
                    "--path-format=absolute",
                    "--show-toplevel",
                    "--git-common-dir",
                    "--git-path",
                    "index",
                ],
            )
            .await;
            let lines: Vec<PathBuf> = git_says
                .lines()
                .map(|l| std::fs::canonicalize(l).unwrap_or_else(|_| PathBuf::from(l)))
                .collect();
            assert_eq!(lines[0], layout.top);
            assert_eq!(lines[1], layout.common_dir);
            let index = layout.index();
            assert_eq!(
                std::fs::canonicalize(index.parent().unwrap()).unwrap(),
                std::fs::canonicalize(lines[2].parent().unwrap()).unwrap()
            );
            let head = crate::run::workspace::git(
                dir,
                &["rev-parse", "-q", "--verify", "HEAD^{commit}"],
                &env(),
            )
            .await
            .ok()
            .map(|s| s.trim().to_owned());
            assert_eq!(super::head(&layout), Some(head), "HEAD in {dir:?}");
            let tags = git(
                dir,
                &[
                    "for-each-ref",
                    "--format=%(objectname) %(refname)",
                    "refs/tags/",
                ],
            )
            .await;
            assert_eq!(
                String::from_utf8(super::tags(&layout).unwrap()).unwrap(),
                tags
            );
        }
    }

    #[tokio::test]
    async fn layout_head_and_tags_are_what_git_says() {
        let dir = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(dir.path()).unwrap().join("repo");
        std::fs::create_dir_all(top.join("sub")).unwrap();
        git(&top, &["init", "-q", "-b", "main"]).await;
        let linked = top.join(".autocode/worktrees/w");
        // Unborn: no HEAD commit.
        assert_eq!(head(&layout(&top, &env()).unwrap()), Some(None));
        std::fs::write(top.join("sub/a.txt"), "a").unwrap();
        git(&top, &["add", "-A"]).await;
        git(&top, &["commit", "-qm", "one"]).await;
        git(&top, &["tag", "v1"]).await;
        git(&top, &["tag", "-a", "-m", "annotated", "v2"]).await;
        git(&top, &["tag", "nested/v3"]).await;
        git(
            &top,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "side",
                linked.to_str().unwrap(),
            ],
        )
        .await;
        agrees(&top, &linked).await;
        // Packed refs, then a loose tag over a packed one, a commit on the linked worktree's
        // branch, and a detached HEAD.
        git(&top, &["pack-refs", "--all"]).await;
        std::fs::write(linked.join("b.txt"), "b").unwrap();
        git(&linked, &["add", "-A"]).await;
        git(&linked, &["commit", "-qm", "two"]).await;
        git(&top, &["tag", "-f", "v1", "side"]).await;
        git(&top, &["tag", "a-after-pack"]).await;
        agrees(&top, &linked).await;
        git(&top, &["checkout", "-q", "--detach", "HEAD"]).await;
        agrees(&top, &linked).await;
        // From a subdirectory, the same repository.
        assert_eq!(layout(&top.join("sub"), &env()).unwrap().top, top);
        // What the reader leaves to git.
        let mut redirected = env();
        redirected.insert("GIT_DIR".into(), "/elsewhere".into());
        assert!(layout(&top, &redirected).is_none());
        std::fs::write(top.join(".git/refs/tags/sym"), "ref: refs/tags/v1\n").unwrap();
        assert!(tags(&layout(&top, &env()).unwrap()).is_none());
        assert!(layout(dir.path(), &env()).is_none(), "not a repository");
    }
}
