//! The fast path against git itself: after every kind of change, the snapshot must be the tree
//! a fresh `git add -A` + `git write-tree` gives on a separate index.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;

use super::{SnapshotPath, WatchClock, Watcher};
use crate::gittree::{GitStore, TreeId};

/// A work tree under git, its store with the watched private index, and a second store whose
/// fresh indexes give the reference tree ids.
struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    store: GitStore,
    index: PathBuf,
    watcher: Watcher,
    reference: GitStore,
    scratch: PathBuf,
    fresh: u32,
}

fn env(home: &Path) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| k == "PATH").collect();
    env.insert("HOME".into(), home.to_string_lossy().into_owned());
    env
}

/// A time far after anything the test writes: every directory counts as settled (the racy rule
/// is tested on its own with a clock in the past).
fn late_clock() -> WatchClock {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    WatchClock::Fixed((now + Duration::from_secs(3600)).as_nanos() as i128)
}

fn write(path: &Path, content: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
}

impl Fixture {
    async fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        let home = root.join("home");
        fs::create_dir_all(&ws).unwrap();
        write(&home.join(".config/git/ignore"), "*.bak\n");
        crate::run::workspace::git(&ws, &["init", "-q"], &env(&home))
            .await
            .expect("git init");
        write(&ws.join(".git/info/exclude"), "private.txt\nscratch/\n");
        // Excluded as a whole by `info/exclude`, then not (PrivateExcludeEdited).
        write(&ws.join("scratch/s.log"), "scratch");
        write(&ws.join("a.txt"), "aaaa");
        write(&ws.join("run.sh"), "echo hi\n");
        write(&ws.join("src/lib.rs"), "pub fn f() {}\n");
        write(&ws.join("src/deep/mod.rs"), "// deep\n");
        write(&ws.join(".gitignore"), "*.log\n*.tmp\nbuild/\n");
        write(&ws.join("logs/a.log"), "log");
        write(&ws.join("logs/.gitignore"), ".gitignore\n*.out\ncache/\n");
        write(&ws.join("logs/b.out"), "out");
        // Excluded as a whole by `logs/.gitignore`, then not (IgnoredGitignoreEdited).
        write(&ws.join("logs/cache/c.log"), "cached");
        write(&ws.join("build/obj.o"), "obj");
        write(&ws.join("notes.bak"), "bak");
        write(&ws.join("private.txt"), "private");
        write(&ws.join("sub/keep.tmp"), "tmp");
        write(&ws.join("sub/x.txt"), "x");
        std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
        write(&ws.join(".autocode/state"), "autocode's own");
        let store = GitStore::open(&root.join("git"), &ws, &env(&home))
            .await
            .unwrap()
            .unwrap();
        let reference = GitStore::open(&root.join("reference-git"), &ws, &env(&home))
            .await
            .unwrap()
            .unwrap();
        Fixture {
            _dir: dir,
            ws,
            home,
            store,
            index: root.join("wt.index"),
            watcher: Watcher::new(late_clock()),
            reference,
            scratch: root.join("scratch"),
            fresh: 0,
        }
    }

    async fn snapshot(&mut self) -> (TreeId, SnapshotPath) {
        self.store
            .write_tree_watched(&self.ws, &self.index, &mut self.watcher)
            .await
            .unwrap()
    }

    /// What git says, with an index of its own.
    async fn truth(&mut self) -> TreeId {
        self.fresh += 1;
        let index = self.scratch.join(format!("{}.index", self.fresh));
        self.reference.write_tree(&self.ws, &index).await.unwrap()
    }

    /// A copy of the private index as it is now, its mtime kept (git's racy rule reads it).
    fn index_copy(&mut self) -> PathBuf {
        self.fresh += 1;
        let copy = self.scratch.join(format!("{}.copy.index", self.fresh));
        fs::create_dir_all(&self.scratch).unwrap();
        if let Ok(meta) = fs::metadata(&self.index) {
            fs::copy(&self.index, &copy).unwrap();
            fs::File::options()
                .write(true)
                .open(&copy)
                .unwrap()
                .set_modified(meta.modified().unwrap())
                .unwrap();
        }
        copy
    }

    /// The snapshot, checked against git on a fresh index; returns it and the path taken.
    async fn checked(&mut self) -> (TreeId, SnapshotPath) {
        let (tree, path) = self.snapshot().await;
        assert_eq!(
            tree,
            self.truth().await,
            "the {path:?} snapshot differs from git's (doubt: {:?}, unwatchable: {:?})",
            self.watcher.last_doubt,
            self.watcher.last_unwatchable
        );
        (tree, path)
    }

    /// After a change to the tree: the next snapshot is written by git and differs from
    /// `before`, and the one after it is the same tree, found on the fast path.
    async fn changed_from(&mut self, before: &TreeId, what: &str) -> TreeId {
        let (after, path) = self.checked().await;
        assert_eq!(path, SnapshotPath::Written, "{what}");
        assert_ne!(&after, before, "{what} changes the tree");
        let (again, path) = self.checked().await;
        assert_eq!((&again, path), (&after, SnapshotPath::Watched), "{what}");
        after
    }

    /// The snapshot, checked against `git add -A` + `git write-tree` on a copy of the same
    /// private index (what the fast path must equal: a file once added stays in the index when
    /// an ignore rule later covers it, so a fresh index can differ after such a change).
    async fn same_as_git(&mut self) -> (TreeId, SnapshotPath) {
        let copy = self.index_copy();
        let (tree, path) = self.snapshot().await;
        let truth = self.reference.write_tree(&self.ws, &copy).await.unwrap();
        assert_eq!(
            tree, truth,
            "the {path:?} snapshot differs from git's (doubt: {:?}, unwatchable: {:?})",
            self.watcher.last_doubt, self.watcher.last_unwatchable
        );
        (tree, path)
    }

    /// A first snapshot by git, then one by the watch.
    async fn settled(&mut self) -> TreeId {
        let (first, path) = self.checked().await;
        assert_eq!(path, SnapshotPath::Written);
        let (again, path) = self.checked().await;
        assert_eq!(
            path,
            SnapshotPath::Watched,
            "doubt {:?}, unwatchable {:?}",
            self.watcher.last_doubt,
            self.watcher.last_unwatchable
        );
        assert_eq!(first, again);
        first
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One kind of change made to the fixture's work tree (or its ignore inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutation {
    SameSizeMtimeRestored,
    ChmodExecutable,
    Delete,
    Rename,
    NewFileInTrackedDir,
    NewFileInUntrackedDir,
    NewFileBesideOnlyIgnoredFiles,
    NewDirectory,
    SymlinkRetargeted,
    IgnoredGitignoreEdited,
    NewGitignoreUnignores,
    PrivateExcludeEdited,
    ExcludesFileEdited,
    NewFileInIgnoredDir,
    IgnoredFileWritten,
    MtimeTouched,
    DeepBesideOnlyIgnoredFiles,
    NewFileWhereExclusionToggles,
}

const CHANGES_THE_TREE: [Mutation; 14] = [
    Mutation::DeepBesideOnlyIgnoredFiles,
    Mutation::SameSizeMtimeRestored,
    Mutation::ChmodExecutable,
    Mutation::Delete,
    Mutation::Rename,
    Mutation::NewFileInTrackedDir,
    Mutation::NewFileInUntrackedDir,
    Mutation::NewFileBesideOnlyIgnoredFiles,
    Mutation::NewDirectory,
    Mutation::SymlinkRetargeted,
    Mutation::IgnoredGitignoreEdited,
    Mutation::NewGitignoreUnignores,
    Mutation::PrivateExcludeEdited,
    Mutation::ExcludesFileEdited,
];

/// Writes `content` to `path`, then puts its mtime back to `mtime` (its ctime still moves).
fn rewrite_keeping_mtime(path: &Path, content: &[u8], mtime: SystemTime) {
    fs::write(path, content).unwrap();
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

impl Fixture {
    /// Applies `m` (`n` varies names so a mutation can repeat).
    fn mutate(&self, m: Mutation, n: u32) {
        let ws = &self.ws;
        match m {
            Mutation::SameSizeMtimeRestored => {
                let path = ws.join("a.txt");
                let Ok(meta) = fs::metadata(&path) else {
                    return;
                };
                let content = fs::read(&path).unwrap();
                let flipped: Vec<u8> = content
                    .iter()
                    .map(|b| if *b == b'a' { b'b' } else { b'a' })
                    .collect();
                rewrite_keeping_mtime(&path, &flipped, meta.modified().unwrap());
            }
            Mutation::ChmodExecutable => {
                let path = ws.join("run.sh");
                if let Ok(meta) = fs::metadata(&path) {
                    let mode = meta.permissions().mode() ^ 0o111;
                    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
                }
            }
            Mutation::Delete => {
                let _ = fs::remove_file(ws.join("src/lib.rs"));
                let _ = fs::remove_file(ws.join(format!("src/new{n}.rs")));
            }
            Mutation::Rename => {
                let from = ws.join("src/deep/mod.rs");
                if from.exists() {
                    fs::rename(&from, ws.join(format!("src/deep/renamed{n}.rs"))).unwrap();
                } else {
                    write(&from, "// deep again\n");
                }
            }
            Mutation::NewFileInTrackedDir => write(&ws.join(format!("src/new{n}.rs")), "new"),
            Mutation::NewFileInUntrackedDir => {
                let dir = ws.join(format!("fresh{n}"));
                fs::create_dir_all(&dir).unwrap();
                // The directory first, empty (watched when the snapshot ran), then a file.
                write(&dir.join("later.txt"), "later");
            }
            Mutation::NewFileBesideOnlyIgnoredFiles => {
                write(&ws.join(format!("logs/x{n}.py")), "print()")
            }
            Mutation::NewDirectory => write(&ws.join(format!("pkg{n}/deeper/mod.py")), "x = 1"),
            Mutation::SymlinkRetargeted => {
                let link = ws.join("link");
                let target = match fs::read_link(&link) {
                    Ok(t) if t == Path::new("a.txt") => "run.sh",
                    _ => "a.txt",
                };
                let _ = fs::remove_file(&link);
                std::os::unix::fs::symlink(target, &link).unwrap();
            }
            Mutation::IgnoredGitignoreEdited => {
                // Edited in place: only the ignore input's stat says so (`b.out` enters).
                let path = ws.join("logs/.gitignore");
                let text = fs::read_to_string(&path).unwrap_or_default();
                let next = if text.contains("*.out") {
                    ".gitignore\n"
                } else {
                    ".gitignore\n*.out\ncache/\n"
                };
                fs::write(&path, next).unwrap();
            }
            Mutation::NewGitignoreUnignores => {
                let path = ws.join("sub/.gitignore");
                if path.exists() {
                    fs::remove_file(&path).unwrap();
                } else {
                    write(&path, "!keep.tmp\n");
                }
            }
            Mutation::PrivateExcludeEdited => {
                // The reference store's copy too: both stand for the repository's.
                for store in [&self.store, &self.reference] {
                    let path = store.git_dir().join("info/exclude");
                    let text = fs::read_to_string(&path).unwrap();
                    let next = match text.strip_prefix("private.txt\nscratch/\n") {
                        Some(rest) => rest.to_owned(),
                        None => format!("private.txt\nscratch/\n{text}"),
                    };
                    fs::write(&path, next).unwrap();
                }
            }
            Mutation::ExcludesFileEdited => {
                let path = self.home.join(".config/git/ignore");
                let text = fs::read_to_string(&path).unwrap_or_default();
                let next = if text.is_empty() { "*.bak\n" } else { "" };
                fs::write(&path, next).unwrap();
            }
            Mutation::DeepBesideOnlyIgnoredFiles => {
                // Two levels of directories no index entry is beneath (two rounds of
                // `git check-ignore`), one of them excluded.
                write(&ws.join(format!("logs/d{n}/build/skip.py")), "skipped");
                write(&ws.join(format!("logs/d{n}/inner/z.py")), "z");
            }
            Mutation::NewFileWhereExclusionToggles => {
                // In directories excluded as a whole until an ignore input changes.
                write(&ws.join(format!("scratch/n{n}.txt")), "n");
                write(&ws.join(format!("logs/cache/n{n}.py")), "n");
            }
            Mutation::NewFileInIgnoredDir => write(&ws.join(format!("build/new{n}.o")), "o"),
            Mutation::IgnoredFileWritten => write(&ws.join("logs/a.log"), &format!("log {n}")),
            Mutation::MtimeTouched => {
                let path = ws.join("sub/x.txt");
                if let Ok(file) = fs::File::options().write(true).open(&path) {
                    file.set_modified(SystemTime::now() - Duration::from_secs(100 + u64::from(n)))
                        .unwrap();
                }
            }
        }
    }
}

#[test]
fn every_kind_of_change_is_seen_and_equals_git() {
    rt().block_on(async {
        for m in CHANGES_THE_TREE {
            let mut fx = Fixture::new().await;
            let before = fx.settled().await;
            fx.mutate(m, 0);
            fx.changed_from(&before, &format!("{m:?}")).await;
        }
    });
}

#[test]
fn a_new_file_in_a_wholly_ignored_directory_keeps_the_tree_without_git() {
    rt().block_on(async {
        let mut fx = Fixture::new().await;
        let before = fx.settled().await;
        for m in [
            Mutation::NewFileInIgnoredDir,
            Mutation::IgnoredFileWritten,
            Mutation::MtimeTouched,
        ] {
            fx.mutate(m, 1);
            let (tree, path) = fx.checked().await;
            assert_eq!(tree, before, "{m:?}");
            if m == Mutation::NewFileInIgnoredDir {
                assert_eq!(path, SnapshotPath::Watched, "{:?}", fx.watcher.last_doubt);
            }
        }
        assert!(fx.watcher.watched >= 2);
    });
}

#[test]
fn a_directory_changed_at_or_after_the_clock_is_not_trusted() {
    rt().block_on(async {
        let mut fx = Fixture::new().await;
        // A clock before every directory's ctime: nothing can be proven.
        fx.watcher = Watcher::new(WatchClock::Fixed(0));
        let (first, path) = fx.checked().await;
        assert_eq!(path, SnapshotPath::Written);
        assert!(
            matches!(
                fx.watcher.last_unwatchable,
                Some(super::Unwatchable::Racy(_))
            ),
            "{:?}",
            fx.watcher.last_unwatchable
        );
        let (again, path) = fx.checked().await;
        assert_eq!((again, path), (first, SnapshotPath::Written));
    });
}

/// The store's own inputs (its config, `info/exclude`, `info/attributes`) are written when
/// autocode opens the store, often within the clock tick of the first snapshot: read the same
/// before and after git ran, they are trusted by their content, and a first snapshot records a
/// watch state. A later change of their content is still a doubt.
#[test]
fn the_stores_own_inputs_written_in_the_clock_tick_are_trusted_by_content() {
    rt().block_on(async {
        let mut fx = Fixture::new().await;
        let ctime = |path: &Path| {
            let meta = fs::symlink_metadata(path).unwrap();
            i128::from(std::os::unix::fs::MetadataExt::ctime(&meta)) * 1_000_000_000
                + i128::from(std::os::unix::fs::MetadataExt::ctime_nsec(&meta))
        };
        let marker = fx.ws.parent().unwrap().join("marker");
        write(&marker, "m");
        let settled = ctime(&marker);
        let private: Vec<PathBuf> = ["config", "info/exclude", "info/attributes"]
            .iter()
            .map(|name| fx.store.git_dir().join(name))
            .collect();
        // Rewritten as they are until the clock has moved past everything else the snapshot
        // reads (a tick is a few milliseconds).
        let since = loop {
            for path in &private {
                fs::write(path, fs::read(path).unwrap()).unwrap();
            }
            let oldest = private.iter().map(|p| ctime(p)).min().unwrap();
            if oldest > settled {
                break oldest;
            }
        };
        fx.watcher = Watcher::new(WatchClock::Fixed(since));
        let (first, path) = fx.checked().await;
        assert_eq!(path, SnapshotPath::Written);
        assert_eq!(fx.watcher.last_unwatchable, None);
        let (again, path) = fx.checked().await;
        assert_eq!((&again, path), (&first, SnapshotPath::Watched));
        // Their content changed (the reference store's copy too): a doubt, and git's tree.
        let exclude = fx.store.git_dir().join("info/exclude");
        for store in [&fx.store, &fx.reference] {
            let path = store.git_dir().join("info/exclude");
            let text = fs::read_to_string(&path).unwrap();
            fs::write(&path, text.replace("private.txt\n", "")).unwrap();
        }
        let (after, path) = fx.checked().await;
        assert_eq!(path, SnapshotPath::Written);
        assert_ne!(after, first, "private.txt enters the tree");
        assert!(
            matches!(&fx.watcher.last_doubt, Some(super::Doubt::Input(p)) if *p == exclude),
            "{:?}",
            fx.watcher.last_doubt
        );
    });
}

#[test]
fn a_racily_clean_entry_is_hashed_and_a_gitlink_always_falls_back() {
    rt().block_on(async {
        let mut fx = Fixture::new().await;
        // An mtime after the index's: racily clean by git's rule, so compared by content.
        let future = SystemTime::now() + Duration::from_secs(7200);
        fs::File::options()
            .write(true)
            .open(fx.ws.join("sub/x.txt"))
            .unwrap()
            .set_modified(future)
            .unwrap();
        let before = fx.settled().await;
        assert!(fx.watcher.hashed >= 1);
        rewrite_keeping_mtime(&fx.ws.join("sub/x.txt"), b"y", future);
        let (after, path) = fx.checked().await;
        assert_ne!(after, before);
        assert_eq!(path, SnapshotPath::Written);

        // A nested repository is a gitlink: never watched.
        let nested = fx.ws.join("nested");
        fs::create_dir_all(&nested).unwrap();
        let env = env(&fx.home);
        let git = |args: &'static [&'static str]| {
            let nested = nested.clone();
            let env = env.clone();
            async move {
                crate::run::workspace::git(&nested, args, &env)
                    .await
                    .expect("git")
            }
        };
        git(&["init", "-q"]).await;
        write(&nested.join("f"), "f");
        git(&["add", "f"]).await;
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "x",
        ])
        .await;
        let (_, path) = fx.checked().await;
        assert_eq!(path, SnapshotPath::Written);
        assert!(matches!(
            fx.watcher.last_unwatchable,
            Some(super::Unwatchable::Entry(_))
        ));
        let (_, path) = fx.checked().await;
        assert_eq!(path, SnapshotPath::Written);
    });
}

/// Every mutation, for the property test, in the order its saved regressions index: the one
/// whose exclusion toggles, those that change the tree, then those that may leave it as it was.
fn all_mutations() -> Vec<Mutation> {
    std::iter::once(Mutation::NewFileWhereExclusionToggles)
        .chain(CHANGES_THE_TREE)
        .chain([
            Mutation::NewFileInIgnoredDir,
            Mutation::IgnoredFileWritten,
            Mutation::MtimeTouched,
        ])
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random sequences of changes, with snapshots between some of them: every snapshot, by
    /// whichever path, is the tree git gives on a fresh index.
    #[test]
    fn random_changes_always_snapshot_as_git_does(
        steps in proptest::collection::vec((0..all_mutations().len(), any::<bool>()), 1..10)
    ) {
        rt().block_on(async {
            let mutations = all_mutations();
            let mut fx = Fixture::new().await;
            fx.same_as_git().await;
            for (n, (which, snapshot)) in steps.into_iter().enumerate() {
                fx.mutate(mutations[which], n as u32);
                if snapshot {
                    fx.same_as_git().await;
                }
            }
            fx.same_as_git().await;
            let (_, mut path) = fx.same_as_git().await;
            if path == SnapshotPath::Refreshed {
                // git kept a stat that differs from the file's below the second (it compares
                // whole seconds): the watch takes the file's once, then holds.
                path = fx.same_as_git().await.1;
            }
            // git's own blind spot (a same-size rewrite within the second of its last ctime,
            // its mtime put back) keeps its stale blob, so the watch cannot hold; any other
            // doubt after no change is a miss.
            if !matches!(fx.watcher.last_doubt, Some(super::Doubt::BelowGitsClock(_))) {
                assert_eq!(
                    path,
                    SnapshotPath::Watched,
                    "nothing changed since the last snapshot (doubt: {:?}, unwatchable: {:?})",
                    fx.watcher.last_doubt,
                    fx.watcher.last_unwatchable
                );
            }
        });
    }
}

#[test]
fn a_large_tree_is_checked_on_every_core_and_a_change_anywhere_is_seen() {
    rt().block_on(async {
        let mut fx = Fixture::new().await;
        let count = super::PARALLEL_ENTRIES + 904;
        for i in 0..count {
            write(
                &fx.ws.join(format!("many/d{:02}/f{i:05}.txt", i % 50)),
                "same size",
            );
        }
        let before = fx.settled().await;
        // One change in the first and one in the last directory, in turn.
        for dir in ["d00", "d49"] {
            let path = fx
                .ws
                .join(format!("many/{dir}"))
                .read_dir()
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path();
            let mtime = fs::metadata(&path).unwrap().modified().unwrap();
            rewrite_keeping_mtime(&path, b"SAME SIZE", mtime);
            fx.changed_from(&before, dir).await;
        }
    });
}

#[test]
fn a_false_alarm_keeps_the_parsed_index_and_later_changes_are_still_seen() {
    rt().block_on(async {
        let mut fx = Fixture::new().await;
        let before = fx.settled().await;
        // An empty directory: its parent's stat moves, the tree and the index do not.
        fs::create_dir_all(fx.ws.join("src/empty")).unwrap();
        let (tree, path) = fx.checked().await;
        assert_eq!(
            (tree.clone(), path),
            (before.clone(), SnapshotPath::Written)
        );
        assert!(matches!(fx.watcher.last_doubt, Some(super::Doubt::Dir(_))));
        let (tree, path) = fx.checked().await;
        assert_eq!((tree, path), (before.clone(), SnapshotPath::Watched));
        // The reused entries still catch a change, and the new empty directory is watched.
        write(&fx.ws.join("src/empty/now.rs"), "now");
        let (after, path) = fx.checked().await;
        assert_eq!(path, SnapshotPath::Written);
        assert_ne!(after, before);
        fx.mutate(Mutation::SameSizeMtimeRestored, 0);
        let (last, path) = fx.checked().await;
        assert_eq!(path, SnapshotPath::Written);
        assert_ne!(last, after);
    });
}

#[test]
fn a_directory_no_longer_excluded_is_watched_after_its_ignore_input_changes() {
    rt().block_on(async {
        for toggle in [
            Mutation::PrivateExcludeEdited,
            Mutation::IgnoredGitignoreEdited,
        ] {
            let mut fx = Fixture::new().await;
            fx.settled().await;
            // No longer excluded (still only ignored files, so no index entry beneath): the
            // next new file there must be seen.
            fx.mutate(toggle, 1);
            let (opened, path) = fx.checked().await;
            assert_eq!(path, SnapshotPath::Written, "{toggle:?}");
            assert_eq!(fx.checked().await, (opened.clone(), SnapshotPath::Watched));
            fx.mutate(Mutation::NewFileWhereExclusionToggles, 2);
            let (after, path) = fx.checked().await;
            assert_eq!(path, SnapshotPath::Written, "{toggle:?}");
            assert_ne!(after, opened, "{toggle:?}");
        }
    });
}

#[test]
fn a_hashed_entry_is_read_in_pieces_and_matches_git() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.bin");
    // Past the 64 kB read buffer, with a tail that is not a whole buffer.
    let content: Vec<u8> = (0..200_003u32).map(|i| (i % 251) as u8).collect();
    fs::write(&big, &content).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink("big.bin", &link).unwrap();
    let home = tempfile::tempdir().unwrap();
    let env = env(home.path());
    for path in [&big, &link] {
        let st = nix::sys::stat::lstat(path).unwrap();
        let id = super::blob_id(path, &st).expect("readable");
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let git = rt()
            .block_on(crate::run::workspace::git(
                dir.path(),
                &["hash-object", "--no-filters", "--", &name],
                &env,
            ))
            .expect("git hash-object");
        // `hash-object` follows a link to its target; a link's own blob (its target path) is
        // held to git by the property test's retargeted symlinks.
        if path == &big {
            assert_eq!(hex, git.trim());
        }
        // A stat that no longer matches the content reads as a doubt, not a wrong id.
        let mut short = st;
        short.st_size -= 1;
        assert_eq!(super::blob_id(path, &short), None);
    }
}

#[test]
fn the_config_read_in_place_names_what_git_config_names() {
    rt().block_on(async {
        let fx = Fixture::new().await;
        let home = fx.home.clone();
        let path_var = env(&home)["PATH"].clone();
        if crate::gitconfig::system_file(std::ffi::OsStr::new(&path_var)).is_none() {
            return; // this git keeps its system file elsewhere: `git config` is asked
        }
        let both = || async {
            let mut from_git = super::record::config_from_git(&fx.store, Some(&home), &fx.ws)
                .await
                .unwrap();
            from_git.0.sort();
            from_git.0.dedup();
            let in_place = super::record::config_in_place(&fx.store, Some(&home), &fx.ws).map(
                |(mut files, excludes)| {
                    files.sort();
                    (files, excludes)
                },
            );
            (in_place, from_git)
        };
        let steps = [
            ("no user config", None),
            (
                "excludes in ~/.gitconfig",
                Some((".gitconfig", "[core]\n\texcludesFile = ~/my-ignore\n")),
            ),
            (
                "xdg and home both",
                Some((
                    ".config/git/config",
                    "[core]\n\texcludesfile = /etc/other-ignore\n",
                )),
            ),
            (
                "a relative one",
                Some((".gitconfig", "[Core]\n\tExcludesFile = rel/ignore # here\n")),
            ),
        ];
        for (step, file) in steps {
            if let Some((name, text)) = file {
                write(&home.join(name), text);
            }
            let (in_place, from_git) = both().await;
            assert_eq!(in_place, Some(from_git), "{step}");
        }
        // An include is git's to follow.
        write(&home.join(".gitconfig"), "[include]\n\tpath = ~/more\n");
        let (in_place, _) = both().await;
        assert_eq!(in_place, None);
    });
}
