//! Snapshots and verification trees on a large git workspace (issue 13), against `git status`
//! and against the copies they replace. `harness = false`; run through
//! `benches/large_workspace.sh`, which generates the repository (`cargo bench --bench
//! large_workspace -- <repo>` on an existing one). Numbers go to docs/performance.md.
//!
//! With `LARGE_WS_COLD=1` (root only) the page cache is dropped before each cold measure; with
//! `LARGE_WS_OLD_COPY=1` the copy replays used before issue 13 is timed too (minutes).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use autocode::gittree::SnapshotPath;
use autocode::gittree::watch::WatchClock;
use autocode::run::replay;
use autocode::run::vtree::VerifyTree;
use autocode::snapshot::{self, Snapshotter, StatCache, Taken};
use autocode::verify::treediff::Comparison;

fn env() -> BTreeMap<String, String> {
    ["PATH", "HOME"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_owned(), v)))
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn git_status(repo: &Path) -> f64 {
    let start = Instant::now();
    let out = Command::new("git")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "status",
            "--porcelain",
        ])
        .current_dir(repo)
        .output()
        .expect("git status");
    assert!(out.status.success());
    start.elapsed().as_secs_f64()
}

fn du(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| du(&e.path()))
            .sum()
    } else {
        meta.len()
    }
}

fn line(what: &str, seconds: f64, status: f64) {
    println!(
        "| {what} | {:.3} s | {:.2}x |",
        seconds,
        seconds / status.max(1e-9)
    );
}

async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, f64) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed().as_secs_f64())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let repo = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .expect("usage: large_workspace <git repository>");
    let repo = Path::new(&repo).canonicalize().expect("repository");
    let cold = std::env::var("LARGE_WS_COLD").as_deref() == Ok("1");
    let env = env();
    let scratch = tempfile::tempdir().expect("scratch");
    let files = snapshot::list_files(&repo, &env).await.expect("list").len();
    println!("repository: {} ({files} files)", repo.display());

    // git status, warm (and cold).
    git_status(&repo);
    let warm_status = median((0..5).map(|_| git_status(&repo)).collect());
    let cold_status = if cold && drop_caches() {
        Some(git_status(&repo))
    } else {
        None
    };
    println!("\n| measure | time | × warm git status |\n|---|---|---|");
    line(
        "git status --porcelain, warm (median of 5)",
        warm_status,
        warm_status,
    );
    if let Some(cold_status) = cold_status {
        line(
            "git status --porcelain, cold (page cache dropped)",
            cold_status,
            warm_status,
        );
    }

    // The snapshot: a tree id with a private index.
    let git_dir = scratch.path().join("run/git");
    let index = scratch.path().join("verify/worktree.index");
    let mut snapshotter = Snapshotter::open(&repo, &git_dir, &index, &env)
        .await
        .expect("open");
    let (first, t_first) = timed(snapshotter.take()).await;
    let first = first.expect("snapshot");
    line(
        "snapshot, first of the run (seeds the private index)",
        t_first,
        warm_status,
    );
    // Written by git, nothing recorded: the snapshot before the fast path.
    snapshotter.set_watch_clock(WatchClock::Off);
    let mut plain = Vec::new();
    for _ in 0..5 {
        let (taken, t) = timed(snapshotter.take()).await;
        assert_eq!(taken.expect("snapshot"), first);
        plain.push(t);
    }
    line(
        "snapshot, warm, written by git, no fast path (as before; median of 5)",
        median(plain),
        warm_status,
    );
    snapshotter.set_watch_clock(WatchClock::Marker);
    // Written by git every time (the watch state dropped first): the cost before the fast path,
    // plus recording a new watch state.
    let mut written = Vec::new();
    for _ in 0..5 {
        snapshotter.forget_watch();
        let (taken, t) = timed(snapshotter.take()).await;
        assert_eq!(taken.expect("snapshot"), first);
        assert_eq!(snapshotter.last_path(), Some(SnapshotPath::Written));
        written.push(t);
    }
    line(
        "snapshot, warm, written by git + a new watch state (median of 5)",
        median(written),
        warm_status,
    );
    let mut warm = Vec::new();
    for _ in 0..5 {
        let (taken, t) = timed(snapshotter.take()).await;
        assert_eq!(taken.expect("snapshot"), first);
        assert_eq!(
            snapshotter.last_path(),
            Some(SnapshotPath::Watched),
            "{:?} {:?}",
            snapshotter.watcher().last_doubt,
            snapshotter.watcher().last_unwatchable
        );
        warm.push(t);
    }
    let warm_snapshot = median(warm);
    line(
        "snapshot, warm, unchanged tree: fast path, no git (median of 5)",
        warm_snapshot,
        warm_status,
    );
    // The same, alternated with git status (a shared machine's load hits both alike).
    let rounds: usize = std::env::var("LARGE_WS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(9);
    let mut ratios = Vec::new();
    let mut fast_times = Vec::new();
    for _ in 0..rounds {
        let status = git_status(&repo);
        let (taken, t) = timed(snapshotter.take()).await;
        assert_eq!(taken.expect("snapshot"), first);
        assert_eq!(snapshotter.last_path(), Some(SnapshotPath::Watched));
        ratios.push(t / status);
        fast_times.push(t);
    }
    println!(
        "| snapshot, warm, unchanged tree: fast path alternated with git status (median of {rounds} pairs) | {:.3} s | {:.2}x (median ratio of pairs) |",
        median(fast_times),
        median(ratios)
    );
    // A false alarm: a new empty directory moves its parent's stat, not the tree nor the index.
    let empty = repo.join("pkg0000/__new_empty_dir__");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let (taken, t) = timed(snapshotter.take()).await;
    assert_eq!(taken.expect("snapshot"), first);
    assert_eq!(snapshotter.last_path(), Some(SnapshotPath::Written));
    line(
        "snapshot after a new empty directory (written by git, index unchanged, its parse reused)",
        t,
        warm_status,
    );
    std::fs::remove_dir(&empty).expect("rmdir");
    let (_, _) = timed(snapshotter.take()).await;
    if std::env::var("LARGE_WS_FAST_ONLY").as_deref() == Ok("1") {
        return;
    }
    if cold && drop_caches() {
        let (_, t) = timed(snapshotter.take()).await;
        line(
            "snapshot, cold, unchanged tree: fast path (page cache dropped)",
            t,
            warm_status,
        );
        snapshotter.forget_watch();
        drop_caches();
        let (_, t) = timed(snapshotter.take()).await;
        line(
            "snapshot, cold, written by git (page cache dropped, private index kept)",
            t,
            warm_status,
        );
    }

    // The old snapshot: every file hashed, a stat cache.
    let mut cache = StatCache::default();
    let (old, t_old_first) = timed(async {
        let files = snapshot::list_files(&repo, &env).await.expect("list");
        snapshot::take(&repo, &files, &mut cache).expect("take")
    })
    .await;
    line(
        "old snapshot (ls-files + sha256), first",
        t_old_first,
        warm_status,
    );
    let (_, t_old_warm) = timed(async {
        let files = snapshot::list_files(&repo, &env).await.expect("list");
        snapshot::take(&repo, &files, &mut cache).expect("take")
    })
    .await;
    line("old snapshot, warm stat cache", t_old_warm, warm_status);

    // One file changes: the snapshot and the diff.
    let changed = std::fs::read_dir(&repo)
        .expect("read repo")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && !p.ends_with(".git"))
        .and_then(|d| {
            std::fs::read_dir(d)
                .ok()?
                .flatten()
                .map(|e| e.path())
                .find(|p| p.is_file())
        })
        .expect("a file to change");
    let original = std::fs::read(&changed).expect("read");
    std::fs::write(&changed, b"changed by the bench\n").expect("write");
    let (second, t_second) = timed(snapshotter.take()).await;
    let second = second.expect("snapshot");
    assert_eq!(snapshotter.last_path(), Some(SnapshotPath::Written));
    line(
        "snapshot after a one-file change (written by git + a new watch state)",
        t_second,
        warm_status,
    );
    let mut after = Vec::new();
    for _ in 0..5 {
        let (taken, t) = timed(snapshotter.take()).await;
        assert_eq!(taken.expect("snapshot"), second);
        assert_eq!(snapshotter.last_path(), Some(SnapshotPath::Watched));
        after.push(t);
    }
    line(
        "snapshot after that, unchanged: fast path (median of 5)",
        median(after),
        warm_status,
    );
    let (changes, t_diff) = timed(snapshotter.diff(&first, &second)).await;
    let changes = changes.expect("diff");
    assert_eq!(changes.len(), 1);
    line(
        "diff of the two snapshots (git diff-tree)",
        t_diff,
        warm_status,
    );

    // Verification trees.
    let (Taken::Tree(tree1), Taken::Tree(tree2)) = (&first, &second) else {
        panic!("not a git repository");
    };
    let store = snapshotter.store().expect("git").clone();
    // The base read from git: the comparison a reviewer and the test-change gate are given.
    let (compared, t) = timed(Comparison::of_trees(&store, tree1, tree2)).await;
    assert_eq!(compared.expect("compare").changes().len(), 1);
    line(
        "base compared from git, one change (diff-tree + blobs)",
        t,
        warm_status,
    );
    let scratch_index = scratch.path().join("verify/compose.index");
    let rel = changed
        .strip_prefix(&repo)
        .expect("inside")
        .to_string_lossy()
        .into_owned();
    let (composed, t) = timed(store.with_paths_from(tree2, tree1, &[rel], &scratch_index)).await;
    assert_eq!(&composed.expect("compose"), tree1);
    line(
        "final tree with a file from the base (read-tree + update-index + write-tree)",
        t,
        warm_status,
    );
    // The verification tree as an overlay of the work tree (a confined run in its worktree):
    // the upper layer for the work tree's own tree, then for the base, one file apart.
    let layered = VerifyTree::new(&scratch.path().join("overlay"), store.clone(), &repo);
    let (r, t) = timed(layered.layer(tree2, &repo, &index, tree2)).await;
    r.expect("layer");
    line(
        "verification tree as an overlay of the work tree (nothing written)",
        t,
        warm_status,
    );
    let (r, t) = timed(layered.layer(tree1, &repo, &index, tree2)).await;
    r.expect("layer");
    line(
        "verification tree as an overlay, the base one file apart",
        t,
        warm_status,
    );
    let trees = VerifyTree::new(&scratch.path().join("verify"), store, &repo);
    let (r, t) = timed(trees.bring_to(tree1)).await;
    r.expect("bring");
    line("verification tree, first checkout", t, warm_status);
    let (r, t) = timed(trees.bring_to(tree2)).await;
    r.expect("bring");
    line(
        "verification tree to the tree after a one-file change",
        t,
        warm_status,
    );
    let dir = trees.dir();
    std::fs::create_dir_all(dir.join("build")).expect("mkdir");
    std::fs::write(dir.join("build/out.o"), b"x").expect("write");
    let (r, t) = timed(trees.bring_to(tree2)).await;
    r.expect("bring");
    line(
        "verification tree again, after a check wrote a file",
        t,
        warm_status,
    );
    if cold && drop_caches() {
        let (r, t) = timed(trees.bring_to(tree1)).await;
        r.expect("bring");
        line("verification tree back, cold", t, warm_status);
    } else {
        let (r, _) = timed(trees.bring_to(tree1)).await;
        r.expect("bring");
    }
    // The comparison before: the base checked out, walked beside the work tree, every file
    // compared by content.
    // (It also finds the ignored `build/` files the work tree has and the checkout has not.)
    let (walked, t) = timed(async { Comparison::of_dirs(&dir, &repo) }).await;
    assert!(walked.changes().iter().any(|(p, _)| changed.ends_with(p)));
    line(
        "base compared by walking its checkout beside the work tree (before)",
        t,
        warm_status,
    );

    // The old replay tree: a fresh copy, then its removal (minutes at 100k files: opt in).
    if std::env::var("LARGE_WS_OLD_COPY").as_deref() == Ok("1") {
        let mut copies = Vec::new();
        for _ in 0..2 {
            let copy = tempfile::tempdir().expect("copy");
            let start = Instant::now();
            replay::clean_copy(&repo, copy.path(), &env)
                .await
                .expect("copy");
            drop(copy);
            copies.push(start.elapsed().as_secs_f64());
        }
        line(
            "old clean copy + removal (the second of two in a row)",
            copies[1],
            warm_status,
        );
    }
    std::fs::write(&changed, original).expect("restore");

    // What is stored.
    let before = serde_json::to_vec(&first.record(None)).expect("json");
    let after = serde_json::to_vec(&second.record(Some(&changes))).expect("json");
    let old_pretty = serde_json::to_vec_pretty(&old).expect("json");
    println!("\n| stored | bytes |\n|---|---|");
    println!("| snapshot-before.json record | {} |", before.len());
    println!(
        "| snapshot-after.json record (one change) | {} |",
        after.len()
    );
    println!(
        "| old snapshot file (pretty, each of two per stage) | {} |",
        old_pretty.len()
    );
    println!(
        "| private git dir (`<run>/git/`, objects of changed content) | {} |",
        du(&git_dir)
    );
    println!(
        "| private index of the work tree (verification root) | {} |",
        du(&index)
    );
    println!(
        "| verification root (indexes + trees, outside the run dir) | {} |",
        du(&scratch.path().join("verify"))
    );
}
