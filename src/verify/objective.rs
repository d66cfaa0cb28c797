//! Reading the objective as a person would: its units (each list item, table row, heading and
//! sentence on its own, [`units`]) and the commands it shows in code formatting, each with what it
//! is for ([`objective_commands`], [`CommandRole`]): a check the final gate replays, a setup step
//! (install, virtual environment, fetch) that is never replayed as a check, or a command it only
//! mentions.

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::shellwords::{split_list, words};

/// What a command the objective shows is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandRole {
    /// A test runner, or a command the objective says must succeed: replayed by the final gate
    /// (and on the base tree) whatever the plan says.
    RequiredCheck,
    /// Installs, creates an environment or fetches: it prepares the tree and shows nothing about
    /// the work, so it is never replayed as a check; a plan's `prepare` step satisfies it.
    Setup,
    /// Named, but neither a test runner nor said to succeed (`tool --json` in an example).
    Mentioned,
    /// A required check or setup command the requirements set aside, with a reason the
    /// reviewers and the person see (`set_aside_commands` in the brief): not replayed.
    SetAside,
}

impl CommandRole {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandRole::RequiredCheck => "required_check",
            CommandRole::Setup => "setup",
            CommandRole::Mentioned => "mentioned",
            CommandRole::SetAside => "set_aside",
        }
    }
}

/// A command the objective shows in code formatting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectiveCommand {
    pub command: String,
    pub role: CommandRole,
    /// Why it has that role, in words shown to the reviewers and in `status`.
    pub why: String,
}

fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("a constant regex"))
}

/// Words saying that something must come out well, whatever the phrasing.
fn succeeds() -> &'static Regex {
    static CELL: OnceLock<Regex> = OnceLock::new();
    regex(
        &CELL,
        r"(?i)\b(work|works|working|pass|passes|passing|passed|succeed|succeeds|success|successfully|green|clean|cleanly|exit(s|ing)?( with)?( status| code)? 0|returns? 0|zero exit|without (errors?|failures?))\b",
    )
}

fn inline_code() -> &'static Regex {
    static CELL: OnceLock<Regex> = OnceLock::new();
    regex(&CELL, r"`([^`\n]+)`")
}

fn list_marker() -> &'static Regex {
    static CELL: OnceLock<Regex> = OnceLock::new();
    regex(&CELL, r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
}

/// A code span that reads as a command rather than a name (`vowels.py`, `count_vowels(text)`).
fn is_command(span: &str) -> bool {
    let span = span.trim();
    if span.is_empty() {
        return false;
    }
    if span.contains(char::is_whitespace) {
        // A program name (or an environment assignment) first: not `median([1, 2])`,
        // `HELLO, ADA!` or `-n N`.
        let first = span.split_whitespace().next().unwrap_or_default();
        // A quantity (`2 MB`, `10 s`) is no program: a program's name has a letter.
        let program = first.starts_with(|c: char| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '/' || c == '_'
        }) && first
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.+/-".contains(c))
            && first.chars().any(|c| c.is_ascii_alphabetic());
        let assignment = first.split_once('=').is_some_and(|(n, _)| {
            !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        return (program || assignment)
            && !span.contains("=>")
            && !span.starts_with("def ")
            && !span.starts_with("fn ");
    }
    matches!(
        span,
        "pytest" | "make" | "tox" | "nox" | "ctest" | "just" | "rake" | "gradle" | "mvn" | "jest"
    ) || is_test_command(span)
}

/// Whether `name second` runs another program named next (`python3 -m`, `uv run`, `bundle exec`).
fn launcher(name: &str, second: &str) -> bool {
    (name.starts_with("python") && second == "-m")
        || (matches!(name, "uv" | "poetry" | "pipenv" | "pdm" | "hatch") && second == "run")
        || (name == "bundle" && second == "exec")
}

/// The words of a simple command from its program on: environment assignments, `env`, and the
/// launchers that run another program (`python3 -m`, `npx`, `uv run`, `poetry run`...) dropped.
fn program_words(command: &str) -> Vec<String> {
    let mut w = words(command);
    loop {
        let Some(first) = w.first().cloned() else {
            return w;
        };
        let name = first.rsplit('/').next().unwrap_or(&first).to_owned();
        let is_assignment = first.split_once('=').is_some_and(|(n, _)| {
            !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if is_assignment || matches!(name.as_str(), "env" | "command" | "exec" | "time" | "npx") {
            w.remove(0);
        } else if launcher(&name, w.get(1).map(String::as_str).unwrap_or_default()) {
            w.drain(..2);
        } else {
            w[0] = name;
            return w;
        }
    }
}

/// Whether a simple command runs tests.
fn simple_is_test(command: &str) -> bool {
    let w = program_words(command);
    let Some(name) = w.first().map(String::as_str) else {
        return false;
    };
    let second = w.get(1).map(String::as_str).unwrap_or_default();
    match name {
        "pytest" | "py.test" | "unittest" | "tox" | "nox" | "jest" | "vitest" | "mocha" | "ava"
        | "tap" | "bats" | "prove" | "rspec" | "ctest" | "phpunit" | "nextest" => true,
        "cargo" => matches!(second, "test" | "nextest"),
        "go" | "deno" | "bun" | "swift" | "dotnet" => second == "test",
        "npm" | "yarn" | "pnpm" => {
            second == "test"
                || second == "t"
                || (second == "run" && w.get(2).is_some_and(|s| s.starts_with("test")))
        }
        "node" => w.iter().any(|x| x == "--test"),
        "make" | "just" | "rake" | "mvn" | "gradle" | "gradlew" | "zig" => w
            .iter()
            .skip(1)
            .any(|x| matches!(x.as_str(), "test" | "tests" | "check" | "verify")),
        _ => false,
    }
}

/// Whether a command (a shell list) runs tests in any of its parts.
pub fn is_test_command(command: &str) -> bool {
    split_list(command)
        .iter()
        .any(|(_, part, _)| simple_is_test(part))
}

/// Whether a simple command installs, creates an environment or fetches.
fn simple_is_setup(command: &str) -> bool {
    let w = words(command);
    let mut w: Vec<&str> = w.iter().map(String::as_str).collect();
    while w
        .first()
        .is_some_and(|f| *f == "sudo" || f.contains('=') && !f.starts_with('-'))
    {
        w.remove(0);
    }
    let Some(first) = w.first() else {
        return false;
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    let second = w.get(1).copied().unwrap_or_default();
    let third = w.get(2).copied().unwrap_or_default();
    match name {
        "pip" | "pip3" | "pipx" => matches!(second, "install" | "download"),
        n if n.starts_with("python") => {
            second == "-m"
                && (matches!(third, "venv" | "virtualenv" | "ensurepip")
                    || (third == "pip" && w.get(3).is_some_and(|x| *x == "install")))
        }
        "virtualenv" | "source" | "." => true,
        "uv" => matches!(second, "sync" | "venv" | "pip" | "add" | "lock"),
        "poetry" | "pipenv" | "pdm" | "bundle" | "composer" | "bun" | "pnpm" => {
            matches!(second, "install" | "i" | "sync" | "add" | "lock" | "")
        }
        "npm" => matches!(second, "install" | "i" | "ci" | "add"),
        "yarn" => matches!(second, "" | "install" | "add"),
        "conda" | "mamba" => matches!(second, "install" | "create" | "env"),
        "cargo" => matches!(second, "fetch" | "install" | "vendor"),
        "go" => {
            (second == "mod" && matches!(third, "download" | "tidy" | "vendor"))
                || matches!(second, "get" | "install")
        }
        "gem" | "apt-get" | "apt" | "brew" | "apk" | "dnf" | "yum" => {
            matches!(second, "install" | "add")
        }
        "rustup" | "corepack" | "nvm" => true,
        "dotnet" => matches!(second, "restore" | "tool"),
        "mix" => matches!(
            second,
            "deps.get" | "deps.compile" | "local.hex" | "local.rebar"
        ),
        "deno" => matches!(second, "install" | "cache"),
        "swift" => second == "package" && matches!(third, "resolve" | "update"),
        "pyenv" => matches!(second, "install" | "local" | "global"),
        _ => false,
    }
}

/// Whether every part of a command is a setup step.
pub fn is_setup_command(command: &str) -> bool {
    let parts = split_list(command);
    !parts.is_empty() && parts.iter().all(|(_, part, _)| simple_is_setup(part))
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

/// A code block of the objective: its language tag, its lines, and the unit before it.
#[derive(Debug, Clone, Default)]
struct Block {
    lang: String,
    lines: Vec<String>,
    intro: String,
}

/// The objective split into units and code blocks.
fn read(text: &str) -> (Vec<String>, Vec<Block>) {
    let mut units: Vec<String> = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    let mut paragraph = String::new();
    let mut item: Option<String> = None;
    let flush = |units: &mut Vec<String>, paragraph: &mut String, item: &mut Option<String>| {
        for s in sentences(paragraph) {
            units.push(s);
        }
        paragraph.clear();
        if let Some(text) = item.take() {
            units.extend(sentences(&text));
        }
    };
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        let indented_code = (line.starts_with("    ") || line.starts_with('\t'))
            && item.is_none()
            && !trimmed.is_empty()
            && !list_marker().is_match(line)
            && (paragraph.trim_end().ends_with(':')
                || units.last().is_some_and(|u| u.ends_with(':')));
        if let Some(fence) = fence {
            flush(&mut units, &mut paragraph, &mut item);
            let mut block = Block {
                lang: trimmed[3..].trim().to_lowercase(),
                intro: units.last().cloned().unwrap_or_default(),
                ..Block::default()
            };
            for inner in lines.by_ref() {
                if inner.trim_start().starts_with(fence) {
                    break;
                }
                block.lines.push(inner.to_owned());
            }
            blocks.push(block);
            continue;
        }
        if indented_code {
            flush(&mut units, &mut paragraph, &mut item);
            let mut block = Block {
                intro: units.last().cloned().unwrap_or_default(),
                lines: vec![line.to_owned()],
                ..Block::default()
            };
            while let Some(next) = lines.peek() {
                if next.starts_with("    ") || next.starts_with('\t') {
                    block
                        .lines
                        .push(lines.next().unwrap_or_default().to_owned());
                } else {
                    break;
                }
            }
            blocks.push(block);
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut units, &mut paragraph, &mut item);
            continue;
        }
        if let Some(marker) = list_marker().find(line) {
            flush(&mut units, &mut paragraph, &mut item);
            item = Some(line[marker.end()..].trim().to_owned());
            continue;
        }
        if trimmed.starts_with('|') {
            flush(&mut units, &mut paragraph, &mut item);
            let cells: Vec<&str> = trimmed
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            let separator = cells
                .iter()
                .all(|c| c.chars().all(|x| matches!(x, '-' | ':' | ' ')));
            if !cells.is_empty() && !separator {
                units.push(cells.join(" | "));
            }
            continue;
        }
        if trimmed.starts_with('#') {
            flush(&mut units, &mut paragraph, &mut item);
            let heading = trimmed.trim_start_matches('#').trim();
            if !heading.is_empty() {
                units.push(heading.to_owned());
            }
            continue;
        }
        if let Some(text) = &mut item {
            // A continuation line of a list item.
            text.push(' ');
            text.push_str(trimmed);
            continue;
        }
        paragraph.push_str(trimmed);
        paragraph.push('\n');
        if trimmed.ends_with(':') {
            // An introduction ("The counter must:") is a unit of its own.
            flush(&mut units, &mut paragraph, &mut item);
        }
    }
    flush(&mut units, &mut paragraph, &mut item);
    (units, blocks)
}

/// The units of the objective a person would see as separate things asked for: each list item,
/// table row, heading, and each sentence of prose (an introduction ending in `:` is its own unit).
/// Code blocks are not units. Whitespace is collapsed.
pub fn units(text: &str) -> Vec<String> {
    read(text)
        .0
        .into_iter()
        .map(|u| u.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|u| !u.is_empty())
        .collect()
}

/// The clause of `unit` that shows `command` in code formatting: `unit` split, outside code
/// spans, at `;` and before `then` or `but` after a comma. The whole unit when the command is
/// not in it as a span (a block's line, introduced by the unit).
fn clause_holding<'a>(unit: &'a str, command: &str) -> &'a str {
    let span = format!("`{command}`");
    let mut start = 0;
    let mut in_code = false;
    let mut clauses = Vec::new();
    for (i, c) in unit.char_indices() {
        match c {
            '`' => in_code = !in_code,
            ';' if !in_code => {
                clauses.push(&unit[start..i]);
                start = i + 1;
            }
            ',' if !in_code => {
                let rest = unit[i + 1..].trim_start();
                if ["then ", "then\n", "but "]
                    .iter()
                    .any(|w| rest.starts_with(w))
                {
                    clauses.push(&unit[start..i]);
                    start = i + 1;
                }
            }
            _ => {}
        }
    }
    clauses.push(&unit[start..]);
    clauses
        .into_iter()
        .find(|clause| clause.contains(&span))
        .unwrap_or(unit)
}

/// The role of `command`, shown in `unit` (or introduced by it).
fn classify(command: &str, unit: &str) -> (CommandRole, String) {
    if is_setup_command(command) {
        return (
            CommandRole::Setup,
            "it installs, creates an environment or fetches: it prepares the tree and is not replayed as a check".into(),
        );
    }
    if is_test_command(command) {
        return (
            CommandRole::RequiredCheck,
            "it runs tests: replayed on the base and on the final tree".into(),
        );
    }
    // The success words speak for their own clause: "install with `x`; then `y` must pass",
    // "`x`, then `y` must pass", "`x` understands …, but people keep passing …".
    let clause = clause_holding(unit, command);
    let without_code = inline_code().replace_all(clause, "CODE");
    if succeeds().is_match(&without_code) {
        return (
            CommandRole::RequiredCheck,
            format!("the objective says it must succeed (\"{}\")", unit.trim()),
        );
    }
    (
        CommandRole::Mentioned,
        "neither a test runner nor said to succeed: shown to the reviewers, not replayed".into(),
    )
}

/// Every command the objective shows in code formatting (inline code that reads as a command,
/// and the lines of a shell or untagged code block; in a block with `$ ` prompts, the prompted
/// lines), with its role. In order, without duplicates.
pub fn objective_commands(objective: &str) -> Vec<ObjectiveCommand> {
    let (units, blocks) = read(objective);
    let mut out: Vec<ObjectiveCommand> = Vec::new();
    let mut add = |command: &str, unit: &str| {
        let command = command.trim().trim_start_matches("$ ").trim();
        if command.is_empty()
            || command.starts_with('#')
            || out.iter().any(|c| c.command == command)
        {
            return;
        }
        let (role, why) = classify(command, unit);
        out.push(ObjectiveCommand {
            command: command.to_owned(),
            role,
            why,
        });
    };
    for unit in &units {
        for span in inline_code().captures_iter(unit) {
            if is_command(&span[1]) {
                add(&span[1], unit);
            }
        }
    }
    for block in &blocks {
        let shell = matches!(
            block.lang.as_str(),
            "" | "sh" | "bash" | "shell" | "console" | "zsh" | "terminal" | "shell-session"
        );
        if !shell {
            continue;
        }
        let prompted: Vec<&String> = block
            .lines
            .iter()
            .filter(|l| l.trim_start().starts_with("$ "))
            .collect();
        let session = matches!(
            block.lang.as_str(),
            "console" | "terminal" | "shell-session"
        );
        let lines: Vec<&String> =
            if session || !prompted.is_empty() && prompted.len() == block.lines.len() {
                prompted
            } else {
                block.lines.iter().collect()
            };
        for line in lines {
            let line = line.trim().trim_start_matches("$ ");
            if is_command(line) {
                add(line, &block.intro);
            }
        }
    }
    out
}

/// The commands the objective requires to succeed (the [`CommandRole::RequiredCheck`] ones).
pub fn objective_checks(objective: &str) -> Vec<String> {
    objective_commands(objective)
        .into_iter()
        .filter(|c| c.role == CommandRole::RequiredCheck)
        .map(|c| c.command)
        .collect()
}

/// A command as compared: its words joined by single spaces.
fn normalized(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The smallest reason a set-aside may give, in characters that are not spaces.
pub const SET_ASIDE_REASON_MIN: usize = 20;

/// The brief's `set_aside_commands` as (command, reason) pairs.
pub fn set_asides(brief: &serde_json::Value) -> Vec<(String, String)> {
    brief["set_aside_commands"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["command"].as_str().unwrap_or_default().to_owned(),
                e["reason"].as_str().unwrap_or_default().trim().to_owned(),
            )
        })
        .collect()
}

/// What is wrong with the brief's set-asides against the objective's `commands`: each must name
/// a required check or setup command the objective shows (words compared, spacing ignored), once,
/// with a reason of at least [`SET_ASIDE_REASON_MIN`] characters.
pub fn set_aside_problems(commands: &[ObjectiveCommand], brief: &serde_json::Value) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (command, reason) in set_asides(brief) {
        let wanted = normalized(&command);
        if !seen.insert(wanted.clone()) {
            problems.push(format!("set_aside_commands names `{command}` twice"));
            continue;
        }
        match commands.iter().find(|c| normalized(&c.command) == wanted) {
            None => {
                let shown: Vec<String> = commands
                    .iter()
                    .filter(|c| matches!(c.role, CommandRole::RequiredCheck | CommandRole::Setup))
                    .map(|c| format!("`{}`", c.command))
                    .collect();
                problems.push(format!(
                    "set_aside_commands names `{command}`, which is not a command the objective shows as a check or setup step ({})",
                    if shown.is_empty() { "it shows none".to_owned() } else { shown.join(", ") }
                ));
            }
            Some(c) if c.role == CommandRole::Mentioned => problems.push(format!(
                "set_aside_commands names `{command}`, which the objective only mentions: nothing replays it, so there is nothing to set aside"
            )),
            Some(_) => {}
        }
        if reason.chars().filter(|c| !c.is_whitespace()).count() < SET_ASIDE_REASON_MIN {
            problems.push(format!(
                "the reason for setting aside `{command}` is too short to be checked: say why it cannot or need not run"
            ));
        }
    }
    problems
}

/// `commands` with the brief's set-asides applied: each named required check or setup command
/// becomes [`CommandRole::SetAside`] with its reason. Entries that name no such command change
/// nothing ([`set_aside_problems`] rejects the brief first).
pub fn apply_set_asides(commands: &mut [ObjectiveCommand], brief: &serde_json::Value) {
    for (command, reason) in set_asides(brief) {
        let wanted = normalized(&command);
        if let Some(c) = commands.iter_mut().find(|c| {
            normalized(&c.command) == wanted
                && matches!(c.role, CommandRole::RequiredCheck | CommandRole::Setup)
        }) {
            c.why = format!(
                "set aside by the requirements, instead of {}: {reason}",
                c.role.as_str()
            );
            c.role = CommandRole::SetAside;
        }
    }
}

/// The command of a plan milestone's `prepare` step (a string, or an object with `command`).
fn prepare_commands(milestone: &serde_json::Value) -> Vec<String> {
    milestone["prepare"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().or_else(|| p["command"].as_str()))
        .map(normalized)
        .collect()
}

/// Which milestone's `prepare` step runs the setup command `command`, if one does.
pub fn prepared_by(milestones: &[serde_json::Value], command: &str) -> Option<String> {
    let wanted = normalized(command);
    milestones.iter().enumerate().find_map(|(i, m)| {
        prepare_commands(m).contains(&wanted).then(|| {
            m["id"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{}", i + 1))
        })
    })
}

/// One line per command the objective shows: the command, its role and why, and for a setup
/// command whether a milestone's `prepare` step of `milestones` (the plan's) runs it.
pub fn describe(commands: &[ObjectiveCommand], milestones: &[serde_json::Value]) -> String {
    let mut out = String::new();
    for c in commands {
        let extra = match c.role {
            CommandRole::Setup => match prepared_by(milestones, &c.command) {
                Some(m) => format!("; run by the prepare step of milestone {m}"),
                None if milestones.is_empty() => String::new(),
                None => "; no prepare step of the plan runs it".to_owned(),
            },
            _ => String::new(),
        };
        out.push_str(&format!(
            "- `{}`: {} ({}{extra})\n",
            c.command,
            c.role.as_str(),
            c.why
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setup_command_is_satisfied_by_a_matching_prepare_step() {
        let commands =
            objective_commands("Run `pip install -e .` first; `python3 -m unittest -q` must pass.");
        let plan = vec![
            serde_json::json!({"id": "M1", "prepare": [{"command": "pip  install -e ."}]}),
            serde_json::json!({"id": "M2"}),
        ];
        let text = describe(&commands, &plan);
        assert!(
            text.contains("`pip install -e .`: setup (") && text.contains("milestone M1"),
            "{text}"
        );
        assert!(
            text.contains("`python3 -m unittest -q`: required_check"),
            "{text}"
        );
        let none = describe(&commands, &[serde_json::json!({"id": "M1"})]);
        assert!(
            none.contains("no prepare step of the plan runs it"),
            "{none}"
        );
    }

    #[test]
    fn list_items_rows_and_sentences_are_units() {
        let objective = "Add two helpers to `text.py`:\n- `count_vowels(text)` counts vowels\n- `count_consonants(text)` counts the\n  other ASCII letters\n\n| flag | meaning |\n|---|---|\n| `--json` | print JSON |\n\n## Notes\nUse only the standard library. Keep it small.\n\n```sh\npytest -q\n```\n";
        assert_eq!(
            units(objective),
            [
                "Add two helpers to `text.py`:",
                "`count_vowels(text)` counts vowels",
                "`count_consonants(text)` counts the other ASCII letters",
                "flag | meaning",
                "`--json` | print JSON",
                "Notes",
                "Use only the standard library.",
                "Keep it small.",
            ]
        );
    }

    #[test]
    fn every_command_shown_has_a_role_whatever_the_phrasing() {
        let roles = |objective: &str| -> Vec<(String, CommandRole)> {
            objective_commands(objective)
                .into_iter()
                .map(|c| (c.command, c.role))
                .collect()
        };
        use CommandRole::*;
        let objective = "Implement `count_vowels(text)` in `vowels.py`: it returns how many characters are vowels. Running `python3 -m unittest -q test_vowels` is expected to succeed. Use only the Python standard library.";
        assert_eq!(
            roles(objective),
            [("python3 -m unittest -q test_vowels".into(), RequiredCheck)]
        );
        // A test runner is a check even when no sentence says it must pass.
        assert_eq!(
            roles("Fix `median`; the suite is run with `go test ./...` in CI."),
            [("go test ./...".into(), RequiredCheck)]
        );
        let fenced = "Add a --json flag.\n\nThese must pass:\n\n```sh\n$ cargo test --offline\ncargo clippy -- -D warnings\n```\n\nThe README shows an example:\n\n```\ntool --json\n```\n\n```python\nprint('not a command')\n```\n";
        assert_eq!(
            roles(fenced),
            [
                ("cargo test --offline".into(), RequiredCheck),
                ("cargo clippy -- -D warnings".into(), RequiredCheck),
                ("tool --json".into(), Mentioned),
            ]
        );
        let setup = "Set up with `python3 -m venv .venv` and `pip install -e .`, then `npm ci && npm install left-pad`; `pip install -e . && pytest -q` must pass and `make` builds it.";
        assert_eq!(
            roles(setup),
            [
                ("python3 -m venv .venv".into(), Setup),
                ("pip install -e .".into(), Setup),
                ("npm ci && npm install left-pad".into(), Setup),
                ("pip install -e . && pytest -q".into(), RequiredCheck),
                ("make".into(), RequiredCheck),
            ]
        );
        let quantities = "`bytes.parse` understands `1kb`, `2 MB` and so on, but people keep passing the IEC names. `npm test` must pass.";
        assert_eq!(objective_checks(quantities), vec!["npm test".to_owned()]);
        let clauses = "Run `make gen`, then `./check.sh --all` must pass.";
        let seen: Vec<(String, CommandRole)> = objective_commands(clauses)
            .into_iter()
            .map(|c| (c.command, c.role))
            .collect();
        assert_eq!(
            seen,
            vec![
                ("make gen".to_owned(), CommandRole::Mentioned),
                ("./check.sh --all".to_owned(), CommandRole::RequiredCheck)
            ]
        );
        let keep = "Fix `median`. Keep `python3 -m unittest -q test_stats`\npassing and add tests.";
        assert_eq!(
            objective_checks(keep),
            ["python3 -m unittest -q test_stats"]
        );
        let indented = "Fix the parser. Make sure this works:\n\n    ./check-parser --strict\n";
        assert_eq!(objective_checks(indented), ["./check-parser --strict"]);
        assert_eq!(
            roles(
                "Run `make` to build. Rename `foo` to `bar`. `median([1, 2])` and `HELLO, ADA!` and `-n N` are not commands."
            ),
            [("make".into(), Mentioned)]
        );
        assert_eq!(
            objective_checks("- `ruff check .` exits 0\n- `./tool --help` prints usage"),
            ["ruff check ."]
        );
    }
}
