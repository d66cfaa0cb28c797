//! `autocode exec` through the real binary, with the scripted fake agent of `run_e2e`: each exit
//! code (0 complete, 1 failed after the run was created, 2 refused with nothing created, 3
//! paused, and continued with the command the pause line names), every line validated against
//! `schemas/exec.schema.json`, command lines carrying the exec ledger's verdicts, and
//! `autocode events --follow RUN --jsonl` started while a run works printing the same lines.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::run_e2e::{BUILD, CHECK, Harness, build_report, script_with};

const OBJECTIVE: &str = "Create hello.txt containing hello";

/// An `exec` (or `resume --jsonl`) that ran to its end.
struct Streamed {
    code: Option<i32>,
    lines: Vec<Value>,
    stderr: String,
}

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {:?}\n--- stdout\n", self.code)?;
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        write!(f, "--- stderr\n{}", self.stderr)
    }
}

impl Streamed {
    fn of(stream: &Self, kind: &str) -> Vec<Value> {
        stream
            .lines
            .iter()
            .filter(|l| l["type"] == kind)
            .cloned()
            .collect()
    }

    fn result(&self) -> &Value {
        self.lines.last().expect("a result line")
    }
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(autocode::exec::SCHEMA_TEXT).expect("schema JSON");
    jsonschema::draft202012::new(&schema).expect("the schema compiles")
}

/// Every stdout line is one schema-valid object; the first is `meta`, the last `result`.
fn parse_stream(stdout: &[u8]) -> Vec<Value> {
    let validator = validator();
    let text = String::from_utf8_lossy(stdout);
    let lines: Vec<Value> = text
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{line}\n{errors:#?}");
            value
        })
        .collect();
    assert_eq!(
        lines.first().map(|l| l["type"].clone()),
        Some(json!("meta")),
        "{text}"
    );
    assert_eq!(
        lines.first().map(|l| l["schema"].clone()),
        Some(json!("autocode-exec/1"))
    );
    assert_eq!(
        lines.last().map(|l| l["type"].clone()),
        Some(json!("result")),
        "{text}"
    );
    lines
}

fn streamed(mut command: Command) -> Streamed {
    let out = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run autocode");
    Streamed {
        code: out.status.code(),
        lines: parse_stream(&out.stdout),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn exec_command(harness: &Harness, extra: &[&str]) -> Command {
    let ws = harness.workspace().display().to_string();
    let mut args = vec!["exec", OBJECTIVE, "--workspace", &ws, "--provider", "fake"];
    args.extend_from_slice(extra);
    harness.command(&args)
}

/// The argv of a `next` command the stream printed, with its placeholders filled.
fn argv_of(next: &str, fill: &[(&str, &str)]) -> Vec<String> {
    let mut text = next.to_owned();
    if let Some(cut) = text.find(" (") {
        text.truncate(cut);
    }
    for (from, to) in fill {
        text = text.replace(from, to);
    }
    text.split_whitespace()
        .map(|w| w.trim_matches('\'').to_owned())
        .collect()
}

fn runs_dir_entries(ws: &Path) -> usize {
    fs::read_dir(ws.join(".autocode/runs"))
        .map(|rd| rd.count())
        .unwrap_or(0)
}

#[test]
fn exec_completes_with_stages_ledgered_commands_and_a_verified_result() {
    let harness = Harness::new(script_with(&[]));
    let done = streamed(exec_command(&harness, &["--yes"]));
    assert_eq!(done.code, Some(0), "{done:?}");
    let meta = &done.lines[0];
    let run_id = meta["run_id"].as_str().expect("run id").to_owned();
    assert_eq!(meta["routes"]["builder"], "fake/alpha-large", "{done:?}");
    let starts: Vec<String> = Streamed::of(&done, "stage_start")
        .iter()
        .map(|s| s["role"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        starts,
        [
            "requirements",
            "planner",
            "plan_reviewer",
            "builder",
            "tester",
            "completion_reviewer"
        ],
        "{done:?}"
    );
    let ends = Streamed::of(&done, "stage_end");
    assert_eq!(ends.len(), 6, "{done:?}");
    assert!(ends.iter().all(|e| e["status"] == "accepted"), "{done:?}");
    // The builder's own commands, with the kernel-attested ledger's word on each.
    let commands = Streamed::of(&done, "command");
    let build = commands
        .iter()
        .find(|c| {
            c["command"] == BUILD && c["stage"].as_str().is_some_and(|s| s.contains("builder"))
        })
        .unwrap_or_else(|| panic!("the builder's command: {done:?}"));
    assert_eq!(build["exit_code"], 0, "{done:?}");
    assert_eq!(build["ledger"]["verdict"], "attested", "{done:?}");
    assert!(commands.iter().any(|c| c["command"] == CHECK), "{done:?}");
    let result = done.result();
    assert_eq!(result["status"], "complete", "{done:?}");
    assert_eq!(result["run_id"], run_id.as_str());
    assert_eq!(result["branch"], format!("autocode/{run_id}"), "{done:?}");
    assert!(result["commits"].as_u64().unwrap_or(0) >= 1, "{done:?}");
    let criteria = result["criteria"].as_array().expect("criteria");
    assert!(
        criteria
            .iter()
            .any(|c| c["criterion"] == "AC1" && c["verdict"] == "PASS"),
        "{done:?}"
    );
    assert!(
        result["next"]
            .as_str()
            .is_some_and(|n| n.starts_with(&format!("autocode apply {run_id}"))),
        "{done:?}"
    );
    assert!(result["tokens"].as_u64().is_some());
}

#[test]
fn exec_pauses_with_what_it_asks_and_the_printed_commands_continue_it() {
    let asking = json!([{"report": {
        "summary": "A greeting file.",
        "goals": ["hello.txt exists"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": [OBJECTIVE]}],
        "open_questions": [{"id": "Q1", "question": "Which file name?",
                            "proposed_default": "hello.txt"}]
    }}]);
    let harness = Harness::new(script_with(&[("requirements", json!([asking]))]));
    let waiting = streamed(exec_command(&harness, &[]));
    assert_eq!(waiting.code, Some(3), "{waiting:?}");
    let pause = Streamed::of(&waiting, "pause");
    assert_eq!(pause.len(), 1, "{waiting:?}");
    assert_eq!(pause[0]["code"], "WAITING_FOR_USER");
    assert_eq!(pause[0]["asks"]["kind"], "answers");
    assert_eq!(pause[0]["asks"]["questions"][0]["id"], "Q1");
    assert_eq!(
        pause[0]["asks"]["questions"][0]["proposed_default"],
        "hello.txt"
    );
    assert_eq!(waiting.result()["status"], "paused");
    assert_eq!(waiting.result()["pause_code"], "WAITING_FOR_USER");
    assert!(waiting.stderr.contains("WAITING_FOR_USER"), "{waiting:?}");

    // The command the pause names, as a caller would run it.
    let next = pause[0]["next"].as_str().expect("next");
    let argv = argv_of(next, &[("Q1=TEXT", "Q1=hello.txt")]);
    assert_eq!(argv[..2], ["autocode", "resume"], "{next}");
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let approval = streamed(harness.command(&args));
    assert_eq!(approval.code, Some(3), "{approval:?}");
    // A resume streams what it did, not the stages before it.
    let starts: Vec<Value> = Streamed::of(&approval, "stage_start");
    assert!(
        starts.iter().all(|s| s["role"] != "requirements"),
        "{approval:?}"
    );
    let pause = Streamed::of(&approval, "pause");
    assert_eq!(pause[0]["code"], "AWAITING_PLAN_APPROVAL", "{approval:?}");
    let token = pause[0]["asks"]["token"]
        .as_str()
        .expect("token")
        .to_owned();
    let next = pause[0]["next"].as_str().expect("next");
    assert!(next.contains(&token), "{next}");
    let argv = argv_of(next, &[]);
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let done = streamed(harness.command(&args));
    assert_eq!(done.code, Some(0), "{done:?}");
    assert_eq!(done.result()["status"], "complete");
    assert!(
        Streamed::of(&done, "activity")
            .iter()
            .any(|a| a["event"] == "plan approved"),
        "{done:?}"
    );
}

#[test]
fn exec_refused_before_anything_exists_exits_2_with_a_refused_result() {
    let harness = Harness::new(script_with(&[]));
    let ws = harness.workspace().display().to_string();
    let refused = streamed(harness.command(&[
        "exec",
        OBJECTIVE,
        "--workspace",
        &ws,
        "--provider",
        "no-such-provider",
    ]));
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert_eq!(refused.lines.len(), 2, "{refused:?}");
    assert_eq!(refused.lines[0]["run_id"], Value::Null);
    let result = refused.result();
    assert_eq!(result["status"], "refused");
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|e| e.contains("no-such-provider")),
        "{refused:?}"
    );
    assert_eq!(
        runs_dir_entries(&harness.workspace()),
        0,
        "nothing was created"
    );
    // An empty objective is refused the same way.
    let empty = streamed(harness.command(&["exec", "  ", "--workspace", &ws]));
    assert_eq!(empty.code, Some(2), "{empty:?}");
    assert_eq!(empty.result()["status"], "refused");
}

#[test]
fn exec_that_fails_after_the_run_exists_exits_1_with_the_run_id() {
    let harness = Harness::new(script_with(&[]));
    // The run directory can be made, its worktree cannot: `.autocode/worktrees` is a file.
    let autocode_dir = harness.workspace().join(".autocode");
    fs::create_dir_all(&autocode_dir).expect("mkdir");
    fs::write(autocode_dir.join("worktrees"), "not a directory\n").expect("plant");
    let failed = streamed(exec_command(&harness, &["--yes"]));
    assert_eq!(failed.code, Some(1), "{failed:?}");
    let run_id = failed.lines[0]["run_id"]
        .as_str()
        .expect("a run was created");
    let result = failed.result();
    assert_eq!(result["status"], "failed", "{failed:?}");
    assert_eq!(result["run_id"], run_id);
    assert!(result["error"].as_str().is_some(), "{failed:?}");
}

#[test]
fn events_follow_started_mid_run_prints_the_same_lines_as_exec() {
    let harness = Harness::new(Value::Null);
    let wait = harness.wait_for_gate();
    harness.set_script(script_with(&[(
        "builder",
        json!([[{"run": wait}, {"run": BUILD}, {"run": CHECK}, build_report()]]),
    )]));
    let mut exec = exec_command(&harness, &["--yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn exec");
    let mut exec_out = BufReader::new(exec.stdout.take().expect("stdout"));
    let mut first = String::new();
    exec_out.read_line(&mut first).expect("the meta line");
    let meta: Value = serde_json::from_str(&first).expect("meta JSON");
    let run_id = meta["run_id"].as_str().expect("run id").to_owned();

    let ws = harness.workspace().display().to_string();
    let mut follow = harness
        .command(&["events", "--follow", &run_id, "--workspace", &ws, "--jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn follow");
    let mut follow_out = BufReader::new(follow.stdout.take().expect("stdout"));
    let mut follow_first = String::new();
    follow_out
        .read_line(&mut follow_first)
        .expect("follow's meta line");
    // The follower is reading while the builder still waits: now let it finish.
    harness.open_gate();

    let mut rest = String::new();
    exec_out.read_to_string(&mut rest).expect("exec stdout");
    let exec_status = exec.wait().expect("exec");
    let mut follow_rest = String::new();
    follow_out
        .read_to_string(&mut follow_rest)
        .expect("follow stdout");
    let follow_status = follow.wait().expect("follow");
    let mut follow_err = String::new();
    if let Some(mut e) = follow.stderr.take() {
        let _ = e.read_to_string(&mut follow_err);
    }
    assert_eq!(exec_status.code(), Some(0), "{first}{rest}");
    assert_eq!(
        follow_status.code(),
        Some(0),
        "{follow_first}{follow_rest}\n{follow_err}"
    );
    let exec_lines = parse_stream(format!("{first}{rest}").as_bytes());
    let follow_lines = parse_stream(format!("{follow_first}{follow_rest}").as_bytes());
    let sorted = |lines: &[Value]| {
        let mut text: Vec<String> = lines.iter().map(Value::to_string).collect();
        text.sort();
        text
    };
    assert_eq!(
        sorted(&exec_lines),
        sorted(&follow_lines),
        "exec:\n{first}{rest}\nfollow:\n{follow_first}{follow_rest}"
    );
    assert!(
        exec_lines
            .iter()
            .any(|l| l["type"] == "command" && l["command"] == wait.as_str()),
        "the waiting command is a command line"
    );
}
