//! The exec ledger and unix-socket gating with real processes: execs recorded with argv, cwd
//! and how each process ended (code, signal), in keeper mode (the built binary, whose `main`
//! starts the keeper) and in-process mode (the library from this multi-threaded harness); a
//! forged command has no match; a failed exec is implausible; pathname unix-socket connects
//! reach only sockets inside the room. The command events of real runs of the three pinned CLIs
//! (recorded with their ledgers in `tests/fixtures/ledger/`) all match a ledger entry.
//!
//! No sleep is used as synchronization.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use autocode::report::evidence::{self, CitedCheck, CommandRecord};
use autocode::report::ledger::{LedgerMatch, LedgerMismatch, check_against_ledger, ledger_match};
use autocode::supervise::{
    self, Attestation, Exit, LaunchOptions, LaunchSpec, LedgerEntry, LedgerExit, Receipt, Room,
    StdinSource, StdioMode,
};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

/// The shell script both modes run: a plain command, a failing one, a missing program, a
/// child killed by a signal, and the root's own exit status.
const SCRIPT: &str =
    "ls / >/dev/null; sh -c 'exit 4'; /nonexistent/program; sh -c 'kill -9 $$'; exit 3";

fn by_argv<'a>(ledger: &'a [LedgerEntry], argv: &[&str]) -> Vec<&'a LedgerEntry> {
    ledger.iter().filter(|entry| entry.argv == argv).collect()
}

fn one<'a>(ledger: &'a [LedgerEntry], argv: &[&str]) -> &'a LedgerEntry {
    let found: Vec<_> = by_argv(ledger, argv)
        .into_iter()
        .filter(|entry| entry.exec_plausible)
        .collect();
    assert_eq!(found.len(), 1, "{argv:?} in {ledger:#?}");
    found[0]
}

fn assert_script_ledger(ledger: &[LedgerEntry], cwd: &Path) {
    let cwd = std::fs::canonicalize(cwd).unwrap();
    let root = one(ledger, &["/bin/sh", "-c", SCRIPT]);
    assert_eq!(root.seq, 0, "the root's own exec comes first");
    assert_eq!(root.exit, Some(LedgerExit::Code(3)));
    assert_eq!(Path::new(&root.cwd), cwd);
    let ls = one(ledger, &["ls", "/"]);
    assert_eq!(ls.exit, Some(LedgerExit::Code(0)));
    assert!(ls.filename.ends_with("/ls"), "{ls:?}");
    assert_eq!(
        one(ledger, &["sh", "-c", "exit 4"]).exit,
        Some(LedgerExit::Code(4))
    );
    assert_eq!(
        one(ledger, &["sh", "-c", "kill -9 $$"]).exit,
        Some(LedgerExit::Signal(9))
    );
    let missing = by_argv(ledger, &["/nonexistent/program"]);
    assert_eq!(missing.len(), 1, "{ledger:#?}");
    assert!(!missing[0].exec_plausible, "{:?}", missing[0]);
    assert_eq!(missing[0].exit, Some(LedgerExit::Code(127)));
    // Attestation: what ran is attested with the executable the kernel ran; a failed exec is
    // known as one; a process killed before any further notified call stays unconfirmed.
    assert_eq!(root.attestation, Attestation::Attested, "{root:?}");
    assert_eq!(ls.attestation, Attestation::Attested, "{ls:?}");
    assert!(
        ls.exe.as_deref().is_some_and(|exe| exe.ends_with("/ls")),
        "{ls:?}"
    );
    assert_eq!(
        one(ledger, &["sh", "-c", "exit 4"]).attestation,
        Attestation::Attested
    );
    assert_eq!(
        one(ledger, &["sh", "-c", "kill -9 $$"]).attestation,
        Attestation::Unconfirmed
    );
    assert_eq!(missing[0].attestation, Attestation::ExecFailed);
    // Sequence numbers are the order the keeper saw the execs.
    let seqs: Vec<u64> = ledger.iter().map(|entry| entry.seq).collect();
    assert_eq!(seqs, (0..ledger.len() as u64).collect::<Vec<_>>());
    // The cited forms of what ran match; a forged one does not.
    assert_eq!(
        ledger_match("ls /", 0, ledger),
        LedgerMatch::Matched { seq: ls.seq }
    );
    assert!(matches!(
        ledger_match("cargo test", 0, ledger),
        LedgerMatch::NotMatched {
            reason: LedgerMismatch::NoExec,
            ..
        }
    ));
    assert!(matches!(
        ledger_match("/nonexistent/program", 127, ledger),
        LedgerMatch::NotMatched {
            reason: LedgerMismatch::ExecImplausible,
            ..
        }
    ));
    assert!(matches!(
        ledger_match("exit 4", 0, ledger),
        LedgerMatch::NotMatched {
            reason: LedgerMismatch::ExitDiffers,
            ..
        }
    ));
}

fn spec(program: &str, args: &[&str], cwd: &Path, room: Option<Room>) -> LaunchSpec {
    LaunchSpec {
        label: "ledger test".into(),
        program: program.into(),
        args: args.iter().map(OsString::from).collect(),
        env: BTreeMap::from([("PATH".into(), "/usr/bin:/bin".into())]),
        cwd: cwd.to_path_buf(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 1 << 16 },
        timeout: None,
        room,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn keeper_mode_records_argv_cwd_and_every_kind_of_end() {
    let dir = tempfile::tempdir().unwrap();
    let ledger_path = dir.path().join("ledger.jsonl");
    let output = Command::new(BIN)
        .args(["supervise", "--json", "--ledger"])
        .arg(&ledger_path)
        .args(["--", "/bin/sh", "-c", SCRIPT])
        .current_dir(dir.path())
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let receipt: Receipt = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(receipt.mode, "seccomp_keeper");
    assert!(receipt.verified);
    let ledger = supervise::read_ledger(&ledger_path).unwrap();
    assert_script_ledger(&ledger, dir.path());
}

/// The routes that gave a forged event a ledger entry without running its command: an exec of
/// another program under the command's argv, and an exec the kernel rejects (ENOEXEC) whose
/// caller then exits 0. Neither is evidence; the honest runs beside them are.
#[test]
fn an_argv_over_another_program_and_a_rejected_exec_are_not_evidence() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("noexec.bin"), "\x7fELF but not really\n").unwrap();
    std::fs::set_permissions(
        dir.path().join("noexec.bin"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let ledger_path = dir.path().join("ledger.jsonl");
    let script = r#"
import os, sys
if os.fork() == 0:
    os.execv("/bin/true", ["python3", "-m", "unittest"])
os.wait()
if os.fork() == 0:
    try:
        os.execv("./noexec.bin", ["./noexec.bin"])
    except OSError:
        os._exit(0)
os.wait()
"#;
    let status = Command::new(BIN)
        .args(["supervise", "--confine", "--ledger"])
        .arg(&ledger_path)
        .args(["--", "/usr/bin/python3", "-c", script])
        .current_dir(dir.path())
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let ledger = supervise::read_ledger(&ledger_path).unwrap();
    let forged = one(&ledger, &["python3", "-m", "unittest"]);
    assert_eq!(
        forged.attestation,
        Attestation::ProgramDiffers,
        "{forged:?}"
    );
    assert!(
        forged
            .exe
            .as_deref()
            .is_some_and(|exe| exe.ends_with("/true"))
    );
    let rejected = one(&ledger, &["./noexec.bin"]);
    assert_eq!(rejected.exit, Some(LedgerExit::Code(0)));
    assert_eq!(
        rejected.attestation,
        Attestation::ExecFailed,
        "{rejected:?}"
    );
    for (command, code) in [("python3 -m unittest", 0), ("./noexec.bin", 0)] {
        assert!(
            matches!(
                ledger_match(command, code, &ledger),
                LedgerMatch::NotMatched {
                    reason: LedgerMismatch::Unattested,
                    ..
                }
            ),
            "{command}: {ledger:#?}"
        );
    }
    let root = ledger.first().unwrap();
    assert_eq!(root.attestation, Attestation::Attested, "{root:?}");
}

#[test]
fn in_process_mode_delivers_the_ledger_and_writes_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let ledger_path = dir.path().join("ledger.jsonl");
    let options = LaunchOptions {
        ledger_path: Some(ledger_path.clone()),
        ..LaunchOptions::default()
    };
    let finished = runtime()
        .block_on(supervise::run_with(
            spec("/bin/sh", &["-c", SCRIPT], dir.path(), None),
            options,
        ))
        .unwrap();
    assert_eq!(finished.exit, Exit::Code(3));
    assert_eq!(finished.receipt.mode, "seccomp_in_process");
    assert_script_ledger(&finished.ledger, dir.path());
    assert_eq!(
        supervise::read_ledger(&ledger_path).unwrap(),
        finished.ledger,
        "the file holds what Finished holds"
    );
}

/// A command over the ledger file's cap (a builder writing a source file through a heredoc) in
/// the shell wrapper of each pinned CLI: the file keeps the payload's ends and digests, and the
/// command event still matches its exec; the same command with one byte changed does not
/// (Codex and OpenCode: no exec, a forgery; Claude Code: `cut_text`, neither evidence nor a
/// proven forgery).
#[test]
fn a_command_over_the_cap_matches_by_digest_and_a_changed_byte_does_not() {
    let body: String = (0..300)
        .map(|at| format!("    printf 'line {at}: it\'s text\\n'   # {at}\n"))
        .collect();
    let command = format!("cat > out.sh <<'EOF'\n{body}EOF\nwc -l out.sh");
    assert!(command.len() > 8192, "{}", command.len());
    let changed = command.replacen("line 150", "line 15O", 1);
    let single = |text: &str| format!("'{}'", text.replace('\'', r#"'"'"'"#));
    let claude = |text: &str| {
        format!(
            "source /tmp/snapshot-bash-1.sh 2>/dev/null || true && eval {} && pwd -P >| /tmp/claude-9f3e-cwd",
            single(text)
        )
    };
    // (CLI, the payload its shell runs, the command event, the event with one byte changed)
    let shapes = [
        (
            "opencode",
            command.clone(),
            command.clone(),
            changed.clone(),
        ),
        (
            "codex",
            command.clone(),
            format!("/bin/bash -lc {}", single(&command)),
            format!("/bin/bash -lc {}", single(&changed)),
        ),
        ("claude", claude(&command), command.clone(), changed.clone()),
    ];
    for (cli, payload, event, forged) in shapes {
        let dir = tempfile::tempdir().unwrap();
        let ledger_path = dir.path().join("ledger.jsonl");
        let options = LaunchOptions {
            ledger_path: Some(ledger_path.clone()),
            ..LaunchOptions::default()
        };
        let finished = runtime()
            .block_on(supervise::run_with(
                spec("/bin/bash", &["-c", &payload], dir.path(), None),
                options,
            ))
            .unwrap();
        assert_eq!(finished.exit, Exit::Code(0), "{cli}");
        let ledger = supervise::read_ledger(&ledger_path).unwrap();
        let file_size = std::fs::metadata(&ledger_path).unwrap().len();
        assert!(
            file_size < 8192,
            "{cli}: the payload is kept by its ends ({file_size} bytes)"
        );
        let shell = &ledger[0];
        assert_eq!(shell.argv_cut.len(), 1, "{cli}: {shell:?}");
        assert!(!shell.argv_truncated, "{cli}");
        assert!(
            matches!(
                ledger_match(&event, 0, &ledger),
                LedgerMatch::Matched { seq: 0 }
            ),
            "{cli}: {:?}",
            ledger_match(&event, 0, &ledger)
        );
        let reason = match ledger_match(&forged, 0, &ledger) {
            LedgerMatch::NotMatched { reason, .. } => reason,
            matched => panic!("{cli}: a changed byte matched: {matched:?}"),
        };
        let expected = if cli == "claude" {
            LedgerMismatch::CutText
        } else {
            LedgerMismatch::NoExec
        };
        assert_eq!(reason, expected, "{cli}");
    }
}

#[test]
fn long_argv_is_cut_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let finished = runtime()
        .block_on(supervise::run(spec(
            "/bin/sh",
            &["-c", "/bin/true $(seq 1 2000)"],
            dir.path(),
            None,
        )))
        .unwrap();
    let long = finished
        .ledger
        .iter()
        .find(|entry| entry.filename == "/bin/true")
        .expect("the exec of /bin/true");
    assert!(long.argv_truncated);
    assert_eq!(long.argv.len(), 1024);
    assert_eq!(long.exit, Some(LedgerExit::Code(0)));
}

/// A listener bound by this test process: outside any family.
fn listen(path: &Path) -> UnixListener {
    UnixListener::bind(path).unwrap()
}

const CONNECT: &str = "import socket, sys\n\
s = socket.socket(socket.AF_UNIX)\n\
try:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print(e.errno); sys.exit(1)\n\
print('connected')\n";

fn python_connect(socket: &Path, cwd: &Path, room: Option<Room>) -> (Exit, String, Receipt) {
    let finished = runtime()
        .block_on(supervise::run(spec(
            "/usr/bin/python3",
            &["-c", CONNECT, socket.to_str().unwrap()],
            cwd,
            room,
        )))
        .unwrap();
    (
        finished.exit,
        String::from_utf8_lossy(&finished.stdout).trim().to_owned(),
        finished.receipt,
    )
}

#[test]
fn pathname_sockets_outside_the_room_are_refused_and_inside_reached() {
    let outside = tempfile::tempdir().unwrap();
    let room_dir = tempfile::tempdir().unwrap();
    let foreign = outside.path().join("server.sock");
    let _foreign = listen(&foreign);
    let own = room_dir.path().join("own.sock");
    let _own = listen(&own);
    let room = || Some(Room::writable([room_dir.path().to_path_buf()]));

    let (exit, out, receipt) = python_connect(&foreign, room_dir.path(), room());
    assert_eq!((exit, out.as_str()), (Exit::Code(1), "13"), "EACCES");
    let denied = receipt
        .denied
        .iter()
        .find(|call| call.syscall == "connect" && call.reason.contains("server.sock"))
        .expect("the refused connect is in the receipt");
    let real = std::fs::canonicalize(&foreign).unwrap();
    assert_eq!(
        denied.reason,
        format!("unix socket {} is outside the room", real.display())
    );

    // A symlink inside the room that points outside is followed, and refused.
    let link = room_dir.path().join("link.sock");
    std::os::unix::fs::symlink(&foreign, &link).unwrap();
    let (exit, out, _) = python_connect(&link, room_dir.path(), room());
    assert_eq!((exit, out.as_str()), (Exit::Code(1), "13"));

    // Relative to the caller's cwd, inside the room: reached.
    let (exit, out, receipt) = python_connect(Path::new("own.sock"), room_dir.path(), room());
    assert_eq!((exit, out.as_str()), (Exit::Code(0), "connected"));
    assert!(
        !receipt
            .denied
            .iter()
            .any(|call| call.reason.contains(".sock")),
        "{:?}",
        receipt.denied
    );

    // Without a room nothing is gated.
    let (exit, out, _) = python_connect(&foreign, room_dir.path(), None);
    assert_eq!((exit, out.as_str()), (Exit::Code(0), "connected"));
}

#[test]
fn keeper_mode_gates_connects_too() {
    // Outside /tmp and HOME: a socket there is the host's own, and the gate refuses it (through
    // the private view of /tmp a host socket is another object, and a connect finds no one).
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let room_dir = tempfile::tempdir().unwrap();
    let foreign = outside.path().join("server.sock");
    let _foreign = listen(&foreign);
    let output = Command::new(BIN)
        .args(["supervise", "--json", "--room"])
        .arg(room_dir.path())
        .args(["--", "/usr/bin/python3", "-c", CONNECT])
        .arg(&foreign)
        .current_dir(room_dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert_eq!(stdout.lines().next(), Some("13"));
    let receipt: Receipt = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(receipt.mode, "seccomp_keeper");
    assert!(receipt.denied.iter().any(|call| call.syscall == "connect"));
}

struct Fixture {
    records: Vec<CommandRecord>,
    checks: Vec<CitedCheck>,
    ledger: Vec<LedgerEntry>,
}

fn fixture(cli: &str) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ledger")
        .join(format!("{cli}-tester.json"));
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    Fixture {
        records: serde_json::from_value(value["command_events"].clone()).unwrap(),
        checks: serde_json::from_value(value["checks"].clone()).unwrap(),
        ledger: serde_json::from_value(value["ledger"].clone()).unwrap(),
    }
}

/// Recorded from `autocode demo --provider <cli>` with the ledger on (tester stage: its
/// `evidence.json` and `ledger.jsonl`, long argv strings cut): every genuine command event of
/// the pinned CLIs is backed by an attested entry, and changing its exit code or its command is
/// caught. Claude Code reports no exit code for a result it does not mark as an error: there the
/// cited check stands on the ledger's attested exit alone.
#[test]
fn every_command_event_of_the_real_clis_matches_a_ledger_entry() {
    for cli in ["codex", "claude", "opencode"] {
        let Fixture {
            records,
            checks,
            ledger,
        } = fixture(cli);
        assert!(!checks.is_empty(), "{cli}");
        let findings = check_against_ledger(
            evidence::check_event_evidence(&checks, &records),
            &records,
            &ledger,
        );
        for finding in &findings {
            assert_eq!(finding.problem, None, "{cli}: {finding:?}");
        }
        assert_eq!(
            records.iter().any(|record| record.exit_code.is_none()),
            cli == "claude",
            "{cli}: only Claude Code leaves the exit unknown"
        );
        for check in checks {
            let (command, code) = (check.command, check.exit_code as i32);
            assert!(
                matches!(
                    ledger_match(&command, code, &ledger),
                    LedgerMatch::Matched { .. }
                ),
                "{cli}: {command:?} exit {code}"
            );
            assert!(
                matches!(
                    ledger_match(&command, code + 1, &ledger),
                    LedgerMatch::NotMatched {
                        reason: LedgerMismatch::ExitDiffers,
                        ..
                    }
                ),
                "{cli}: {command:?} with another exit"
            );
            assert!(
                matches!(
                    ledger_match(&format!("{command} --forged"), code, &ledger),
                    LedgerMatch::NotMatched {
                        reason: LedgerMismatch::NoExec,
                        ..
                    }
                ),
                "{cli}: {command:?} altered"
            );
        }
    }
}

/// An exec from a thread that is not its process's leader: the notification names the thread,
/// the ledger names the process (the caller is read from /proc, not taken for a leader).
#[test]
fn an_exec_from_a_non_leader_thread_is_recorded_under_its_process() {
    let dir = tempfile::tempdir().unwrap();
    let ledger_path = dir.path().join("ledger.jsonl");
    let script = "import os, threading, sys\n\
                  sys.stdout.write(str(os.getpid()) + '\\n'); sys.stdout.flush()\n\
                  t = threading.Thread(target=lambda: os.execv('/bin/sh', ['sh', '-c', 'exit 5', 'from-thread']))\n\
                  t.start(); t.join()\n";
    let output = Command::new(BIN)
        .args(["supervise", "--ledger"])
        .arg(&ledger_path)
        .args(["--", "python3", "-c", script])
        .current_dir(dir.path())
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(5), "{output:?}");
    let pid: i32 = String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .expect("python printed its pid");
    let ledger = supervise::read_ledger(&ledger_path).unwrap();
    let from_thread = one(&ledger, &["sh", "-c", "exit 5", "from-thread"]);
    assert_eq!(from_thread.pid, pid, "{ledger:#?}");
    assert_eq!(from_thread.exit, Some(LedgerExit::Code(5)));
}

/// The failed `PATH` probes of an `execvp` (directories without the program) are answered
/// ENOENT by the keeper without running anything, read as failed execs of that argv, and cost
/// one line per run of them (per millisecond); the program found runs and is attested.
#[test]
fn failed_path_probes_are_answered_and_folded() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let search = format!("PATH={}:{}:/usr/bin:/bin", a.display(), b.display());
    let ledger_path = dir.path().join("ledger.jsonl");
    let status = Command::new(BIN)
        .args(["supervise", "--ledger"])
        .arg(&ledger_path)
        .args(["--", "/usr/bin/env", &search, "sh", "-c", "exit 5"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(5));
    let ledger = supervise::read_ledger(&ledger_path).unwrap();
    let runs = by_argv(&ledger, &["sh", "-c", "exit 5"]);
    let names: Vec<String> = runs.iter().map(|entry| entry.filename.clone()).collect();
    assert_eq!(
        names[..2],
        [
            a.join("sh").to_string_lossy().into_owned(),
            b.join("sh").to_string_lossy().into_owned()
        ],
        "{ledger:#?}"
    );
    for probe in &runs[..2] {
        assert!(!probe.exec_plausible, "{probe:?}");
        assert_eq!(probe.attestation, Attestation::ExecFailed, "{probe:?}");
        assert_eq!(probe.exit, Some(LedgerExit::Code(5)), "{probe:?}");
    }
    let found = runs.last().unwrap();
    assert_eq!(runs.len(), 3, "{ledger:#?}");
    assert_eq!(found.attestation, Attestation::Attested, "{found:?}");
    assert_eq!(found.exit, Some(LedgerExit::Code(5)));
    let seqs: Vec<u64> = ledger.iter().map(|entry| entry.seq).collect();
    assert_eq!(seqs, (0..ledger.len() as u64).collect::<Vec<_>>());
    let text = std::fs::read_to_string(&ledger_path).unwrap();
    if runs[0].at_ms == runs[1].at_ms {
        assert!(
            !text.contains("/b/sh"),
            "the second probe is the first's: {text}"
        );
    }
}
