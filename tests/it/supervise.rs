//! The process-ownership boundary with real processes: detached daemons of every common kind,
//! thread callers, second listeners, owner loss, keeper loss, spawning threads that exit, and
//! leak checks. End-to-end cases run the built binary (`autocode supervise`), whose `main`
//! starts the keeper before any thread; in-process cases use the library from this
//! multi-threaded harness (in-process servicing).
//!
//! No sleep is used as synchronization: every wait is a bounded loop of readiness checks on
//! files and pids.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use autocode::supervise::{
    self, EndedBy, Exit, LaunchOptions, LaunchSpec, Receipt, StdinSource, StdioMode,
};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

/// In-process launches share this process's fd table and children: count leaks one at a time.
static IN_PROCESS: Mutex<()> = Mutex::new(());

fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Alive = present in /proc and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect()
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    receipt: Receipt,
}

/// `autocode supervise --json -- ARGV`; the receipt is the last stdout line.
fn supervise_json(argv: &[&str]) -> Outcome {
    let output = Command::new(BIN)
        .arg("supervise")
        .arg("--json")
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .expect("run autocode");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let last = stdout.lines().last().unwrap_or_default();
    let receipt: Receipt = serde_json::from_str(last).unwrap_or_else(|error| {
        panic!(
            "no receipt ({error}) in stdout {stdout:?}, stderr {:?}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    Outcome {
        code: output.status.code(),
        stdout,
        receipt,
    }
}

fn python(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write script");
    path.to_string_lossy().into_owned()
}

fn assert_verified(receipt: &Receipt) {
    assert!(receipt.verified, "cleanup not verified: {receipt:?}");
    assert_eq!(receipt.mode, "seccomp_keeper", "{receipt:?}");
    assert_eq!(
        receipt.session_boundary.as_deref(),
        Some("seccomp_user_notification")
    );
}

#[test]
fn plain_exit_passes_the_code_through_and_verifies() {
    let outcome = supervise_json(&["sh", "-c", "echo out; exit 7"]);
    assert_eq!(outcome.code, Some(7));
    assert!(outcome.stdout.starts_with("out\n"));
    assert_verified(&outcome.receipt);
    assert_eq!(outcome.receipt.ended_by, EndedBy::RootExit);
    assert!(outcome.receipt.sessions.is_empty());
}

/// A daemon that announces its pid in `file` once it runs in its new session.
const ANNOUNCE: &str = "sh -c 'echo $$ >> \"$0\"; exec sleep 1000'";

#[test]
fn setsid_daemon_left_behind_is_recorded_and_killed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let script = format!(
        "setsid {ANNOUNCE} {f} & n=0; while [ ! -s {f} ] && [ $n -lt 2000 ]; do n=$((n+1)); sleep 0.005; done",
        f = file.display()
    );
    let outcome = supervise_json(&["sh", "-c", &script]);
    let pids = pids_in(&file);
    assert_eq!(pids.len(), 1, "daemon did not announce itself");
    assert_verified(&outcome.receipt);
    assert!(
        outcome.receipt.sessions.contains(&pids[0]),
        "{:?}",
        outcome.receipt
    );
    assert!(outcome.receipt.killed.contains(&pids[0]));
    assert!(!alive(pids[0]), "the setsid daemon survived");
}

const DOUBLE_FORK: &str = r#"
import os, sys, time
out = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 4096)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, b"%d\n" % os.getpid())
        os.close(fd)
        while True:
            time.sleep(100)
    os._exit(0)
deadline = time.time() + 10
while time.time() < deadline and not open(out, "a+").seek(0, 2):
    time.sleep(0.005)
"#;

#[test]
fn double_fork_daemon_that_closes_every_descriptor_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let script = python(dir.path(), "daemon.py", DOUBLE_FORK);
    let outcome = supervise_json(&["python3", &script, file.to_str().unwrap()]);
    let pids = pids_in(&file);
    assert_eq!(pids.len(), 1);
    assert_verified(&outcome.receipt);
    assert_eq!(outcome.receipt.sessions.len(), 1, "{:?}", outcome.receipt);
    assert!(!alive(pids[0]), "the double-forked daemon survived");
}

#[test]
fn nohup_and_disown_do_not_escape() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let script = format!(
        "nohup sleep 1000 >/dev/null 2>&1 & echo $! >> {f}; sleep 1000 & echo $! >> {f}; disown -a; true",
        f = file.display()
    );
    let outcome = supervise_json(&["bash", "-c", &script]);
    let pids = pids_in(&file);
    assert_eq!(pids.len(), 2);
    assert_verified(&outcome.receipt);
    for pid in pids {
        assert!(!alive(pid), "{pid} survived");
    }
}

#[test]
fn node_detached_spawn_is_recorded_and_killed() {
    let script = "const c = require('child_process').spawn('sleep', ['1000'], {detached: true, stdio: 'ignore'}); console.log(c.pid); c.unref();";
    let outcome = supervise_json(&["node", "-e", script]);
    let pid: i32 = outcome
        .stdout
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_verified(&outcome.receipt);
    assert!(!alive(pid), "node's detached child survived");
    // The detached child's setsid may run before or after node exits; either way it is gone,
    // and when it ran, it was recorded under the child's pid (its TGID).
    for session in &outcome.receipt.sessions {
        assert_eq!(*session, pid);
    }
}

const THREAD_SETSID: &str = r#"
import ctypes, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
out, count = sys.argv[1], int(sys.argv[2])
for _ in range(count):
    if os.fork() == 0:
        results = []
        threads = [threading.Thread(target=lambda: results.append(libc.setsid())) for _ in range(16)]
        for t in threads: t.start()
        for t in threads: t.join()
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        ok = sum(1 for r in results if r > 0)
        os.write(fd, b"%d %d\n" % (os.getpid(), ok))
        os.close(fd)
        while True:
            time.sleep(100)
deadline = time.time() + 20
def announced():
    return len(open(out).read().splitlines()) if os.path.exists(out) else 0
while time.time() < deadline and announced() < count:
    time.sleep(0.005)
print(open(out).read(), end="")
"#;

#[test]
fn thread_storm_setsid_records_the_thread_group_not_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let script = python(dir.path(), "storm.py", THREAD_SETSID);
    let outcome = supervise_json(&["python3", &script, file.to_str().unwrap(), "4"]);
    let lines: Vec<(i32, i32)> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace().map(|w| w.parse::<i32>().unwrap());
            (words.next().unwrap(), words.next().unwrap())
        })
        .collect();
    assert_eq!(lines.len(), 4);
    assert_verified(&outcome.receipt);
    for (pid, successes) in lines {
        // 16 threads raced; exactly one setsid can succeed per process.
        assert_eq!(successes, 1, "process {pid}");
        assert!(
            outcome.receipt.sessions.contains(&pid),
            "{pid} not recorded: {:?}",
            outcome.receipt
        );
        assert!(!alive(pid), "{pid} survived");
    }
}

const FILTERS: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Insn))]
allow = (Insn * 1)(Insn(0x06, 0, 0, 0x7fff0000))
prog = Prog(1, allow)
SYS_seccomp, SET_MODE_FILTER, NEW_LISTENER = 317, 1, 8
listener = libc.syscall(SYS_seccomp, SET_MODE_FILTER, NEW_LISTENER, ctypes.byref(prog))
listener_errno = ctypes.get_errno()
ordinary = libc.syscall(SYS_seccomp, SET_MODE_FILTER, 0, ctypes.byref(prog))
filters = [l for l in open("/proc/self/status") if l.startswith("Seccomp_filters")][0].split()[1]
def target(fd):
    try:
        return os.readlink("/proc/self/fd/" + fd)
    except OSError:
        return ""
own_listeners = sum(1 for fd in os.listdir("/proc/self/fd") if "seccomp" in target(fd))
print(listener, os.strerror(listener_errno), ordinary, filters, own_listeners)
"#;

#[test]
fn a_second_listener_is_refused_and_an_ordinary_filter_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let script = python(dir.path(), "filters.py", FILTERS);
    let outcome = supervise_json(&["python3", &script]);
    let line = outcome.stdout.lines().next().unwrap();
    assert_eq!(
        line, "-1 Operation not permitted 0 2 0",
        "{}",
        outcome.stdout
    );
    assert_verified(&outcome.receipt);
    assert_eq!(outcome.receipt.denied.len(), 1);
    assert_eq!(outcome.receipt.denied[0].syscall, "seccomp");
}

fn status_field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .unwrap_or_else(|| panic!("{key} missing in {status}"))
        .trim()
        .to_owned()
}

#[test]
fn the_family_runs_without_boundary_capabilities_and_with_no_new_privs() {
    let outcome = supervise_json(&["cat", "/proc/self/status"]);
    assert_verified(&outcome.receipt);
    let status = &outcome.stdout;
    assert_eq!(status_field(status, "NoNewPrivs:"), "1");
    assert_eq!(status_field(status, "Seccomp_filters:"), "1");
    for key in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        let set = u64::from_str_radix(&status_field(status, key), 16).unwrap();
        for cap in [21, 19, 16, 17, 39, 38, 33, 32] {
            assert_eq!(set & (1 << cap), 0, "{key} still holds capability {cap}");
        }
    }
}

#[test]
fn group_mode_refuses_joining_a_group_outside_the_family() {
    // `autocode supervise` keeps the terminal: the root has its own group in the caller's
    // session, so the caller's group is reachable by setpgid and must be refused.
    let script = "import os\ntry:\n    os.setpgid(0, os.getpgid(os.getppid()))\n    print('joined')\nexcept PermissionError:\n    print('refused')\nos.setpgid(0, 0)\nprint('own group ok')";
    let outcome = supervise_json(&["python3", "-c", script]);
    assert_eq!(
        outcome.stdout.lines().take(2).collect::<Vec<_>>(),
        ["refused", "own group ok"]
    );
    assert_verified(&outcome.receipt);
    assert_eq!(outcome.receipt.root_sid, None);
    assert_eq!(outcome.receipt.denied.len(), 1, "{:?}", outcome.receipt);
    assert_eq!(outcome.receipt.denied[0].syscall, "setpgid");
}

const STAGE: &str = r#"
import os, subprocess, sys, time
out, go = sys.argv[1], sys.argv[2]
def daemon():
    p = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    with open(out, "a") as f: f.write("%d\n" % p.pid)
daemon()
deadline = time.time() + 20
while go != "-" and not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.005)
if go != "-":
    daemon()
with open(out, "a") as f: f.write("%d\n" % os.getpid())
with open(out + ".ready", "w") as f: f.write("ready")
while True:
    time.sleep(100)
"#;

fn autocode_children(autocode: u32) -> Vec<(i32, String)> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let ppid: u32 = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        if ppid == autocode {
            children.push((pid, comm));
        }
    }
    children
}

#[test]
fn autocode_killed_mid_stage_leaves_nothing_and_the_keeper_writes_the_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let receipt_path = dir.path().join("receipt.json");
    let script = python(dir.path(), "stage.py", STAGE);
    let mut autocode = Command::new(BIN)
        .args(["supervise", "--receipt"])
        .arg(&receipt_path)
        .args(["--", "python3", &script, file.to_str().unwrap(), "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = dir.path().join("pids.ready");
    wait_until(
        "the stage to start its daemon",
        Duration::from_secs(20),
        || ready.exists(),
    );
    let pids = pids_in(&file);
    assert_eq!(pids.len(), 2);
    autocode.kill().unwrap();
    autocode.wait().unwrap();
    wait_until("the keeper's receipt", Duration::from_secs(20), || {
        receipt_path.exists()
    });
    let receipt: Receipt =
        serde_json::from_str(&std::fs::read_to_string(&receipt_path).unwrap()).unwrap();
    assert!(receipt.verified, "{receipt:?}");
    assert!(receipt.owner_lost);
    assert_eq!(receipt.ended_by, EndedBy::OwnerLost);
    assert!(receipt.sessions.contains(&pids[0]), "{receipt:?}");
    for pid in pids {
        wait_until("the family to be gone", Duration::from_secs(5), || {
            !alive(pid)
        });
    }
}

#[test]
fn keeper_killed_autocode_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pids");
    let go = dir.path().join("go");
    let script = python(dir.path(), "stage.py", STAGE);
    let autocode = Command::new(BIN)
        .args(["supervise", "--json", "--timeout", "30", "--"])
        .args([
            "python3",
            &script,
            file.to_str().unwrap(),
            go.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the first daemon", Duration::from_secs(20), || {
        pids_in(&file).len() == 1
    });
    let keeper = autocode_children(autocode.id())
        .into_iter()
        .find(|(_, comm)| comm == "autocode")
        .expect("a keeper process")
        .0;
    // SAFETY-free: kill(1) the keeper by pid.
    assert!(
        Command::new("kill")
            .args(["-9", &keeper.to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_until("the keeper to be gone", Duration::from_secs(10), || {
        !alive(keeper)
    });
    std::fs::write(&go, "go").unwrap();
    let ready = dir.path().join("pids.ready");
    wait_until("the second daemon", Duration::from_secs(20), || {
        ready.exists()
    });
    let pids = pids_in(&file);
    assert_eq!(pids.len(), 3);
    // End the stage: the root is the last pid; kill it, the boundary ends the rest.
    assert!(
        Command::new("kill")
            .args(["-9", &pids[2].to_string()])
            .status()
            .unwrap()
            .success()
    );
    let output = autocode.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let receipt: Receipt = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(receipt.verified, "{receipt:?}");
    assert!(receipt.keeper_lost);
    assert!(receipt.sessions.contains(&pids[0]), "{receipt:?}");
    assert!(
        receipt.sessions.contains(&pids[1]),
        "taken-over servicing recorded nothing: {receipt:?}"
    );
    for pid in pids {
        assert!(!alive(pid), "{pid} survived");
    }
}

fn spec(program: &str, args: &[&str]) -> LaunchSpec {
    LaunchSpec {
        label: "test".into(),
        program: program.into(),
        args: args.iter().map(OsString::from).collect(),
        env: std::env::vars_os().collect::<BTreeMap<_, _>>(),
        cwd: std::env::temp_dir(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 1 << 20 },
        timeout: Some(Duration::from_secs(30)),
        room: None,
    }
}

#[test]
fn spawning_thread_exit_does_not_kill_the_root() {
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .thread_keep_alive(Duration::from_millis(1))
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "n=0; while [ ! -e {g} ] && [ $n -lt 4000 ]; do n=$((n+1)); sleep 0.005; done; echo survived",
        g = go.display()
    );
    let handle = runtime.handle().clone();
    // Launch from a short-lived thread (as a blocking-pool thread would be), which then exits.
    let running = std::thread::spawn(move || {
        handle.block_on(supervise::spawn(
            spec("sh", &["-c", &script]),
            LaunchOptions::default(),
        ))
    })
    .join()
    .unwrap()
    .unwrap();
    std::fs::write(&go, "").unwrap();
    let finished = runtime.block_on(running.finish()).unwrap();
    assert_eq!(finished.exit, Exit::Code(0), "{finished:?}");
    assert_eq!(String::from_utf8_lossy(&finished.stdout), "survived\n");
    assert!(finished.receipt.verified);
    assert_eq!(finished.receipt.mode, "seccomp_in_process");
}

fn boundary_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path()).is_ok_and(|target| {
                let target = target.to_string_lossy();
                // eventfds are left out: every tokio runtime of a concurrent test opens them.
                target.contains("seccomp") || target.contains("pidfd")
            })
        })
        .count()
}

/// Processes of ours (zombies included) whose command name starts with `prefix`.
fn named(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
        .filter(|stat| {
            stat.split_once('(')
                .is_some_and(|(_, rest)| rest.starts_with(prefix))
        })
        .collect()
}

#[test]
fn two_hundred_sequential_launches_leak_nothing() {
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Uniquely named programs, so concurrent tests' orphans (this harness is a subreaper once
    // it launches) are not counted, and recycled pids do not matter.
    let dir = tempfile::tempdir().unwrap();
    let (shell, sleeper) = (
        dir.path().join("leakcheck-sh"),
        dir.path().join("leakcheck-zz"),
    );
    std::os::unix::fs::symlink("/bin/sh", &shell).unwrap();
    std::os::unix::fs::symlink("/bin/sleep", &sleeper).unwrap();
    let script = format!("{} 1000 & true", sleeper.display());
    let launch = || spec(shell.to_str().unwrap(), &["-c", &script]);
    // Warm up the one-time threads and descriptors (spawner thread, owner state).
    runtime.block_on(supervise::run(launch())).unwrap();
    let fds_before = boundary_fds();
    for _ in 0..200 {
        let finished = runtime.block_on(supervise::run(launch())).unwrap();
        assert_eq!(finished.exit, Exit::Code(0));
        assert!(finished.receipt.verified, "{:?}", finished.receipt);
        assert_eq!(finished.receipt.killed.len(), 1);
    }
    assert_eq!(boundary_fds(), fds_before, "listener or pidfd leaked");
    assert_eq!(
        named("leakcheck"),
        Vec::<String>::new(),
        "processes or zombies left"
    );
}

#[test]
fn timeout_terminates_the_family_and_reports_it() {
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut timed = spec("sh", &["-c", "setsid sleep 1000 & sleep 1000"]);
    timed.timeout = Some(Duration::from_millis(300));
    let options = LaunchOptions {
        grace: Duration::from_millis(500),
        ..LaunchOptions::default()
    };
    let finished = runtime
        .block_on(supervise::run_with(timed, options))
        .unwrap();
    assert_eq!(finished.exit, Exit::TimedOut);
    assert_eq!(finished.receipt.ended_by, EndedBy::Timeout);
    assert!(finished.receipt.verified);
}

#[test]
fn an_idle_hold_keeps_a_silent_stage_from_idling_out() {
    // A silent stage outlives its idle timeout while a hold says work for it runs elsewhere
    // (an ACP agent waiting on autocode's terminal); the paired case below idles out.
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let options = LaunchOptions {
        idle_timeout: Some(Duration::from_secs(1)),
        grace: Duration::from_millis(200),
        ..LaunchOptions::default()
    };
    let finished = runtime.block_on(async {
        let running = supervise::spawn(spec("sleep", &["2.5"]), options)
            .await
            .unwrap();
        let hold = running.idle_holder().hold();
        let finished = running.finish().await.unwrap();
        drop(hold);
        finished
    });
    assert_eq!(finished.receipt.ended_by, EndedBy::RootExit);
    assert_eq!(finished.exit, Exit::Code(0));
}

#[test]
fn streaming_stage_reads_lines_tees_capped_logs_and_idles_out() {
    use tokio::io::AsyncBufReadExt;
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out_log, err_log) = (dir.path().join("out.log"), dir.path().join("err.log"));
    let options = LaunchOptions {
        stdout_log: Some(out_log.clone()),
        stderr_log: Some(err_log.clone()),
        log_limit: 16,
        idle_timeout: Some(Duration::from_millis(300)),
        grace: Duration::from_millis(200),
        receipt_path: None,
        ledger_path: None,
    };
    // Prints, then goes silent while a survivor holds stdout open: the idle timeout ends it.
    let stage = spec(
        "sh",
        &[
            "-c",
            "echo one; echo two; echo 0123456789abcdefXYZ >&2; setsid sleep 1000 & exec sleep 1000",
        ],
    );
    let finished = runtime.block_on(async {
        let mut running = supervise::spawn(stage, options).await.unwrap();
        let mut lines = tokio::io::BufReader::new(running.stdout().unwrap()).lines();
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line);
        }
        assert_eq!(seen, ["one", "two"]);
        running.finish().await.unwrap()
    });
    assert_eq!(finished.exit, Exit::TimedOut);
    assert_eq!(finished.receipt.ended_by, EndedBy::IdleTimeout);
    assert!(finished.receipt.verified);
    assert_eq!(std::fs::read_to_string(&out_log).unwrap(), "one\ntwo\n");
    assert_eq!(
        std::fs::read_to_string(&err_log).unwrap(),
        "0123456789abcdef\n[autocode: log cut at 16 bytes]\n"
    );
}

#[test]
fn cancellation_ends_the_family() {
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let finished = runtime.block_on(async {
        let running = supervise::spawn(spec("sleep", &["1000"]), LaunchOptions::default())
            .await
            .unwrap();
        running.canceller().cancel();
        running.finish().await.unwrap()
    });
    assert_eq!(finished.exit, Exit::Signal(libc::SIGTERM));
    assert_eq!(finished.receipt.ended_by, EndedBy::Cancelled);
    assert!(finished.receipt.verified);
}

#[test]
fn stdin_bytes_reach_the_root() {
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut cat = spec("cat", &[]);
    cat.stdin = StdinSource::Bytes(b"prompt text".to_vec());
    cat.env = BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]);
    let finished = runtime.block_on(supervise::run(cat)).unwrap();
    assert_eq!(finished.stdout, b"prompt text");
    assert_eq!(finished.exit, Exit::Code(0));
}

#[test]
fn a_missing_program_is_a_spawn_error() {
    let _serial = IN_PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let error = runtime
        .block_on(supervise::run(spec("/nonexistent/program", &[])))
        .unwrap_err();
    assert!(
        matches!(error, supervise::LaunchError::Spawn { .. }),
        "{error}"
    );
}

/// Every file under `src/` outside `src/supervise/`.
fn sources_outside_supervise(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("supervise") {
                sources_outside_supervise(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_boundary_starts_processes() {
    // Rust spellings of starting a process; comment lines are prose, not calls.
    let forbidden = regex::Regex::new(concat!(
        r"std::process::Command|tokio::process::Command|process::Command\b|process::\{[^}]*\bCommand\b",
        r"|\bfork\s*\(|libc::fork|unistd::fork|posix_spawn|\bexecv[pe]?\s*\(|\bexecvpe\s*\(",
        r"|\bfexecve\b|unistd::exec|\.exec\(\)|CommandExt|\bSYS_(clone3?|fork|vfork|execve)\b",
    ))
    .unwrap();
    for line in [
        "let c = std::process::Command::new(\"x\");",
        "use tokio::process::Command;",
        "use std::process::{Child, Command};",
        "unsafe { libc::fork() }",
        "libc::execvp(p, a);",
        "cmd.exec();",
        "libc::posix_spawnp(...)",
    ] {
        assert!(forbidden.is_match(line), "the guard misses {line}");
    }
    assert!(!forbidden.is_match("let c = clap::Command::new(\"autocode\");"));
    assert!(!forbidden.is_match("codex exec --json"));
    let mut files = Vec::new();
    sources_outside_supervise(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(!files.is_empty());
    let mut offenders = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in text.lines().enumerate() {
            if !line.trim_start().starts_with("//") && forbidden.is_match(line) {
                offenders.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "processes started outside src/supervise/:\n{}",
        offenders.join("\n")
    );
}
