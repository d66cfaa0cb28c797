//! The requirements conversation through a pseudo-terminal (stdin and stderr on its slave side):
//! answers, `/default`, the plan approved with `y`; `/pause` is a normal `WAITING_FOR_USER`
//! pause that `resume` continues; `--no-chat` asks nothing on the same terminal.

use std::fs;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::run_e2e::{Harness, script_with};

const OBJECTIVE: &str = "Create hello.txt containing hello";

/// Runs `command` with stdin and stderr on a pseudo-terminal whose input is `typed`; (exit code,
/// stdout, what reached the terminal).
fn converse(mut command: Command, typed: &str) -> (Option<i32>, String, String) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let slave: OwnedFd = pty.slave;
    let slave_err = slave.try_clone().expect("dup slave");
    let mut child = command
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave_err))
        .spawn()
        .expect("spawn autocode on a pty");
    // The parent's copies of the slave go with the command: the master reads EOF (EIO) once
    // autocode and its children closed theirs.
    drop(command);
    let mut master = fs::File::from(pty.master);
    // A terminal in canonical mode hands the program one line per read: typing ahead is safe.
    master.write_all(typed.as_bytes()).expect("type");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 1 << 16];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
        bytes
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("stdout");
    let pid = child.id();
    let (done, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(Duration::from_secs(120)).is_err() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX)),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    });
    let status = child.wait().expect("wait");
    let _ = done.send(());
    let _ = watchdog.join();
    let screen = String::from_utf8_lossy(&reader.join().expect("pty reader")).into_owned();
    (status.code(), stdout, screen)
}

fn asking_harness() -> Harness {
    let asking = json!([{"report": {
        "summary": "A greeting file.",
        "goals": ["hello.txt exists"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": [OBJECTIVE]}],
        "open_questions": [
            {"id": "Q1", "question": "Which file name?", "proposed_default": "hello.txt"},
            {"id": "Q2", "question": "Which greeting?", "proposed_default": "hello"}
        ]
    }}]);
    Harness::new(script_with(&[("requirements", json!([asking]))]))
}

fn run_command(harness: &Harness, extra: &[&str]) -> Command {
    let ws = harness.workspace().display().to_string();
    let mut args = vec![
        "run",
        OBJECTIVE,
        "--workspace",
        &ws,
        "--provider",
        "fake",
        "--json",
    ];
    args.extend_from_slice(extra);
    harness.command(&args)
}

fn answers(harness: &Harness) -> Value {
    harness.status().json["answers"].clone()
}

#[test]
fn questions_are_answered_on_the_terminal_and_the_plan_approved_with_y() {
    let harness = asking_harness();
    let (code, stdout, screen) = converse(run_command(&harness, &[]), "/default\nhi there\ny\n");
    assert_eq!(code, Some(0), "{stdout}\n{screen}");
    let summary: Value = serde_json::from_str(stdout.trim()).expect("--json summary");
    assert_eq!(summary["outcome"], "complete", "{screen}");
    assert!(screen.contains("2 open questions"), "{screen}");
    assert!(screen.contains("Q1: Which file name?"), "{screen}");
    assert!(screen.contains("Q2 [default: hello] > "), "{screen}");
    assert!(screen.contains("? [y/N, /pause]"), "{screen}");
    let answers = answers(&harness);
    assert_eq!(answers["Q1"]["text"], "hello.txt", "{answers}");
    assert_eq!(answers["Q2"]["text"], "hi there", "{answers}");
}

#[test]
fn pause_on_the_terminal_is_a_normal_pause_that_resume_continues() {
    let harness = asking_harness();
    let (code, stdout, screen) = converse(run_command(&harness, &[]), "/pause\n");
    assert_eq!(code, Some(3), "{stdout}\n{screen}");
    let summary: Value = serde_json::from_str(stdout.trim()).expect("--json summary");
    assert_eq!(summary["pause"]["code"], "WAITING_FOR_USER", "{screen}");
    assert_eq!(answers(&harness), json!({}));
    let done = harness.resume(&["--answer", "Q1=hello.txt", "--answer", "Q2=hello", "--yes"]);
    done.assert_complete();

    // --no-chat on the same terminal asks nothing.
    let quiet = asking_harness();
    let (code, _, screen) = converse(run_command(&quiet, &["--no-chat"]), "");
    assert_eq!(code, Some(3), "{screen}");
    assert!(!screen.contains("/default"), "nothing was asked: {screen}");
}
