//! End-to-end runs with the scripted fake agent (`tests/fake_agent/fake_agent.py`), a real
//! executable that prints OpenCode 1.18.33 `run --format json` events, really runs its commands
//! and really writes its files.
//!
//! This part checks the fake agent itself: every action's stream goes through the real binary's
//! `autocode events normalize --transport opencode --json` with zero malformed lines, the
//! commands carry their real exit codes, usage is the deterministic per-step formula, the final
//! report is the last step's text, and the per-role attempt counter, sessions and evidence
//! substitutions behave as the script contract says.
//!
//! No sleep is used as synchronization: processes are waited on, files are polled with a bound.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

fn fake_agent_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_agent/fake_agent.py")
}

fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Alive = present in /proc and not a zombie.
fn alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = stat.get(stat.rfind(')')? + 1..)?;
            rest.split_whitespace().next().map(|state| state != "Z")
        })
        .unwrap_or(false)
}

/// A temp dir with a script file and a workspace: the fake agent alone, without autocode.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new(script: Value) -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir(dir.path().join("ws")).expect("workspace dir");
        fs::write(
            dir.path().join("script.json"),
            serde_json::to_vec_pretty(&script).expect("script json"),
        )
        .expect("write script");
        Sandbox { dir }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("script.json")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("script.json.state")
    }

    /// One agent call, as a provider TOML would launch it; the prompt goes on stdin.
    fn call(&self, role: &str, session: Option<&str>, prompt: &str) -> Output {
        let mut command = Command::new("python3");
        command
            .arg(fake_agent_path())
            .arg("--script")
            .arg(self.script())
            .args(["--role", role, "--workspace"])
            .arg(self.workspace())
            .args(["--model", "alpha-large"]);
        if let Some(session) = session {
            command.args(["--session", session]);
        }
        let mut child = command
            .current_dir(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fake agent");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(prompt.as_bytes())
            .expect("write prompt");
        child.wait_with_output().expect("wait fake agent")
    }

    /// `autocode events normalize --transport opencode FILE --json` on a call's stdout.
    fn normalize(&self, stdout: &[u8]) -> Value {
        let file = self.dir.path().join("stdout.jsonl");
        fs::write(&file, stdout).expect("write stdout");
        let out = Command::new(BIN)
            .args(["events", "normalize", "--transport", "opencode", "--json"])
            .arg(&file)
            .output()
            .expect("run autocode events normalize");
        assert!(
            out.status.success(),
            "normalize failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let normalized: Value = serde_json::from_slice(&out.stdout).expect("normalize --json");
        assert_eq!(
            normalized["summary"]["malformed_lines"], 0,
            "{normalized:#}"
        );
        assert_eq!(normalized["summary"]["unknown_lines"], 0, "{normalized:#}");
        normalized
    }

    fn calls(&self) -> Vec<Value> {
        fs::read_to_string(self.state().join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("calls.jsonl line"))
            .collect()
    }
}

fn events_of<'a>(normalized: &'a Value, kind: &str) -> Vec<&'a Value> {
    normalized["events"]
        .as_array()
        .expect("events array")
        .iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

fn final_report(normalized: &Value) -> Option<Value> {
    let report = &normalized["summary"]["final_report"];
    (report["kind"] == "text").then(|| {
        let text = report["value"].as_str().expect("report text");
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
    })
}

#[test]
fn fake_agent_commands_files_usage_and_report_normalize_cleanly() {
    let sandbox = Sandbox::new(json!({
        "builder": [[
            {"run": "echo hello > out.txt && cat out.txt"},
            {"run": "ls /nonexistent-dir-xyz; exit 3"},
            {"write": "src/lib.txt", "content": "line\n"},
            {"report": {"status": "done", "checks": [
                {"command": "cat out.txt", "exit_code": 0, "evidence_ref": "{{event:1}}"},
                {"command": "ls", "exit_code": 3, "evidence_ref": "{{last_event}}"}
            ]}}
        ]]
    }));
    let out = sandbox.call("builder", None, "build it");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let normalized = sandbox.normalize(&out.stdout);

    // The commands really ran in the workspace, with their real exit codes and output.
    assert_eq!(
        fs::read_to_string(sandbox.workspace().join("out.txt")).expect("out.txt"),
        "hello\n"
    );
    assert_eq!(
        fs::read_to_string(sandbox.workspace().join("src/lib.txt")).expect("written file"),
        "line\n"
    );
    let commands = events_of(&normalized, "command_finished");
    assert_eq!(commands.len(), 2);
    assert_eq!(
        commands[0]["command"],
        "echo hello > out.txt && cat out.txt"
    );
    assert_eq!(commands[0]["exit_code"], 0);
    assert_eq!(commands[0]["status"], "succeeded");
    assert_eq!(commands[0]["output_excerpt"], "hello\n");
    assert_eq!(commands[1]["exit_code"], 3);
    assert_eq!(commands[1]["status"], "failed");
    assert!(
        commands[1]["output_excerpt"]
            .as_str()
            .expect("excerpt")
            .contains("nonexistent-dir-xyz"),
        "{:?}",
        commands[1]
    );
    let changes = events_of(&normalized, "file_change");
    assert_eq!(changes.len(), 1);
    assert!(
        changes[0]["path"]
            .as_str()
            .expect("path")
            .ends_with("ws/src/lib.txt")
    );

    // The evidence substitutions cite the bash calls (not the write) by their callIDs.
    let report = final_report(&normalized).expect("final report");
    assert_eq!(report["status"], "done");
    assert_eq!(
        report["checks"][0]["evidence_ref"],
        commands[0]["evidence_id"]
    );
    assert_eq!(
        report["checks"][1]["evidence_ref"],
        commands[1]["evidence_id"]
    );
    assert!(
        commands[0]["evidence_id"]
            .as_str()
            .expect("evidence id")
            .starts_with("event:call_")
    );

    // Four steps (k = 0..3): prompt 1000+100k of which 600+10k cached, completion 40+k of
    // which 12+k reasoning. Normalized input excludes cache reads; output includes reasoning.
    let usage = &normalized["summary"]["usage"];
    assert_eq!(
        usage["input_tokens"],
        (0..4).map(|k| 400 + 90 * k).sum::<u64>()
    );
    assert_eq!(
        usage["cache_read_tokens"],
        (0..4).map(|k| 600 + 10 * k).sum::<u64>()
    );
    assert_eq!(usage["output_tokens"], (0..4).map(|k| 40 + k).sum::<u64>());
    assert_eq!(
        usage["reasoning_tokens"],
        (0..4).map(|k| 12 + k).sum::<u64>()
    );
    assert_eq!(normalized["summary"]["stop"]["class"], "completed");

    let session = normalized["summary"]["session_id"]
        .as_str()
        .expect("session");
    assert!(session.starts_with("ses_"), "{session}");
    assert!(
        session[4..].chars().all(|c| c.is_ascii_hexdigit()),
        "{session}"
    );
}

#[test]
fn fake_agent_plays_one_attempt_per_call_and_keeps_a_resumed_session() {
    let sandbox = Sandbox::new(json!({
        "tester": [
            [{"text": "first"}],
            [{"text": "second {{role}} {{attempt}} {{session}}"}]
        ]
    }));
    let first = sandbox.call("tester", None, "prompt one");
    let first = sandbox.normalize(&first.stdout);
    assert_eq!(final_report(&first), Some(json!("first")));
    let session = first["summary"]["session_id"]
        .as_str()
        .expect("session")
        .to_owned();

    let second = sandbox.call("tester", Some(&session), "prompt two");
    let second = sandbox.normalize(&second.stdout);
    assert_eq!(second["summary"]["session_id"], session.as_str());
    assert_eq!(
        final_report(&second),
        Some(Value::String(format!("second tester 2 {session}")))
    );

    // A third call has no attempt left: a distinct exit code and a clear message.
    let third = sandbox.call("tester", None, "prompt three");
    assert_eq!(third.status.code(), Some(97));
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert!(
        stderr.contains("2 attempt(s) for role tester; this is call 3"),
        "{stderr}"
    );

    // Every call is logged with its prompt; a fresh call gets a new session.
    let calls = sandbox.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0]["resumed"], false);
    assert_eq!(calls[1]["resumed"], true);
    assert_eq!(calls[1]["session"], session.as_str());
    assert_ne!(calls[2]["session"], session.as_str());
    let prompt = calls[1]["prompt_file"].as_str().expect("prompt file");
    assert_eq!(fs::read_to_string(prompt).expect("prompt"), "prompt two");
}

#[test]
fn fake_agent_provider_stops_normalize_to_their_classes() {
    let sandbox = Sandbox::new(json!({
        "builder": [
            [{"error": {"status": 429, "message": "mock 429 error", "retryable": true,
                        "retry_after": 1}}],
            [{"run": "true"}, {"length": true}],
            [{"shell_command_final": "ls"}],
            [{"run": "true"}, {"exit": 5}]
        ]
    }));

    let rate_limited = sandbox.call("builder", None, "");
    assert_eq!(rate_limited.status.code(), Some(1));
    let normalized = sandbox.normalize(&rate_limited.stdout);
    let stop = &normalized["summary"]["stop"];
    assert_eq!(stop["class"], "rate_limit", "{stop}");
    assert_eq!(stop["http_status"], 429);
    assert_eq!(stop["reset_hint"], "retry-after: 1");
    assert_eq!(normalized["summary"]["provider_errors"], 1);

    let cut = sandbox.call("builder", None, "");
    assert_eq!(cut.status.code(), Some(0));
    let normalized = sandbox.normalize(&cut.stdout);
    assert_eq!(normalized["summary"]["stop"]["class"], "output_cap");
    assert_eq!(normalized["summary"]["final_report"], Value::Null);

    let shell = sandbox.call("builder", None, "");
    let normalized = sandbox.normalize(&shell.stdout);
    assert_eq!(normalized["summary"]["stop"]["class"], "completed");
    assert_eq!(final_report(&normalized), Some(json!({"cmd": "ls"})));

    let no_answer = sandbox.call("builder", None, "");
    assert_eq!(no_answer.status.code(), Some(5));
    let normalized = sandbox.normalize(&no_answer.stdout);
    assert_eq!(
        normalized["summary"]["stop"]["class"],
        "ended_without_answer"
    );
    assert_eq!(normalized["summary"]["commands_finished"], 1);
}

#[test]
fn fake_agent_daemon_outlives_the_agent_and_hang_waits_until_killed() {
    let sandbox = Sandbox::new(json!({
        "builder": [[{"daemon": "exec sleep 120"}, {"text": "started"}]],
        "tester": [[{"run": "echo before"}, {"hang": true}]]
    }));
    let out = sandbox.call("builder", None, "");
    assert_eq!(out.status.code(), Some(0));
    let normalized = sandbox.normalize(&out.stdout);
    assert_eq!(normalized["summary"]["commands_finished"], 1);
    let daemons = fs::read_to_string(sandbox.state().join("daemons.jsonl")).expect("daemons");
    let daemon: Value =
        serde_json::from_str(daemons.lines().next().expect("one daemon")).expect("daemon line");
    let pid = i32::try_from(daemon["pid"].as_i64().expect("pid")).expect("pid fits");
    // The agent has exited (waited above); its detached daemon is still running.
    assert!(alive(pid), "daemon {pid} died with the agent");
    // kill(1) rather than libc: the tests hold no unsafe code.
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    wait_until("the daemon to die", Duration::from_secs(10), || !alive(pid));

    let mut hanging = Command::new("python3")
        .arg(fake_agent_path())
        .arg("--script")
        .arg(sandbox.script())
        .args(["--role", "tester", "--workspace"])
        .arg(sandbox.workspace())
        .args(["--model", "beta-small"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hanging agent");
    let marker = sandbox.state().join("tester-1.hanging");
    wait_until("the hang marker", Duration::from_secs(20), || {
        marker.exists()
    });
    let recorded: u32 = fs::read_to_string(&marker)
        .expect("marker")
        .trim()
        .parse()
        .expect("pid in marker");
    assert_eq!(recorded, hanging.id());
    assert_eq!(hanging.try_wait().expect("try_wait"), None, "hang returned");
    hanging.kill().expect("kill hanging agent");
    let output = hanging.wait_with_output().expect("wait");
    // What was printed before the hang is a complete step, flushed line by line.
    let normalized = sandbox.normalize(&output.stdout);
    assert_eq!(normalized["summary"]["commands_finished"], 1);
    assert_eq!(
        normalized["summary"]["stop"]["class"],
        "ended_without_answer"
    );
}
