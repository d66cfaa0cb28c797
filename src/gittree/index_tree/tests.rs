//! The in-process tree against `git write-tree` on the same index, through changes that leave
//! the cache tree whole, partly invalidated or absent, and over packed objects.

use super::*;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::run::workspace::git_as_is;

struct Repo {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    index: PathBuf,
}

/// `git args…` in `dir` with only `env` and the tests' identity, through the boundary (as
/// autocode runs every process): whether it exited 0, its stdout and its stderr.
fn run_git(dir: &Path, env: &BTreeMap<String, String>, args: &[&str]) -> (bool, String, String) {
    let mut argv: Vec<&str> = vec![
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@x",
        "-c",
        "gc.auto=0",
    ];
    argv.extend([
        "-c",
        "advice.addEmbeddedRepo=false",
        "-c",
        "core.fsmonitor=false",
    ]);
    argv.extend(args);
    let out = git_as_is(dir, &argv, env);
    (out.success, out.stdout, out.stderr)
}

/// The environment these tests run git with: `PATH`, a `HOME` of their own, no system config,
/// and `index` as the index file when there is one.
fn git_env(home: &Path, index: Option<&Path>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".to_owned(), home.display().to_string()),
        ("GIT_CONFIG_NOSYSTEM".to_owned(), "1".to_owned()),
    ]);
    if let Some(index) = index {
        env.insert("GIT_INDEX_FILE".to_owned(), index.display().to_string());
    }
    env
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(dir.path()).unwrap().join("ws");
        fs::create_dir_all(&ws).unwrap();
        let index = ws.parent().unwrap().join("private.index");
        let repo = Repo {
            _dir: dir,
            ws,
            index,
        };
        repo.git(&["init", "-q"]);
        repo
    }

    /// `git args…` in the work tree with the private index; it must succeed.
    fn git(&self, args: &[&str]) -> String {
        let env = git_env(self.ws.parent().unwrap(), Some(&self.index));
        let (ok, stdout, stderr) = run_git(&self.ws, &env, args);
        assert!(ok, "git {args:?}: {stderr}");
        stdout
    }

    fn odb(&self) -> Odb {
        Odb::open(&self.ws.join(".git"))
    }

    /// The tree written in process from the index as it is now.
    fn ours(&self) -> Option<TreeId> {
        write(&self.odb(), &fs::read(&self.index).unwrap())
    }

    /// `git add -A`, then the in-process tree against `git write-tree` (which then rewrites
    /// the index's cache tree when `let_git_write` is set; else git reads a copy).
    fn check(&self, let_git_write: bool, step: &str) {
        self.git(&["add", "-A"]);
        let ours = self
            .ours()
            .unwrap_or_else(|| panic!("{step}: not read in process"));
        let gits = if let_git_write {
            self.git(&["write-tree"])
        } else {
            let copy = self.index.with_extension("copy");
            fs::copy(&self.index, &copy).unwrap();
            let env = git_env(self.ws.parent().unwrap(), Some(&copy));
            let (ok, stdout, stderr) = run_git(&self.ws, &env, &["write-tree"]);
            assert!(ok, "{stderr}");
            stdout
        };
        assert_eq!(ours.as_str(), gits.trim(), "{step}");
        // Every tree it names can be read back by git.
        self.git(&["ls-tree", "-r", "-t", ours.as_str()]);
    }

    /// Commits everything, packs every object, and reads `HEAD` back into a new private index
    /// (whose cache tree then names every directory's tree, each only in the pack).
    fn commit_packed_and_read_back(&self) {
        for args in [
            &["add", "-A"][..],
            &["commit", "-qm", "seed"],
            &["repack", "-a", "-d", "-q"],
            &["prune-packed"],
        ] {
            self.git(args);
        }
        fs::remove_file(&self.index).unwrap();
        self.git(&["read-tree", "HEAD"]);
    }

    fn write(&self, path: &str, content: &str) {
        let path = self.ws.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
}

fn chmod_x(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A small deterministic generator (xorshift), so every run makes the same trees.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % below as u64) as usize
    }
}

const NAMES: [&str; 12] = [
    "a", "a.txt", "a-b", "a0", "b", "é", "Z", "x.y.z", "dir", "dir.rs", "dir-1", "_",
];

fn random_path(rng: &mut Rng) -> String {
    let depth = 1 + rng.next(4);
    (0..depth)
        .map(|_| NAMES[rng.next(NAMES.len())])
        .collect::<Vec<_>>()
        .join("/")
}

/// Writes a file at `path` unless a file or directory stands in the way.
fn try_write(repo: &Repo, path: &str, content: &str) {
    let full = repo.ws.join(path);
    let blocked = full
        .ancestors()
        .skip(1)
        .take_while(|p| *p != repo.ws)
        .any(|p| p.is_file())
        || full.is_dir();
    if !blocked {
        repo.write(path, content);
    }
}

#[test]
fn the_tree_of_an_index_is_the_one_git_writes_through_random_changes() {
    for seed in [1u64, 7, 42, 1234] {
        let repo = Repo::new();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        for n in 0..40 {
            try_write(&repo, &random_path(&mut rng), &format!("file {n}\n"));
        }
        repo.check(rng.next(2) == 0, &format!("seed {seed}: first"));
        for round in 0..6 {
            for _ in 0..1 + rng.next(6) {
                let path = random_path(&mut rng);
                let full = repo.ws.join(&path);
                match rng.next(5) {
                    0 if full.is_file() => fs::remove_file(&full).unwrap(),
                    1 if full.is_file() => chmod_x(&full),
                    2 if full.is_dir() => fs::remove_dir_all(&full).unwrap(),
                    3 if !full.exists() && full.parent().is_some_and(Path::is_dir) => {
                        std::os::unix::fs::symlink("a/b", &full).unwrap()
                    }
                    _ => try_write(&repo, &path, &format!("round {round}\n")),
                }
            }
            repo.check(rng.next(2) == 0, &format!("seed {seed}: round {round}"));
        }
    }
}

#[test]
fn an_embedded_repository_is_a_gitlink_as_git_writes_it() {
    let repo = Repo::new();
    repo.write("top.txt", "top\n");
    repo.write("sub/inner.txt", "inner\n");
    let sub = repo.ws.join("sub");
    let env = git_env(repo.ws.parent().unwrap(), None);
    for args in [
        &["init", "-q"][..],
        &["add", "inner.txt"],
        &["commit", "-qm", "inner"],
    ] {
        let (ok, _, stderr) = run_git(&sub, &env, args);
        assert!(ok, "{stderr}");
    }
    repo.check(false, "gitlink");
    let listed = repo.git(&["ls-files", "-s"]);
    assert!(listed.contains("160000"), "{listed}");
}

#[test]
fn a_whole_cache_tree_over_packed_trees_writes_nothing() {
    let repo = Repo::new();
    for n in 0..30 {
        repo.write(
            &format!("d{}/e{}/f{n}.txt", n % 3, n % 5),
            &format!("{n}\n"),
        );
    }
    // The index as `read-tree` leaves it: every directory's tree is valid, and only packed.
    repo.commit_packed_and_read_back();
    let loose_before = loose_objects(&repo.ws.join(".git/objects"));
    let head_tree = repo.git(&["rev-parse", "HEAD^{tree}"]);
    assert_eq!(repo.ours().unwrap().as_str(), head_tree.trim());
    assert_eq!(loose_objects(&repo.ws.join(".git/objects")), loose_before);
    // One file changed: its directories are written, the rest taken from the cache tree.
    repo.write("d1/e1/f1.txt", "changed\n");
    repo.check(false, "one change over packs");
    let written = loose_objects(&repo.ws.join(".git/objects")) - loose_before;
    assert_eq!(written, 1 + 3, "the blob and three trees (root, d1, d1/e1)");
}

fn loose_objects(objects: &Path) -> usize {
    fs::read_dir(objects)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().len() == 2)
        .map(|e| fs::read_dir(e.path()).unwrap().count())
        .sum()
}

#[test]
fn an_index_git_must_write_is_left_to_git() {
    // Intent to add.
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.git(&["add", "-N", "a.txt"]);
    assert_eq!(repo.ours(), None);
    // A conflict (stages 1–3).
    let repo = Repo::new();
    repo.write("f.txt", "base\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "base"]);
    repo.git(&["checkout", "-qb", "other"]);
    repo.write("f.txt", "other\n");
    repo.git(&["commit", "-qam", "other"]);
    repo.git(&["checkout", "-q", "-"]);
    repo.write("f.txt", "mine\n");
    repo.git(&["commit", "-qam", "mine"]);
    let env = git_env(repo.ws.parent().unwrap(), Some(&repo.index));
    let (merged, _, _) = run_git(&repo.ws, &env, &["merge", "-q", "other"]);
    assert!(!merged);
    assert_eq!(repo.ours(), None);
    // Not an index at all.
    assert_eq!(write(&repo.odb(), b"not an index"), None);
}

#[test]
fn a_cache_tree_that_does_not_parse_is_not_used() {
    assert!(
        cache_tree(b"\x000 0\n").is_none(),
        "a valid root needs its oid"
    );
    assert!(cache_tree(b"\x00-1 1\n").is_none(), "a subtree is missing");
    assert!(cache_tree(b"x\x00-1 0\n").is_none(), "the root has a name");
    let root_and_one = [b"\x00-1 1\n".as_slice(), b"d\x002 0\n", &[7u8; 20]].concat();
    let cache = cache_tree(&root_and_one).unwrap();
    assert_eq!(cache.get(b"".as_slice()), Some(&(0, None)));
    assert_eq!(cache.get(b"d".as_slice()), Some(&(2, Some([7u8; 20]))));
}

#[test]
fn packs_this_reader_cannot_read_leave_the_tree_to_git() {
    let repo = Repo::new();
    repo.write("d/f.txt", "f\n");
    repo.commit_packed_and_read_back();
    assert!(repo.ours().is_some());
    // An index of a version this reader does not take: not a guess, and no tree written loose.
    let pack_dir = repo.ws.join(".git/objects/pack");
    for entry in fs::read_dir(&pack_dir).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "idx") {
            let mut bytes = fs::read(entry.path()).unwrap();
            bytes[7] = 3;
            let path = entry.path();
            let mut perms = fs::metadata(&path).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
            fs::set_permissions(&path, perms).unwrap();
            fs::write(&path, bytes).unwrap();
        }
    }
    let loose_before = loose_objects(&repo.ws.join(".git/objects"));
    assert_eq!(repo.ours(), None);
    assert_eq!(loose_objects(&repo.ws.join(".git/objects")), loose_before);
}
