use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::gittree::GitStore;
use crate::run::workspace::git_test_env as env;
use crate::supervise::{self, LaunchSpec, StdinSource, StdioMode};

/// Lists a tree as `kind path detail` lines, sorted: a file's content digest and executable
/// bit, a link's target. The same script lists the checkout and the overlay. The `.git` file
/// names each root's own git directory: listed by what git reads through it.
const LIST: &str = r#"
import hashlib, os, stat, subprocess
lines = []
for root, dirs, files in os.walk(".", followlinks=False):
    for name in dirs + files:
        path = os.path.join(root, name)[2:]
        st = os.lstat(path)
        if path == ".git":
            git = lambda *a: subprocess.run(("git",) + a, capture_output=True, text=True).stdout
            lines.append("git %s %s status[%s]" % (
                stat.S_ISREG(st.st_mode), git("rev-parse", "HEAD^{tree}").strip(),
                git("status", "--porcelain", "--untracked-files=all").strip()))
        elif stat.S_ISLNK(st.st_mode):
            lines.append("link %s %s" % (path, os.readlink(path)))
        elif stat.S_ISDIR(st.st_mode):
            lines.append("dir %s" % path)
        elif stat.S_ISREG(st.st_mode):
            digest = hashlib.sha1(open(path, "rb").read()).hexdigest()
            lines.append("file %s %s %o" % (path, digest, st.st_mode & 0o100))
        else:
            lines.append("other %s" % path)
print("\n".join(sorted(lines)))
"#;

/// Runs a Python `script` in `dir` (in `room`, if any; unconfined else) and returns its
/// stdout, asserting that it succeeded.
async fn python(dir: &Path, script: &str, room: Option<supervise::Room>) -> String {
    let spec = LaunchSpec {
        label: "python in the tree".into(),
        program: "python3".into(),
        args: vec!["-c".into(), script.into()],
        env: env()
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
        cwd: dir.to_owned(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 1 << 20 },
        timeout: Some(Duration::from_secs(60)),
        room,
    };
    let done = supervise::run(spec).await.unwrap();
    assert_eq!(
        done.exit,
        supervise::Exit::Code(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    String::from_utf8(done.stdout).unwrap()
}

/// The tree in `dir` (seen through `overlay`, if any) as [`LIST`] lists it.
async fn list(dir: &Path, overlay: Option<&Overlay>) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let room = overlay.map(|o| supervise::Room {
        overlay: Some(o.clone()),
        ..crate::run::confine::replay_room(dir, scratch.path(), &env(), Vec::new())
    });
    python(dir, LIST, room).await
}

struct Fixture {
    dir: tempfile::TempDir,
    ws: PathBuf,
    store: GitStore,
}

impl Fixture {
    async fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(dir.path()).unwrap().join("ws");
        crate::run::workspace::git_init_for_tests(&ws).await;
        let store = GitStore::open(&dir.path().join("git"), &ws, &env())
            .await
            .unwrap()
            .unwrap();
        Fixture { dir, ws, store }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }

    fn write(&self, rel: &str, content: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    /// The work tree's snapshot, written through `index` (as the snapshotter does).
    async fn snapshot(&self, index: &str) -> (TreeId, PathBuf) {
        let index = self.dir.path().join(index);
        let tree = self.store.write_tree(&self.ws, &index).await.unwrap();
        (tree, index)
    }

    fn trees(&self, name: &str) -> VerifyTree {
        VerifyTree::new(&self.dir.path().join(name), self.store.clone(), &self.ws)
    }

    /// `tree` checked out and closed, against `tree` as an overlay over the work tree (whose
    /// snapshot is `lower`): the same listing and the same report.
    async fn assert_same(&self, tree: &TreeId, lower: &(TreeId, PathBuf)) -> Layer {
        let checkout = self.trees("checkout");
        let checked = checkout.bring_to(tree).await.unwrap();
        let expected = list(&checkout.dir(), None).await;
        let overlay = self.trees("overlay");
        let roots = [checkout.root(), overlay.root()];
        // Shown as the checkout shows it, and named as the checkout names what it leaves out.
        let assert_shows = async |layer: &Layer, what: &str| {
            let seen = list(&layer.overlay.dir, Some(&layer.overlay)).await;
            assert_eq!(seen, expected, "{what}");
            let normalize = |unclosed: &[String]| -> Vec<String> {
                unclosed
                    .iter()
                    .map(|u| {
                        roots.iter().fold(u.clone(), |u, root| {
                            u.replace(&*root.to_string_lossy(), "<root>")
                        })
                    })
                    .collect()
            };
            assert_eq!(
                normalize(&layer.report.unclosed),
                normalize(&checked.unclosed)
            );
            assert_eq!(layer.report.files, checked.files);
        };
        let layer = overlay
            .layer(tree, &self.ws, &lower.1, &lower.0)
            .await
            .unwrap();
        assert_shows(&layer, "the overlay shows what the checkout holds").await;
        // The same through what a first layer over the same snapshot read (kept by the runner
        // while the snapshots' fast path proves the work tree unchanged).
        let mut known = None;
        overlay
            .layer_known(&lower.0, &self.ws, &lower.1, &lower.0, &mut known)
            .await
            .unwrap();
        assert!(known.is_some(), "the first layer leaves what it read");
        let again = overlay
            .layer_known(tree, &self.ws, &lower.1, &lower.0, &mut known)
            .await
            .unwrap();
        assert_shows(&again, "the overlay over a known view").await;
        layer
    }
}

/// What the work tree holds beyond its snapshot (its `.git`, ignored files and directories, an
/// empty directory, a FIFO) is hidden; links that lead outside, lexically or resolved, are
/// hidden and named as the checkout names them; the tree shown is the checkout's, exactly.
#[tokio::test]
async fn the_overlay_of_the_snapshot_is_its_checkout() {
    let f = Fixture::new().await;
    f.write(".gitignore", "target/\n*.log\n");
    f.write("src/a.txt", "a\n");
    f.write("src/trace.log", "ignored beside tracked files\n");
    f.write("docs/d.md", "d\n");
    f.write("deep/x/y/z.txt", "z\n");
    f.write("run.sh", "#!/bin/sh\n");
    fs::set_permissions(f.path("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    f.write("target/debug/artifact", "built\n");
    f.write("debug.log", "log\n");
    fs::create_dir_all(f.path("empty/inner")).unwrap();
    nix::unistd::mkfifo(&f.path("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    symlink("src/a.txt", f.path("inside")).unwrap();
    symlink("/etc/hostname", f.path("abs")).unwrap();
    symlink("../../elsewhere", f.path("docs/up")).unwrap();
    symlink("..", f.path("src/root")).unwrap();
    symlink("src/root/..", f.path("climbs")).unwrap();
    symlink("target/debug", f.path("into-ignored")).unwrap();
    let lower = f.snapshot("w.index").await;
    let layer = f.assert_same(&lower.0, &lower).await;
    assert_eq!(layer.report.unclosed.len(), 3, "{:?}", layer.report);
    // Nothing of the tree was written: the upper layer holds whiteouts and the `.git` file.
    let upper_files: Vec<PathBuf> = walk(&layer.overlay.upper)
        .into_iter()
        .filter(|p| {
            !fs::symlink_metadata(p)
                .unwrap()
                .file_type()
                .is_char_device()
        })
        .filter(|p| !p.is_dir())
        .collect();
    assert_eq!(upper_files, [layer.overlay.upper.join(".git")]);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

/// Another tree than the work tree's (the base, before the builder changed it): every kind of
/// difference — content, mode, a removed directory, a file that became a directory and one
/// that replaced a directory, a link that became a file, added and removed links — is shown as
/// the checkout shows it, and what the work tree gained since is hidden.
#[tokio::test]
async fn the_overlay_of_another_tree_is_its_checkout() {
    let f = Fixture::new().await;
    f.write(".gitignore", "build/\n");
    f.write("src/a.txt", "base a\n");
    f.write("src/keep.txt", "kept\n");
    f.write("docs/guide/intro.md", "intro\n");
    f.write("tool", "a file that becomes a directory\n");
    f.write("lib/mod/x.rs", "a directory that becomes a file\n");
    f.write("mode.sh", "echo\n");
    symlink("src/a.txt", f.path("link-to-file")).unwrap();
    symlink("/etc", f.path("escaping-in-base")).unwrap();
    let base = f.snapshot("base.index").await;
    // The builder's work.
    f.write("src/a.txt", "changed a\n");
    fs::remove_dir_all(f.path("docs")).unwrap();
    fs::remove_file(f.path("tool")).unwrap();
    f.write("tool/main.rs", "fn main() {}\n");
    fs::remove_dir_all(f.path("lib/mod")).unwrap();
    f.write("lib/mod", "now a file\n");
    fs::set_permissions(f.path("mode.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::remove_file(f.path("link-to-file")).unwrap();
    f.write("link-to-file", "now a file\n");
    fs::remove_file(f.path("escaping-in-base")).unwrap();
    symlink("/usr", f.path("escaping-now")).unwrap();
    f.write("added/new.txt", "new\n");
    f.write("build/out.o", "ignored output\n");
    let work = f.snapshot("w.index").await;
    assert_ne!(base.0, work.0);
    let layer = f.assert_same(&base.0, &work).await;
    assert_eq!(
        layer.report.unclosed,
        ["`escaping-in-base` is a symlink to /etc (outside the tree)"]
    );
    // And the work tree's own snapshot, from the same lower layer.
    f.assert_same(&work.0, &work).await;
}

/// What a family wrote in the overlay is gone at the next use; the work tree never saw it.
#[tokio::test]
async fn a_use_does_not_see_what_the_last_one_wrote() {
    let f = Fixture::new().await;
    f.write("main.py", "print(1)\n");
    let lower = f.snapshot("w.index").await;
    let trees = f.trees("overlay");
    let layer = trees
        .layer(&lower.0, &f.ws, &lower.1, &lower.0)
        .await
        .unwrap();
    // Two commands, two mounts of the same layers: the second sees what the first wrote.
    let writes = [
        "echo tampered > main.py && echo n > new.txt && mkdir made".to_owned(),
        "grep -q tampered main.py && test -e new.txt && test -d made".to_owned(),
    ];
    let replayed = crate::run::replay::run_checks_in(
        &layer.overlay.dir,
        crate::run::replay::Restore::default(),
        &writes,
        &env(),
        Duration::from_secs(30),
        crate::run::replay::ReplayConfinement::Room { allow_connect: &[] },
        Some(layer.overlay.clone()),
    )
    .await
    .unwrap();
    assert!(replayed.iter().all(|r| r.passed()), "{replayed:?}");
    assert_eq!(fs::read_to_string(f.path("main.py")).unwrap(), "print(1)\n");
    assert!(!f.path("new.txt").exists());
    let again = trees
        .layer(&lower.0, &f.ws, &lower.1, &lower.0)
        .await
        .unwrap();
    assert_eq!(
        list(&again.overlay.dir, Some(&again.overlay)).await,
        list_checkout(&f, &lower.0).await
    );
}

async fn list_checkout(f: &Fixture, tree: &TreeId) -> String {
    let checkout = f.trees("checkout");
    checkout.bring_to(tree).await.unwrap();
    list(&checkout.dir(), None).await
}

/// A tree the overlay cannot show is left to the checkout: a directory it needs where the
/// work tree has an ignored one (the merged view would show the ignored files).
#[tokio::test]
async fn a_directory_over_an_ignored_one_is_left_to_the_checkout() {
    let f = Fixture::new().await;
    f.write("out/tracked.txt", "in the base\n");
    let base = f.snapshot("base.index").await;
    fs::remove_file(f.path("out/tracked.txt")).unwrap();
    f.write(".gitignore", "out/\n");
    f.write("out/generated", "ignored now\n");
    let work = f.snapshot("w.index").await;
    let error = f
        .trees("overlay")
        .layer(&base.0, &f.ws, &work.1, &work.0)
        .await
        .unwrap_err();
    assert!(matches!(error, LayerError::Unsupported(_)), "{error}");
}

/// An overlay reads its own attributes in the lower layer (an empty file marked as a whiteout
/// hides itself, a directory marked opaque): an agent can set them on its files, so a work tree
/// that carries one is left to the checkout.
#[tokio::test]
async fn a_work_tree_carrying_overlay_attributes_is_left_to_the_checkout() {
    for (path, name) in [
        ("tests/__init__.py", "user.overlay.whiteout"),
        ("tests", "user.overlay.opaque"),
    ] {
        let f = Fixture::new().await;
        f.write("tests/__init__.py", "");
        f.write("tests/test_x.py", "def test_x(): assert False\n");
        let set = format!(
            "import os; os.setxattr({:?}, {name:?}, b'y', follow_symlinks=False)",
            f.path(path).to_string_lossy()
        );
        python(&f.ws, &set, None).await;
        let lower = f.snapshot("w.index").await;
        let error = f
            .trees("overlay")
            .layer(&lower.0, &f.ws, &lower.1, &lower.0)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, LayerError::Unsupported(why) if why.contains("overlay attributes")),
            "{path}: {error}"
        );
    }
}

/// The tree's git metadata is readable and not writable in a replay's room: git answers, but
/// a check can neither commit nor plant a file in the tree's git directory, the run's store or
/// the repository's object store (the directories its alternates name).
#[tokio::test]
async fn no_check_in_the_room_writes_the_trees_git_directory_or_the_objects() {
    let f = Fixture::new().await;
    f.write("a.txt", "a\n");
    let lower = f.snapshot("w.index").await;
    let trees = f.trees("overlay");
    let layer = trees
        .layer(&lower.0, &f.ws, &lower.1, &lower.0)
        .await
        .unwrap();
    let alternates = "$(git rev-parse --git-dir)/objects/info/alternates";
    let checks: Vec<String> = [
        "git ls-files | grep -qx a.txt".to_owned(),
        "test -z \"$(git status --porcelain)\"".to_owned(),
        // The room's private layers take these writes (the git directory lies in a covered
        // directory); what matters is that none reaches the real directories (below).
        "touch \"$(git rev-parse --git-dir)/planted\" 2>/dev/null; true".to_owned(),
        "git -c user.name=a -c user.email=a@a commit -q --allow-empty -m x 2>/dev/null; true"
            .to_owned(),
        format!("touch \"$(head -1 {alternates})/planted\" 2>/dev/null; true"),
        format!("touch \"$(tail -1 {alternates})/planted\" 2>/dev/null; true"),
        format!("test \"$(wc -l < {alternates})\" -eq 2"),
    ]
    .to_vec();
    let head_before = std::fs::read(trees.git_dir().join("HEAD")).unwrap();
    let replayed = crate::run::replay::run_checks_in(
        &layer.overlay.dir,
        crate::run::replay::Restore::default(),
        &checks,
        &env(),
        Duration::from_secs(30),
        crate::run::replay::ReplayConfinement::Room { allow_connect: &[] },
        Some(layer.overlay.clone()),
    )
    .await
    .unwrap();
    for r in &replayed {
        assert!(r.passed(), "{}: {:?} {}", r.command, r.exit, r.output_tail);
    }
    for dir in [
        trees.git_dir(),
        f.store.git_dir().join("objects"),
        f.ws.join(".git/objects"),
    ] {
        assert!(!dir.join("planted").exists(), "{dir:?}");
    }
    assert_eq!(
        std::fs::read(trees.git_dir().join("HEAD")).unwrap(),
        head_before,
        "the commit did not reach the tree's git directory"
    );
}

/// A directory the builder added holding both a file and an empty directory (`mkdir -p
/// src/deep && echo one > src/c.txt`): the base tree as an overlay over that work tree hides
/// the empty directory beyond the snapshot and the whole new directory, in either order.
#[tokio::test]
async fn a_new_directory_with_an_empty_one_inside_is_hidden_whole_from_the_base() {
    let f = Fixture::new().await;
    f.write("keep.txt", "kept\n");
    let base = f.snapshot("base.index").await;
    fs::create_dir_all(f.path("src/deep")).unwrap();
    f.write("src/c.txt", "one\n");
    let work = f.snapshot("w.index").await;
    assert_ne!(base.0, work.0);
    f.assert_same(&base.0, &work).await;
    f.assert_same(&work.0, &work).await;
}
