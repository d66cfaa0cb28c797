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
//! - [`looks_like_test`], [`tree_changes`], [`unified_diff`]: which files of the base tree the
//!   builder changed, which of them are tests, and the text a person or reviewer is shown.
//! - [`PendingReview`], [`HumanDecision`], [`TestChangeReview`]: what a person was asked, what
//!   they answered, when, and the exact text they were shown (bound by its sha256).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

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
    /// Whether the base tree was saved (`<run>/base/`) before any stage ran.
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

/// `<run>/base/`: the work tree as it was before any stage ran.
pub fn base_dir(state: &super::state::RunState) -> std::path::PathBuf {
    state.run_dir().join("base")
}

/// The text shown to a person, with its sha256.
pub fn shown(text: String) -> (String, String) {
    let sha = sha256_hex(text.as_bytes());
    (text, sha)
}

// ---------------------------------------------------------------------------------------------
// Vacuous checks.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
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
fn split_list(command: &str) -> Vec<(Op, String, bool)> {
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
fn words(command: &str) -> Vec<String> {
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
    Regex::new(r"(?i)\b(must|should|has to|have to|needs? to|shall|is required to|are required to)\s+(still\s+|also\s+|all\s+)?(pass|succeed|exit (with )?(status |code )?0|run cleanly|be green|keep passing)|\b(make sure|ensure|check that|verify that)\b.*\b(passes|pass|succeeds|succeed)\b|\bmust be green\b|\bkeep\b[^.]*\bpassing\b")
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
        if !must.is_match(&code.replace_all(&sentence, "CODE")) {
            continue;
        }
        for span in code.captures_iter(&sentence) {
            if is_command(&span[1]) {
                add(&span[1]);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Tests the builder changed.

/// Whether `path` (relative, `/`-separated) looks like a test in a common layout, or is named by
/// one of `checks`.
pub fn looks_like_test(path: &str, checks: &[String]) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let dirs: Vec<&str> = path.split('/').collect();
    let dirs = &dirs[..dirs.len().saturating_sub(1)];
    let in_dir = |d: &str| dirs.contains(&d);
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or_default();
    let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
    let by_layout = match ext {
        "py" => {
            name.starts_with("test_")
                || stem.ends_with("_test")
                || name == "conftest.py"
                || in_dir("tests")
                || in_dir("test")
        }
        "rs" => in_dir("tests") || in_dir("benches"),
        "go" => stem.ends_with("_test") || in_dir("testdata"),
        "js" | "ts" | "jsx" | "tsx" | "mjs" | "cjs" | "mts" | "cts" => {
            stem.ends_with(".test")
                || stem.ends_with(".spec")
                || in_dir("__tests__")
                || in_dir("test")
                || in_dir("tests")
        }
        "java" | "kt" => {
            path.contains("src/test/")
                || stem.ends_with("Test")
                || stem.ends_with("Tests")
                || stem.ends_with("IT")
        }
        _ => in_dir("testdata") || in_dir("fixtures"),
    };
    by_layout || checks.iter().any(|check| named_by(check, path))
}

/// Test runners: a file or module right after one of these (options skipped) is a test.
const TEST_RUNNERS: [&str; 10] = [
    "unittest", "pytest", "py.test", "bats", "prove", "mocha", "jest", "vitest", "tap", "ava",
];

/// Whether `check` names `path` as a test: as a word (a path, or a Python module such as
/// `test_vowels` or `pkg.test_x`) that reads as a test (`test`, `spec` or `check` in its name) or
/// that a test runner is given. Code passed with `-c`/`-e` names nothing: the program under test
/// (`python3 greet.py`, `from stats import median`) is not a test.
fn named_by(check: &str, path: &str) -> bool {
    let module = path
        .strip_suffix(".py")
        .map(|p| p.replace('/', "."))
        .unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
    let test_like = ["test", "spec", "check"].iter().any(|t| name.contains(t));
    for (_, command, _) in split_list(check) {
        let mut after_runner = false;
        let mut skip_next = false;
        for word in words(&command) {
            if skip_next {
                skip_next = false;
                continue;
            }
            if word == "-c" || word == "-e" {
                skip_next = true;
                continue;
            }
            let w = word.trim_start_matches("./");
            let w = w.split("::").next().unwrap_or(w);
            if TEST_RUNNERS.contains(&w) {
                after_runner = true;
                continue;
            }
            let names = !w.is_empty() && (w == path || (!module.is_empty() && w == module));
            if names && (test_like || after_runner) {
                return true;
            }
        }
    }
    false
}

/// How a file differs between the base and the final tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

/// Directories never compared (version control, autocode, build outputs, caches).
const SKIPPED_DIRS: [&str; 10] = [
    ".git",
    ".autocode",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    ".pytest_cache",
    ".mypy_cache",
    ".tox",
    ".ruff_cache",
];

/// Regular files and symlinks under `root`, relative, sorted.
pub fn list_tree(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if !SKIPPED_DIRS.contains(&entry.file_name().to_string_lossy().as_ref()) {
                    walk(root, &path, out);
                }
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn read_entry(path: &Path) -> Option<Vec<u8>> {
    let meta = fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path).ok()?;
        return Some(format!("symlink → {}\n", target.display()).into_bytes());
    }
    fs::read(path).ok()
}

/// Files that differ between `base` and `work`, sorted by path.
pub fn tree_changes(base: &Path, work: &Path) -> Vec<(String, Change)> {
    let base_files: BTreeSet<String> = list_tree(base).into_iter().collect();
    let work_files: BTreeSet<String> = list_tree(work).into_iter().collect();
    let mut out = Vec::new();
    for rel in base_files.union(&work_files) {
        let change = match (base_files.contains(rel), work_files.contains(rel)) {
            (true, false) => Some(Change::Deleted),
            (false, true) => Some(Change::Added),
            _ => (read_entry(&base.join(rel)) != read_entry(&work.join(rel)))
                .then_some(Change::Modified),
        };
        if let Some(change) = change {
            out.push((rel.clone(), change));
        }
    }
    out
}

/// Base files the builder modified or deleted that look like tests.
pub fn changed_tests(base: &Path, work: &Path, checks: &[String]) -> Vec<String> {
    tree_changes(base, work)
        .into_iter()
        .filter(|(rel, change)| *change != Change::Added && looks_like_test(rel, checks))
        .map(|(rel, _)| rel)
        .collect()
}

/// A unified diff of `rel` between the two trees (`--- a/rel` / `+++ b/rel`, 2 lines of context).
pub fn file_diff(base: &Path, work: &Path, rel: &str) -> String {
    let old = read_entry(&base.join(rel))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let new = read_entry(&work.join(rel))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    unified_diff(rel, &old, &new)
}

/// The diff of `files` between the trees, cut at `max` characters.
pub fn diff_of(base: &Path, work: &Path, files: &[String], max: usize) -> String {
    let mut out = String::new();
    for rel in files {
        out.push_str(&file_diff(base, work, rel));
    }
    cut(&out, max)
}

/// `text` cut at about `max` characters (on a character boundary), saying so.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… (cut: {} more characters)\n",
        &text[..end],
        text.len() - end
    )
}

/// A line diff in unified form. Files past a few thousand lines are summarised.
pub fn unified_diff(rel: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut out = format!("--- a/{rel}\n+++ b/{rel}\n");
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        out.push_str(&format!(
            "@@ changed: {} lines → {} lines (too large to diff here) @@\n",
            a.len(),
            b.len()
        ));
        return out;
    }
    // Longest common subsequence table, from the end.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The edit script: (' ' | '-' | '+', line).
    let mut script: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            script.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            script.push(('-', a[i]));
            i += 1;
        } else {
            script.push(('+', b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 2;
    let changed: Vec<usize> = script
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| *k != ' ')
        .map(|(i, _)| i)
        .collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(script.len());
        let old_start = script[..start].iter().filter(|(k, _)| *k != '+').count() + 1;
        let new_start = script[..start].iter().filter(|(k, _)| *k != '-').count() + 1;
        let old_len = script[start..end].iter().filter(|(k, _)| *k != '+').count();
        let new_len = script[start..end].iter().filter(|(k, _)| *k != '-').count();
        out.push_str(&format!(
            "@@ -{old_start},{old_len} +{new_start},{new_len} @@\n"
        ));
        for (kind, line) in &script[start..end] {
            out.push(*kind);
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The changed files that bear on a criterion: those its text or check names (by path or file
/// name), or every changed file when it names none.
pub fn files_bearing_on(
    changes: &[(String, Change)],
    text: &str,
    check: Option<&str>,
) -> Vec<String> {
    let haystack = format!("{text} {}", check.unwrap_or_default());
    let named: Vec<String> = changes
        .iter()
        .filter(|(rel, _)| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or(name);
            haystack.contains(rel.as_str())
                || haystack.contains(name)
                || (stem.len() > 2 && haystack.contains(stem))
        })
        .map(|(rel, _)| rel.clone())
        .collect();
    if named.is_empty() {
        changes.iter().map(|(rel, _)| rel.clone()).collect()
    } else {
        named
    }
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
        assert_eq!(
            objective_checks("Make sure `pytest` passes and `ruff check .` succeeds."),
            ["pytest", "ruff check ."]
        );
    }

    #[test]
    fn test_layouts_are_recognised() {
        let checks = vec!["python3 -m unittest -q pkg.check_all".to_owned()];
        for path in [
            "test_vowels.py",
            "vowels_test.py",
            "tests/helpers.py",
            "tests/it/run.rs",
            "pkg/x_test.go",
            "src/app.test.ts",
            "web/__tests__/a.js",
            "src/test/java/AppTest.java",
            "src/main/java/FooTest.java",
            "pkg/check_all.py",
        ] {
            assert!(looks_like_test(path, &checks), "{path}");
        }
        for path in [
            "vowels.py",
            "src/lib.rs",
            "main.go",
            "src/app.ts",
            "README.md",
        ] {
            assert!(!looks_like_test(path, &checks), "{path}");
        }
        // The program a check runs, or imports in its code, is not a test.
        let checks = vec![
            "python3 greet.py --shout ada | grep -q 'HELLO, ADA'".to_owned(),
            "python3 -c 'from stats import median; assert median([1]) == 1'".to_owned(),
            "pytest -q suite/acceptance.py".to_owned(),
            "sh verify_check.sh".to_owned(),
        ];
        assert!(!looks_like_test("greet.py", &checks));
        assert!(!looks_like_test("stats.py", &checks));
        assert!(looks_like_test("suite/acceptance.py", &checks));
        assert!(looks_like_test("verify_check.sh", &checks));
    }

    #[test]
    fn diffs_show_the_change_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\n";
        let diff = unified_diff("x.txt", old, new);
        assert!(diff.starts_with("--- a/x.txt\n+++ b/x.txt\n"), "{diff}");
        assert!(diff.contains("-d\n+D\n"), "{diff}");
        assert!(diff.contains("+h\n"), "{diff}");
        assert!(unified_diff("x", "same\n", "same\n").is_empty());
        let deleted = unified_diff("t.py", "x = 1\n", "");
        assert!(deleted.contains("@@ -1,1 +1,0 @@\n-x = 1\n"), "{deleted}");
    }

    #[test]
    fn tree_changes_and_changed_tests() {
        let base = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        fs::write(base.path().join("test_a.py"), "assert f() == 1\n").unwrap();
        fs::write(base.path().join("a.py"), "def f(): raise\n").unwrap();
        fs::write(base.path().join("test_gone.py"), "x\n").unwrap();
        fs::write(work.path().join("test_a.py"), "pass\n").unwrap();
        fs::write(work.path().join("a.py"), "def f(): return 1\n").unwrap();
        fs::write(work.path().join("test_new.py"), "y\n").unwrap();
        fs::create_dir(work.path().join(".git")).unwrap();
        fs::write(work.path().join(".git/HEAD"), "x").unwrap();
        let changes = tree_changes(base.path(), work.path());
        assert_eq!(
            changes,
            vec![
                ("a.py".to_owned(), Change::Modified),
                ("test_a.py".to_owned(), Change::Modified),
                ("test_gone.py".to_owned(), Change::Deleted),
                ("test_new.py".to_owned(), Change::Added),
            ]
        );
        assert_eq!(
            changed_tests(base.path(), work.path(), &[]),
            ["test_a.py", "test_gone.py"]
        );
        assert_eq!(
            files_bearing_on(&changes, "f works in a.py", None),
            ["a.py"]
        );
    }
}
