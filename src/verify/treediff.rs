//! Which files of the base tree the builder changed, which of them are tests, and the diffs a
//! person or a reviewer is shown (a small line diff in unified form, no external tool). The base
//! tree is a git tree id read from the run's object store, compared with the work tree's
//! snapshot in time proportional to what changed ([`Comparison::of_trees`]); outside git it is
//! the closed copy saved in `<run>/base/` before any stage ran, walked beside the work tree
//! ([`Comparison::of_dirs`]). See `super::BaseSource`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::gittree::{ChangedEntry, GitStore, GitTreeError, Side, TreeId};

pub use super::testfiles::{TestMatcher, looks_like_test};
use super::{manifest, tamper, testfiles};

/// How a file differs between the base and the final tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

/// Directories never compared (version control, autocode, build outputs, caches).
const SKIPPED_DIRS: [&str; 10] = [
    ".git",
    ".autocode",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    ".pytest_cache",
    ".mypy_cache",
    ".tox",
    ".ruff_cache",
];

/// Regular files and symlinks under `root`, relative, sorted.
pub fn list_tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            // `.git` is a file in a worktree; `.autocode` is never the work.
            if name == ".git" || name == ".autocode" {
                continue;
            }
            if kind.is_dir() {
                if !SKIPPED_DIRS.contains(&name.as_str()) {
                    walk(root, &path, out);
                }
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn read_entry(path: &Path) -> Option<Vec<u8>> {
    let meta = fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path).ok()?;
        return Some(format!("symlink → {}\n", target.display()).into_bytes());
    }
    crate::bounded_read::read(path, crate::bounded_read::TREE_FILE_CAP).ok()
}

/// Whether two entries hold the same thing: the same symlink target, or regular files with the
/// same bytes (compared as streams, whatever their size). Anything else — a FIFO, a device, an
/// unreadable file — counts as different.
fn same_entry(a: &Path, b: &Path) -> bool {
    let (Ok(meta_a), Ok(meta_b)) = (fs::symlink_metadata(a), fs::symlink_metadata(b)) else {
        return false;
    };
    match (
        meta_a.file_type().is_symlink(),
        meta_b.file_type().is_symlink(),
    ) {
        (true, true) => {
            return fs::read_link(a)
                .ok()
                .is_some_and(|t| fs::read_link(b).ok() == Some(t));
        }
        (false, false) => {}
        _ => return false,
    }
    let (Ok(mut fa), Ok(mut fb)) = (
        crate::bounded_read::open_regular(a),
        crate::bounded_read::open_regular(b),
    ) else {
        return false;
    };
    if meta_a.len() != meta_b.len() {
        return false;
    }
    let mut buf_a = vec![0u8; 1 << 16];
    let mut buf_b = vec![0u8; 1 << 16];
    loop {
        let Ok(n) = std::io::Read::read(&mut fa, &mut buf_a) else {
            return false;
        };
        if n == 0 {
            // Same length, every byte so far equal: b must end here too.
            return matches!(std::io::Read::read(&mut fb, &mut buf_b[..1]), Ok(0));
        }
        if std::io::Read::read_exact(&mut fb, &mut buf_b[..n]).is_err() || buf_a[..n] != buf_b[..n]
        {
            return false;
        }
    }
}

/// Files that differ between `base` and `work`, sorted by path.
pub fn tree_changes(base: &Path, work: &Path) -> Vec<(String, Change)> {
    let base_files: BTreeSet<String> = list_tree(base).into_iter().collect();
    let work_files: BTreeSet<String> = list_tree(work).into_iter().collect();
    let mut out = Vec::new();
    for rel in base_files.union(&work_files) {
        let change = match (base_files.contains(rel), work_files.contains(rel)) {
            (true, false) => Some(Change::Deleted),
            (false, true) => Some(Change::Added),
            _ => (!same_entry(&base.join(rel), &work.join(rel))).then_some(Change::Modified),
        };
        if let Some(change) = change {
            out.push((rel.clone(), change));
        }
    }
    out
}

/// A unified diff of `rel` between the two trees (`--- a/rel` / `+++ b/rel`, 2 lines of context).
fn file_diff(base: &Path, work: &Path, rel: &str) -> String {
    let old = read_entry(&base.join(rel))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let new = read_entry(&work.join(rel))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    unified_diff(rel, &old, &new)
}

/// The work tree compared with the base tree: what changed, and the content of both sides for
/// the diffs.
#[derive(Debug, Clone)]
pub struct Comparison {
    changes: Vec<(String, Change)>,
    /// Every path of the base tree (what an added file may shadow).
    base_paths: Vec<String>,
    sides: Sides,
}

/// The test changes of a comparison (`Comparison::test_changes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestChanges {
    /// Test files of the base the work modified or deleted, and files it added or changed that
    /// change what the runners collect: restoring them (removing the added ones) puts the base
    /// tests back in front of the result's code.
    pub restorable: Vec<String>,
    /// Code files whose inline tests the work removed or altered: code and tests share the file,
    /// so the base tests cannot be put back alone, and a person reviews the change.
    pub inline: Vec<String>,
    /// Lines the work added that change the test framework's verdicts from inside the process
    /// that runs the tests (`verify::tamper`): no tree of files put back undoes them, and a
    /// person reviews the change.
    pub tampering: Vec<tamper::Tampering>,
}

impl TestChanges {
    pub fn is_empty(&self) -> bool {
        self.restorable.is_empty() && self.inline.is_empty() && self.tampering.is_empty()
    }

    /// Every path, restorable first, each once.
    pub fn all(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .restorable
            .iter()
            .chain(&self.inline)
            .cloned()
            .collect();
        for t in &self.tampering {
            if !all.contains(&t.path) {
                all.push(t.path.clone());
            }
        }
        all
    }
}

#[derive(Debug, Clone)]
enum Sides {
    /// Both trees on disk (outside git): read when a diff is asked for.
    Dirs { base: PathBuf, work: PathBuf },
    /// Read from the object store when compared: per changed path, the base and the work side.
    Loaded(BTreeMap<String, BothSides>),
}

/// The content of a changed path in the base and in the work tree (`None`: absent, or not read:
/// past the size cap).
type BothSides = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Whether a path lies in a directory never compared ([`SKIPPED_DIRS`]).
fn in_skipped_dir(rel: &str) -> bool {
    let dirs: Vec<&str> = rel.split('/').collect();
    dirs[..dirs.len().saturating_sub(1)]
        .iter()
        .any(|d| SKIPPED_DIRS.contains(d))
}

impl Comparison {
    /// The base copy `base` walked beside the work tree `work` (outside git, older runs).
    pub fn of_dirs(base: &Path, work: &Path) -> Comparison {
        Comparison {
            changes: tree_changes(base, work),
            base_paths: list_tree(base),
            sides: Sides::Dirs {
                base: base.to_owned(),
                work: work.to_owned(),
            },
        }
    }

    /// The base tree `base` against the work tree's snapshot `now`, both read from `store`:
    /// one `diff-tree` and two `cat-file` batches for the changed blobs (each up to the cap a
    /// file read from disk has, 64 MiB in all: past that a side reads as empty, as a file over
    /// the cap always did).
    pub async fn of_trees(
        store: &GitStore,
        base: &TreeId,
        now: &TreeId,
    ) -> Result<Comparison, GitTreeError> {
        let entries: Vec<ChangedEntry> = store
            .diff_entries(base, now)
            .await?
            .into_iter()
            .filter(|e| !in_skipped_dir(&e.path))
            .collect();
        let objects: Vec<String> = entries
            .iter()
            .flat_map(|e| [&e.old, &e.new])
            .flatten()
            .filter(|s| !s.is_gitlink())
            .map(|s| s.object.clone())
            .collect();
        let blobs = store
            .read_blobs(&objects, crate::bounded_read::TREE_FILE_CAP)
            .await?;
        let content = |side: &Option<Side>| -> Option<Vec<u8>> {
            let side = side.as_ref()?;
            if side.is_gitlink() {
                return Some(format!("submodule → {}\n", side.object).into_bytes());
            }
            let bytes = blobs.get(&side.object)?;
            Some(if side.is_symlink() {
                format!("symlink → {}\n", String::from_utf8_lossy(bytes)).into_bytes()
            } else {
                bytes.clone()
            })
        };
        let mut changes = Vec::with_capacity(entries.len());
        let mut loaded = BTreeMap::new();
        for e in &entries {
            let change = match (&e.old, &e.new) {
                (None, _) => Change::Added,
                (_, None) => Change::Deleted,
                _ => Change::Modified,
            };
            changes.push((e.path.clone(), change));
            loaded.insert(e.path.clone(), (content(&e.old), content(&e.new)));
        }
        let base_paths = store
            .entries(base)
            .await?
            .into_iter()
            .map(|e| e.path)
            .filter(|p| !in_skipped_dir(p))
            .collect();
        Ok(Comparison {
            changes,
            base_paths,
            sides: Sides::Loaded(loaded),
        })
    }

    /// Files that differ between the base and the work tree, sorted by path.
    pub fn changes(&self) -> &[(String, Change)] {
        &self.changes
    }

    /// Base files the builder modified or deleted that look like tests.
    pub fn changed_tests(&self, checks: &[String]) -> Vec<String> {
        self.test_changes(checks).restorable
    }

    /// What the work changed of the tests the runners collect (`verify::testfiles`): base tests
    /// modified or deleted, added files shadowing a base test module, added or changed files that
    /// configure collection, code files whose inline tests lost or changed a test, and added
    /// lines that change the test framework (`verify::tamper`).
    pub fn test_changes(&self, checks: &[String]) -> TestChanges {
        let matcher = TestMatcher::new(checks);
        let mut out = TestChanges::default();
        for (rel, change) in &self.changes {
            let configures = testfiles::configures_tests(rel, checks);
            if *change != Change::Deleted && tamper::reads(rel) {
                // `conftest.py` and the like configure the tests: the tests' side too.
                let test_side = matcher.is_test(rel) || configures;
                let (old, new) = self.texts(rel);
                let old = (*change == Change::Modified).then_some(old.as_str());
                out.tampering
                    .extend(tamper::find(rel, old, &new, test_side));
            }
            let restorable = (configures && self.manifest_changes_tests(rel, *change, checks))
                || match change {
                    Change::Added => testfiles::shadows_tests(rel, &self.base_paths, &matcher),
                    Change::Modified | Change::Deleted => {
                        matcher.is_test(rel) && !self.is_code_with_doctests(rel)
                    }
                };
            if restorable {
                out.restorable.push(rel.clone());
            } else if *change != Change::Added && super::inline::may_hold_tests(rel) {
                let (old, new) = self.texts(rel);
                if super::inline::tests_beside_code_changed(rel, &old, &new) {
                    out.inline.push(rel.clone());
                }
            }
        }
        out
    }

    /// Whether `rel`, a test only because a check names it, is a Python module whose tests are
    /// its doctests (`inline::python_code_with_doctests`): judged as tests beside code, and
    /// taken back by the witness as code (`inline::base_code_with_result_tests`).
    pub fn is_code_with_doctests(&self, rel: &str) -> bool {
        if !rel.ends_with(".py") || testfiles::test_by_layout(rel) {
            return false;
        }
        let (old, new) = self.texts(rel);
        super::inline::python_code_with_doctests(&old, &new)
    }

    /// Whether a file that configures test collection, changed, added or deleted, changes how
    /// the tests run: a manifest whose change is only the project's dependencies or description
    /// does not (`verify::manifest`, told when the base has no such file); any other such file
    /// does.
    fn manifest_changes_tests(&self, rel: &str, change: Change, checks: &[String]) -> bool {
        let (old, new) = self.texts(rel);
        let old = (change != Change::Added).then_some(old.as_str());
        manifest::changes_tests(rel, old, &new, checks)
    }

    /// The text of `rel` in the base and in the work tree (empty when absent).
    fn texts(&self, rel: &str) -> (String, String) {
        let lossy = |b: Option<Vec<u8>>| {
            b.map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        };
        match &self.sides {
            Sides::Dirs { base, work } => (
                lossy(read_entry(&base.join(rel))),
                lossy(read_entry(&work.join(rel))),
            ),
            Sides::Loaded(loaded) => loaded
                .get(rel)
                .map(|(old, new)| (lossy(old.clone()), lossy(new.clone())))
                .unwrap_or_default(),
        }
    }

    /// A unified diff of `rel` between the two trees.
    pub fn file_diff(&self, rel: &str) -> String {
        match &self.sides {
            Sides::Dirs { base, work } => file_diff(base, work, rel),
            Sides::Loaded(loaded) => {
                let text = |b: &Option<Vec<u8>>| {
                    b.as_deref()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                        .unwrap_or_default()
                };
                let (old, new) = loaded
                    .get(rel)
                    .map(|(old, new)| (text(old), text(new)))
                    .unwrap_or_default();
                unified_diff(rel, &old, &new)
            }
        }
    }

    /// The diff of `files` between the trees, cut at `max` characters.
    pub fn diff_of(&self, files: &[String], max: usize) -> String {
        let mut out = String::new();
        for rel in files {
            out.push_str(&self.file_diff(rel));
        }
        cut(&out, max)
    }
}

/// `text` cut at about `max` characters (on a character boundary), saying so.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… (cut: {} more characters)\n",
        &text[..end],
        text.len() - end
    )
}

/// A line diff in unified form. Files past a few thousand lines are summarised.
pub fn unified_diff(rel: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut out = format!("--- a/{rel}\n+++ b/{rel}\n");
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        out.push_str(&format!(
            "@@ changed: {} lines → {} lines (too large to diff here) @@\n",
            a.len(),
            b.len()
        ));
        return out;
    }
    // Longest common subsequence table, from the end.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The edit script: (' ' | '-' | '+', line).
    let mut script: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            script.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            script.push(('-', a[i]));
            i += 1;
        } else {
            script.push(('+', b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 2;
    let changed: Vec<usize> = script
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| *k != ' ')
        .map(|(i, _)| i)
        .collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(script.len());
        let old_start = script[..start].iter().filter(|(k, _)| *k != '+').count() + 1;
        let new_start = script[..start].iter().filter(|(k, _)| *k != '-').count() + 1;
        let old_len = script[start..end].iter().filter(|(k, _)| *k != '+').count();
        let new_len = script[start..end].iter().filter(|(k, _)| *k != '-').count();
        out.push_str(&format!(
            "@@ -{old_start},{old_len} +{new_start},{new_len} @@\n"
        ));
        for (kind, line) in &script[start..end] {
            out.push(*kind);
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The changed files that bear on a criterion: those its text or check names (by path or file
/// name), or every changed file when it names none.
pub fn files_bearing_on(
    changes: &[(String, Change)],
    text: &str,
    check: Option<&str>,
) -> Vec<String> {
    let haystack = format!("{text} {}", check.unwrap_or_default());
    let named: Vec<String> = changes
        .iter()
        .filter(|(rel, _)| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
            haystack.contains(rel.as_str())
                || haystack.contains(name)
                || (stem.len() > 2 && haystack.contains(stem))
        })
        .map(|(rel, _)| rel.clone())
        .collect();
    if named.is_empty() {
        changes.iter().map(|(rel, _)| rel.clone()).collect()
    } else {
        named
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_compare_by_content_at_any_size_and_fifos_differ() {
        let dir = tempfile::tempdir().unwrap();
        let p = |name: &str| dir.path().join(name);
        let big = vec![7u8; (1 << 16) * 3 + 5];
        fs::write(p("a"), &big).unwrap();
        fs::write(p("b"), &big).unwrap();
        assert!(same_entry(&p("a"), &p("b")));
        let mut other = big.clone();
        *other.last_mut().unwrap() = 8;
        fs::write(p("c"), &other).unwrap();
        assert!(!same_entry(&p("a"), &p("c")));
        nix::unistd::mkfifo(&p("f"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        nix::unistd::mkfifo(&p("g"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(
            !same_entry(&p("f"), &p("g")),
            "a FIFO is never the same (and never hangs)"
        );
        std::os::unix::fs::symlink("a", p("l1")).unwrap();
        std::os::unix::fs::symlink("a", p("l2")).unwrap();
        assert!(same_entry(&p("l1"), &p("l2")));
        assert!(!same_entry(&p("l1"), &p("a")));
    }

    #[test]
    fn diffs_show_the_change_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\n";
        let diff = unified_diff("x.txt", old, new);
        assert!(diff.starts_with("--- a/x.txt\n+++ b/x.txt\n"), "{diff}");
        assert!(diff.contains("-d\n+D\n"), "{diff}");
        assert!(diff.contains("+h\n"), "{diff}");
        assert!(unified_diff("x", "same\n", "same\n").is_empty());
        let deleted = unified_diff("t.py", "x = 1\n", "");
        assert!(deleted.contains("@@ -1,1 +1,0 @@\n-x = 1\n"), "{deleted}");
    }

    #[test]
    fn tree_changes_and_changed_tests() {
        let base = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        fs::write(base.path().join("test_a.py"), "assert f() == 1\n").unwrap();
        fs::write(base.path().join("a.py"), "def f(): raise\n").unwrap();
        fs::write(base.path().join("test_gone.py"), "x\n").unwrap();
        fs::write(work.path().join("test_a.py"), "pass\n").unwrap();
        fs::write(work.path().join("a.py"), "def f(): return 1\n").unwrap();
        fs::write(work.path().join("test_new.py"), "y\n").unwrap();
        fs::write(work.path().join(".git"), "gitdir: /elsewhere\n").unwrap();
        fs::create_dir(work.path().join(".autocode")).unwrap();
        fs::write(work.path().join(".autocode/x"), "x").unwrap();
        let changes = tree_changes(base.path(), work.path());
        assert_eq!(
            changes,
            vec![
                ("a.py".to_owned(), Change::Modified),
                ("test_a.py".to_owned(), Change::Modified),
                ("test_gone.py".to_owned(), Change::Deleted),
                ("test_new.py".to_owned(), Change::Added),
            ]
        );
        assert_eq!(
            Comparison::of_dirs(base.path(), work.path()).changed_tests(&[]),
            ["test_a.py", "test_gone.py"]
        );
        assert_eq!(
            files_bearing_on(&changes, "f works in a.py", None),
            ["a.py"]
        );
    }

    /// Test changes by what the runners collect: an added package shadowing a test module, an
    /// added conftest, node's default patterns, gutted inline Rust tests; an added plain test
    /// file and honest inline additions are not changes.
    #[test]
    fn test_changes_follow_what_the_runners_collect() {
        let base = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let both = |rel: &str, old: &str, new: &str| {
            for (root, text) in [(base.path(), old), (work.path(), new)] {
                let path = root.join(rel);
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(path, text).unwrap();
            }
        };
        let added = |rel: &str, text: &str| {
            let path = work.path().join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        both("test_stats.py", "assert 1\n", "assert 1\n");
        both("stats.py", "x = 1\n", "x = 2\n");
        both("test-slug.mjs", "assert(slug())\n", "\n");
        both(
            "src/lib.rs",
            "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { super::f(); }\n}\n",
            "pub fn f() {}\n#[cfg(test)]\nmod tests {}\n",
        );
        both(
            "src/more.rs",
            "pub fn g() {}\n#[test]\nfn g_runs() { g(); }\n",
            "pub fn g() { }\n#[test]\nfn g_runs() { g(); }\n#[test]\nfn g_again() { g(); }\n",
        );
        added("test_stats/__init__.py", "");
        added("sub/conftest.py", "collect_ignore = ['x']\n");
        added("test_median.py", "assert 2\n");
        let compared = Comparison::of_dirs(base.path(), work.path());
        let changes = compared.test_changes(&["python3 -m unittest test_stats".to_owned()]);
        assert_eq!(
            changes.restorable,
            ["sub/conftest.py", "test-slug.mjs", "test_stats/__init__.py"]
        );
        assert_eq!(changes.inline, ["src/lib.rs"]);
        assert!(changes.tampering.is_empty());
        assert_eq!(changes.all().len(), 4);

        // Lines that change the test framework's verdicts, in code or in a new test module,
        // are test changes too; a conftest skipping tests is the tests' own business.
        both(
            "stats.py",
            "x = 1\n",
            "import unittest\nunittest.TestCase.assertEqual = print\n",
        );
        added(
            "test_zz.py",
            "import unittest as u\nu.TestCase.assertTrue = print\n",
        );
        added(
            "conftest.py",
            "import pytest\npytest.skip('slow', allow_module_level=True)\n",
        );
        let compared = Comparison::of_dirs(base.path(), work.path());
        let changes = compared.test_changes(&["python3 -m unittest test_stats".to_owned()]);
        let found: Vec<(String, usize)> = changes
            .tampering
            .iter()
            .map(|t| (t.path.clone(), t.line))
            .collect();
        assert_eq!(found, [("stats.py".into(), 2), ("test_zz.py".into(), 2)]);
        assert!(changes.all().contains(&"stats.py".to_owned()));
        both("stats.py", "x = 1\n", "x = 2\n");
        for gone in ["test_zz.py", "conftest.py"] {
            fs::remove_file(work.path().join(gone)).unwrap();
        }

        // A manifest's change is a test change by what changed in it: a dependency from the
        // registry is not (`npm install --save`), the script `npm test` runs is; a package.json
        // added where the base had none is when its test script cannot fail.
        let npm = ["npm test".to_owned()];
        let before = r#"{"name": "a", "scripts": {"test": "node --test"}}"#;
        both(
            "app/package.json",
            before,
            r#"{"name": "a", "scripts": {"test": "node --test"}, "dependencies": {"is-number": "^7.0.0"}}"#,
        );
        both(
            "lib/package.json",
            before,
            r#"{"name": "a", "scripts": {"test": "node --test test/one.test.js"}}"#,
        );
        added("new/package.json", before);
        added("vacuous/package.json", r#"{"scripts": {"test": "exit 0"}}"#);
        let changes = Comparison::of_dirs(base.path(), work.path()).test_changes(&npm);
        assert!(!changes.restorable.contains(&"app/package.json".to_owned()));
        assert!(changes.restorable.contains(&"lib/package.json".to_owned()));
        assert!(!changes.restorable.contains(&"new/package.json".to_owned()));
        assert!(
            changes
                .restorable
                .contains(&"vacuous/package.json".to_owned())
        );

        // A module a check runs the doctests of is code: an example added beside the others is
        // no test change, an altered one is a change of tests beside code; a check-named file
        // holding test functions is put back as a test file.
        let doc = ["python3 -m pytest --doctest-modules textkit.py checks_calc.py".to_owned()];
        let module = "def shout(s):\n    \"\"\"\n    >>> shout('a')\n    'A'\n    \"\"\"\n    return s.upper()\n";
        both(
            "textkit.py",
            module,
            &format!(
                "{module}\n\ndef low(s):\n    \"\"\"\n    >>> low('A')\n    'a'\n    \"\"\"\n    return s.lower()\n"
            ),
        );
        both(
            "checks_calc.py",
            "def test_a():\n    assert 1\n",
            "def test_a():\n    assert 1\n\n\ndef test_b():\n    assert 2\n",
        );
        let changes = Comparison::of_dirs(base.path(), work.path()).test_changes(&doc);
        assert!(!changes.all().contains(&"textkit.py".to_owned()));
        assert!(changes.restorable.contains(&"checks_calc.py".to_owned()));
        both("textkit.py", module, &module.replace("'A'", "'B'"));
        let changes = Comparison::of_dirs(base.path(), work.path()).test_changes(&doc);
        assert!(changes.inline.contains(&"textkit.py".to_owned()));
        assert!(!changes.restorable.contains(&"textkit.py".to_owned()));
    }

    /// The base read from git: a changed test is found, its diff shown, a symlink shown by its
    /// target, an added file is not a changed test, and build outputs are not compared.
    #[tokio::test]
    async fn the_base_tree_is_compared_from_git() {
        let env: std::collections::BTreeMap<String, String> = ["PATH", "HOME"]
            .into_iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_owned(), v)))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("tests")).unwrap();
        crate::run::workspace::git(&ws, &["init", "-q"], &env)
            .await
            .expect("git init");
        fs::write(ws.join("tests/test_a.py"), "assert f() == 1\nassert g()\n").unwrap();
        fs::write(ws.join("a.py"), "def f(): raise\n").unwrap();
        std::os::unix::fs::symlink("a.py", ws.join("alias.py")).unwrap();
        let store = GitStore::open(&dir.path().join("git"), &ws, &env)
            .await
            .unwrap()
            .unwrap();
        let index = dir.path().join("wt.index");
        let base = store.write_tree(&ws, &index).await.unwrap();
        fs::write(ws.join("tests/test_a.py"), "assert f() == 1\n").unwrap();
        fs::write(ws.join("a.py"), "def f(): return 1\n").unwrap();
        fs::write(ws.join("tests/test_new.py"), "assert f()\n").unwrap();
        fs::remove_file(ws.join("alias.py")).unwrap();
        std::os::unix::fs::symlink("tests/test_a.py", ws.join("alias.py")).unwrap();
        fs::create_dir_all(ws.join("target")).unwrap();
        fs::write(ws.join("target/out.bin"), "built").unwrap();
        let now = store.write_tree(&ws, &index).await.unwrap();
        let compared = Comparison::of_trees(&store, &base, &now).await.unwrap();
        assert_eq!(
            compared.changes(),
            [
                ("a.py".to_owned(), Change::Modified),
                ("alias.py".to_owned(), Change::Modified),
                ("tests/test_a.py".to_owned(), Change::Modified),
                ("tests/test_new.py".to_owned(), Change::Added),
            ]
        );
        assert_eq!(compared.changed_tests(&[]), ["tests/test_a.py"]);
        let diff = compared.diff_of(&compared.changed_tests(&[]), 20_000);
        assert!(
            diff.starts_with("--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"),
            "{diff}"
        );
        assert!(diff.contains(" assert f() == 1\n-assert g()\n"), "{diff}");
        let link = compared.diff_of(&["alias.py".to_owned()], 20_000);
        assert!(
            link.contains("-symlink → a.py\n+symlink → tests/test_a.py\n"),
            "{link}"
        );
        // The same comparison from the two trees on disk reads the same.
        let walked = dir.path().join("base");
        store
            .checkout(&base, &walked, &dir.path().join("base.index"))
            .await
            .unwrap();
        let from_dirs = Comparison::of_dirs(&walked, &ws);
        assert_eq!(from_dirs.changes(), compared.changes());
        assert_eq!(
            from_dirs.diff_of(&["a.py".to_owned()], 100),
            compared.diff_of(&["a.py".to_owned()], 100)
        );
        assert!(
            Comparison::of_trees(&store, &now, &now)
                .await
                .unwrap()
                .changes()
                .is_empty()
        );
    }
}
