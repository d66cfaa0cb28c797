//! What "verified" means beyond a passing check: the rules that keep the completion gate from
//! accepting work that was not done (issue 11), as pure functions plus the typed record they keep
//! in `run.json` (`RunState::verification`).
//!
//! - [`vacuous_check`]: a planned check whose exit status cannot depend on the work (`… || true`,
//!   `…; exit 0`, `true`, a bare `echo`, a `python3 -c "print('ok')"`) is a schema-level problem.
//! - [`objective_checks`]: the commands the objective itself names, in code formatting, as
//!   something that must pass; the final gate replays them whatever the plan says.
//! - [`CheckKind`]: a criterion asks for a change (`fail_to_pass`: its check must fail on the base
//!   tree) or guards behaviour (`pass_to_pass`); [`BaseCheck`] records the base-tree run.
//! - Which files of the base tree the builder changed and which are tests: `run::treediff`.
//! - [`PendingReview`], [`HumanDecision`], [`TestChangeReview`]: what a person was asked, what
//!   they answered, when, and the exact text they were shown (bound by its sha256).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::report::evidence::sha256_hex;

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
    /// Commands the objective names as having to pass (extracted when the run starts).
    pub required_checks: Vec<String>,
    /// Whether the base tree was saved (a git tree, or `<run>/base/`) before any stage ran.
    pub base_saved: bool,
    /// What the base tree's closed copy had to leave out (symlinks out of the tree, FIFOs...):
    /// a replay leaves the same entries out without failing, since they are not the work's.
    pub base_unclosed: Vec<String>,
    /// Planned checks run on the base tree, by command.
    pub base_checks: BTreeMap<String, BaseCheck>,
    /// Criteria waiting for a person (set by the last `AWAITING_HUMAN_REVIEW` pause).
    pub pending_reviews: Vec<PendingReview>,
    pub human_decisions: Vec<HumanDecision>,
    /// Changed tests waiting for (or given) a person's acceptance.
    pub test_change_review: Option<TestChangeReview>,
    /// Filled when the run completes: per criterion, how it was verified.
    pub verified: Vec<VerifiedCriterion>,
}

impl Verification {
    pub fn for_objective(objective: &str) -> Verification {
        Verification {
            required_checks: objective_checks(objective),
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

/// Where the work tree as it was before any stage ran (the base tree) is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseSource {
    /// The closed copy in `<run>/base/` (outside git, and runs of an autocode before trees).
    Dir(std::path::PathBuf),
    /// A tree in the run's private object store (`<run>/base-tree.json`): never checked out
    /// for reading; a replay on the base brings the verification tree to it.
    GitTree(crate::gittree::TreeId),
}

/// The run's base tree, `None` until it is saved.
pub fn base_source(state: &super::state::RunState) -> Option<BaseSource> {
    if !state.verification.base_saved {
        return None;
    }
    let run_dir = state.run_dir();
    Some(match super::vtree::base_record(&run_dir) {
        Some(record) => BaseSource::GitTree(record.tree),
        None => BaseSource::Dir(base_copy_dir(&run_dir)),
    })
}

/// Where the base tree is copied outside git.
pub fn base_copy_dir(run_dir: &std::path::Path) -> std::path::PathBuf {
    run_dir.join("base")
}

/// The text shown to a person, with its sha256.
pub fn shown(text: String) -> (String, String) {
    let sha = sha256_hex(text.as_bytes());
    (text, sha)
}

// ---------------------------------------------------------------------------------------------
// Vacuous checks.

/// The operator before an item of a shell list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Start,
    Seq,
    And,
    Or,
    Pipe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Exits 0 whatever the tree holds.
    Zero,
    Depends,
}

/// Splits a shell list at top level into `(operator before, command text, backgrounded)`.
pub(crate) fn split_list(command: &str) -> Vec<(Op, String, bool)> {
    let chars: Vec<char> = command.chars().collect();
    let mut out: Vec<(Op, String, bool)> = Vec::new();
    let mut current = String::new();
    let mut op = Op::Start;
    let mut depth = 0i32;
    let mut i = 0;
    let mut at_word_start = true;
    let push = |out: &mut Vec<(Op, String, bool)>, current: &mut String, op: Op, bg: bool| {
        let text = current.trim().to_owned();
        if !text.is_empty() {
            out.push((op, text, bg));
        }
        current.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map(|p| i + 1 + p)
                    .unwrap_or(chars.len() - 1);
                current.extend(&chars[i..=end]);
                i = end + 1;
                at_word_start = false;
                continue;
            }
            '"' | '`' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != c {
                    if chars[j] == '\\' {
                        j += 1;
                    }
                    j += 1;
                }
                let end = j.min(chars.len() - 1);
                current.extend(&chars[i..=end]);
                i = end + 1;
                at_word_start = false;
                continue;
            }
            '\\' => {
                current.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    current.push(n);
                }
                i += 2;
                continue;
            }
            '#' if at_word_start && depth == 0 => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '(' | '{' => depth += 1,
            ')' | '}' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            let next = chars.get(i + 1).copied();
            let sep = match (c, next) {
                ('|', Some('|')) => Some((Op::Or, 2, false)),
                ('&', Some('&')) => Some((Op::And, 2, false)),
                ('|', _) => Some((Op::Pipe, 1, false)),
                ('&', Some('>')) => None,
                ('&', _) if !current.ends_with('>') && !current.ends_with('<') => {
                    Some((Op::Seq, 1, true))
                }
                (';', _) | ('\n', _) => Some((Op::Seq, 1, false)),
                _ => None,
            };
            if let Some((next_op, width, bg)) = sep {
                push(&mut out, &mut current, op, bg);
                op = next_op;
                i += width;
                at_word_start = true;
                continue;
            }
        }
        current.push(c);
        at_word_start = c.is_whitespace() || matches!(c, '(' | '{');
        i += 1;
    }
    push(&mut out, &mut current, op, false);
    out
}

/// Words of a simple command, quotes removed (enough to recognise the command name).
pub(crate) fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in command.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                has = true;
            }
            None if c.is_whitespace() => {
                if has || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                has = false;
            }
            None => word.push(c),
        }
    }
    if has || !word.is_empty() {
        out.push(word);
    }
    out
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
        if is_assignment || matches!(*first, "command" | "builtin" | "exec" | "nohup" | "time") {
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
    match name {
        "true" | ":" | "echo" | "printf" | "set" | "export" | "sleep" | "shopt" => {
            (Status::Zero, false)
        }
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

/// Commands at the end of a pipeline that hide the status of what feeds them.
const STATUS_SINKS: [&str; 9] = [
    "tee", "cat", "head", "tail", "sort", "uniq", "wc", "less", "more",
];

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
    let mut status: Option<Status> = None;
    for (op, commands, bg) in pipelines {
        let (own, ends) = if bg {
            (Status::Zero, false)
        } else if commands.len() > 1 {
            let last = commands.last().cloned().unwrap_or_default();
            let last_words = words(&last);
            let name = last_words.first().map(String::as_str).unwrap_or_default();
            if STATUS_SINKS.contains(&name) {
                (Status::Zero, false)
            } else {
                command_status(&last)
            }
        } else {
            command_status(&commands[0])
        };
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
    status.unwrap_or(Status::Zero)
}

/// Why `check`'s exit status cannot depend on the work, if it cannot.
pub fn vacuous_check(check: &str) -> Option<String> {
    if check.trim().is_empty() {
        return Some("the check is empty".into());
    }
    (list_status(check) == Status::Zero).then(|| {
        format!(
            "its exit status cannot depend on the work (it exits 0 whatever the tree holds: `|| true`, `; exit 0`, `true`, `:`, a bare `echo`, a pipe into `tee`/`cat`, a background `&`, or code that only prints); give a command that fails when the criterion does not hold: {check}"
        )
    })
}

// ---------------------------------------------------------------------------------------------
// The objective's own checks.

fn must_pass() -> Regex {
    Regex::new(r"(?i)\b(must|should|has to|have to|needs? to|shall|is required to|are required to)\s+(still\s+|also\s+|all\s+)?(pass|succeed|exit (with )?(status |code )?0|run cleanly|be green|keep passing)|\b(make sure|ensure|check that|verify that)\b.*\b(passes|pass|succeeds|succeed)\b|\bmust be green\b|\bkeep\s+[^.\s][^.]*\spassing\b")
        .expect("a constant regex")
}

fn inline_code() -> Regex {
    Regex::new(r"`([^`\n]+)`").expect("a constant regex")
}

/// A code span that reads as a command rather than a name (`vowels.py`, `count_vowels(text)`).
fn is_command(span: &str) -> bool {
    let span = span.trim();
    if span.is_empty() {
        return false;
    }
    if span.contains(char::is_whitespace) {
        return !span.contains("=>") && !span.starts_with("def ") && !span.starts_with("fn ");
    }
    matches!(
        span,
        "pytest" | "make" | "tox" | "nox" | "ctest" | "just" | "rake" | "gradle" | "mvn"
    )
}

/// Sentences (split at `.`, `!`, `?` followed by whitespace, and at blank lines), ignoring
/// punctuation inside code spans.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_code = false;
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        current.push(c);
        if c == '`' {
            in_code = !in_code;
        }
        if c == '\n' {
            in_code = false;
        }
        let next_space = chars.get(i + 1).is_none_or(|n| n.is_whitespace());
        let blank_line = c == '\n' && chars.get(i + 1) == Some(&'\n');
        if (!in_code && matches!(c, '.' | '!' | '?') && next_space) || blank_line {
            if !current.trim().is_empty() {
                out.push(current.trim().to_owned());
            }
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out
}

/// The commands the objective names, in code formatting, as something that must pass: inline
/// code in a sentence that says so, and the lines of a fenced or indented block introduced by
/// such a sentence. In order, without duplicates.
pub fn objective_checks(objective: &str) -> Vec<String> {
    let must = must_pass();
    let code = inline_code();
    let mut out: Vec<String> = Vec::new();
    let mut add = |command: &str| {
        let command = command.trim().trim_start_matches("$ ").trim();
        if !command.is_empty() && !command.starts_with('#') && !out.iter().any(|c| c == command) {
            out.push(command.to_owned());
        }
    };
    // Blocks first take their lines out of the prose.
    let mut prose = String::new();
    let mut lines = objective.lines().peekable();
    let mut last_text = String::new();
    while let Some(line) = lines.next() {
        let fenced = line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~");
        let indented = (line.starts_with("    ") || line.starts_with('\t'))
            && !line.trim().is_empty()
            && !line.trim_start().starts_with(['-', '*'])
            && prose.trim_end().ends_with(':');
        if fenced || indented {
            let mut block = Vec::new();
            if fenced {
                let fence = &line.trim_start()[..3];
                for inner in lines.by_ref() {
                    if inner.trim_start().starts_with(fence) {
                        break;
                    }
                    block.push(inner.to_owned());
                }
            } else {
                block.push(line.to_owned());
                while let Some(next) = lines.peek() {
                    if next.starts_with("    ") || next.starts_with('\t') {
                        block.push(lines.next().unwrap_or_default().to_owned());
                    } else {
                        break;
                    }
                }
            }
            if must.is_match(&last_text) {
                for command in block {
                    add(&command);
                }
            }
            prose.push_str("\n\n");
            continue;
        }
        if !line.trim().is_empty() {
            last_text = line.to_owned();
        }
        prose.push_str(line);
        prose.push('\n');
    }
    for sentence in sentences(&prose) {
        for clause in clauses(&sentence) {
            if !must.is_match(&code.replace_all(clause, "CODE")) {
                continue;
            }
            for span in code.captures_iter(clause) {
                if is_command(&span[1]) {
                    add(&span[1]);
                }
            }
        }
    }
    out
}

/// The clauses of a sentence, split outside code spans at `;` and at `, then`: "must pass"
/// speaks for its own clause, so a setup command before it ("install with `pip install -e .`;
/// then `pytest` must pass", "`npm ci`, then `npm test` must pass") is not a check.
fn clauses(sentence: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_code = false;
    for (i, c) in sentence.char_indices() {
        let rest = &sentence[i + c.len_utf8()..];
        match c {
            '`' => in_code = !in_code,
            ';' if !in_code => {
                out.push(&sentence[start..i]);
                start = i + 1;
            }
            ',' if !in_code
                && rest
                    .trim_start()
                    .strip_prefix("then")
                    .is_some_and(|r| r.starts_with(char::is_whitespace)) =>
            {
                out.push(&sentence[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&sentence[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert_eq!(vacuous_check(check), None, "{check} is a real check");
        }
    }

    #[test]
    fn the_objective_names_its_checks() {
        let objective = "Implement `count_vowels(text)` in `vowels.py`: it returns how many characters are vowels. `python3 -m unittest -q test_vowels` must pass. Use only the Python standard library.";
        assert_eq!(
            objective_checks(objective),
            ["python3 -m unittest -q test_vowels"]
        );
        let fenced = "Add a --json flag.\n\nThese must pass:\n\n```sh\n$ cargo test --offline\ncargo clippy -- -D warnings\n```\n\nThe README shows an example:\n\n```\ntool --json\n```\n";
        assert_eq!(
            objective_checks(fenced),
            ["cargo test --offline", "cargo clippy -- -D warnings"]
        );
        let keep = "Fix `median`. Keep `python3 -m unittest -q test_stats`\npassing and add tests.";
        assert_eq!(
            objective_checks(keep),
            ["python3 -m unittest -q test_stats"]
        );
        let indented =
            "Fix the parser. Make sure this passes:\n\n    pytest -q tests/test_parser.py\n";
        assert_eq!(
            objective_checks(indented),
            ["pytest -q tests/test_parser.py"]
        );
        assert!(objective_checks("Run `make` to build. Rename `foo` to `bar`.").is_empty());
        // A setup command in the clause before "must pass" is not a check.
        assert_eq!(
            objective_checks(
                "Set up with `python3 -m venv .venv && .venv/bin/pip install -e . pytest`; then `.venv/bin/python -m pytest -q` must pass."
            ),
            [".venv/bin/python -m pytest -q"]
        );
        assert_eq!(
            objective_checks(
                "The tests run in a venv: `python3 -m venv .venv && .venv/bin/pip install pytest .`, then\n`.venv/bin/python -m pytest -q` must pass."
            ),
            [".venv/bin/python -m pytest -q"]
        );
        assert_eq!(
            objective_checks("Add unit tests; `cargo test --offline -q` must pass."),
            ["cargo test --offline -q"]
        );
        // "keep passing" without an object is a habit, not "keep X passing".
        assert!(
            objective_checks(
                "`bytes.parse` understands `1kb`, `2 MB` and so on, but people keep passing the IEC names."
            )
            .is_empty()
        );
        assert_eq!(
            objective_checks("Make sure `pytest` passes and `ruff check .` succeeds."),
            ["pytest", "ruff check ."]
        );
    }
}
