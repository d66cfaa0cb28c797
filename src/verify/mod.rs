//! What "verified" means beyond a passing check: the rules that keep the completion gate from
//! accepting work that was not done (issue 11), as pure functions plus the typed record they keep
//! in `run.json` (`RunState::verification`).
//!
//! - [`vacuous_check`]: a planned check whose exit status cannot depend on the work (`… || true`,
//!   `…; exit 0`, `true`, a bare `echo`, a `python3 -c "print('ok')"`) is a schema-level problem.
//! - [`check_shell`]: the shell a check runs in when autocode runs it (bash, as the agents').
//! - `verify::objective`: every command the objective shows in code formatting, typed by its role
//!   (a required check the final gate replays whatever the plan says, a setup step, a mention).
//! - [`CheckKind`]: a criterion asks for a change (`fail_to_pass`: its check must fail on the base
//!   tree) or guards behaviour (`pass_to_pass`); [`BaseCheck`] records the base-tree run.
//! - Which files of the base tree the builder changed and which are tests: `verify::treediff`;
//!   whether a manifest's change is a test change or only a dependency: `verify::manifest`;
//!   code that changes the test framework's verdicts from inside the tests' process:
//!   `verify::tamper`.
//! - [`PendingReview`], [`HumanDecision`], [`TestChangeReview`]: what a person was asked, what
//!   they answered, when, and the exact text they were shown (bound by its sha256).

pub mod canary;
pub mod inline;
pub mod manifest;
pub mod objective;
pub mod shellwords;
pub mod standins;
pub mod tamper;
pub mod testcount;
pub mod testfiles;
pub mod testids;
pub mod treediff;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::report::evidence::sha256_hex;
use objective::{CommandRole, ObjectiveCommand, objective_commands};
use shellwords::{Op, split_list, words};
use testcount::TestTally;

/// Whether a criterion asks for a change or guards existing behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// The check must FAIL on the base tree and PASS on the final tree.
    FailToPass,
    /// The check must pass before and after.
    PassToPass,
}

impl CheckKind {
    /// The kind of a plan criterion (`"kind"`); a plan without it asks for a change.
    pub fn of_criterion(criterion: &Value) -> CheckKind {
        match criterion["kind"].as_str() {
            Some("pass_to_pass") => CheckKind::PassToPass,
            _ => CheckKind::FailToPass,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::FailToPass => "fail_to_pass",
            CheckKind::PassToPass => "pass_to_pass",
        }
    }
}

/// One planned check run on the base tree (a clean copy saved before any stage ran).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseCheck {
    pub passed: bool,
    pub detail: String,
    /// How many tests its output says ran.
    #[serde(default)]
    pub tests: TestTally,
    /// Which tests its output names as run (`verify::testids`), when its runner names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_ids: Option<testids::TestIds>,
    /// Set when this verdict is that of an identical replay already run, recorded as this one
    /// (`run::replay_cache`): the check was not run again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<crate::ids::ReplayNo>,
}

impl BaseCheck {
    /// Whether the check passed: it exited 0 and its runner did not say that no test ran nor
    /// stop before its end (a check selecting tests the work adds runs none before it: it fails
    /// there, as a `fail_to_pass` check must).
    pub fn held(&self) -> bool {
        self.passed && !self.tests.shows_nothing()
    }

    /// Why it did not pass (its output's tail, or why its runner shows nothing).
    pub fn why_not(&self) -> &str {
        match self.tests.why_nothing() {
            Some(why) if self.passed => why,
            _ => &self.detail,
        }
    }
}

/// A criterion that needs a person before the run may complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingReview {
    pub milestone: usize,
    pub criterion_id: String,
    pub why: String,
    /// The text shown to the person: the criterion, why, and the part of the diff bearing on it.
    pub shown: String,
    pub shown_sha256: String,
}

/// A person's answer to a [`PendingReview`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanDecision {
    pub milestone: usize,
    pub criterion_id: String,
    pub accepted: bool,
    /// `--because` of a rejection.
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
    pub shown: String,
    pub shown_sha256: String,
}

/// Tests the builder changed that fail the checks in their original form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestChangeReview {
    /// The diff of the test files (base → final) and the failing output, as shown.
    pub shown: String,
    /// sha256 of the test diff alone: an acceptance holds while the test files stay as shown.
    pub diff_sha256: String,
    /// Set when a person accepted it (`resume --accept-test-changes`).
    pub accepted_at: Option<DateTime<Utc>>,
}

/// How a criterion was verified when the run completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifiedCriterion {
    pub milestone: usize,
    pub criterion_id: String,
    pub how: String,
}

/// Everything issue 11's gates record in `run.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Verification {
    /// Commands the objective names as having to pass (extracted when the run starts): the
    /// [`CommandRole::RequiredCheck`] ones of `objective_commands`.
    pub required_checks: Vec<String>,
    /// Every command the objective shows in code formatting, with its role.
    pub objective_commands: Vec<ObjectiveCommand>,
    /// Whether the base tree was saved (a git tree, or `<run>/base/`) before any stage ran.
    pub base_saved: bool,
    /// What the base tree's closed copy had to leave out (symlinks out of the tree, FIFOs...):
    /// a replay leaves the same entries out without failing, since they are not the work's.
    pub base_unclosed: Vec<String>,
    /// Planned checks (and the objective's required checks) run on the base tree, by command.
    pub base_checks: BTreeMap<String, BaseCheck>,
    /// The same checks replayed on the final tree by the last final gate, by command.
    pub final_checks: BTreeMap<String, BaseCheck>,
    /// Criteria waiting for a person (set by the last `AWAITING_HUMAN_REVIEW` pause).
    pub pending_reviews: Vec<PendingReview>,
    pub human_decisions: Vec<HumanDecision>,
    /// Changed tests waiting for (or given) a person's acceptance.
    pub test_change_review: Option<TestChangeReview>,
    /// Checks that showed the change: failed on the base tree, passed on the result, and failed
    /// on the result with its code changes taken back (`run::witness`).
    pub witnesses: Vec<String>,
    /// Why no check shows the change, when none does (a person is then asked).
    pub unwitnessed: Option<String>,
    /// Filled when the run completes: per criterion, how it was verified.
    pub verified: Vec<VerifiedCriterion>,
}

impl Verification {
    pub fn for_objective(objective: &str) -> Verification {
        let commands = objective_commands(objective);
        Verification {
            required_checks: commands
                .iter()
                .filter(|c| c.role == CommandRole::RequiredCheck)
                .map(|c| c.command.clone())
                .collect(),
            objective_commands: commands,
            ..Verification::default()
        }
    }

    /// The person's acceptance of `criterion` on exactly the text `sha` (if any).
    pub fn accepted(&self, milestone: usize, criterion: &str, sha: &str) -> Option<&HumanDecision> {
        self.human_decisions.iter().rev().find(|d| {
            d.accepted
                && d.milestone == milestone
                && d.criterion_id == criterion
                && d.shown_sha256 == sha
        })
    }
}

/// The text shown to a person, with its sha256.
pub fn shown(text: String) -> (String, String) {
    let sha = sha256_hex(text.as_bytes());
    (text, sha)
}

// ---------------------------------------------------------------------------------------------
// The shell of a check.

/// The shell autocode runs a check, a `prepare` step or the direct runtime's shell command in:
/// the first `bash` on the absolute entries of `path` (the environment's `PATH`), else `sh`.
///
/// Every supported CLI runs its model's commands with `/bin/bash` (`report::ledger`), so a check
/// an agent ran and cited was bash's: `source .venv/bin/activate && pytest`, `[[ -f x ]]`,
/// `set -o pipefail; … | tee log`, `diff <(…) expected`. Replayed with `sh` (dash on Debian)
/// they fail where the agent's passed. Only where no bash is installed does `sh` run them.
pub fn check_shell(path: Option<&str>) -> std::path::PathBuf {
    path.and_then(|path| crate::provider::probe::resolve_on_path("bash", path.as_ref()))
        .unwrap_or_else(|| std::path::PathBuf::from("sh"))
}

// ---------------------------------------------------------------------------------------------
// Vacuous checks.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Exits 0 whatever the tree holds.
    Zero,
    Depends,
}

/// Code given to an interpreter that only prints (`print('ok')`, `console.log(1)`).
fn only_prints(code: &str) -> bool {
    let statements: Vec<&str> = code
        .split([';', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    !statements.is_empty()
        && statements.iter().all(|s| {
            s.starts_with("print(")
                || s.starts_with("print ")
                || s.starts_with("console.log(")
                || s.starts_with("puts ")
                || *s == "pass"
                || s.starts_with("import sys")
                || s.starts_with("sys.exit(0)")
                || s.starts_with("process.exit(0)")
        })
}

/// The status of one simple command or group, and whether it ends the script.
fn command_status(command: &str) -> (Status, bool) {
    let trimmed = command.trim();
    for (open, close) in [("(", ")"), ("{", "}")] {
        if let Some(inner) = trimmed
            .strip_prefix(open)
            .and_then(|rest| rest.strip_suffix(close))
        {
            return (list_status(inner), false);
        }
    }
    let all = words(trimmed);
    let mut w: Vec<&str> = all.iter().map(String::as_str).collect();
    while let Some(first) = w.first() {
        let is_assignment = first.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if is_assignment
            || matches!(
                *first,
                "command" | "builtin" | "exec" | "nohup" | "time" | "env"
            )
        {
            w.remove(0);
        } else {
            break;
        }
    }
    // Redirections do not change the status.
    w.retain(|x| !x.starts_with('>') && !x.starts_with("2>") && !x.starts_with("1>"));
    let Some(&name) = w.first() else {
        return (Status::Zero, false);
    };
    let name = name.rsplit('/').next().unwrap_or(name);
    // A script given to a shell (`sh -c '… || true'`, `eval "…; exit 0"`) has the status of its
    // text: the same forms hidden one level down.
    let script = match name {
        "sh" | "bash" | "dash" | "zsh" | "ksh" => w
            .iter()
            .position(|x| x.starts_with('-') && !x.starts_with("--") && x.contains('c'))
            .and_then(|p| w.get(p + 1)),
        "eval" if w.len() == 2 => w.get(1),
        _ => None,
    };
    if let Some(script) = script {
        return (list_status(script), false);
    }
    match name {
        "true" | ":" | "echo" | "printf" | "set" | "export" | "sleep" | "shopt" => {
            (Status::Zero, false)
        }
        "test" | "[" | "[[" if constant_test(&w[1..]) => (Status::Zero, false),
        "exit" | "return" => match w.get(1) {
            Some(&"0") => (Status::Zero, true),
            None => (Status::Depends, true),
            Some(_) => (Status::Depends, true),
        },
        _ if name.starts_with("python") || name == "node" || name == "ruby" => {
            let code = w
                .iter()
                .position(|x| *x == "-c" || *x == "-e")
                .and_then(|p| w.get(p + 1));
            match code {
                Some(code) if only_prints(code) => (Status::Zero, false),
                _ => (Status::Depends, false),
            }
        }
        _ => (Status::Depends, false),
    }
}

/// Whether the operands of `test`/`[` hold whatever the tree holds: a file test of a directory
/// that always exists (`-d .`, `-e /`), a string test of a literal (`-n x`, `x`, `a = a`).
fn constant_test(operands: &[&str]) -> bool {
    let ops: Vec<&str> = operands
        .iter()
        .copied()
        .filter(|o| !matches!(*o, "]" | "]]"))
        .collect();
    if ops.iter().any(|o| o.contains('$') || o.contains('`')) {
        return false;
    }
    let always_there = |p: &str| matches!(p, "." | ".." | "/" | "./" | "../");
    match ops.as_slice() {
        [word] => !word.is_empty() && !word.starts_with('-') || *word == "-n",
        ["-d" | "-e" | "-r" | "-x" | "-w", path] => always_there(path),
        ["-n", word] => !word.is_empty(),
        ["-z", word] => word.is_empty(),
        [a, "=" | "==", b] => a == b,
        [a, "!=", b] => a != b,
        _ => false,
    }
}

/// Commands at the end of a pipeline that hide the status of what feeds them.
const STATUS_SINKS: [&str; 9] = [
    "tee", "cat", "head", "tail", "sort", "uniq", "wc", "less", "more",
];

/// The shell options that change a list's status, as `set` left them at a point of the list.
#[derive(Debug, Clone, Copy, Default)]
struct ShellOptions {
    /// `set -o pipefail`: a pipeline fails when any of its commands does.
    pipefail: bool,
    /// `set -e`: a failing command that is a list of its own ends the script with its status.
    errexit: bool,
}

impl ShellOptions {
    /// `options` after the simple command `words` when it is `set` (`set -euo pipefail`,
    /// `set -o errexit -o pipefail`, `set +o pipefail`).
    fn after(mut self, words: &[String]) -> ShellOptions {
        if words.first().map(String::as_str) != Some("set") {
            return self;
        }
        let mut args = words[1..].iter();
        while let Some(arg) = args.next() {
            let on = match arg.chars().next() {
                Some('-') if arg != "--" && arg != "-" => true,
                Some('+') => false,
                _ => break,
            };
            for flag in arg[1..].chars() {
                match flag {
                    'e' => self.errexit = on,
                    'o' => match args.next().map(String::as_str) {
                        Some("pipefail") => self.pipefail = on,
                        Some("errexit") => self.errexit = on,
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
        self
    }
}

/// Whether `set -e` ends the script when `command` fails: a simple command, not a compound one
/// (`if`, `while`, `!`…), whose failure `errexit` ignores or whose status it reads otherwise.
fn errexit_applies(command: &str) -> bool {
    let first = words(command).into_iter().next().unwrap_or_default();
    !matches!(
        first.as_str(),
        "" | "if"
            | "then"
            | "else"
            | "elif"
            | "fi"
            | "while"
            | "until"
            | "do"
            | "done"
            | "for"
            | "case"
            | "esac"
            | "!"
            | "function"
            | "select"
            | "{"
            | "}"
    ) && !first.starts_with('(')
        && !first.starts_with('{')
}

fn list_status(command: &str) -> Status {
    let items = split_list(command);
    // Group into pipelines: (operator before the pipeline, commands, backgrounded).
    let mut pipelines: Vec<(Op, Vec<String>, bool)> = Vec::new();
    for (op, text, bg) in items {
        match (op, pipelines.last_mut()) {
            (Op::Pipe, Some(last)) => {
                last.1.push(text);
                last.2 = bg;
            }
            _ => pipelines.push((op, vec![text], bg)),
        }
    }
    let mut options = ShellOptions::default();
    let mut status: Option<Status> = None;
    // An and-or list of one pipeline that depends on the work, run under `set -e` (with
    // `pipefail` when it pipes): its failure ends the script with that failure, so the script's
    // status depends on the work whatever follows.
    let mut ends_on_failure = false;
    // Pipelines of the current and-or list so far, and whether its one pipeline ends the script.
    let mut in_list = 0usize;
    let mut list_guard = false;
    for (op, commands, bg) in pipelines {
        if matches!(op, Op::Start | Op::Seq) {
            ends_on_failure |= in_list == 1 && list_guard;
            in_list = 0;
        }
        in_list += 1;
        let (own, ends) = if bg {
            (Status::Zero, false)
        } else if commands.len() > 1 {
            let is_sink = |command: &str| {
                words(command)
                    .first()
                    .is_some_and(|name| STATUS_SINKS.contains(&name.as_str()))
            };
            let last = commands.last().cloned().unwrap_or_default();
            if options.pipefail {
                // The pipeline fails when any command does; a sink fails only on its own
                // trouble (a full disk), never because of the work.
                let depends = commands
                    .iter()
                    .any(|c| !is_sink(c) && command_status(c).0 == Status::Depends);
                if depends {
                    (Status::Depends, false)
                } else {
                    (Status::Zero, false)
                }
            } else if is_sink(&last) {
                (Status::Zero, false)
            } else {
                command_status(&last)
            }
        } else {
            command_status(&commands[0])
        };
        list_guard = !bg
            && own == Status::Depends
            && options.errexit
            && commands.iter().all(|c| errexit_applies(c));
        if !bg && commands.len() == 1 {
            options = options.after(&words(&commands[0]));
        }
        status = Some(match (op, status) {
            (Op::Start | Op::Seq | Op::Pipe, _) | (_, None) => own,
            (Op::And, Some(Status::Zero)) => own,
            (Op::And, Some(Status::Depends)) => Status::Depends,
            (Op::Or, Some(prev)) => {
                if prev == Status::Zero || own == Status::Zero {
                    Status::Zero
                } else {
                    Status::Depends
                }
            }
        });
        if ends && matches!(op, Op::Start | Op::Seq) {
            break;
        }
    }
    if ends_on_failure {
        return Status::Depends;
    }
    status.unwrap_or(Status::Zero)
}

/// Why `check`'s exit status cannot depend on the work, if it cannot.
pub fn vacuous_check(check: &str) -> Option<String> {
    if check.trim().is_empty() {
        return Some("the check is empty".into());
    }
    if objective::is_setup_command(check) {
        return Some(format!(
            "it only prepares the tree (installs, creates an environment or fetches) and shows nothing about the work; a setup step belongs in the milestone's prepare steps, and the check must be a command that fails when the criterion does not hold: {check}"
        ));
    }
    (list_status(check) == Status::Zero).then(|| {
        format!(
            "its exit status cannot depend on the work (it exits 0 whatever the tree holds: `|| true`, `; exit 0`, `true`, `:`, a bare `echo`, a pipe into `tee`/`cat`, a background `&`, or code that only prints); give a command that fails when the criterion does not hold: {check}"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_run_in_the_first_bash_on_path_else_sh() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (empty, with_bash, not_executable) = (
            dir.path().join("e"),
            dir.path().join("b"),
            dir.path().join("n"),
        );
        for d in [&empty, &with_bash, &not_executable] {
            std::fs::create_dir(d).unwrap();
        }
        std::fs::write(with_bash.join("bash"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            with_bash.join("bash"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(not_executable.join("bash"), "").unwrap();
        let path = |dirs: &[&std::path::Path]| std::env::join_paths(dirs).unwrap();
        let shell = |p: &std::ffi::OsStr| check_shell(p.to_str());
        assert_eq!(
            shell(&path(&[&empty, &not_executable, &with_bash])),
            with_bash.join("bash")
        );
        assert_eq!(
            shell(&path(&[&empty, &not_executable])),
            std::path::PathBuf::from("sh")
        );
        // A relative entry would depend on the directory the check runs in: never read.
        let relative = with_bash.strip_prefix("/").unwrap();
        assert_eq!(shell(relative.as_os_str()), std::path::PathBuf::from("sh"));
        assert_eq!(check_shell(None), std::path::PathBuf::from("sh"));
    }

    #[test]
    fn vacuous_forms_are_found() {
        for check in [
            "python3 -m unittest -q test_vowels || true",
            "python3 -m unittest -q test_vowels || :",
            "python3 -m unittest; exit 0",
            "pytest -q; true",
            "true",
            ":",
            "exit 0",
            "echo ok",
            "echo 'tests pass'",
            "python3 -c \"print('ok')\"",
            "pytest | tee log.txt",
            "cargo test 2>&1 | tail -n 5",
            "pytest &",
            "(pytest || true)",
            "{ pytest; true; }",
            "pytest || echo failed",
            "FOO=1 true",
            "pytest; echo done",
            "   ",
            "python3 -m unittest -q test_vowels || test -d .",
            "go test ./... || [ -e / ]",
            "npm test || [[ -n ok ]]",
            "cargo test || test x = x",
            "pip install -e .",
            ".venv/bin/pip install -r requirements.txt",
            "uv sync",
            "go mod download && go mod tidy",
            "cargo fetch",
            "dotnet restore",
            "mix deps.get",
            "deno install",
            "swift package resolve",
            "bundle install",
            "python3 -m venv .venv && npm ci",
            "sh -c 'python3 -m unittest -q test_vowels || true'",
            "bash -c \"pytest -q; exit 0\"",
            "bash -ec 'npm test || :'",
            "/bin/sh -c 'cargo test | tail -5'",
            "eval 'go test ./... || true'",
            "env sh -c 'pytest || true'",
            "set -e; pytest | tee log; echo done",
            "set -o pipefail; pytest || true",
            "set -e; pytest || true; echo ok",
            "set -e; pytest && echo ok; echo done",
            "set -eo pipefail; if pytest; then :; fi; echo ok",
            "set -e; ! pytest; echo ok",
            "set -o pipefail; set +o pipefail; pytest | tee log",
            "set -e; set +e; pytest; echo ok",
            "set -o pipefail; true | tee log",
            "set -e; pytest & echo started",
        ] {
            assert!(vacuous_check(check).is_some(), "{check} should be vacuous");
        }
    }

    #[test]
    fn real_checks_are_not_vacuous() {
        for check in [
            "python3 -m unittest -q test_vowels",
            "pytest -q && echo ok",
            "true && pytest",
            "cargo test --offline",
            "grep -qx hello hello.txt",
            "test -f out.txt || exit 1",
            "printf 'hello\\n' | grep -q hello",
            "python3 -c \"import vowels; assert vowels.count_vowels('a') == 1\"",
            "sh -c 'echo \"a || true\"' && pytest",
            "cmd 2>&1 >/dev/null",
            "pytest # || true",
            "echo 'x' | python3 check.py",
            "set -e; pytest",
            "pytest && test -d build",
            "test -f out.txt",
            "[ \"$(python3 vowels.py aeiou)\" = 5 ]",
            "pip install -e . && pytest -q",
            "dotnet test",
            "mix test",
            "deno test",
            "swift test",
            "go test ./...",
            "uv run pytest",
            "sh -c 'python3 -m unittest -q test_vowels'",
            "bash -c 'pytest -q && echo ok'",
            "sh -c 'pytest || true' && pytest",
            "sh run_tests.sh",
            "bash -lc 'npm test'",
            "set -o pipefail; python3 -m unittest discover 2>&1 | tee test.log",
            "set -euo pipefail; cargo test | tee log",
            "set -e; pytest; echo done",
            "set -eo pipefail; npm test | tail -5; echo finished",
            "set -o errexit; go test ./...; echo ok",
            "set -o errexit -o pipefail; pytest | tee log; echo ok",
        ] {
            assert_eq!(vacuous_check(check), None, "{check} is a real check");
        }
    }
}
