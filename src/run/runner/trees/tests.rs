//! Tests of the runner's snapshots and verification trees (`super`), over real git workspaces.

use super::*;
use crate::ids::{ProviderName, RunId};
use crate::run::workspace::git_test_env as env;

/// An `--in-place` run over a fresh git workspace `ws/` holding `files`, with its run
/// directory and a runner; its verification root goes with it.
struct InPlace {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    state: RunState,
    runner: CliRunner,
}

impl InPlace {
    async fn new(files: &[(&str, &str)]) -> InPlace {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        crate::run::workspace::git_init_for_tests(&ws).await;
        for (path, content) in files {
            let path = ws.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let run_id = format!("t{n}-{}", std::process::id());
        let state = RunState::new(
            RunId::new(&run_id).unwrap(),
            "objective".into(),
            ws.clone(),
            ProviderName::new("p").unwrap(),
            BTreeMap::new(),
        );
        assert!(matches!(state.isolation, Isolation::InPlace));
        std::fs::create_dir_all(state.run_dir()).unwrap();
        InPlace {
            _dir: dir,
            ws,
            state,
            runner: CliRunner::new(env(), Vec::new()),
        }
    }

    async fn snapshot(&mut self) -> TreeId {
        match self.runner.snapshot(&self.state, &env()).await.unwrap() {
            Taken::Tree(tree) => tree,
            Taken::Files(_) => panic!("a git workspace"),
        }
    }

    /// Snapshots until one git wrote has recorded a watch state (the files just written
    /// are within the racy rule's tick at first).
    async fn settled(&mut self) -> TreeId {
        let mut tree = self.snapshot().await;
        for _ in 0..2 {
            tree = self.snapshot().await;
        }
        tree
    }
}

impl Drop for InPlace {
    fn drop(&mut self) {
        let _ = vtree::remove_verification_trees(&self.ws, self.state.run_id.as_str());
    }
}

/// An `--in-place` replay stands only while the person's workspace holds still: proven by
/// a snapshot on the fast path with the layer's tree; an edit, even one that puts the same
/// content back, is a move.
#[tokio::test]
async fn an_in_place_workspace_holds_still_only_if_no_stat_moved() {
    let mut f = InPlace::new(&[("a.txt", "a\n")]).await;
    let tree = f.settled().await;
    let (runner, state) = (&mut f.runner, &f.state);
    assert!(runner.unchanged_since(state, &tree, &env()).await);
    // The same content written again moves the file's stat.
    std::fs::write(f.ws.join("a.txt"), "a\n").unwrap();
    assert!(!runner.unchanged_since(state, &tree, &env()).await);
    // Still, once git wrote that snapshot, the tree holds still again.
    assert!(runner.unchanged_since(state, &tree, &env()).await);
    std::fs::write(f.ws.join("b.txt"), "new\n").unwrap();
    assert!(!runner.unchanged_since(state, &tree, &env()).await);
}

/// An `--in-place` replay during which the person edits the workspace does not stand: it
/// runs again in a checkout of the tree. The check waits on a FIFO outside the workspace;
/// whoever opens the FIFO's other end (this test's thread) edits the workspace at the
/// first run of the check and lets each run go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_replay_is_redone_in_a_checkout_when_the_workspace_moved() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let mut f = InPlace::new(&[("a.txt", "a\n")]).await;
    // Outside /tmp and HOME: in the replay's private view of those a FIFO is another pipe.
    let gate_dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let gate = gate_dir.path().join("gate");
    nix::unistd::mkfifo(&gate, nix::sys::stat::Mode::S_IRWXU).unwrap();
    f.settled().await;
    let served = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let opener = {
        let (gate, ws, served, stop) = (gate.clone(), f.ws.clone(), served.clone(), stop.clone());
        std::thread::spawn(move || {
            loop {
                // Blocks until a run of the check opens the FIFO to read.
                let mut end = std::fs::OpenOptions::new().write(true).open(&gate).unwrap();
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                if served.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The person saves the file again, same content: its stat moves.
                    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
                }
                std::io::Write::write_all(&mut end, b"go\n").unwrap();
                // Waits until that run closes its end (POLLERR on ours): one serve a run.
                use std::os::fd::AsFd;
                let mut fds = [nix::poll::PollFd::new(
                    end.as_fd(),
                    nix::poll::PollFlags::empty(),
                )];
                nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE).unwrap();
            }
        })
    };
    let check = format!("read -r go < {} && grep -qx a a.txt", gate.display());
    let replayed = f
        .runner
        .replay_in_tree(
            &f.state,
            &ReplayTree::Final,
            Batch {
                prepare: &[],
                commands: std::slice::from_ref(&check),
            },
            &env(),
            Duration::from_secs(60),
            ReplayConfinement::Room { allow_connect: &[] },
        )
        .await
        .expect("a git workspace")
        .unwrap()
        .checks;
    stop.store(true, Ordering::SeqCst);
    // Releases the thread's next open, if it waits on one.
    let _release = nix::fcntl::open(
        &gate,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_NONBLOCK,
        nix::sys::stat::Mode::empty(),
    )
    .unwrap();
    opener.join().unwrap();
    assert_eq!(served.load(Ordering::SeqCst), 2, "the check ran twice");
    assert_eq!(replayed.len(), 1);
    assert!(replayed[0].passed(), "{replayed:?}");
    let room = replayed[0].receipt.room.as_ref().expect("a room");
    assert!(
        room.overlay.is_none(),
        "the result is the checkout's: {room:?}"
    );
}

/// What a layer read of the work tree serves the next layer only while the snapshots'
/// fast path proves nothing moved: an ignored file left in a tracked directory after one
/// layer (the same tree for git) is hidden from the next.
#[tokio::test]
async fn a_layer_reads_the_work_tree_again_once_anything_moved() {
    let mut f = InPlace::new(&[(".gitignore", "*.log\n"), ("src/a.txt", "a\n")]).await;
    let env = env();
    let vtree = f.runner.verify_tree(&f.state, &env).await.unwrap().unwrap();
    let mut whiteouts = Vec::new();
    let mut tree = None;
    for round in 0..4 {
        if round == 3 {
            std::fs::write(f.ws.join("src/left.log"), "left by an agent\n").unwrap();
        }
        let taken = f.snapshot().await;
        assert!(
            tree.is_none_or(|t| t == taken),
            "an ignored file is not in the tree"
        );
        let just_taken = Some(taken.clone());
        let layer = f.runner.layer(&f.state, &vtree, &taken, just_taken, &env);
        let layer = layer.await;
        let Some(layer) = layer.unwrap() else {
            panic!("this host mounts overlays");
        };
        let upper = layer.overlay.upper;
        // The work tree's `.git` is covered by the tree's own (`vtree::gitdir`).
        assert!(upper.join(".git").is_file());
        whiteouts = ["src/left.log", ".git"]
            .into_iter()
            .filter(|rel| {
                use std::os::unix::fs::FileTypeExt;
                std::fs::symlink_metadata(upper.join(rel))
                    .is_ok_and(|m| m.file_type().is_char_device())
            })
            .collect();
        if round == 2 {
            assert!(f.runner.lower_view.is_some(), "the work tree settled");
        }
        tree = Some(taken);
    }
    assert_eq!(whiteouts, ["src/left.log"]);
}
