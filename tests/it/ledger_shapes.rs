//! The ledger's wrapper matching over a corpus of command shapes
//! (`tests/fixtures/ledger/command_corpus.json`: the real CLI fixtures' commands and realistic
//! model-written ones with heredocs, here-strings, input redirections, pipes and quoting): for
//! every command, the exec each pinned CLI makes for it backs the command event it reports, and
//! nothing else does. Zero genuine events may be flagged.
//!
//! Claude Code's wrapper is built here the way the pinned CLI (2.1.328) builds it; its rules
//! are read from the CLI's own code (`Pf` heredoc, `mN` multi-line string, `hN` input
//! redirection, `zOa` "add `< /dev/null`", `GOa` quoting, `Uuo` for pipes). Which quoting its
//! plain branch uses could not be read, so both candidates (`'…'` with `'"'"'`, and the
//! `shell-quote` package's) are checked.

use autocode::report::ledger::{LedgerMatch, ledger_match};
use autocode::supervise::{Attestation, LedgerEntry, LedgerExit};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;

/// A compiled pattern, built once per pattern for the whole test.
fn re(pattern: &'static str) -> Regex {
    static CACHE: LazyLock<Mutex<HashMap<&'static str, Regex>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut cache = CACHE.lock().unwrap();
    cache
        .entry(pattern)
        .or_insert_with(|| Regex::new(pattern).unwrap())
        .clone()
}

fn corpus() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ledger/command_corpus.json"
    );
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    serde_json::from_value(value["commands"].clone()).unwrap()
}

/// `Pf`: the command has a heredoc (not an arithmetic shift).
fn has_heredoc(command: &str) -> bool {
    let shift = [
        r"\d\s*<<\s*\d",
        r"\[\[\s*\d+\s*<<\s*\d+\s*\]\]",
        r"\$\(\(.*<<.*\)\)",
    ];
    if shift.iter().any(|pattern| re(pattern).is_match(command)) {
        return false;
    }
    re(r#"<<-?\s*(?:'\w+'|"\w+"|\w+|\\\w+)"#).is_match(command)
}

/// `mN`: a quoted string spans lines.
fn has_multiline_string(command: &str) -> bool {
    re(r"'(?:[^'\\]|\\.)*\n(?:[^'\\]|\\.)*'").is_match(command)
        || re(r#""(?:[^"\\]|\\.)*\n(?:[^"\\]|\\.)*""#).is_match(command)
}

/// `hN`: an input redirection (`(?:^|[\s;&|])<(?![<(])\s*\S+`, its look-ahead spelled out).
fn has_input_redirection(command: &str) -> bool {
    re(r"(?:^|[\s;&|])<(?:\s+\S|[^\s<(])").is_match(command)
}

/// `kFs`: single quotes, each `'` as `'"'"'`.
fn single_quoted(command: &str) -> String {
    format!("'{}'", command.replace('\'', r#"'"'"'"#))
}

/// The `shell-quote` package's `quote([command])`.
fn shell_quote(command: &str) -> String {
    if command.is_empty() {
        return "''".into();
    }
    let space_or_double = command.contains(|c: char| c == '"' || c.is_whitespace());
    if space_or_double && !command.contains('\'') {
        return format!("'{}'", re(r"(['\\])").replace_all(command, r"\$1"));
    }
    if space_or_double || command.contains('\'') {
        return format!("\"{}\"", re(r#"(["\\$`!])"#).replace_all(command, r"\$1"));
    }
    re(r#"([A-Za-z]:)?([#!"$&'()*,:;<=>?@\[\\\]^`{|}])"#)
        .replace_all(command, r"$1\$2")
        .into_owned()
}

/// The `eval` word of Claude Code's wrapper for `command`, with `plain` quoting the plain branch.
fn claude_eval_word(command: &str, plain: fn(&str) -> String) -> String {
    let stdin = !has_heredoc(command) && !has_input_redirection(command);
    if command.contains('|') && stdin {
        return format!("{} < /dev/null", single_quoted(command));
    }
    let quoted = if has_heredoc(command) || has_multiline_string(command) {
        single_quoted(command)
    } else {
        plain(command)
    };
    if stdin {
        format!("{quoted} < /dev/null")
    } else {
        quoted
    }
}

fn claude_payload(command: &str, plain: fn(&str) -> String) -> String {
    format!(
        "source /root/.claude/shell-snapshots/snapshot-bash-1764633600-ab12cd.sh 2>/dev/null || true && \\builtin shopt -u extglob 2>/dev/null || true && eval {} && pwd -P >| /tmp/claude-9f3e-cwd",
        claude_eval_word(command, plain)
    )
}

fn attested(argv: Vec<String>) -> LedgerEntry {
    LedgerEntry {
        seq: 0,
        pid: 4242,
        filename: argv[0].clone(),
        argv,
        argv_truncated: false,
        argv_cut: Vec::new(),
        cwd: "/work/tree".into(),
        at_ms: 5,
        exec_plausible: true,
        exit: Some(LedgerExit::Code(0)),
        attestation: Attestation::Attested,
        exe: Some("/usr/bin/bash".into()),
    }
}

fn bash_c(command: &str) -> Vec<String> {
    vec!["/bin/bash".into(), "-c".into(), command.into()]
}

#[test]
fn every_corpus_command_is_backed_by_each_clis_exec_and_nothing_else_is() {
    let commands = corpus();
    assert!(commands.len() >= 100, "{} shapes", commands.len());
    let mut flagged = Vec::new();
    let mut checked = 0;
    for command in &commands {
        let execs: Vec<(&str, Vec<String>, Vec<String>)> = vec![
            ("opencode", bash_c(command), vec![command.clone()]),
            (
                "codex",
                bash_c(command),
                vec![
                    command.clone(),
                    format!("/bin/bash -lc {}", single_quoted(command)),
                ],
            ),
            (
                "claude (single quotes)",
                bash_c(&claude_payload(command, single_quoted)),
                vec![command.clone()],
            ),
            (
                "claude (shell-quote)",
                bash_c(&claude_payload(command, shell_quote)),
                vec![command.clone()],
            ),
        ];
        for (cli, argv, cited) in execs {
            let ledger = [attested(argv)];
            for cited in cited {
                checked += 1;
                if ledger_match(&cited, 0, &ledger) != (LedgerMatch::Matched { seq: 0 }) {
                    flagged.push(format!("{cli}: {cited:?}"));
                }
                // Another command, or the same one with another exit, is not backed.
                assert!(
                    !matches!(
                        ledger_match(&format!("{cited} && rm -rf ."), 0, &ledger),
                        LedgerMatch::Matched { .. }
                    ),
                    "{cli}: {cited:?} backs a longer command"
                );
                assert!(
                    !matches!(
                        ledger_match(&cited, 1, &ledger),
                        LedgerMatch::Matched { .. }
                    ),
                    "{cli}: {cited:?} backs another exit"
                );
            }
        }
    }
    assert!(
        flagged.is_empty(),
        "{} of {checked} genuine events flagged:\n{}",
        flagged.len(),
        flagged.join("\n")
    );
}

#[test]
fn the_wrapper_rules_read_from_the_cli_classify_as_it_does() {
    assert!(has_heredoc("python3 - <<'EOF'\nx\nEOF"));
    assert!(has_heredoc("cat <<-EOF\nx\nEOF"));
    assert!(!has_heredoc("echo $((1 << 2))"));
    assert!(
        !has_heredoc("wc -w <<< 'a b'"),
        "a here-string is not a heredoc"
    );
    assert!(has_input_redirection("python3 x.py < in.txt"));
    assert!(
        !has_input_redirection("wc -w <<< 'a b'"),
        "a quoted here-string keeps `< /dev/null`"
    );
    assert!(
        has_heredoc("wc -w <<< abc"),
        "an unquoted one reads as a heredoc"
    );
    assert!(!has_input_redirection("diff <(sort a) <(sort b)"));
    assert!(!has_input_redirection("echo a > b"));
    assert_eq!(
        claude_eval_word("python3 x.py < in.txt", single_quoted),
        "'python3 x.py < in.txt'"
    );
    assert_eq!(
        claude_eval_word("npm test | grep -q ok", shell_quote),
        "'npm test | grep -q ok' < /dev/null"
    );
    assert_eq!(shell_quote(r#"grep -qx "a b" f"#), r#"'grep -qx "a b" f'"#);
    assert_eq!(shell_quote("echo 'a b'"), r#""echo 'a b'""#);
}
