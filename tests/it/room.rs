//! The agent's room (Landlock) with real processes: writes outside the writable set refused
//! (a HOME-like and a `.git`-like directory among them) and inside allowed, an unreadable file
//! carved out of readable siblings, signals and abstract unix sockets that cannot leave the
//! family, the ownership guarantees unchanged under a room, the room holding for an ordinary
//! user, and read-only holes (an in-place builder's `.git` and `.autocode/`) beneath a writable
//! tree, as root and as an ordinary user.
//!
//! Each case probes with a small Python program that reports, per operation, `ok` or the errno
//! name; a control launch without a room shows the same probe succeeding, so a refusal is the
//! room's doing and not the test's.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use autocode::supervise::{self, Exit, LaunchSpec, Overlay, Receipt, Room, StdinSource, StdioMode};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

/// Tries each `kind:arg` operation and prints `{op: "ok" | errno name}` as JSON.
const PROBE: &str = r#"
import errno, json, os, signal, socket, subprocess, sys
results = {}
for op in sys.argv[1:]:
    kind, _, arg = op.partition(":")
    try:
        if kind == "write":
            with open(arg, "w") as f:
                f.write("x")
        elif kind == "mkdir":
            os.mkdir(arg)
        elif kind == "unlink":
            os.unlink(arg)
        elif kind == "read":
            with open(arg) as f:
                f.read()
        elif kind == "kill":
            os.kill(int(arg), signal.SIGTERM)
        elif kind == "connect":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("\0" + arg)
            s.close()
        elif kind == "own_socket":
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind("\0" + arg)
            server.listen(1)
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect("\0" + arg)
            client.close()
            server.close()
        elif kind == "dgram":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.sendto(b"x", arg)
            s.close()
        elif kind == "dgram_msg":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.sendmsg([b"x"], [], 0, arg)
            s.close()
        elif kind == "kill_child":
            child = subprocess.Popen(["sleep", "1000"])
            child.send_signal(signal.SIGTERM)
            child.wait()
        else:
            raise SystemExit("unknown op " + kind)
        results[op] = "ok"
    except OSError as e:
        results[op] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(results))
"#;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn spec(program: &str, args: Vec<OsString>, cwd: &Path, room: Option<Room>) -> LaunchSpec {
    LaunchSpec {
        label: "room test".into(),
        program: program.into(),
        args,
        env: std::env::vars_os().collect::<BTreeMap<_, _>>(),
        cwd: cwd.to_owned(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 1 << 20 },
        timeout: Some(Duration::from_secs(60)),
        room,
    }
}

/// Runs the probe with `ops`, in `room` (or unconfined), and returns its verdicts.
fn probe(cwd: &Path, room: Option<Room>, ops: &[String]) -> (BTreeMap<String, String>, Receipt) {
    let mut args: Vec<OsString> = vec!["-c".into(), PROBE.into()];
    args.extend(ops.iter().map(OsString::from));
    let finished = runtime()
        .block_on(supervise::run(spec("python3", args, cwd, room)))
        .expect("launch");
    let stdout = String::from_utf8_lossy(&finished.stdout);
    assert_eq!(
        finished.exit,
        Exit::Code(0),
        "probe failed: {stdout} {}",
        String::from_utf8_lossy(&finished.stderr)
    );
    let verdicts = serde_json::from_str(stdout.trim()).unwrap_or_else(|error| {
        panic!("probe output {stdout:?}: {error}");
    });
    (verdicts, finished.receipt)
}

fn op(kind: &str, path: impl AsRef<Path>) -> String {
    format!("{kind}:{}", path.as_ref().display())
}

/// A scratch tree: `work/` (the room's writable place), `home/`, `repo/.git/`, `outside/`.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for sub in ["work", "home", "repo/.git", "outside"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("home/.bashrc"), "# rc\n").unwrap();
        std::fs::write(root.join("repo/.git/config"), "[core]\n").unwrap();
        std::fs::write(root.join("outside/victim"), "keep\n").unwrap();
        Self { _dir: dir, root }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.root.join(sub)
    }

    fn room(&self) -> Room {
        Room::writable([self.path("work")])
    }
}

fn verdict<'a>(verdicts: &'a BTreeMap<String, String>, op: &str) -> &'a str {
    verdicts
        .get(op)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no verdict for {op} in {verdicts:?}"))
}

#[test]
fn writes_outside_the_room_are_refused_and_inside_work() {
    let tree = Tree::new();
    let inside = [
        op("write", tree.path("work/new.txt")),
        op("mkdir", tree.path("work/sub")),
    ];
    let outside = [
        op("write", tree.path("outside/new.txt")),
        op("write", tree.path("outside/victim")),
        op("unlink", tree.path("outside/victim")),
        op("mkdir", tree.path("outside/sub")),
        op("write", tree.path("home/.bashrc")),
        op("write", tree.path("home/.profile")),
        op("write", tree.path("repo/.git/config")),
        op("write", tree.path("repo/.git/hooks-pre-commit")),
        op("mkdir", tree.path("repo/.git/hooks")),
    ];
    let all: Vec<String> = inside.iter().chain(&outside).cloned().collect();
    let (verdicts, receipt) = probe(&tree.path("work"), Some(tree.room()), &all);
    for op in &inside {
        assert_eq!(verdict(&verdicts, op), "ok", "{op}: {verdicts:?}");
    }
    for op in &outside {
        assert!(
            matches!(verdict(&verdicts, op), "EACCES" | "EPERM"),
            "{op} was not refused: {verdicts:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(tree.path("outside/victim")).unwrap(),
        "keep\n"
    );
    assert_eq!(
        std::fs::read_to_string(tree.path("repo/.git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!tree.path("home/.profile").exists());
    let room = receipt.room.expect("the receipt lists the room");
    assert_eq!(room.writable, vec![tree.path("work")]);
    assert!(
        room.mechanisms
            .iter()
            .any(|m| m.starts_with("landlock-abi-"))
    );
    // Control: the same writes succeed without a room (root's DAC would allow them all).
    let control = Tree::new();
    let (verdicts, receipt) = probe(
        &control.path("work"),
        None,
        &[op("write", control.path("outside/new.txt"))],
    );
    assert_eq!(
        verdicts.values().collect::<Vec<_>>(),
        vec!["ok"],
        "{verdicts:?}"
    );
    assert!(receipt.room.is_none());
}

#[test]
fn an_unreadable_file_cannot_be_read_while_its_siblings_can() {
    let tree = Tree::new();
    let state = tree.path("outside/state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("key"), "secret").unwrap();
    std::fs::write(state.join("public"), "public").unwrap();
    std::fs::write(tree.path("work/notes"), "notes").unwrap();
    let room = Room {
        writable: vec![tree.path("work")],
        unreadable: vec![state.join("key"), tree.path("outside/missing")],
        read_only: Vec::new(),
        overlay: None,
        views: None,
        allow_connect: Vec::new(),
    };
    let ops = [
        op("read", state.join("key")),
        op("read", state.join("public")),
        op("read", tree.path("outside/victim")),
        op("read", tree.path("home/.bashrc")),
        op("read", tree.path("work/notes")),
        op("write", tree.path("work/fresh")),
        op("read", tree.path("work/fresh")),
        op("read", "/etc/passwd"),
    ];
    let (verdicts, receipt) = probe(&tree.path("work"), Some(room), &ops);
    assert_eq!(verdict(&verdicts, &ops[0]), "EACCES", "{verdicts:?}");
    for op in &ops[1..] {
        assert_eq!(verdict(&verdicts, op), "ok", "{op}: {verdicts:?}");
    }
    let room = receipt.room.unwrap();
    assert_eq!(room.unreadable, vec![state.join("key")]);
    assert_eq!(room.skipped, vec![tree.path("outside/missing")]);
}

/// A process started outside the family, killed on drop.
struct Outsider(std::process::Child);

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn signals_cannot_leave_the_family() {
    let tree = Tree::new();
    let mut sleeper = Outsider(
        Command::new("sleep")
            .arg("1000")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let kill = format!("kill:{}", sleeper.0.id());
    let kill_own = "kill_child:".to_owned();
    let (verdicts, receipt) = probe(
        &tree.path("work"),
        Some(tree.room()),
        &[kill.clone(), kill_own.clone()],
    );
    assert_eq!(verdict(&verdicts, &kill), "EPERM", "{verdicts:?}");
    assert_eq!(verdict(&verdicts, &kill_own), "ok", "{verdicts:?}");
    assert!(sleeper.0.try_wait().unwrap().is_none(), "the outsider died");
    assert!(receipt.room.unwrap().signals_scoped);
    // Autocode itself is outside the family too.
    let own = format!("kill:{}", std::process::id());
    let (verdicts, _) = probe(
        &tree.path("work"),
        Some(tree.room()),
        std::slice::from_ref(&own),
    );
    assert_eq!(verdict(&verdicts, &own), "EPERM", "{verdicts:?}");
}

#[test]
fn abstract_unix_sockets_outside_the_family_are_unreachable() {
    use std::os::linux::net::SocketAddrExt;
    let tree = Tree::new();
    let name = format!("autocode-room-test-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    let connect = format!("connect:{name}");
    let own = format!("own_socket:{name}-inside");
    let (verdicts, receipt) = probe(
        &tree.path("work"),
        Some(tree.room()),
        &[connect.clone(), own.clone()],
    );
    assert_eq!(verdict(&verdicts, &connect), "EPERM", "{verdicts:?}");
    assert_eq!(verdict(&verdicts, &own), "ok", "{verdicts:?}");
    assert!(receipt.room.unwrap().abstract_sockets_scoped);
    // Control: unconfined, the same connect reaches the listener.
    let (verdicts, _) = probe(&tree.path("work"), None, std::slice::from_ref(&connect));
    assert_eq!(verdict(&verdicts, &connect), "ok", "{verdicts:?}");
    drop(listener);
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// End to end through `autocode supervise --confine --json`: a setsid daemon inside the room is
/// still killed, the cleanup verified, and the receipt lists the room (with the private TMPDIR).
#[test]
fn the_ownership_guarantees_hold_in_a_room() {
    let tree = Tree::new();
    let work = tree.path("work");
    let script = "setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' & \
                  while [ ! -s daemon.pid ]; do :; done; \
                  echo \"tmp=$TMPDIR\"; touch \"$TMPDIR/scratch\" && echo tmp-ok";
    let output = Command::new(BIN)
        .args(["supervise", "--json", "--confine", "--writable"])
        .arg(&work)
        .args(["--", "sh", "-c", script])
        .current_dir(&work)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let receipt: Receipt = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(receipt.verified, "{receipt:?}");
    assert!(!receipt.sessions.is_empty(), "{receipt:?}");
    let daemon: i32 = std::fs::read_to_string(work.join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(daemon) {
        assert!(Instant::now() < deadline, "daemon {daemon} survived");
        std::thread::sleep(Duration::from_millis(5));
    }
    let room = receipt.room.expect("room in the receipt");
    assert!(stdout.contains("tmp-ok"), "{stdout}");
    let tmp = stdout
        .lines()
        .find_map(|line| line.strip_prefix("tmp="))
        .map(PathBuf::from)
        .unwrap();
    assert_eq!(room.writable, vec![work.clone(), tmp.clone()]);
    assert!(!tmp.exists(), "the private TMPDIR is removed after the run");
    assert!(room.signals_scoped && room.abstract_sockets_scoped);
}

/// The room binds an ordinary user as it binds root: the family runs as `nobody` (dropped by
/// `setpriv` inside the family when the test runs as root; otherwise the test's own user) and
/// still cannot write a world-writable directory outside the room.
#[test]
fn the_room_holds_for_an_ordinary_user() {
    let tree = Tree::new();
    for sub in ["", "work", "outside"] {
        std::fs::set_permissions(tree.path(sub), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let script = format!(
        "id -u; echo x > {out} || echo outside-refused; echo x > {inside} && echo inside-ok",
        out = tree.path("outside/by-user").display(),
        inside = tree.path("work/by-user").display(),
    );
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let (program, mut args): (&str, Vec<OsString>) = if root {
        (
            "setpriv",
            [
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
                "/bin/sh",
            ]
            .map(OsString::from)
            .to_vec(),
        )
    } else {
        ("/bin/sh", Vec::new())
    };
    args.extend(["-c".into(), script.into()]);
    let finished = runtime()
        .block_on(supervise::run(spec(
            program,
            args,
            &tree.path("work"),
            Some(tree.room()),
        )))
        .unwrap();
    let stdout = String::from_utf8_lossy(&finished.stdout);
    let stderr = String::from_utf8_lossy(&finished.stderr);
    let uid: u32 = stdout
        .lines()
        .next()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    assert_ne!(
        uid, 0,
        "the family must run as an ordinary user: {stdout} {stderr}"
    );
    assert!(stdout.contains("outside-refused"), "{stdout} {stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(stdout.contains("inside-ok"), "{stdout} {stderr}");
    assert!(!tree.path("outside/by-user").exists());
    assert!(finished.receipt.verified);
}

/// A workspace as an in-place builder sees it: `work/` writable, `work/.git` and
/// `work/.autocode` read-only holes, the stage's outbox inside `.autocode` writable again.
fn in_place_tree(tree: &Tree) -> (PathBuf, PathBuf) {
    let work = tree.path("work");
    let outbox = work.join(".autocode/runs/r/stages/s/outbox");
    for sub in [".git/hooks", "src"] {
        std::fs::create_dir_all(work.join(sub)).unwrap();
    }
    std::fs::create_dir_all(&outbox).unwrap();
    std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(work.join(".autocode/runs/r/run.json"), "{}").unwrap();
    (work, outbox)
}

#[test]
fn read_only_holes_keep_git_and_the_runs_beneath_a_writable_tree() {
    let tree = Tree::new();
    let (work, outbox) = in_place_tree(&tree);
    let room = Room {
        writable: vec![work.clone(), outbox.clone()],
        unreadable: Vec::new(),
        read_only: vec![work.join(".git"), work.join(".autocode")],
        overlay: None,
        views: None,
        allow_connect: Vec::new(),
    };
    let allowed = [
        op("write", work.join("new-top-level")),
        op("mkdir", work.join("newdir")),
        op("write", work.join("src/lib.py")),
        op("write", outbox.join("report.json")),
        op("read", work.join(".git/config")),
    ];
    let refused = [
        op("write", work.join(".git/config")),
        op("write", work.join(".git/hooks/post-checkout")),
        op("mkdir", work.join(".git/info")),
        op("unlink", work.join(".git/config")),
        op("write", work.join(".autocode/runs/r/run.json")),
        op("mkdir", work.join(".autocode/runs/planted")),
    ];
    let all: Vec<String> = allowed.iter().chain(&refused).cloned().collect();
    let (verdicts, receipt) = probe(&work, Some(room), &all);
    for op in &allowed {
        assert_eq!(verdict(&verdicts, op), "ok", "{op}: {verdicts:?}");
    }
    for op in &refused {
        assert_eq!(verdict(&verdicts, op), "EROFS", "{op}: {verdicts:?}");
    }
    assert_eq!(
        std::fs::read_to_string(work.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!work.join(".git/hooks/post-checkout").exists());
    assert!(outbox.join("report.json").exists());
    let room = receipt.room.as_ref().expect("the receipt lists the room");
    assert_eq!(
        room.read_only,
        vec![work.join(".autocode"), work.join(".git")]
    );
    assert_mounts_stayed_private(&receipt, "mount-namespace", &work);
}

/// The room's mounts were the family's own: the receipt names a `mechanism` mechanism, the
/// cleanup was verified, and nothing is mounted at `path` in this process's mount namespace.
fn assert_mounts_stayed_private(receipt: &Receipt, mechanism: &str, path: &Path) {
    let room = receipt.room.as_ref().expect("the receipt lists the room");
    assert!(
        room.mechanisms.iter().any(|m| m.starts_with(mechanism)),
        "{room:?}"
    );
    assert!(receipt.verified);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*path.to_string_lossy()), "{mounts}");
}

/// The same holes for an ordinary user (a user namespace mapping the user to itself): autocode
/// itself runs as `nobody` (through `setpriv` when the test runs as root).
#[test]
fn read_only_holes_hold_for_an_ordinary_user() {
    let tree = Tree::new();
    let (work, outbox) = in_place_tree(&tree);
    for entry in walk(tree.path("")) {
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let script = format!(
        "id -u; echo x > .git/hooks/pre-commit || echo hook-refused; \
         echo x > .autocode/runs/r/run.json || echo state-refused; \
         echo x > new-file && echo top-ok; echo x > {outbox}/report.json && echo outbox-ok",
        outbox = outbox.display()
    );
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut command = autocode_as_ordinary_user(root);
    let output = command
        .args(["supervise", "--json", "--writable"])
        .arg(&work)
        .arg("--writable")
        .arg(&outbox)
        .arg("--read-only")
        .arg(work.join(".git"))
        .arg("--read-only")
        .arg(work.join(".autocode"))
        .args(["--", "/bin/sh", "-c", &script])
        .current_dir(&work)
        .env("HOME", tree.path("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout} {stderr}");
    let uid: u32 = stdout
        .lines()
        .next()
        .unwrap_or_default()
        .parse()
        .unwrap_or(0);
    assert_ne!(
        uid, 0,
        "the family must run as an ordinary user: {stdout} {stderr}"
    );
    for said in ["hook-refused", "state-refused", "top-ok", "outbox-ok"] {
        assert!(stdout.contains(said), "{said}: {stdout} {stderr}");
    }
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(!work.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(work.join(".autocode/runs/r/run.json")).unwrap(),
        "{}"
    );
    let receipt: Receipt = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("receipt in {stdout}: {e}"));
    assert!(receipt.verified);
    let room = receipt.room.expect("room");
    assert!(
        room.mechanisms.iter().any(|m| m.contains("user namespace")) || !root,
        "{room:?}"
    );
}

/// The autocode binary run as `nobody` (through `setpriv` when the test runs as `root`),
/// else as the test's own user.
pub(super) fn autocode_as_ordinary_user(root: bool) -> Command {
    if !root {
        return Command::new(BIN);
    }
    let mut command = Command::new("setpriv");
    command.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        BIN,
    ]);
    command
}

fn walk(dir: PathBuf) -> Vec<PathBuf> {
    let mut out = vec![dir.clone()];
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Datagrams sent with `sendto` or `sendmsg` to a pathname unix socket outside the room are
/// refused like a connect would be; inside the room they go through.
#[test]
fn datagrams_to_unix_sockets_outside_the_room_are_refused() {
    use std::os::unix::net::UnixDatagram;
    let tree = Tree::new();
    let outside = UnixDatagram::bind(tree.path("outside/server.sock")).unwrap();
    outside.set_nonblocking(true).unwrap();
    let inside = UnixDatagram::bind(tree.path("work/own.sock")).unwrap();
    inside.set_nonblocking(true).unwrap();
    let ops = [
        op("dgram", tree.path("outside/server.sock")),
        op("dgram_msg", tree.path("outside/server.sock")),
        op("dgram", tree.path("work/own.sock")),
        op("dgram_msg", tree.path("work/own.sock")),
    ];
    let (verdicts, receipt) = probe(&tree.path("work"), Some(tree.room()), &ops);
    assert_eq!(verdict(&verdicts, &ops[0]), "EACCES", "{verdicts:?}");
    assert_eq!(verdict(&verdicts, &ops[1]), "EACCES", "{verdicts:?}");
    assert_eq!(verdict(&verdicts, &ops[2]), "ok", "{verdicts:?}");
    assert_eq!(verdict(&verdicts, &ops[3]), "ok", "{verdicts:?}");
    let mut buf = [0u8; 8];
    assert!(
        outside.recv(&mut buf).is_err(),
        "nothing reached the outside socket"
    );
    assert_eq!(inside.recv(&mut buf).unwrap(), 1);
    assert_eq!(inside.recv(&mut buf).unwrap(), 1);
    let denied: Vec<&str> = receipt.denied.iter().map(|d| d.syscall.as_str()).collect();
    assert!(denied.contains(&"sendto"), "{denied:?}");
    assert!(denied.contains(&"sendmsg"), "{denied:?}");
    // Without a room the same sends go through (a control for the refusal above).
    let (verdicts, _) = probe(&tree.path("work"), None, &ops[..2]);
    assert_eq!(verdict(&verdicts, &ops[0]), "ok", "{verdicts:?}");
    assert_eq!(verdict(&verdicts, &ops[1]), "ok", "{verdicts:?}");
}

/// A room with an overlay (the verification tree): the family sees the lower tree through its
/// directory, without what the upper layer's whiteouts hide, from a cwd inside it; its writes
/// land in the upper layer; the lower layer stays as it was and cannot be written directly.
#[test]
fn an_overlay_shows_the_lower_tree_and_keeps_every_write_in_the_upper_layer() {
    let tree = Tree::new();
    let lower = tree.path("outside/lower");
    std::fs::create_dir_all(lower.join("src")).unwrap();
    std::fs::create_dir_all(lower.join("target")).unwrap();
    std::fs::write(lower.join("src/lib.py"), "original\n").unwrap();
    std::fs::write(lower.join("target/artifact"), "built\n").unwrap();
    let overlay = Overlay {
        dir: tree.path("work/tree"),
        lower: lower.clone(),
        upper: tree.path("outside/layer/upper"),
        work: tree.path("outside/layer/work"),
    };
    for dir in [&overlay.dir, &overlay.upper, &overlay.work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    supervise::whiteout(&overlay.upper.join("target")).unwrap();
    let room = Room {
        overlay: Some(overlay.clone()),
        ..Room::writable([overlay.dir.clone()])
    };
    let merged = &overlay.dir;
    let allowed = [
        op("read", "src/lib.py"),
        op("write", merged.join("src/lib.py")),
        op("write", merged.join("new.txt")),
        op("mkdir", merged.join("made")),
    ];
    let refused = [
        (op("read", merged.join("target/artifact")), "ENOENT"),
        (op("write", lower.join("src/lib.py")), "EACCES"),
        (op("write", lower.join("planted")), "EACCES"),
    ];
    let all: Vec<String> = allowed
        .iter()
        .cloned()
        .chain(refused.iter().map(|(op, _)| op.clone()))
        .collect();
    let (verdicts, receipt) = probe(merged, Some(room), &all);
    for op in &allowed {
        assert_eq!(verdict(&verdicts, op), "ok", "{op}: {verdicts:?}");
    }
    for (op, errno) in &refused {
        assert_eq!(verdict(&verdicts, op), *errno, "{op}: {verdicts:?}");
    }
    assert_eq!(
        std::fs::read_to_string(lower.join("src/lib.py")).unwrap(),
        "original\n"
    );
    assert!(lower.join("target/artifact").exists() && !lower.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(overlay.upper.join("src/lib.py")).unwrap(),
        "x"
    );
    assert!(overlay.upper.join("new.txt").exists() && overlay.upper.join("made").is_dir());
    // Autocode's own view of the directory is what was there before: nothing.
    assert_eq!(std::fs::read_dir(merged).unwrap().count(), 0);
    let room = receipt.room.as_ref().expect("the receipt lists the room");
    assert_eq!(room.overlay.as_ref(), Some(&overlay));
    assert_mounts_stayed_private(&receipt, "mount-namespace-overlay", merged);
}

/// The verification tree's overlay for an ordinary user (a user namespace, `userxattr`):
/// `autocode supervise --overlay-lower` run as `nobody` shows the lower tree in the current
/// directory, takes the command's writes, and leaves the lower tree as it was.
#[test]
fn an_overlay_holds_for_an_ordinary_user() {
    let tree = Tree::new();
    let lower = tree.path("outside/lower");
    let view = tree.path("work/view");
    let temp = tree.path("tmp");
    std::fs::create_dir_all(lower.join("src")).unwrap();
    std::fs::create_dir_all(&view).unwrap();
    std::fs::create_dir_all(&temp).unwrap();
    std::fs::write(lower.join("src/lib.py"), "original\n").unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    for entry in walk(tree.path("")) {
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    // The work tree is the user's own (a copy-up keeps the owner, which must be mapped).
    if root {
        for entry in walk(lower.clone()) {
            std::os::unix::fs::lchown(&entry, Some(65534), Some(65534)).unwrap();
        }
    }
    let script = "id -u; cat src/lib.py; echo changed > src/lib.py && echo new > new.txt && \
                  cat src/lib.py new.txt";
    let mut command = autocode_as_ordinary_user(root);
    let output = command
        .args(["supervise", "--json", "--overlay-lower"])
        .arg(&lower)
        .args(["--", "/bin/sh", "-c", script])
        .current_dir(&view)
        .env("HOME", tree.path("home"))
        .env("TMPDIR", &temp)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout} {stderr}");
    // The probe's layers and the command's are gone, though the kernel made the overlay's
    // work directory unreadable to its owner.
    let left: Vec<PathBuf> = std::fs::read_dir(&temp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_ne!(lines.first().copied(), Some("0"), "{stdout} {stderr}");
    assert_eq!(lines[1..4], ["original", "changed", "new"], "{stdout}");
    assert_eq!(
        std::fs::read_to_string(lower.join("src/lib.py")).unwrap(),
        "original\n"
    );
    assert!(!lower.join("new.txt").exists());
    assert_eq!(std::fs::read_dir(&view).unwrap().count(), 0);
    let receipt: Receipt = serde_json::from_str(lines.last().copied().unwrap_or_default())
        .unwrap_or_else(|e| panic!("receipt in {stdout}: {e}"));
    assert!(receipt.verified);
    let room = receipt.room.expect("room");
    assert_eq!(room.overlay.as_ref().map(|o| &o.lower), Some(&lower));
    assert!(
        room.mechanisms
            .iter()
            .any(|m| m == "mount-namespace-overlay (user namespace)")
            || !root,
        "{room:?}"
    );
}
