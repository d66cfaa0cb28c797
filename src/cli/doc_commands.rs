//! The docs' command lines against the real command line: every `autocode …` line of
//! `docs/*.md` and `README.md` (in fenced blocks, continued lines joined, and in inline code)
//! must parse with the clap `Cli`, so a doc that names a flag or command that does not exist
//! fails. Placeholders stay as written (`OBJECTIVE`, `RUN`, `<ID>`); the notation of optional
//! parts (`[--json]`), alternatives (`a|b`) and repetition (`...`) is read as the first choice.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::{Cli, with_default_subcommand};

/// One command line a document names, with where it is.
#[derive(Debug)]
struct DocCommand {
    file: PathBuf,
    line: usize,
    text: String,
}

fn docs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files.push(root.join("README.md"));
    files
}

/// The text from `autocode ` on, when `line` runs autocode (after a pipe, `&&`, a `$ ` prompt
/// or variable assignments).
fn autocode_part(line: &str) -> Option<&str> {
    let line = line.trim().trim_start_matches("$ ");
    let start = if line.starts_with("autocode ") || line == "autocode" {
        0
    } else {
        // `printf … | autocode …`, `cd x && autocode …`, `VAR=1 autocode …`.
        let at = ["| autocode ", "&& autocode ", " autocode "]
            .iter()
            .filter_map(|p| line.find(p).map(|i| i + p.len() - "autocode ".len()))
            .min()?;
        let before = &line[..at];
        let assignments_only = before
            .split_whitespace()
            .all(|w| w.contains('=') && !w.starts_with('-'));
        let piped = before.trim_end().ends_with('|') || before.trim_end().ends_with("&&");
        if !piped && !assignments_only {
            return None;
        }
        at
    };
    Some(&line[start..])
}

/// Cuts a shell comment and what follows a command separator.
fn command_only(text: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && (i == 0 || chars[i - 1].is_whitespace()) => break,
            None if c == '>' => {
                // `2>&1`: the descriptor's digits go with the redirection.
                let kept = out.trim_end_matches(|d: char| d.is_ascii_digit()).len();
                out.truncate(kept);
                break;
            }
            None if c == ';' || (c == '|' && chars.get(i + 1) == Some(&' ')) => break,
            None if c == '&' && chars.get(i + 1) == Some(&'&') => break,
            None => {}
        }
        out.push(c);
    }
    out
}

fn commands_of(file: &Path) -> Vec<DocCommand> {
    let text = std::fs::read_to_string(file).expect("doc is readable");
    let mut out = Vec::new();
    let mut fenced = false;
    let mut pending: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            if let Some((at, mut joined)) = pending.take() {
                joined.push(' ');
                joined.push_str(line.trim());
                match joined.strip_suffix('\\') {
                    Some(more) => pending = Some((at, more.trim_end().to_owned())),
                    None => out.push(DocCommand {
                        file: file.to_owned(),
                        line: at,
                        text: joined,
                    }),
                }
                continue;
            }
            if let Some(part) = autocode_part(line) {
                let part = part.trim_end();
                match part.strip_suffix('\\') {
                    Some(more) => pending = Some((index + 1, more.trim_end().to_owned())),
                    None => out.push(DocCommand {
                        file: file.to_owned(),
                        line: index + 1,
                        text: part.to_owned(),
                    }),
                }
            }
            continue;
        }
        // Inline code: `autocode …`.
        for (i, span) in line.split('`').enumerate() {
            if i % 2 == 1 && (span.starts_with("autocode ") || span == "autocode") {
                out.push(DocCommand {
                    file: file.to_owned(),
                    line: index + 1,
                    text: span.to_owned(),
                });
            }
        }
    }
    out
}

/// Words that end a command in running text (`autocode resume RUN later, or …`).
const PROSE: &[&str] = &["or", "and", "then", "if", "to", "when", "until", "after"];

/// The words clap sees: notation read as its first choice, prose after the command dropped.
/// `None` when the text is not a command line (`autocode main()`, `autocode <a@b>`, `autocode …`).
fn words_of(command: &str) -> Option<Vec<String>> {
    // `"…"` is an elided objective; an unquoted `…` is repetition or elision.
    let command = command_only(
        &command
            .replace("\\|", "|")
            .replace("\"…\"", "OBJECTIVE")
            .replace("'…'", "OBJECTIVE"),
    );
    let second = command.split_whitespace().nth(1).unwrap_or_default();
    let command_like = second.starts_with('-')
        || second.starts_with('"')
        || second.starts_with('\'')
        || (!second.is_empty()
            && second
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    if !second.is_empty() && !command_like {
        return None;
    }
    let mut words = Vec::new();
    for word in crate::verify::shellwords::words(&command) {
        if word.starts_with('(') || PROSE.contains(&word.as_str()) || word.ends_with(',') {
            break; // `autocode resume RUN (optionally …)`: prose from here.
        }
        if matches!(word.as_str(), "..." | "…" | "]..." | "]…") {
            continue;
        }
        // `--protocol chat-completions|responses`, `NAME...|--all`: the first alternative.
        let word = match word.split_once('|') {
            Some((first, _)) if !first.is_empty() => first,
            _ => word.as_str(),
        };
        let trimmed = word
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches("...")
            .trim_end_matches(']');
        let trimmed = trimmed.trim_end_matches('…').trim_end_matches(']');
        if trimmed.is_empty() {
            continue;
        }
        // `--ROLE-model M`: one role's flag stands for all of them.
        let trimmed = if trimmed == "--ROLE-model" {
            "--builder-model"
        } else {
            trimmed
        };
        words.push(trimmed.to_owned());
    }
    Some(words)
}

/// A placeholder value (`N`, `SECS`, `I/N`, `<id>`, `…`): not a literal the docs promise.
fn placeholder(value: &str) -> bool {
    value.is_empty()
        || value.starts_with('<')
        || value.contains('…')
        || !value.chars().any(|c| c.is_ascii_lowercase())
}

fn parse_error(command: &DocCommand) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let mut words = words_of(&command.text)?;
    // A placeholder a typed value refuses is given typed values in turn; a real value that is
    // refused is an error in the doc.
    let mut tried = 0;
    loop {
        let args = with_default_subcommand(words.iter().map(Into::into).collect());
        let Err(e) = Cli::command().try_get_matches_from(args) else {
            return None;
        };
        match e.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            // Naming a command in running text (`autocode capture`), optional parts that
            // exclude each other (`[--json] [--markdown]`).
            | ErrorKind::MissingRequiredArgument
            | ErrorKind::MissingSubcommand
            | ErrorKind::ArgumentConflict => return None,
            ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
                let value = match e.get(ContextKind::InvalidValue) {
                    Some(ContextValue::String(v)) => v.clone(),
                    _ => String::new(),
                };
                if value.is_empty() {
                    return None; // `--provider` named in running text without its value.
                }
                if placeholder(&value) && tried < 4 {
                    let typed = ["1", "1/2", "127.0.0.1:80", "x"][tried];
                    tried += 1;
                    if let Some(w) = words.iter_mut().rev().find(|w| **w == value || w.ends_with(&format!("={value}"))) {
                        *w = w.replace(&value, typed);
                        continue;
                    }
                }
                if placeholder(&value) {
                    return None;
                }
            }
            _ => {}
        }
        return Some(format!(
            "{}:{}: `{}`: {}",
            command.file.display(),
            command.line,
            command.text,
            e.render().to_string().lines().next().unwrap_or_default()
        ));
    }
}

#[test]
fn every_command_line_in_the_docs_parses() {
    let commands: Vec<DocCommand> = docs().iter().flat_map(|f| commands_of(f)).collect();
    assert!(commands.len() > 50, "found only {}", commands.len());
    let failures: Vec<String> = commands.iter().filter_map(parse_error).collect();
    assert!(
        failures.is_empty(),
        "{} of {} documented command lines do not parse:\n{}",
        failures.len(),
        commands.len(),
        failures.join("\n")
    );
}

#[test]
fn a_flag_that_does_not_exist_is_found() {
    let wrong = DocCommand {
        file: PathBuf::from("docs/direct.md"),
        line: 1,
        text: "autocode --provider autocode --completion-reviewer-model claude/x \"…\"".into(),
    };
    assert!(parse_error(&wrong).is_some());
    let right = DocCommand {
        text: "autocode --provider autocode --completion-model claude/x \"…\"".into(),
        ..wrong
    };
    assert_eq!(parse_error(&right), None);
}

#[test]
fn notation_and_continued_lines_are_read() {
    assert_eq!(
        words_of("autocode models --provider autocode [--json]  # the roster").unwrap(),
        ["autocode", "models", "--provider", "autocode", "--json"]
    );
    assert_eq!(
        words_of("autocode demo [--protocol chat-completions\\|responses]").unwrap(),
        ["autocode", "demo", "--protocol", "chat-completions"]
    );
    assert_eq!(
        words_of("autocode resume RUN later, or choose another model").unwrap(),
        ["autocode", "resume", "RUN"]
    );
    assert_eq!(words_of("autocode main()   (single-threaded)"), None);
    assert_eq!(
        autocode_part("printf '%s' \"$K\" | autocode connections setup --key-stdin"),
        Some("autocode connections setup --key-stdin")
    );
    assert_eq!(
        autocode_part("AUTOCODE_X=1 autocode doctor"),
        Some("autocode doctor")
    );
    assert_eq!(autocode_part("run autocode twice"), None);
}
