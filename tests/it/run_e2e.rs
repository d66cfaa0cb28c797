//! End-to-end runs with the scripted fake agent (`tests/fake_agent/fake_agent.py`), a real
//! executable that prints OpenCode 1.18.33 `run --format json` events, really runs its commands
//! and really writes its files.
//!
//! The first part checks the fake agent itself: every action's stream goes through the real
//! binary's `autocode events normalize --transport opencode --json` with zero malformed lines,
//! the commands carry their real exit codes, usage is the deterministic per-step formula, the
//! final report is the last step's text, and the per-role attempt counter, sessions and
//! evidence substitutions behave as the script contract says.
//!
//! The whole-run part drives the real `autocode run`/`resume`/`status` binary with an isolated
//! `HOME` whose `autocode/providers/fake.toml` registers the fake agent (planning and building
//! on the `alpha-*` family, every verifier on `beta-*`), a temp git repository as workspace and
//! one script per test: the happy path, every pause the pipeline can reach without a real model
//! (cross-model, discovery writes, invalid output, rate limit, output cap, budget, blocked,
//! planning budget, builder retry limit, interrupted by `kill -9`, run busy, transport change),
//! the repairs and corrections in the same session, the replay and the final gate refuting a
//! tester, credential withholding and a hostile workspace. The calls the fake agent logs are
//! the ground truth of what was launched, with which model, session and prompt.
//!
//! No sleep is used as synchronization: processes are waited on, files are polled with a bound.

use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_autocode");

fn fake_agent_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_agent/fake_agent.py")
}

pub(super) fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Alive = present in /proc and not a zombie.
pub(super) fn alive(pid: i32) -> bool {
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

    pub(super) fn calls(&self) -> Vec<Value> {
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

    // A placeholder citing a command that never ran is a broken script, not a report.
    let broken = Sandbox::new(json!({"tester": [[{"run": "true"}, {"text": "{{event:2}}"}]]}));
    let out = broken.call("tester", None, "");
    assert_eq!(out.status.code(), Some(97));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("only 1 command(s) ran"), "{stderr}");

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

// ---------------------------------------------------------------------------------------------
// Whole runs: the real binary drives the fake agent through every role.
// ---------------------------------------------------------------------------------------------

/// The plan's one acceptance check (read-only, so judging stages may run it).
pub(super) const CHECK: &str = "grep -qx hello hello.txt";
/// What a builder runs to do the work.
pub(super) const BUILD: &str = "printf 'hello\\n' > hello.txt";
/// autocode's exit code when `run`/`resume` paused.
const PAUSED_EXIT: i32 = 3;

/// An isolated HOME holding `autocode/providers/fake.toml`, a seeded git workspace and a script.
pub(super) struct Harness {
    root: tempfile::TempDir,
}

pub(super) struct Finished {
    pub(super) code: Option<i32>,
    pub(super) json: Value,
    pub(super) stderr: String,
}

impl Finished {
    pub(super) fn pause_code(&self) -> Option<&str> {
        self.json["pause"]["code"].as_str()
    }

    pub(super) fn assert_paused(&self, code: &str) {
        assert_eq!(self.code, Some(PAUSED_EXIT), "{self:?}");
        assert_eq!(self.pause_code(), Some(code), "{self:?}");
        assert!(
            self.stderr.contains(code),
            "the pause code is on stderr: {self:?}"
        );
    }

    /// The stage directory the pause names (e.g. `004-builder-1`).
    pub(super) fn pause_attempt(&self) -> &str {
        self.json["pause"]["attempt"].as_str().unwrap_or_default()
    }

    pub(super) fn pause_reason(&self) -> &str {
        self.json["pause"]["reason"].as_str().unwrap_or_default()
    }

    pub(super) fn assert_complete(&self) {
        assert_eq!(self.code, Some(0), "{self:?}");
        assert_eq!(self.json["outcome"], "complete", "{self:?}");
    }
}

impl std::fmt::Debug for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- json\n{:#}\n--- stderr\n{}",
            self.code, self.json, self.stderr
        )
    }
}

/// Runs an `autocode` command to its end and reads its `--json` document.
pub(super) fn finish(mut command: Command) -> Finished {
    let out = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run autocode");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        // The --json document is the last non-empty stdout line when anything precedes it.
        stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null)
    });
    Finished {
        code: out.status.code(),
        json,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(super) fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .stdout(Stdio::null())
        .status()
        .expect("git");
    assert!(status.success(), "git {args:?} in {}", dir.display());
}

impl Harness {
    /// `roles`: TOML lines for the `[roles]` table; `extra`: more TOML appended.
    pub(super) fn with_roles(script: Value, roles: &str, extra: &str) -> Harness {
        let root = tempfile::tempdir().expect("tempdir");
        let harness = Harness { root };
        for dir in [harness.home(), harness.workspace(), harness.temp()] {
            fs::create_dir_all(dir).expect("mkdir");
        }
        let providers = harness.home().join(".config/autocode/providers");
        fs::create_dir_all(&providers).expect("providers dir");
        let command = [
            "python3".to_owned(),
            fake_agent_path().display().to_string(),
            "--script".into(),
            harness.script().display().to_string(),
            "--role".into(),
            "{role}".into(),
            "--workspace".into(),
            "{workspace}".into(),
            "--model".into(),
            "{model}".into(),
        ];
        // The fake agent keeps its call log beside the script: its own state, so the room
        // grants it like a real CLI's.
        let toml = format!(
            "name = \"fake\"\ncommand = {}\nresume = [\"--session\", \"{{session}}\"]\nprompt = \"stdin\"\noutput = \"opencode_events\"\n\n[roles]\n{roles}\n[confine]\nwritable = [{}]\n{extra}",
            serde_json::to_string(&command).expect("argv as a TOML array"),
            serde_json::to_string(&format!("{}/", harness.state().display())).expect("path")
        );
        fs::write(providers.join("fake.toml"), toml).expect("write fake.toml");
        harness.set_script(script);
        let ws = harness.workspace();
        git(&ws, &["init", "-q"]);
        fs::write(ws.join("README.md"), "seed\n").expect("seed");
        fs::write(ws.join(".gitignore"), "build/\n").expect("gitignore");
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", "seed"]);
        harness
    }

    /// Independent families: planning and building on `alpha-*`, every verifier on `beta-*`.
    pub(super) fn new(script: Value) -> Harness {
        Harness::with_roles(script, INDEPENDENT_ROLES, "")
    }

    pub(super) fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    pub(super) fn workspace(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    /// autocode's TMPDIR: what a killed run leaves there goes with the test.
    fn temp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }

    fn script(&self) -> PathBuf {
        self.root.path().join("script.json")
    }

    pub(super) fn state(&self) -> PathBuf {
        self.root.path().join("script.json.state")
    }

    /// A file the test makes to let a waiting agent go on ([`Harness::wait_for_gate`]). It lies
    /// in the fake agent's state directory, which the room shows real: the room's `/tmp` is a
    /// private layer over the real one, where a file made from outside after the agent looked
    /// for it may never appear (overlayfs keeps the lookup that found nothing; a change to a lower
    /// layer while mounted is undefined). A gate in a plain temporary directory held a run in
    /// its builder stage forever.
    pub(super) fn gate(&self) -> PathBuf {
        self.state().join("gate")
    }

    /// A shell command that waits until the test opens the gate.
    pub(super) fn wait_for_gate(&self) -> String {
        format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done",
            self.gate().display()
        )
    }

    /// Lets the agent waiting at the gate go on.
    pub(super) fn open_gate(&self) {
        fs::create_dir_all(self.state()).expect("the fake agent's state directory");
        fs::write(self.gate(), "").expect("open the gate");
    }

    pub(super) fn set_script(&self, script: Value) {
        fs::write(
            self.script(),
            serde_json::to_vec_pretty(&script).expect("script"),
        )
        .expect("write script");
    }

    pub(super) fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        let home = self.home();
        command
            .args(args)
            .current_dir(self.root.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("LANG", "C.UTF-8")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("TMPDIR", self.temp())
            .stdin(Stdio::null());
        command
    }

    pub(super) fn autocode(&self, args: &[&str]) -> Finished {
        finish(self.command(args))
    }

    fn ws_arg(&self) -> String {
        self.workspace().display().to_string()
    }
    /// `autocode run OBJECTIVE --workspace WS --provider fake --json EXTRA...`
    pub(super) fn run(&self, extra: &[&str]) -> Finished {
        finish(self.run_command(extra))
    }

    /// The `run` command line, to spawn or to give more environment.
    pub(super) fn run_command(&self, extra: &[&str]) -> Command {
        self.run_objective_command("Create hello.txt containing hello", extra)
    }

    /// `autocode run OBJECTIVE --workspace WS --provider fake --json EXTRA...`, to spawn.
    pub(super) fn run_objective_command(&self, objective: &str, extra: &[&str]) -> Command {
        let ws = self.ws_arg();
        let mut args = vec![
            "run",
            objective,
            "--workspace",
            &ws,
            "--provider",
            "fake",
            "--json",
        ];
        args.extend_from_slice(extra);
        self.command(&args)
    }

    pub(super) fn resume(&self, extra: &[&str]) -> Finished {
        let ws = self.ws_arg();
        let mut args = vec!["resume", "--workspace", &ws, "--json"];
        args.extend_from_slice(extra);
        self.autocode(&args)
    }

    pub(super) fn status(&self) -> Finished {
        let ws = self.ws_arg();
        self.autocode(&["status", "--workspace", &ws, "--json"])
    }

    /// The fake agent's call log: (role, attempt, model, resumed) per call, in order.
    pub(super) fn calls(&self) -> Vec<Value> {
        fs::read_to_string(self.state().join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("calls.jsonl line"))
            .collect()
    }

    pub(super) fn roles_called(&self) -> Vec<String> {
        self.calls()
            .iter()
            .map(|c| c["role"].as_str().expect("role").to_owned())
            .collect()
    }

    pub(super) fn prompt_of(&self, role: &str, attempt: u32) -> String {
        fs::read_to_string(self.state().join(format!("prompts/{role}-{attempt}.md")))
            .unwrap_or_default()
    }

    /// The tree the run worked in (its worktree, or the workspace `--in-place`).
    pub(super) fn work_tree(finished: &Finished) -> PathBuf {
        PathBuf::from(
            finished.json["work_tree"]
                .as_str()
                .expect("work_tree in --json"),
        )
    }
}

pub(super) const INDEPENDENT_ROLES: &str = r#"glm = { model = "alpha-large" }
requirements = { model = "alpha-large" }
plan_reviewer = { model = "beta-large" }
terra = { model = "alpha-large" }
sol = { model = "beta-large" }
completion = { model = "beta-large" }
astra = { model = "alpha-large" }
"#;

const STRONG_RETRY: &str = r#"
[builder_retry]
strong_model = "alpha-huge"
checker_model = "beta-huge"
"#;

// ---- the reports of a run that goes well -----------------------------------------------------

pub(super) fn requirements_ok() -> Value {
    json!([{"report": {
        "summary": "A file hello.txt that says hello.",
        "goals": ["hello.txt exists and contains hello"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": ["Create hello.txt containing hello"]}],
        "open_questions": []
    }}])
}

pub(super) fn plan_ok() -> Value {
    json!([{"report": {
        "summary": "One milestone: write hello.txt.",
        "milestones": [{
            "id": "M1",
            "title": "Write hello.txt",
            "description": "Create hello.txt with the single line hello.",
            "acceptance_criteria": [
                {"id": "AC1", "text": "hello.txt is exactly hello", "check": CHECK,
                 "human_review": false, "kind": "fail_to_pass"}
            ]
        }]
    }}])
}

fn approve() -> Value {
    json!([{"report": {"verdict": "approve", "summary": "The plan is sound.", "concerns": [], "uncovered": []}}])
}

pub(super) fn build_report() -> Value {
    json!({"report": {
        "status": "done",
        "summary": "Wrote hello.txt.",
        "files_changed": ["hello.txt"],
        "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{last_event}}"}],
        "blockers": []
    }})
}

pub(super) fn build_ok() -> Value {
    json!([{"run": BUILD}, {"run": CHECK}, build_report()])
}

fn test_report(verdict: &str, exit_code: i64) -> Value {
    json!({"report": {
        "milestone_id": "M1",
        "summary": "Checked hello.txt.",
        "criteria": [{
            "criterion_id": "AC1",
            "verdict": verdict,
            "checks": [{"command": CHECK, "exit_code": exit_code,
                        "evidence_ref": "{{last_event}}"}],
            "notes": ""
        }]
    }})
}

fn test_pass() -> Value {
    json!([{"run": CHECK}, test_report("PASS", 0)])
}

fn test_fail() -> Value {
    json!([{"run": CHECK}, test_report("FAIL", 1)])
}

fn complete() -> Value {
    json!([{"report": {"decision": "COMPLETE", "summary": "Done.", "findings": [], "uncovered": []}}])
}

/// A script where every role succeeds at its first attempt.
fn happy_script() -> serde_json::Map<String, Value> {
    let script = json!({
        "requirements": [requirements_ok()],
        "planner": [plan_ok()],
        "plan_reviewer": [approve()],
        "builder": [build_ok()],
        "tester": [test_pass()],
        "completion_reviewer": [complete()]
    });
    match script {
        Value::Object(map) => map,
        _ => unreachable!("a JSON object literal"),
    }
}

pub(super) fn script_with(overrides: &[(&str, Value)]) -> Value {
    let mut script = happy_script();
    for (role, attempts) in overrides {
        script.insert((*role).to_owned(), attempts.clone());
    }
    Value::Object(script)
}

const PIPELINE: [&str; 6] = [
    "requirements",
    "planner",
    "plan_reviewer",
    "builder",
    "tester",
    "completion_reviewer",
];

#[test]
fn run_happy_path_completes_with_every_role_once() {
    let harness = Harness::new(script_with(&[]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert_eq!(harness.roles_called(), PIPELINE);
    // The work happened in the run's tree, not in the user's checkout, and each role ran on
    // its own route.
    let tree = Harness::work_tree(&finished);
    assert_ne!(tree, harness.workspace());
    assert!(!harness.workspace().join("hello.txt").exists());
    assert_eq!(
        fs::read_to_string(tree.join("hello.txt")).expect("hello.txt"),
        "hello\n"
    );
    let models: Vec<String> = harness
        .calls()
        .iter()
        .map(|c| c["model"].as_str().expect("model").to_owned())
        .collect();
    assert_eq!(
        models,
        [
            "alpha-large",
            "alpha-large",
            "beta-large",
            "alpha-large",
            "beta-large",
            "beta-large"
        ]
    );
    // Every agent ran in the run's tree, and was handed that tree as its workspace; the
    // tester ran in a throwaway copy of it instead: its verification tree, outside the
    // workspace and the run's tree (under HOME's cache, read-only in every room).
    for call in harness.calls() {
        if call["role"] == "tester" {
            assert_ne!(call["cwd"], tree.display().to_string(), "{call}");
            assert_eq!(call["workspace"], call["cwd"], "{call}");
            let copy = PathBuf::from(call["cwd"].as_str().expect("cwd"));
            assert!(
                copy.starts_with(harness.home().join(".cache/autocode/verify"))
                    && copy.ends_with("tree"),
                "{call}"
            );
            assert!(!copy.starts_with(harness.workspace()) && !copy.starts_with(&tree));
            continue;
        }
        assert_eq!(call["cwd"], tree.display().to_string(), "{call}");
        assert_eq!(call["workspace"], tree.display().to_string(), "{call}");
    }
    // The builder was told the objective and the report schema on stdin.
    let prompt = harness.prompt_of("builder", 1);
    assert!(
        prompt.contains("Create hello.txt containing hello"),
        "{prompt}"
    );
    assert!(prompt.contains("\"files_changed\""), "{prompt}");
    // Usage adds up, step by step: requirements, planner, reviewer and completion made one
    // step each, the builder three (two commands and the report), the tester two.
    let steps = [1u64, 1, 1, 3, 2, 1];
    let sum = |per_step: fn(u64) -> u64| -> u64 {
        steps
            .iter()
            .map(|&n| (0..n).map(per_step).sum::<u64>())
            .sum()
    };
    let usage = &finished.json["usage"];
    assert_eq!(usage["input_tokens"], sum(|k| 400 + 90 * k), "{usage}");
    assert_eq!(usage["cache_read_tokens"], sum(|k| 600 + 10 * k), "{usage}");
    assert_eq!(usage["output_tokens"], sum(|k| 40 + k), "{usage}");
    assert_eq!(usage["reasoning_tokens"], sum(|k| 12 + k), "{usage}");
    let status = harness.status();
    assert_eq!(status.code, Some(0), "{status:?}");
    assert_eq!(status.json["usage"], *usage, "{status:?}");
    assert!(status.json["completed_at"].is_string(), "{status:?}");
    assert_eq!(status.json["pause"], Value::Null, "{status:?}");
    // Resuming a complete run launches nothing.
    let again = harness.resume(&[]);
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(harness.roles_called(), PIPELINE);
}

#[test]
fn run_refuses_same_family_verifiers_before_anything_exists() {
    // The tester on the builder's family: independence is not waived, so nothing runs.
    // Preflight refuses it before anything exists (tests/it/preflight_e2e.rs covers the rest).
    let harness = Harness::new(script_with(&[]));
    let finished = harness.run(&["--yes", "--tester-model", "alpha-small"]);
    assert_eq!(finished.code, Some(2), "{finished:?}");
    assert!(
        finished
            .stderr
            .contains("verifier independence cannot be met")
            && finished.stderr.contains("--tester-model"),
        "{finished:?}"
    );
    assert!(harness.calls().is_empty(), "an agent was launched");
    assert!(!harness.workspace().join(".autocode/runs").exists());

    // `--single-model` waives independence knowingly: every role runs on the one model.
    let waived = Harness::new(script_with(&[]));
    waived
        .run(&["--yes", "--single-model", "alpha-large"])
        .assert_complete();
    assert_eq!(waived.roles_called(), PIPELINE);
    assert!(waived.calls().iter().all(|c| c["model"] == "alpha-large"));
}

#[test]
fn run_pauses_when_the_planner_writes_a_file() {
    let planner = json!([[{"write": "notes.md", "content": "my plan\n"},
                          plan_ok().get(0).cloned().expect("report")]]);
    let harness = Harness::new(script_with(&[("planner", planner)]));
    // Unconfined, so the write happens and the snapshot comparison (the check behind the
    // room) is what stops it.
    let finished = harness.run(&["--yes", "--unconfined"]);
    finished.assert_paused("PAUSED_DISCOVERY_WRITE");
    assert_eq!(finished.pause_attempt(), "002-planner-1");
    assert!(finished.pause_reason().contains("notes.md"), "{finished:?}");
    assert_eq!(harness.roles_called(), ["requirements", "planner"]);
}

#[test]
fn run_a_testers_edit_stays_in_its_copy_and_its_pass_is_not_believed() {
    let tester = json!([[{"run": "printf 'hello\\n' > hello.txt"}, {"run": CHECK},
                         test_report("PASS", 0)]]);
    let builder = json!([[{"run": "printf 'hi\\n' > hello.txt"}, {"run": CHECK},
                          {"report": {"status": "done", "summary": "Wrote it.",
                                      "files_changed": ["hello.txt"], "checks": [],
                                      "blockers": []}}]]);
    let harness = Harness::new(script_with(&[("tester", tester), ("builder", builder)]));
    let finished = harness.run(&["--yes"]);
    // The tester fixed the file in its throwaway copy: the work tree keeps the builder's text,
    // and autocode's own replay in a clean copy of the work tree fails the check.
    assert_ne!(finished.code, Some(0), "{finished:?}");
    let tree = Harness::work_tree(&finished);
    assert_eq!(
        fs::read_to_string(tree.join("hello.txt")).expect("hello.txt"),
        "hi\n"
    );
}

/// The tester's copy and every replay share the run's one verification tree: what the tester
/// wrote there (a new file, a deleted one) is gone when autocode replays, and nothing else
/// (no copy of the base tree, no second tree) is kept beside it. In a worktree run the tree is
/// an overlay of the work tree (the tester's writes land in its upper layer, which the next
/// replay replaces), in an `--in-place` run too (the overlay of the workspace itself);
/// `AUTOCODE_VERIFICATION_TREE=checkout` checks it out instead.
#[test]
fn run_the_tester_and_the_replays_share_one_tree_and_the_testers_files_are_gone() {
    for (checkout, in_place) in [(false, false), (true, false), (false, true)] {
        let tester = json!([[{"run": "printf 'x\\n' > stray.txt && mkdir -p build && touch build/out"},
                             {"run": CHECK}, {"run": "rm hello.txt"}, test_report("PASS", 0)]]);
        // The tester cites the first check (exit 0); its copy has lost hello.txt by the end.
        let tester = {
            let mut t = tester;
            t[0][3]["report"]["criteria"][0]["checks"][0]["evidence_ref"] = json!("{{event:2}}");
            t
        };
        let harness = Harness::new(script_with(&[("tester", tester)]));
        let mut command = if in_place {
            harness.run_command(&["--yes", "--in-place"])
        } else {
            harness.run_command(&["--yes"])
        };
        if checkout {
            command.env("AUTOCODE_VERIFICATION_TREE", "checkout");
        }
        let finished = finish(command);
        finished.assert_complete();
        let cwd = harness
            .calls()
            .iter()
            .find(|c| c["role"] == "tester")
            .and_then(|c| c["cwd"].as_str().map(PathBuf::from))
            .expect("the tester ran");
        assert!(cwd.ends_with("tree"), "{cwd:?}");
        let work_tree = Harness::work_tree(&finished);
        assert_eq!(
            fs::read_to_string(work_tree.join("hello.txt")).expect("hello.txt"),
            "hello\n"
        );
        assert!(!work_tree.join("stray.txt").exists() && !work_tree.join("build").exists());
        let root = cwd.parent().expect("the verification root");
        for gone in ["base", "tester", "replay"] {
            assert!(!root.join(gone).exists(), "{gone} in {root:?}");
        }
        let run_dir = PathBuf::from(finished.json["run_dir"].as_str().expect("run_dir"));
        let tester_room = fs::read_dir(run_dir.join("stages"))
            .expect("stages")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().contains("tester"))
            .map(|e| e.path().join("room.json"))
            .expect("the tester's stage");
        let room: Value =
            serde_json::from_slice(&fs::read(tester_room).expect("room.json")).expect("JSON");
        // The final gate's last replay is its witness replay when a check showed the change: it
        // takes the work's hello.txt back itself (the base code with the result's tests), so
        // only the tester's writes are looked for then.
        let run_json: Value =
            serde_json::from_slice(&fs::read(run_dir.join("run.json")).expect("run.json"))
                .expect("JSON");
        let witnessed = run_json["verification"]["witnesses"]
            .as_array()
            .is_some_and(|w| !w.is_empty());
        if checkout {
            assert!(room.get("overlay").is_none(), "{room}");
            assert!(!cwd.join("stray.txt").exists() && !cwd.join("build").exists());
            if !witnessed {
                assert_eq!(
                    fs::read_to_string(cwd.join("hello.txt")).expect("hello.txt"),
                    "hello\n",
                    "the final gate replayed in the tree brought back to the work tree"
                );
            }
        } else {
            assert_eq!(
                room["overlay"]["lower"].as_str(),
                work_tree.to_str(),
                "{room}"
            );
            // Autocode never sees the overlay: nothing was written in the tree's directory.
            assert_eq!(fs::read_dir(&cwd).expect("the tree").count(), 0, "{cwd:?}");
            // The last replay's upper layer holds nothing the tester wrote or removed (see
            // `witnessed` for hello.txt).
            let upper = root.join("layer/upper");
            let names: &[&str] = if witnessed {
                &["stray.txt", "build"]
            } else {
                &["stray.txt", "build", "hello.txt"]
            };
            for name in names {
                assert!(
                    upper.join(name).symlink_metadata().is_err(),
                    "{name} in {upper:?}"
                );
            }
        }
    }
}

#[test]
fn run_rejects_a_tester_citing_a_missing_event_and_repairs_in_the_same_session() {
    let lying = json!([{"run": CHECK}, {"report": {
        "milestone_id": "M1",
        "summary": "Checked.",
        "criteria": [{"criterion_id": "AC1", "verdict": "PASS",
                      "checks": [{"command": CHECK, "exit_code": 0,
                                  "evidence_ref": "event:call_does_not_exist"}],
                      "notes": ""}]
    }}]);
    // The repair: the same session, no new command, the right reference.
    let repaired = json!([{"run": CHECK}, test_report("PASS", 0)]);
    let harness = Harness::new(script_with(&[("tester", json!([lying, repaired]))]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let testers: Vec<Value> = harness
        .calls()
        .into_iter()
        .filter(|c| c["role"] == "tester")
        .collect();
    assert_eq!(testers.len(), 2);
    assert_eq!(testers[1]["resumed"], true);
    assert_eq!(testers[1]["session"], testers[0]["session"]);
    let repair = harness.prompt_of("tester", 2);
    assert!(repair.contains("call_does_not_exist"), "{repair}");
}

#[test]
fn run_rejects_a_tester_whose_stream_lies_about_a_failing_check() {
    // The first build is wrong; the tester's stream claims the check passed (exit 0) though it
    // really exited 1. The kernel's exec ledger shows the check's real end, so the attempt is
    // rejected as a forged command event; told so, the tester reports the failure honestly and
    // the builder reworks the milestone.
    let wrong_build = json!([{"run": "printf 'bye\\n' > hello.txt"},
                             {"report": {"status": "done", "summary": "Wrote it.",
                                         "files_changed": ["hello.txt"], "checks": [],
                                         "blockers": []}}]);
    let lying_tester = json!([{"run": CHECK, "fake_exit": 0}, test_report("PASS", 0)]);
    let harness = Harness::new(script_with(&[
        ("builder", json!([wrong_build, build_ok()])),
        ("tester", json!([lying_tester, test_fail(), test_pass()])),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert_eq!(
        harness.roles_called(),
        [
            "requirements",
            "planner",
            "plan_reviewer",
            "builder",
            "tester",
            "tester",
            "builder",
            "tester",
            "completion_reviewer"
        ]
    );
    // The repair prompt names the forged event; the rework prompt carries the honest failure.
    let repair = harness.prompt_of("tester", 2);
    assert!(repair.contains("forged command event"), "{repair}");
    let validation: Value = serde_json::from_slice(
        &fs::read(only_run_dir(&harness).join("stages/005-tester-1/validation.json")).unwrap(),
    )
    .unwrap();
    assert!(
        validation["problems"][0]
            .as_str()
            .is_some_and(|p| p.starts_with("forged command event")),
        "{validation}"
    );
}

#[test]
fn run_builder_fails_twice_then_the_stronger_attempt_succeeds() {
    let wrong_build = json!([{"run": "printf 'bye\\n' > hello.txt"},
                             {"report": {"status": "done", "summary": "Wrote it.",
                                         "files_changed": ["hello.txt"], "checks": [],
                                         "blockers": []}}]);
    let harness = Harness::with_roles(
        script_with(&[
            (
                "builder",
                json!([wrong_build.clone(), wrong_build, build_ok()]),
            ),
            ("tester", json!([test_fail(), test_fail(), test_pass()])),
        ]),
        INDEPENDENT_ROLES,
        STRONG_RETRY,
    );
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let builders: Vec<String> = harness
        .calls()
        .iter()
        .filter(|c| c["role"] == "builder")
        .map(|c| c["model"].as_str().expect("model").to_owned())
        .collect();
    assert_eq!(builders, ["alpha-large", "alpha-large", "alpha-huge"]);
}

#[test]
fn run_pauses_on_a_rate_limit_and_resume_continues() {
    let limited = json!([{"error": {"status": 429, "message": "mock 429 error",
                                    "retryable": true, "retry_after": 1}}]);
    let harness = Harness::new(script_with(&[("builder", json!([limited, build_ok()]))]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_RATE_LIMIT");
    assert_eq!(
        harness.roles_called().last().map(String::as_str),
        Some("builder")
    );
    // `status` shows the same pause, and exits like the paused run.
    let status = harness.status();
    assert_eq!(status.code, Some(PAUSED_EXIT), "{status:?}");
    assert_eq!(
        status.json["pause"]["code"], "PAUSED_RATE_LIMIT",
        "{status:?}"
    );
    let resumed = harness.resume(&[]);
    resumed.assert_complete();
    let builders = harness
        .calls()
        .iter()
        .filter(|c| c["role"] == "builder")
        .count();
    assert_eq!(builders, 2);
}

#[test]
fn run_output_cap_pauses() {
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": BUILD}, {"length": true}], build_ok()]),
    )]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_OUTPUT_CAP");
    assert_eq!(finished.pause_attempt(), "004-builder-1");
    // The next step names the route that paused (a registered tool here), no other CLI's
    // variable.
    let next = finished.json["pause"]["next_step"]
        .as_str()
        .unwrap_or_default();
    assert!(next.contains("the response cap of provider fake"), "{next}");
    assert!(next.contains("--abandon-stage 004-builder-1"), "{next}");
    assert!(
        !next.contains("OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX"),
        "{next}"
    );
    assert!(!next.contains("CLAUDE_CODE_MAX_OUTPUT_TOKENS"), "{next}");
    // Setting the cut attempt aside runs the stage again.
    harness
        .resume(&["--abandon-stage", "004-builder-1"])
        .assert_complete();
    assert_eq!(calls_of(&harness, "builder").len(), 2);
}

#[test]
fn run_corrects_a_shell_command_final_message_once_in_the_same_session() {
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([
            [{"run": BUILD}, {"run": CHECK}, {"shell_command_final": "touch ran-by-autocode"}],
            [{"run": CHECK}, build_report()]
        ]),
    )]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let builders: Vec<Value> = harness
        .calls()
        .into_iter()
        .filter(|c| c["role"] == "builder")
        .collect();
    assert_eq!(builders.len(), 2);
    assert_eq!(builders[1]["resumed"], true);
    assert_eq!(builders[1]["session"], builders[0]["session"]);
    let correction = harness.prompt_of("builder", 2);
    assert!(correction.contains("shell command"), "{correction}");
    // autocode never ran the command it was handed.
    let tree = Harness::work_tree(&finished);
    assert!(!tree.join("ran-by-autocode").exists());
    assert!(correction.contains("ran-by-autocode"), "{correction}");
}

#[test]
fn run_pauses_when_the_token_budget_runs_out() {
    // The requirements call's two steps count 1040 then 1141 tokens (input + cache reads +
    // output): a budget of 1500 is crossed mid-stage, which stops the stage there.
    let harness = Harness::new(script_with(&[(
        "requirements",
        json!([
            [{"run": "true"}, requirements_ok().get(0).cloned().expect("report")],
            requirements_ok()
        ]),
    )]));
    let finished = harness.run(&["--yes", "--max-tokens", "1500"]);
    finished.assert_paused("PAUSED_BUDGET");
    assert_eq!(finished.pause_attempt(), "001-requirements-1");
    assert_eq!(harness.roles_called(), ["requirements"]);
    // Resuming with the same budget changes nothing: it is already spent.
    let still = harness.resume(&[]);
    still.assert_paused("PAUSED_BUDGET");
    assert_eq!(harness.roles_called(), ["requirements"]);
    // A raised budget runs the stage again and the run completes.
    let raised = harness.resume(&["--max-tokens", "1000000"]);
    raised.assert_complete();
    assert_eq!(
        harness.roles_called(),
        [&["requirements"][..], &PIPELINE[..]].concat()
    );
}

#[test]
fn run_killed_mid_stage_is_judged_on_resume_and_abandon_continues() {
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": BUILD}, {"hang": true}], build_ok()]),
    )]));
    let mut autocode = harness
        .run_command(&["--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn autocode");
    let marker = harness.state().join("builder-1.hanging");
    wait_until("the builder to hang", Duration::from_secs(60), || {
        marker.exists()
    });
    let agent: i32 = fs::read_to_string(&marker)
        .expect("marker")
        .trim()
        .parse()
        .expect("pid");
    // A second autocode on the held run changes nothing.
    let busy = harness.resume(&[]);
    busy.assert_paused("PAUSED_RUN_BUSY");
    assert_eq!(
        harness
            .calls()
            .iter()
            .filter(|c| c["role"] == "builder")
            .count(),
        1
    );
    assert!(alive(agent), "the busy resume disturbed the running stage");
    autocode.kill().expect("SIGKILL autocode");
    autocode.wait().expect("reap autocode");
    // The keeper takes the agent's family down with autocode.
    wait_until("the orphaned agent to die", Duration::from_secs(30), || {
        !alive(agent)
    });

    let judged = harness.resume(&[]);
    judged.assert_paused("PAUSED_INTERRUPTED");
    let attempt = judged.json["pause"]["attempt"]
        .as_str()
        .expect("the paused attempt is named")
        .to_owned();
    assert!(attempt.contains("builder"), "{attempt}");
    // Judged, not replayed: no new builder call happened.
    let builders = || {
        harness
            .calls()
            .iter()
            .filter(|c| c["role"] == "builder")
            .count()
    };
    assert_eq!(builders(), 1);

    // Without a decision it stays paused; a name that is no attempt is refused.
    harness.resume(&[]).assert_paused("PAUSED_INTERRUPTED");
    let unknown = harness.resume(&["--abandon-stage", "999-builder-9"]);
    assert_ne!(unknown.code, Some(0), "{unknown:?}");
    assert_eq!(builders(), 1);

    let continued = harness.resume(&["--abandon-stage", &attempt]);
    continued.assert_complete();
    assert_eq!(builders(), 2);
}

#[test]
fn run_in_a_hostile_workspace_uses_only_the_users_provider() {
    let harness = Harness::new(script_with(&[]));
    let ws = harness.workspace();
    let pwned = harness.root.path().join("pwned");
    let evil_toml = |name: &str| {
        format!(
            "name = \"{name}\"\ncommand = [\"sh\", \"-c\", \"echo {name} >> {}\"]\nprompt = \"stdin\"\noutput = \"opencode_events\"\n\n[roles]\n{INDEPENDENT_ROLES}",
            pwned.display()
        )
    };
    // Provider definitions planted in the project, under every name a user might pass.
    for (path, name) in [
        (".autocode/providers/fake.toml", "fake"),
        (".autocode/providers/evil.toml", "evil"),
        ("providers/fake.toml", "fake"),
        ("providers/evil.toml", "evil"),
        ("opencode.toml", "opencode"),
    ] {
        let file = ws.join(path);
        fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        fs::write(file, evil_toml(name)).expect("plant provider");
    }
    // Awkward names and a link out of the tree: snapshots and the replay copy must cope
    // without following it.
    fs::write(ws.join("we ird\nname.txt"), "x\n").expect("odd name");
    let outside = harness.root.path().join("outside.txt");
    fs::write(&outside, "outside\n").expect("outside file");
    std::os::unix::fs::symlink(&outside, ws.join("link-out")).expect("symlink");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "hostile"]);

    // Run from inside the workspace, with an objective full of shell syntax.
    let ws_arg = harness.ws_arg();
    let objective = format!(
        "Create hello.txt containing hello $(echo x >> {p}) `echo y >> {p}` ; echo z >> {p}",
        p = pwned.display()
    );
    // The brief quotes the whole objective: a quote covers a unit only when it spans half of it.
    let mut requirements = requirements_ok();
    requirements[0]["report"]["acceptance_criteria"][0]["covers"] = json!([objective]);
    harness.set_script(script_with(&[("requirements", json!([requirements]))]));
    let out = harness
        .command(&[
            "run",
            &objective,
            "--workspace",
            &ws_arg,
            "--provider",
            "fake",
            "--json",
            "--yes",
        ])
        .current_dir(&ws)
        .output()
        .expect("autocode run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(harness.roles_called(), PIPELINE);
    // The objective reached the agent verbatim, as data.
    assert!(harness.prompt_of("builder", 1).contains("$(echo x >>"));

    // A provider only the workspace defines does not exist.
    let out = harness
        .command(&[
            "run",
            "x",
            "--workspace",
            &ws_arg,
            "--provider",
            "evil",
            "--json",
        ])
        .current_dir(&ws)
        .output()
        .expect("autocode run --provider evil");
    assert_ne!(out.status.code(), Some(0));
    assert_ne!(out.status.code(), Some(PAUSED_EXIT));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("evil"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    assert!(
        !pwned.exists(),
        "workspace content was executed: {}",
        fs::read_to_string(&pwned).unwrap_or_default()
    );
    assert_eq!(fs::read_to_string(&outside).expect("outside"), "outside\n");
}

/// A requirements stage that reports one open question (`Q1`, default `hello.txt`).
pub(super) fn asking_one_question() -> Value {
    json!([{"report": {
        "summary": "A greeting file.",
        "goals": ["hello.txt exists"],
        "constraints": [],
        "acceptance_criteria": [{"id": "AC1", "text": "hello.txt contains exactly hello",
                                "covers": ["Create hello.txt containing hello"]}],
        "open_questions": [{"id": "Q1", "question": "Which file name?",
                            "proposed_default": "hello.txt"}]
    }}])
}

#[test]
fn run_waits_for_answers_and_plan_approval_without_yes() {
    let asking = asking_one_question();
    let harness = Harness::new(script_with(&[("requirements", json!([asking]))]));
    let waiting = harness.run(&[]);
    waiting.assert_paused("WAITING_FOR_USER");
    assert!(waiting.pause_reason().contains("Q1"), "{waiting:?}");
    assert_eq!(harness.roles_called(), ["requirements"]);

    // An answer to a question nobody asked is refused, and nothing runs.
    let typo = harness.resume(&["--answer", "Q9=x"]);
    assert_ne!(typo.code, Some(0), "{typo:?}");
    assert_eq!(harness.roles_called(), ["requirements"]);

    let approval = harness.resume(&["--answer", "Q1=greeting-from-the-user.txt"]);
    approval.assert_paused("AWAITING_PLAN_APPROVAL");
    assert_eq!(
        harness.roles_called(),
        ["requirements", "planner", "plan_reviewer"]
    );
    assert!(
        harness
            .prompt_of("planner", 1)
            .contains("greeting-from-the-user.txt"),
        "the planner was not told the answer"
    );
    let token = approval
        .pause_reason()
        .split_whitespace()
        .find(|word| word.starts_with("r1:"))
        .expect("the approval token is in the pause")
        .to_owned();

    // A token for another revision does not approve this one.
    let wrong = harness.resume(&["--approve-plan", "r1:0000"]);
    assert_ne!(wrong.code, Some(0), "{wrong:?}");
    assert!(!harness.roles_called().iter().any(|r| r == "builder"));

    let approved = harness.resume(&["--approve-plan", &token]);
    approved.assert_complete();
    assert_eq!(harness.roles_called(), PIPELINE);
}

#[test]
fn run_builder_daemon_does_not_outlive_its_stage() {
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"daemon": "exec sleep 300"}, {"run": BUILD}, {"run": CHECK}, build_report()]]),
    )]));
    let finished = harness.run(&["--yes"]);
    let daemons = fs::read_to_string(harness.state().join("daemons.jsonl")).expect("daemons");
    let daemon: Value =
        serde_json::from_str(daemons.lines().next().expect("one daemon")).expect("daemon line");
    let pid = i32::try_from(daemon["pid"].as_i64().expect("pid")).expect("pid fits");
    // The boundary owns the whole family, detached or not: by the time autocode returns, the
    // stage's daemon is gone.
    assert!(!alive(pid), "the builder's daemon {pid} outlived autocode");
    finished.assert_complete();
}

fn wrong_build() -> Value {
    json!([{"run": "printf 'bye\\n' > hello.txt"},
           {"report": {"status": "done", "summary": "Wrote it.", "files_changed": ["hello.txt"],
                       "checks": [], "blockers": []}}])
}

/// The one run directory of a harness's workspace.
pub(super) fn only_run_dir(harness: &Harness) -> PathBuf {
    let runs: Vec<PathBuf> = fs::read_dir(harness.workspace().join(".autocode/runs"))
        .expect("runs dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().expect("one run")
}

pub(super) fn calls_of(harness: &Harness, role: &str) -> Vec<Value> {
    harness
        .calls()
        .into_iter()
        .filter(|c| c["role"] == role)
        .collect()
}

#[test]
fn run_in_place_works_in_the_workspace_itself() {
    let harness = Harness::new(script_with(&[]));
    // In place, the builder may create files at the top level (hello.txt is new).
    let finished = harness.run(&["--yes", "--in-place"]);
    finished.assert_complete();
    assert_eq!(
        fs::read_to_string(harness.workspace().join("hello.txt")).expect("hello.txt"),
        "hello\n"
    );
}

/// An in-place builder works in the user's own checkout, but its `.git` (hooks, config) is a
/// throwaway layer of its own and `.autocode/` (the runs) stays read-only: what it plants in
/// `.git` stays in the layer, what it plants in the runs fails, its honest work (staging
/// included) does not.
#[test]
fn an_in_place_builder_cannot_plant_in_git_or_the_runs() {
    let plant = "echo planted > .git/hooks/post-checkout || echo refused-hook; \
                 git config core.fsmonitor 'touch fsmonitor-ran' || echo refused-config; \
                 printf 'x\\n' > staged.txt && git add staged.txt && git ls-files | grep -qx staged.txt && echo staged-ok; \
                 git rm -q --cached staged.txt; rm -f staged.txt; \
                 mkdir -p .autocode/runs/planted && echo '{}' > .autocode/runs/planted/run.json || echo refused-run; \
                 for r in .autocode/runs/*/run.json; do echo forged > \"$r\" || echo refused-state; done; true";
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": plant}, {"run": BUILD}, {"run": CHECK}, build_report()]]),
    )]));
    let config_before = fs::read(harness.workspace().join(".git/config")).expect("config");
    let finished = harness.run(&["--yes", "--in-place"]);
    finished.assert_complete();
    let ws = harness.workspace();
    assert_eq!(
        fs::read_to_string(ws.join("hello.txt")).expect("hello.txt"),
        "hello\n"
    );
    assert!(!ws.join(".git/hooks/post-checkout").exists());
    assert_eq!(
        fs::read(ws.join(".git/config")).expect("config"),
        config_before
    );
    assert!(!ws.join(".autocode/runs/planted").exists());
    let run = only_run_dir(&harness);
    let stages = fs::read_dir(run.join("stages")).expect("stages");
    let builder = stages
        .map(|e| e.expect("stage").path())
        .find(|p| p.to_string_lossy().contains("builder"))
        .expect("a builder stage");
    let room: Value =
        serde_json::from_slice(&fs::read(builder.join("room.json")).expect("room.json"))
            .expect("room json");
    let read_only: Vec<&str> = room["read_only"]
        .as_array()
        .expect("read_only")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(read_only.len(), 1, "{room}");
    assert!(read_only[0].ends_with("/.autocode"));
    assert!(
        room["views"]["layers"]
            .as_array()
            .expect("layers")
            .iter()
            .any(|l| l["dir"].as_str().is_some_and(|d| d.ends_with("/.git"))),
        "{room}"
    );
    let receipt: Value = serde_json::from_slice(
        &fs::read(builder.join("supervision.json")).expect("supervision.json"),
    )
    .expect("receipt json");
    assert!(
        receipt["room"]["mechanisms"]
            .as_array()
            .expect("mechanisms")
            .iter()
            .any(|m| m.as_str().is_some_and(|m| m.starts_with("mount-namespace"))),
        "{receipt}"
    );
    let stdout = fs::read_to_string(builder.join("stdout.log")).unwrap_or_default();
    for refused in ["refused-run", "refused-state"] {
        assert!(stdout.contains(refused), "{refused} not in {stdout}");
    }
    assert!(stdout.contains("staged-ok"), "{stdout}");
}

#[test]
fn run_retries_a_retryable_transport_error_once_on_a_fresh_session() {
    let bad_gateway = json!([{"error": {"status": 502, "message": "mock 502 error",
                                        "retryable": true}}]);
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([bad_gateway.clone(), build_ok()]),
    )]));
    harness.run(&["--yes"]).assert_complete();
    let builders = calls_of(&harness, "builder");
    assert_eq!(builders.len(), 2);
    assert_eq!(builders[1]["resumed"], false);

    // Twice in a row: the one retry is used up, the stage pauses without a third call.
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([bad_gateway.clone(), bad_gateway, build_ok()]),
    )]));
    let finished = harness.run(&["--yes"]);
    assert_eq!(finished.code, Some(PAUSED_EXIT), "{finished:?}");
    assert_eq!(calls_of(&harness, "builder").len(), 2);
}

#[test]
fn run_final_gate_replays_the_plans_checks_not_the_testers_choice() {
    // The tester "verifies" with a command that proves nothing; its replay passes, but the
    // final gate replays the plan's own check on the final tree and sends the work back.
    let trivial = json!([{"run": "true"}, {"report": {
        "milestone_id": "M1",
        "summary": "Looks fine.",
        "criteria": [{"criterion_id": "AC1", "verdict": "PASS",
                      "checks": [{"command": "true", "exit_code": 0,
                                  "evidence_ref": "{{last_event}}"}],
                      "notes": ""}]
    }}]);
    let harness = Harness::new(script_with(&[
        ("builder", json!([wrong_build(), build_ok()])),
        ("tester", json!([trivial, test_pass()])),
        ("completion_reviewer", json!([complete(), complete()])),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert_eq!(calls_of(&harness, "builder").len(), 2);
    // The rework names the plan's check that failed on the final tree.
    let rework = harness.prompt_of("builder", 2);
    assert!(rework.contains("Open findings to fix"), "{rework}");
    assert!(rework.contains("failed on the final tree"), "{rework}");
    assert!(!harness.prompt_of("builder", 1).contains("Open findings"));
}

#[test]
fn run_pauses_invalid_output_after_two_report_repairs() {
    let prose = json!([{"run": BUILD}, {"text": "I wrote the file, all good."}]);
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([prose.clone(), [{"text": "Still prose."}], [{"text": "{\"status\": \"done\"}"}]]),
    )]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_INVALID_OUTPUT");
    let builders = calls_of(&harness, "builder");
    assert_eq!(builders.len(), 3);
    // Both repairs continued the first session.
    assert!(
        builders[1..]
            .iter()
            .all(|c| c["resumed"] == true && c["session"] == builders[0]["session"])
    );
    assert_eq!(finished.pause_attempt(), "006-builder-3");
}

#[test]
fn run_pauses_planning_budget_after_two_blocking_reviews() {
    let blocking = json!([{"report": {
        "verdict": "changes_requested",
        "summary": "Missing a rollback plan.",
        "concerns": [{"id": "C1", "blocking": true, "text": "No rollback.",
                      "requested_change": "Add one."}],
        "uncovered": []
    }}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan_ok(), plan_ok()])),
        ("plan_reviewer", json!([blocking.clone(), blocking])),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_PLANNING_BUDGET");
    assert!(
        finished.pause_reason().contains("No rollback"),
        "{finished:?}"
    );
    assert_eq!(
        harness.roles_called(),
        [
            "requirements",
            "planner",
            "plan_reviewer",
            "planner",
            "plan_reviewer"
        ]
    );
    // The second planner was told the concern.
    assert!(harness.prompt_of("planner", 2).contains("No rollback"));
}

/// A plan that labels `pass_to_pass` a check failing on the base tree is sent back to the
/// planner as a repair (autocode ran it there), not to the plan review: the reviewer sees only
/// the repaired plan, and each check ran on the base tree once.
#[test]
fn a_pass_to_pass_check_failing_on_the_base_tree_is_repaired_before_the_review() {
    let mut mislabelled = plan_ok();
    mislabelled[0]["report"]["milestones"][0]["acceptance_criteria"][0]["kind"] =
        json!("pass_to_pass");
    let harness = Harness::new(script_with(&[("planner", json!([mislabelled, plan_ok()]))]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert_eq!(
        harness.roles_called(),
        [
            "requirements",
            "planner",
            "planner",
            "plan_reviewer",
            "builder",
            "tester",
            "completion_reviewer"
        ]
    );
    let repair = harness.prompt_of("planner", 2);
    assert!(
        repair.contains("its pass_to_pass check") && repair.contains("FAILS on the base tree"),
        "{repair}"
    );
    assert!(
        !harness
            .prompt_of("plan_reviewer", 1)
            .contains("FAILS on the base tree")
    );
    let run_dir = finished.json["run_dir"].as_str().expect("run_dir");
    let activity =
        std::fs::read_to_string(std::path::Path::new(run_dir).join("activity.jsonl")).unwrap();
    assert_eq!(
        activity.matches("checks run on the base tree").count(),
        1,
        "{activity}"
    );
}

#[test]
fn run_pauses_when_the_completion_reviewer_is_blocked() {
    let blocked = json!([{"report": {
        "decision": "BLOCKED",
        "summary": "Needs a product decision on the greeting.",
        "findings": [{"id": "F1", "blocking": true, "text": "Which language?"}],
        "uncovered": []
    }}]);
    let harness = Harness::new(script_with(&[("completion_reviewer", json!([blocked]))]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_BLOCKED");
    assert!(
        finished.pause_reason().contains("product decision"),
        "{finished:?}"
    );
}

#[test]
fn run_pauses_builder_retry_limit_without_a_stronger_model() {
    let harness = Harness::new(script_with(&[
        ("builder", json!([wrong_build(), wrong_build(), build_ok()])),
        ("tester", json!([test_fail(), test_fail(), test_pass()])),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_BUILDER_RETRY_LIMIT");
    assert_eq!(calls_of(&harness, "builder").len(), 2);
}

/// A stuck milestone is shown to the resolver (read-only) before the run pauses; its diagnosis
/// joins the pause reason. The pause stands: the resolver advises, it does not decide.
#[test]
fn run_consults_the_resolver_before_pausing_a_stuck_milestone() {
    let diagnosis = "hello.txt is written with a trailing space";
    let harness = Harness::new(script_with(&[
        ("builder", json!([wrong_build(), wrong_build()])),
        ("tester", json!([test_fail(), test_fail()])),
        (
            "resolver",
            json!([[{"report": {
                "summary": "The builder writes the wrong text.",
                "diagnosis": diagnosis,
                "recommended_changes": ["write exactly `hello` with no trailing space"]
            }}]]),
        ),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_BUILDER_RETRY_LIMIT");
    assert!(finished.pause_reason().contains(diagnosis), "{finished:?}");
    assert!(
        finished.pause_reason().contains("trailing space"),
        "{finished:?}"
    );
    assert_eq!(calls_of(&harness, "resolver").len(), 1);
    // Without a resolver answer the pause is the same, and says so.
    let silent = Harness::new(script_with(&[
        ("builder", json!([wrong_build(), wrong_build()])),
        ("tester", json!([test_fail(), test_fail()])),
    ]));
    let finished = silent.run(&["--yes"]);
    finished.assert_paused("PAUSED_BUILDER_RETRY_LIMIT");
    assert!(finished.pause_reason().contains("resolver"), "{finished:?}");
}

#[test]
fn run_pauses_uncertain_when_the_agent_exits_without_an_answer() {
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": BUILD}, {"exit": 2}]]),
    )]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_PROVIDER_UNCERTAIN");
    assert_eq!(finished.pause_attempt(), "004-builder-1");
}

/// autocode's own git commands (worktree creation, snapshots' `ls-files`, the replay copy) run
/// in the user's repository with its configuration: a planted hook or `core.fsmonitor` runs.
#[test]
fn run_does_not_execute_repository_hooks_or_fsmonitor() {
    let harness = Harness::new(script_with(&[]));
    let ws = harness.workspace();
    let marker = harness.root.path().join("hook-ran");
    for hook in ["post-checkout", "reference-transaction"] {
        let path = ws.join(".git/hooks").join(hook);
        fs::write(
            &path,
            format!("#!/bin/sh\necho {hook} >> {}\n", marker.display()),
        )
        .expect("hook");
        let status = Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .expect("chmod");
        assert!(status.success());
    }
    let fsmonitor = format!("echo fsmonitor >> {}; false", marker.display());
    git(&ws, &["config", "core.fsmonitor", &fsmonitor]);
    harness.run(&["--yes"]).assert_complete();
    assert!(
        !marker.exists(),
        "repository code ran: {}",
        fs::read_to_string(&marker).unwrap_or_default()
    );
}

#[test]
fn run_killed_after_a_complete_report_is_judged_interrupted_not_adopted_from_the_keepers_receipt() {
    // The builder's stream already holds its complete report when autocode dies. The receipt
    // the keeper writes after autocode's death carries no integrity tag (the keeper does not
    // hold the run-state key), so autocode does not trust it: the attempt is judged
    // interrupted, not adopted, and nothing is replayed blindly.
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([
            [{"run": BUILD}, {"run": CHECK}, build_report(), {"hang": true}],
            build_ok()
        ]),
    )]));
    let mut autocode = harness
        .run_command(&["--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn autocode");
    let marker = harness.state().join("builder-1.hanging");
    wait_until("the builder to hang", Duration::from_secs(60), || {
        marker.exists()
    });
    let agent: i32 = fs::read_to_string(&marker)
        .expect("marker")
        .trim()
        .parse()
        .expect("pid");
    // Kill only once the stage log holds the report's final step.
    let runs = harness.workspace().join(".autocode/runs");
    wait_until(
        "the report in the stage log",
        Duration::from_secs(30),
        || {
            fs::read_dir(&runs)
                .into_iter()
                .flatten()
                .flatten()
                .any(|run| {
                    fs::read_to_string(run.path().join("stages/004-builder-1/stdout.log"))
                        .is_ok_and(|log| log.contains("\"reason\":\"stop\""))
                })
        },
    );
    autocode.kill().expect("SIGKILL autocode");
    autocode.wait().expect("reap autocode");
    wait_until("the orphaned agent to die", Duration::from_secs(30), || {
        !alive(agent)
    });
    let judged = harness.resume(&[]);
    judged.assert_paused("PAUSED_INTERRUPTED");
    assert_eq!(
        judged.json["pause"]["attempt"], "004-builder-1",
        "{judged:?}"
    );
    assert_eq!(
        calls_of(&harness, "builder").len(),
        1,
        "the builder was run again"
    );
    // The keeper's receipt is there, untagged.
    let run = only_run_dir(&harness);
    let receipt: Value = serde_json::from_slice(
        &fs::read(run.join("stages/004-builder-1/supervision.json")).expect("keeper receipt"),
    )
    .expect("receipt json");
    assert_eq!(receipt["owner_lost"], true, "{receipt:#}");
    assert!(receipt.get("integrity").is_none(), "{receipt:#}");
    harness
        .resume(&["--abandon-stage", "004-builder-1"])
        .assert_complete();
    assert_eq!(calls_of(&harness, "builder").len(), 2);
}

#[test]
fn run_withholds_credentials_from_agents_and_checks() {
    // The builder records its environment under the ignored build/ directory; the plan's
    // check fails wherever a secret is visible, so the tester and autocode's own replays
    // prove the check environment is clean too, and that a variable the person lets through
    // (`AUTOCODE_PASS_ENV`, a test's `DATABASE_URL`) reaches the checks as it reaches the agents.
    let env_check = "! env | grep -q e2e-secret && test -n \"$GITHUB_TOKEN\"";
    let plan = json!([{"report": {
        "summary": "One milestone.",
        "milestones": [{"id": "M1", "title": "Greeting", "description": "",
                        "acceptance_criteria": [
                            {"id": "AC1", "text": "hello", "check": CHECK, "human_review": false, "kind": "fail_to_pass"},
                            {"id": "AC2", "text": "no secrets", "check": env_check,
                             "human_review": false, "kind": "pass_to_pass"}]}]
    }}]);
    let tester = json!([{"run": CHECK}, {"run": env_check}, {"report": {
        "milestone_id": "M1",
        "summary": "Both hold.",
        "criteria": [
            {"criterion_id": "AC1", "verdict": "PASS", "notes": "",
             "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{event:1}}"}]},
            {"criterion_id": "AC2", "verdict": "PASS", "notes": "",
             "checks": [{"command": env_check, "exit_code": 0, "evidence_ref": "{{event:2}}"}]}
        ]
    }}]);
    let builder = json!([{"run": "mkdir -p build && env > build/env.txt"}, {"run": BUILD},
                         {"run": CHECK}, build_report()]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan])),
        ("builder", json!([builder])),
        ("tester", json!([tester])),
    ]));
    let mut command = harness.run_command(&["--yes"]);
    command
        .env("OPENAI_API_KEY", "sk-e2e-secret-1")
        .env("DATABASE_URL", "postgres://u:e2e-secret-2@db/x")
        .env("GITHUB_TOKEN", "ghp-passed-through")
        .env("AUTOCODE_PASS_ENV", "GITHUB_TOKEN")
        .env("E2E_ORDINARY", "kept")
        // The widened policy: more name words, camelCase, values shaped like credentials.
        .env("DB_PWD", "e2e-secret-3")
        .env("accessToken", "e2e-secret-4")
        .env(
            "NOTIFY",
            "https://hooks.slack.com/services/T0/B0/e2e-secret-5",
        )
        .env("MIRROR", "postgres://u:pa/e2e-secret-6@h/db")
        .env("CONN", "Server=db;Password=e2e-secret-7")
        .env(
            "E2E_BINARY",
            std::ffi::OsStr::from_bytes(b"\xff e2e-secret-8"),
        )
        .env("SORT_KEY", "kept-too");
    let finished = finish(command);
    finished.assert_complete();
    let tree = Harness::work_tree(&finished);
    let seen = fs::read(tree.join("build/env.txt")).expect("the builder's env");
    let seen = String::from_utf8_lossy(&seen);
    assert!(!seen.contains("e2e-secret"), "{seen}");
    assert!(seen.contains("E2E_ORDINARY=kept"), "{seen}");
    assert!(seen.contains("SORT_KEY=kept-too"), "{seen}");
    assert!(seen.contains("GITHUB_TOKEN=ghp-passed-through"), "{seen}");
    // PWD is the stage's directory, set by the launcher, not withheld.
    assert!(
        seen.lines().any(|l| l == format!("PWD={}", tree.display())),
        "{seen}"
    );
    // The builder's launch record names what was withheld and why, never a value.
    let run = only_run_dir(&harness);
    let launch = fs::read_to_string(run.join("stages/004-builder-1/launch.json")).expect("launch");
    assert!(!launch.contains("e2e-secret"), "{launch}");
    let launch: Value = serde_json::from_str(&launch).expect("launch json");
    let reason = |name: &str| {
        launch["withheld_env"]
            .as_array()
            .expect("withheld_env")
            .iter()
            .find(|w| w["name"] == name)
            .map(|w| w["reason"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(
        reason("E2E_BINARY").as_deref(),
        Some("not_utf8"),
        "{launch:#}"
    );
    assert_eq!(reason("DB_PWD").as_deref(), Some("credential_name"));
    assert_eq!(reason("accessToken").as_deref(), Some("credential_name"));
    assert_eq!(reason("NOTIFY").as_deref(), Some("credential_value"));
    assert_eq!(reason("MIRROR").as_deref(), Some("url_with_password"));
    assert_eq!(reason("CONN").as_deref(), Some("credential_value"));
    assert_eq!(reason("PWD"), None);
    // The replays ran the check (on the base tree, the tester's, the final gate's), and no
    // record of them holds the passed value (their keys digest it under the run-state key).
    let replays: Vec<_> = fs::read_dir(run.join("replays"))
        .expect("replay records")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(!replays.is_empty());
    for path in replays.iter().chain([&run.join("replay-results.json")]) {
        let text = fs::read_to_string(path).expect("record");
        assert!(
            !text.contains("ghp-passed-through"),
            "{}: {text}",
            path.display()
        );
    }
}

#[test]
fn run_pauses_when_the_plan_reviewer_deletes_a_file() {
    let reviewer = json!([[{"run": "rm README.md"}, approve().get(0).cloned().expect("report")]]);
    let harness = Harness::new(script_with(&[("plan_reviewer", reviewer)]));
    // Unconfined, so the write happens and the snapshot comparison (the check behind the
    // room) is what stops it.
    let finished = harness.run(&["--yes", "--unconfined"]);
    finished.assert_paused("PAUSED_DISCOVERY_WRITE");
    assert_eq!(finished.pause_attempt(), "003-plan_reviewer-1");
    assert!(
        finished.pause_reason().contains("README.md"),
        "{finished:?}"
    );
}

#[test]
fn run_resume_notices_a_changed_provider_file() {
    let limited = json!([{"error": {"status": 429, "message": "mock 429 error",
                                    "retryable": true}}]);
    let harness = Harness::new(script_with(&[("builder", json!([limited, build_ok()]))]));
    harness.run(&["--yes"]).assert_paused("PAUSED_RATE_LIMIT");
    // The provider definition changes while the run is paused.
    let toml = harness.home().join(".config/autocode/providers/fake.toml");
    let mut text = fs::read_to_string(&toml).expect("fake.toml");
    text.push_str("\n# edited while the run was paused\n");
    fs::write(&toml, text).expect("edit fake.toml");
    let changed = harness.resume(&[]);
    changed.assert_paused("PAUSED_TRANSPORT_CHANGED");
    assert_eq!(calls_of(&harness, "builder").len(), 1);
    harness
        .resume(&["--accept-transport-change"])
        .assert_complete();
    assert_eq!(calls_of(&harness, "builder").len(), 2);
}

#[test]
fn run_rejects_a_builder_citing_the_wrong_exit_code_then_accepts_the_repair() {
    // The builder cites its failing pre-check (grep exits 2: no file yet) as exit 0; the repair
    // cites a real pass.
    let misquoting = json!([{"run": CHECK}, {"run": BUILD}, {"report": {
        "status": "done", "summary": "Wrote hello.txt.", "files_changed": ["hello.txt"],
        "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{event:1}}"}],
        "blockers": []
    }}]);
    let repair = json!([{"run": CHECK}, build_report()]);
    let harness = Harness::new(script_with(&[("builder", json!([misquoting, repair]))]));
    harness.run(&["--yes"]).assert_complete();
    let builders = calls_of(&harness, "builder");
    assert_eq!(builders.len(), 2);
    assert_eq!(builders[1]["session"], builders[0]["session"]);
    let repair_prompt = harness.prompt_of("builder", 2);
    assert!(
        repair_prompt.contains("autocode rejected your report"),
        "{repair_prompt}"
    );
    assert!(
        repair_prompt.contains("exited 2, not the cited 0"),
        "{repair_prompt}"
    );
}

/// OpenCode's events give the reset hint as `retry-after: 1`; the runner's hint parser reads
/// `30`, epochs and times of day, so the pause has no reset time and `--wait` cannot wait.
#[test]
fn run_rate_limit_with_retry_after_carries_its_reset_time_and_resume_waits() {
    let limited = json!([{"error": {"status": 429, "message": "mock 429 error",
                                    "retryable": true, "retry_after": 1}}]);
    let harness = Harness::new(script_with(&[("builder", json!([limited, build_ok()]))]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_RATE_LIMIT");
    let resume_after = finished.json["pause"]["resume_after"]
        .as_str()
        .map(str::to_owned);
    assert!(
        resume_after.is_some(),
        "OpenCode's `retry-after: 1` gave no reset time: {finished:?}"
    );
    harness.resume(&["--wait"]).assert_complete();
}

#[test]
fn run_two_milestones_continue_then_complete() {
    let second_check = "grep -qx world world.txt";
    let plan = json!([{"report": {
        "summary": "Two files, one per milestone.",
        "milestones": [
            {"id": "M1", "title": "hello", "description": "",
             "acceptance_criteria": [{"id": "AC1", "text": "hello", "check": CHECK,
                                      "human_review": false, "kind": "fail_to_pass"}]},
            {"id": "M2", "title": "world", "description": "",
             "acceptance_criteria": [{"id": "AC2", "text": "world", "check": second_check,
                                      "human_review": false, "kind": "fail_to_pass"}]}
        ]
    }}]);
    let second_build = json!([{"run": "printf 'world\\n' > world.txt"}, {"run": second_check},
        {"report": {"status": "done", "summary": "Wrote world.txt.",
                    "files_changed": ["world.txt"],
                    "checks": [{"command": second_check, "exit_code": 0,
                                "evidence_ref": "{{last_event}}"}],
                    "blockers": []}}]);
    let second_test = json!([{"run": second_check}, {"report": {
        "milestone_id": "M2", "summary": "world holds.",
        "criteria": [{"criterion_id": "AC2", "verdict": "PASS", "notes": "",
                      "checks": [{"command": second_check, "exit_code": 0,
                                  "evidence_ref": "{{last_event}}"}]}]
    }}]);
    // COMPLETE after the first of two milestones is refused; the repair says CONTINUE.
    let early = json!([{"report": {"decision": "COMPLETE", "summary": "Done?", "findings": [], "uncovered": []}}]);
    let cont = json!([{"report": {"decision": "CONTINUE", "summary": "On to M2.", "findings": [], "uncovered": []}}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan])),
        ("builder", json!([build_ok(), second_build])),
        ("tester", json!([test_pass(), second_test])),
        ("completion_reviewer", json!([early, cont, complete()])),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert_eq!(
        harness.roles_called(),
        [
            "requirements",
            "planner",
            "plan_reviewer",
            "builder",
            "tester",
            "completion_reviewer",
            "completion_reviewer",
            "builder",
            "tester",
            "completion_reviewer"
        ]
    );
    assert!(
        harness
            .prompt_of("completion_reviewer", 2)
            .contains("COMPLETE is only for the last milestone")
    );
    assert!(harness.prompt_of("builder", 2).contains("Milestone 2 of 2"));
    let tree = Harness::work_tree(&finished);
    assert_eq!(
        fs::read_to_string(tree.join("world.txt")).expect("world"),
        "world\n"
    );
}

#[test]
fn run_names_uncommitted_changes_it_does_not_see() {
    let harness = Harness::new(script_with(&[]));
    fs::write(
        harness.workspace().join("README.md"),
        "edited, not committed\n",
    )
    .expect("edit");
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert!(finished.stderr.contains("README.md"), "{finished:?}");
    // The user's edit is left alone, and the run's tree started from HEAD.
    assert_eq!(
        fs::read_to_string(harness.workspace().join("README.md")).expect("readme"),
        "edited, not committed\n"
    );
    assert_eq!(
        fs::read_to_string(Harness::work_tree(&finished).join("README.md")).expect("readme"),
        "seed\n"
    );
}

#[test]
fn run_accepts_an_unnamed_event_ref_for_a_unique_command() {
    // `event:?` resolves when exactly one command of the attempt ran that text with that exit.
    let tester = json!([{"run": CHECK}, {"report": {
        "milestone_id": "M1", "summary": "Checked.",
        "criteria": [{"criterion_id": "AC1", "verdict": "PASS", "notes": "",
                      "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "event:?"}]}]
    }}]);
    let harness = Harness::new(script_with(&[("tester", json!([tester]))]));
    harness.run(&["--yes"]).assert_complete();
    assert_eq!(calls_of(&harness, "tester").len(), 1);
}

#[test]
fn run_pauses_when_a_repair_answers_from_another_session() {
    let prose = json!([{"run": BUILD}, {"text": "Done, trust me."}]);
    let elsewhere = json!([{"session": "ses_0000000000000000000000ff"}, {"run": CHECK},
                           build_report()]);
    let harness = Harness::new(script_with(&[("builder", json!([prose, elsewhere]))]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_PROVIDER_UNCERTAIN");
    assert!(
        finished
            .pause_reason()
            .contains("ses_0000000000000000000000ff"),
        "{finished:?}"
    );
    let builders = calls_of(&harness, "builder");
    assert_eq!(builders.len(), 2);
    assert_eq!(builders[1]["resumed"], true);
}

#[test]
fn run_pauses_repeated_failure_when_the_final_message_stays_a_shell_command() {
    // One same-session correction, then the two report-only repairs, then the pause.
    let shell = json!([{"shell_command_final": "make test"}]);
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": BUILD}, {"shell_command_final": "make test"}], shell, shell, shell]),
    )]));
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_REPEATED_FAILURE");
    let builders = calls_of(&harness, "builder");
    assert_eq!(builders.len(), 4);
    assert!(builders[1..].iter().all(|c| c["resumed"] == true));
    assert!(harness.prompt_of("builder", 2).contains("make test"));
    assert!(
        harness
            .prompt_of("builder", 3)
            .contains("autocode rejected your report")
    );
}

#[test]
fn run_pauses_repeated_failure_when_the_stronger_attempt_fails_the_same_way() {
    let harness = Harness::with_roles(
        script_with(&[
            (
                "builder",
                json!([wrong_build(), wrong_build(), wrong_build(), build_ok()]),
            ),
            (
                "tester",
                json!([test_fail(), test_fail(), test_fail(), test_pass()]),
            ),
        ]),
        INDEPENDENT_ROLES,
        STRONG_RETRY,
    );
    let finished = harness.run(&["--yes"]);
    finished.assert_paused("PAUSED_REPEATED_FAILURE");
    let models: Vec<Value> = calls_of(&harness, "builder")
        .iter()
        .map(|c| c["model"].clone())
        .collect();
    assert_eq!(
        models,
        [
            json!("alpha-large"),
            json!("alpha-large"),
            json!("alpha-huge")
        ]
    );
}

#[test]
fn run_completes_when_the_builder_tries_to_commit_its_work() {
    let committing = json!([{"run": BUILD},
        {"run": "git add hello.txt && git -c user.name=b -c user.email=b@example.invalid commit -qm build"},
        {"run": CHECK}, build_report()]);
    let harness = Harness::new(script_with(&[("builder", json!([committing]))]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let tree = Harness::work_tree(&finished);
    let log = Command::new("git")
        .args(["log", "--format=%an|%s"])
        .current_dir(&tree)
        .output()
        .expect("git log");
    // Agents never commit: the git metadata is outside the room, so the builder's commit was
    // refused; autocode committed the accepted stage itself, on the run's branch.
    let log = String::from_utf8_lossy(&log.stdout);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(
        lines[0].starts_with(
            "autocode|autocode: milestone 1 \"Write hello.txt\" (stage 004-builder-1)"
        ),
        "{log}"
    );
    assert!(lines[1].ends_with("|seed"), "{log}");
    assert_eq!(
        fs::read_to_string(tree.join("hello.txt")).expect("hello.txt"),
        "hello\n"
    );
}

/// A human-review criterion is a gate: the run pauses `AWAITING_HUMAN_REVIEW` with the
/// criterion, why, and the diff bearing on it; a rejection sends the milestone back to the
/// builder with the reason; an acceptance (time and text shown recorded) completes the run, and
/// the final message says how each criterion was verified.
#[test]
fn a_human_review_criterion_waits_for_a_person() {
    let plan = json!([{"report": {
        "summary": "One milestone with a human check.",
        "milestones": [{"id": "M1", "title": "Greeting", "description": "",
                        "acceptance_criteria": [
                            {"id": "AC1", "text": "hello", "check": CHECK, "human_review": false, "kind": "fail_to_pass"},
                            {"id": "AC2", "text": "hello.txt reads well", "check": null,
                             "human_review": true, "kind": "fail_to_pass"}]}]
    }}]);
    let tester = json!([{"run": CHECK}, {"report": {
        "milestone_id": "M1", "summary": "AC1 holds; AC2 needs a person.",
        "criteria": [
            {"criterion_id": "AC1", "verdict": "PASS", "notes": "",
             "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{last_event}}"}]},
            {"criterion_id": "AC2", "verdict": "HUMAN_REVIEW", "notes": "tone", "checks": []}
        ]
    }}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan])),
        ("builder", json!([build_ok(), build_ok()])),
        ("tester", json!([tester.clone(), tester])),
        ("completion_reviewer", json!([complete(), complete()])),
    ]));
    let paused = harness.run(&["--yes"]);
    paused.assert_paused("AWAITING_HUMAN_REVIEW");
    let reason = paused.pause_reason();
    assert!(
        reason.contains("AC2") && reason.contains("human review"),
        "{paused:?}"
    );
    assert!(
        reason.contains("+hello"),
        "the diff bearing on it is shown: {paused:?}"
    );
    assert!(
        !reason.contains("AC1 ("),
        "AC1 is verified by its check: {paused:?}"
    );
    // Without a decision the pause stays; an unknown criterion is a usage error.
    harness.resume(&[]).assert_paused("AWAITING_HUMAN_REVIEW");
    assert_eq!(harness.resume(&["--accept", "AC1"]).code, Some(2));

    let builders = || {
        harness
            .calls()
            .iter()
            .filter(|c| c["role"] == "builder")
            .count()
    };
    assert_eq!(builders(), 1);
    let rejected = harness.resume(&["--reject", "AC2", "--because", "say it louder"]);
    rejected.assert_paused("AWAITING_HUMAN_REVIEW");
    assert_eq!(
        builders(),
        2,
        "the rejection sent the milestone back to the builder"
    );
    let prompt = harness.prompt_of("builder", 2);
    assert!(prompt.contains("say it louder"), "{prompt}");

    harness.resume(&["--accept", "AC2"]).assert_complete();
    let status = harness.status();
    let v = &status.json["verification"];
    let decisions = v["human_decisions"].as_array().cloned().unwrap_or_default();
    assert_eq!(decisions.len(), 2, "{status:?}");
    assert_eq!(decisions[0]["accepted"], false);
    assert_eq!(decisions[1]["accepted"], true);
    assert!(
        decisions[1]["shown"]
            .as_str()
            .unwrap_or_default()
            .contains("reads well")
    );
    assert!(decisions[1]["at"].is_string());
    let verified = v["verified"].as_array().cloned().unwrap_or_default();
    let how = |id: &str| {
        verified
            .iter()
            .find(|c| c["criterion_id"] == id)
            .and_then(|c| c["how"].as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    assert!(how("AC1").starts_with("replayed"), "{verified:?}");
    assert!(
        how("AC1").contains("failed on the base tree"),
        "{verified:?}"
    );
    assert!(
        how("AC2").starts_with("accepted by a person"),
        "{verified:?}"
    );
}

/// `kill -9` of autocode in the middle of every stage kind: the keeper ends the agent's family,
/// `resume` judges the attempt from its artifacts (never replays it), and `--abandon-stage`
/// runs the stage again to completion.
#[test]
fn run_killed_mid_stage_of_every_kind_is_judged_then_continues() {
    type Ok = fn() -> Value;
    let roles: [(&str, Ok); 6] = [
        ("requirements", requirements_ok),
        ("planner", plan_ok),
        ("plan_reviewer", approve),
        ("builder", build_ok),
        ("tester", test_pass),
        ("completion_reviewer", complete),
    ];
    for (role, ok) in roles {
        let harness = Harness::new(script_with(&[(role, json!([[{"hang": true}], ok()]))]));
        let mut autocode = harness
            .run_command(&["--yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn autocode");
        let marker = harness.state().join(format!("{role}-1.hanging"));
        wait_until(
            &format!("the {role} to hang"),
            Duration::from_secs(60),
            || marker.exists(),
        );
        let agent: i32 = fs::read_to_string(&marker)
            .expect("marker")
            .trim()
            .parse()
            .expect("pid");
        autocode.kill().expect("SIGKILL autocode");
        autocode.wait().expect("reap autocode");
        wait_until(
            &format!("the orphaned {role} to die"),
            Duration::from_secs(30),
            || !alive(agent),
        );
        let calls = || harness.calls().iter().filter(|c| c["role"] == role).count();
        let judged = harness.resume(&[]);
        judged.assert_paused("PAUSED_INTERRUPTED");
        let attempt = judged.json["pause"]["attempt"]
            .as_str()
            .expect("the paused attempt is named")
            .to_owned();
        assert!(attempt.contains(role), "{role}: {attempt}");
        assert_eq!(calls(), 1, "{role} was replayed blindly");
        harness
            .resume(&["--abandon-stage", &attempt])
            .assert_complete();
        assert_eq!(calls(), 2, "{role}");
    }
}

/// The builder rewrites a test the plan's check runs: with the original test restored the check
/// fails, so the run pauses `AWAITING_TEST_CHANGE_REVIEW` with the test diff; a person's
/// `--accept-test-changes` completes it. An escaping symlink the builder adds fails the replay.
#[test]
fn changed_tests_wait_for_a_person_and_escaping_links_fail_the_replay() {
    let check = "sh tests/check.sh";
    let plan = json!([{"report": {
        "summary": "One milestone.",
        "milestones": [{"id": "M1", "title": "Greeting", "description": "",
                        "acceptance_criteria": [
                            {"id": "AC1", "text": "the greeting check passes", "check": check,
                             "human_review": false, "kind": "fail_to_pass"}]}]
    }}]);
    let build = |extra: &str| {
        json!([
            {"run": format!("printf 'hi\\n' > hello.txt && printf 'grep -qx hi hello.txt\\n' > tests/check.sh{extra}")},
            {"run": check},
            {"report": {"status": "done", "summary": "Wrote hello.txt.",
                        "files_changed": ["hello.txt", "tests/check.sh"],
                        "checks": [{"command": check, "exit_code": 0, "evidence_ref": "{{last_event}}"}],
                        "blockers": []}}
        ])
    };
    let tester = json!([{"run": check}, {"report": {
        "milestone_id": "M1", "summary": "Checked.",
        "criteria": [{"criterion_id": "AC1", "verdict": "PASS", "notes": "",
                      "checks": [{"command": check, "exit_code": 0, "evidence_ref": "{{last_event}}"}]}]
    }}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan.clone()])),
        ("builder", json!([build("")])),
        ("tester", json!([tester.clone()])),
    ]));
    let ws = harness.workspace();
    fs::create_dir_all(ws.join("tests")).expect("tests dir");
    fs::write(ws.join("tests/check.sh"), "grep -qx hello hello.txt\n").expect("seed test");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "a test"]);
    let paused = harness.run(&["--yes"]);
    paused.assert_paused("AWAITING_TEST_CHANGE_REVIEW");
    let reason = paused.pause_reason();
    assert!(reason.contains("tests/check.sh"), "{paused:?}");
    assert!(
        reason.contains("-grep -qx hello hello.txt") && reason.contains("+grep -qx hi hello.txt"),
        "the test diff is shown: {paused:?}"
    );
    harness
        .resume(&[])
        .assert_paused("AWAITING_TEST_CHANGE_REVIEW");
    harness.resume(&["--accept-test-changes"]).assert_complete();
    let status = harness.status();
    assert!(
        status.json["verification"]["test_change_review"]["accepted_at"].is_string(),
        "{status:?}"
    );

    // The same work delivered through an absolute symlink out of the tree never passes a replay.
    let outside = tempfile::tempdir().expect("outside");
    let target = outside.path().join("check.sh");
    fs::write(&target, "true\n").expect("outside file");
    let linking = format!(" && ln -sf {} tests/check.sh", target.display());
    // The tester works in a closed copy of the tree too: the link is not there, the check
    // fails, and an honest tester says so.
    let failing = json!([{"run": check}, {"report": {
        "milestone_id": "M1", "summary": "The check fails.",
        "criteria": [{"criterion_id": "AC1", "verdict": "FAIL", "notes": "tests/check.sh is missing",
                      "checks": [{"command": check, "exit_code": 2, "evidence_ref": "{{last_event}}"}]}]
    }}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan])),
        (
            "builder",
            json!([build(&linking), build(&linking), build(&linking)]),
        ),
        ("tester", json!([failing.clone(), failing.clone(), failing])),
    ]));
    let ws = harness.workspace();
    fs::create_dir_all(ws.join("tests")).expect("tests dir");
    fs::write(ws.join("tests/check.sh"), "grep -qx hello hello.txt\n").expect("seed test");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "a test"]);
    let stopped = harness.run(&["--yes"]);
    assert_eq!(stopped.code, Some(PAUSED_EXIT), "{stopped:?}");
    assert!(
        matches!(
            stopped.pause_code(),
            Some("PAUSED_BUILDER_RETRY_LIMIT" | "PAUSED_REPEATED_FAILURE")
        ),
        "{stopped:?}"
    );
}

/// Outside git nothing changes: the base tree is the closed copy in `<run>/base/`, walked
/// beside the work tree for the test diff, the replays run in fresh copies, and no verification
/// tree is made.
#[test]
fn outside_git_the_base_is_a_copy_and_changed_tests_still_wait_for_a_person() {
    let check = "sh tests/check.sh";
    let plan = json!([{"report": {
        "summary": "One milestone.",
        "milestones": [{"id": "M1", "title": "Greeting", "description": "",
                        "acceptance_criteria": [
                            {"id": "AC1", "text": "the greeting check passes", "check": check,
                             "human_review": false, "kind": "fail_to_pass"}]}]
    }}]);
    let build = json!([
        {"run": "printf 'hi\\n' > hello.txt && printf 'grep -qx hi hello.txt\\n' > tests/check.sh"},
        {"run": check},
        {"report": {"status": "done", "summary": "Wrote hello.txt.",
                    "files_changed": ["hello.txt", "tests/check.sh"],
                    "checks": [{"command": check, "exit_code": 0, "evidence_ref": "{{last_event}}"}],
                    "blockers": []}}
    ]);
    let tester = json!([{"run": check}, {"report": {
        "milestone_id": "M1", "summary": "Checked.",
        "criteria": [{"criterion_id": "AC1", "verdict": "PASS", "notes": "",
                      "checks": [{"command": check, "exit_code": 0, "evidence_ref": "{{last_event}}"}]}]
    }}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan])),
        ("builder", json!([build])),
        ("tester", json!([tester])),
    ]));
    let ws = harness.workspace();
    fs::remove_dir_all(ws.join(".git")).expect("no git");
    fs::create_dir_all(ws.join("tests")).expect("tests dir");
    fs::write(ws.join("tests/check.sh"), "grep -qx hello hello.txt\n").expect("seed test");
    let paused = harness.run(&["--yes", "--in-place"]);
    paused.assert_paused("AWAITING_TEST_CHANGE_REVIEW");
    let reason = paused.pause_reason();
    assert!(
        reason.contains("-grep -qx hello hello.txt") && reason.contains("+grep -qx hi hello.txt"),
        "the test diff is shown: {paused:?}"
    );
    let runs: Vec<PathBuf> = fs::read_dir(ws.join(".autocode/runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        fs::read_to_string(runs[0].join("base/tests/check.sh")).expect("the base copy"),
        "grep -qx hello hello.txt\n"
    );
    assert!(!runs[0].join("base-tree.json").exists());
    assert!(
        !harness.home().join(".cache/autocode/verify").exists(),
        "no verification tree outside git"
    );
    harness.resume(&["--accept-test-changes"]).assert_complete();
}

/// Ctrl-C or SIGTERM in the middle of a stage: the stage's family is ended, the run pauses
/// `PAUSED_INTERRUPTED` with its next step and autocode exits 3; `resume --abandon-stage`
/// completes it. After a SIGKILL, `status` sees the free run lock and shows the attempt as
/// interrupted with the step that continues it.
#[test]
fn sigint_and_sigterm_pause_the_run_and_sigkill_shows_as_interrupted() {
    for (signal, name) in [
        (nix::sys::signal::Signal::SIGINT, "SIGINT"),
        (nix::sys::signal::Signal::SIGTERM, "SIGTERM"),
    ] {
        let harness = Harness::new(script_with(&[(
            "builder",
            json!([[{"hang": true}], build_ok()]),
        )]));
        let autocode = harness
            .run_command(&["--yes"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn autocode");
        let marker = harness.state().join("builder-1.hanging");
        wait_until("the builder to hang", Duration::from_secs(60), || {
            marker.exists()
        });
        let agent: i32 = fs::read_to_string(&marker)
            .expect("marker")
            .trim()
            .parse()
            .expect("pid");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(autocode.id() as i32), signal)
            .expect("signal autocode");
        let out = autocode.wait_with_output().expect("autocode ends");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{name}: {stderr}");
        assert!(stderr.contains("PAUSED_INTERRUPTED"), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
        wait_until(
            &format!("{name}: the builder's family to end"),
            Duration::from_secs(30),
            || !alive(agent),
        );
        let status = harness.status();
        status.assert_paused("PAUSED_INTERRUPTED");
        let attempt = status.json["pause"]["attempt"]
            .as_str()
            .expect("the attempt is named")
            .to_owned();
        harness
            .resume(&["--abandon-stage", &attempt])
            .assert_complete();
    }
    // SIGKILL: nothing could record the pause; status works it out from the free lock.
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"hang": true}], build_ok()]),
    )]));
    let mut autocode = harness
        .run_command(&["--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn autocode");
    let marker = harness.state().join("builder-1.hanging");
    wait_until("the builder to hang", Duration::from_secs(60), || {
        marker.exists()
    });
    autocode.kill().expect("SIGKILL autocode");
    autocode.wait().expect("reap autocode");
    let status = harness.status();
    status.assert_paused("PAUSED_INTERRUPTED");
    assert!(
        status.json["pause"]["next_step"]
            .as_str()
            .is_some_and(|step| step.starts_with("autocode resume")),
        "{status:?}"
    );
}
