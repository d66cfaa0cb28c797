//! The requirements conversation through a pseudo-terminal (stdin and stderr on its slave side):
//! answers, `/default`, the plan approved with `y`; `/pause` is a normal `WAITING_FOR_USER`
//! pause that `resume` continues; `--no-chat` asks nothing on the same terminal. After the
//! answers the brief is shown: feedback writes it again, `y` approves that exact revision, and
//! `/pause` there is a pause that `resume` on a terminal comes back to.

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

fn asking_brief() -> Value {
    json!([{"report": {
        "summary": "A greeting file.",
        "goals": ["hello.txt exists"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": [OBJECTIVE]}],
        "open_questions": [
            {"id": "Q1", "question": "Which file name?", "proposed_default": "hello.txt"},
            {"id": "Q2", "question": "Which greeting?", "proposed_default": "hello"}
        ]
    }}])
}

fn asking_harness() -> Harness {
    Harness::new(script_with(&[("requirements", json!([asking_brief()]))]))
}

/// The activity log's lines of the workspace's one run.
fn activity(harness: &Harness) -> Vec<Value> {
    let runs = harness.workspace().join(".autocode/runs");
    let run = fs::read_dir(&runs)
        .expect("runs dir")
        .filter_map(Result::ok)
        .find(|e| e.path().join("activity.jsonl").exists())
        .expect("a run");
    fs::read_to_string(run.path().join("activity.jsonl"))
        .expect("activity")
        .lines()
        .map(|l| serde_json::from_str(l).expect("activity line"))
        .collect()
}

/// The activity lines whose text mentions `what`.
fn logged(harness: &Harness, what: &str) -> Vec<String> {
    activity(harness)
        .iter()
        .map(Value::to_string)
        .filter(|l| l.contains(what))
        .collect()
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
    let (code, stdout, screen) = converse(run_command(&harness, &[]), "/default\nhi there\ny\ny\n");
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

#[test]
fn feedback_writes_the_brief_again_and_y_approves_the_second_revision() {
    let revised = json!([{"report": {
        "summary": "A greeting file and a README.",
        "goals": ["hello.txt exists", "README.md says hi"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": [OBJECTIVE]}],
        "open_questions": [
            {"id": "Q1", "question": "Which file name?", "proposed_default": "hello.txt"},
            {"id": "Q2", "question": "Which greeting?", "proposed_default": "hello"}
        ]
    }}]);
    let harness = Harness::new(script_with(&[(
        "requirements",
        json!([asking_brief(), revised]),
    )]));
    let (code, stdout, screen) = converse(
        run_command(&harness, &[]),
        "/default\nhi there\nplease also add a README that says hi\ny\ny\n",
    );
    assert_eq!(code, Some(0), "{stdout}\n{screen}");
    assert!(screen.contains("brief revision b1:"), "{screen}");
    assert!(screen.contains("brief revision b2:"), "{screen}");
    assert!(screen.contains("README.md says hi"), "{screen}");
    assert!(screen.contains("Q2: hi there (user)"), "{screen}");
    // The second requirements prompt carries the previous brief, the answers and the feedback.
    let second = harness.prompt_of("requirements", 2);
    assert!(
        second.contains("please also add a README that says hi"),
        "{second}"
    );
    assert!(second.contains("A greeting file."), "{second}");
    assert!(second.contains("- Q2: hi there (user)"), "{second}");
    // The run went on from the second brief, approved by its digest.
    let planner = harness.prompt_of("planner", 1);
    assert!(planner.contains("README.md says hi"), "{planner}");
    let state = harness.status().json;
    let review = &state["brief_review"];
    let approved = review["approved"].as_str().expect("approved digest");
    assert!(approved.starts_with("b2:"), "{review}");
    assert!(
        review["feedback"][0]["revision"]
            .as_str()
            .expect("revision")
            .starts_with("b1:")
    );
    assert_eq!(
        review["feedback"][0]["text"],
        "please also add a README that says hi"
    );
    assert_eq!(state["answers"]["Q2"]["text"], "hi there");
    let approvals = logged(&harness, "brief approved");
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert!(approvals[0].contains(approved), "{approvals:?}");
}

#[test]
fn pause_at_the_brief_resumes_at_the_brief() {
    let harness = asking_harness();
    let (code, stdout, screen) =
        converse(run_command(&harness, &[]), "/default\nhi there\n/pause\n");
    assert_eq!(code, Some(3), "{stdout}\n{screen}");
    let summary: Value = serde_json::from_str(stdout.trim()).expect("--json summary");
    assert_eq!(summary["pause"]["code"], "WAITING_FOR_USER", "{screen}");
    let state = harness.status().json;
    assert_eq!(state["answers"]["Q2"]["text"], "hi there", "answers kept");
    assert_eq!(state["brief_review"]["waiting"], true, "{state}");
    assert!(harness.prompt_of("planner", 1).is_empty(), "no plan yet");

    // Off a terminal, resume pauses at the brief again.
    let again = harness.resume(&[]);
    assert_eq!(again.json["pause"]["code"], "WAITING_FOR_USER");

    // On a terminal, resume shows the brief again; y approves it and the run completes.
    let ws = harness.workspace().display().to_string();
    let resume = harness.command(&["resume", "--workspace", &ws, "--json"]);
    let (code, stdout, screen) = converse(resume, "y\ny\n");
    assert_eq!(code, Some(0), "{stdout}\n{screen}");
    assert!(screen.contains("brief revision b1:"), "{screen}");
    assert!(
        !screen.contains("Q1 [default"),
        "answers are not asked again: {screen}"
    );
    let state = harness.status().json;
    assert!(
        state["brief_review"]["approved"]
            .as_str()
            .is_some_and(|d| d.starts_with("b1:")),
        "{state}"
    );
    assert_eq!(
        harness.prompt_of("requirements", 2),
        "",
        "requirements ran once"
    );
}
