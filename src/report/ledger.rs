//! Evidence against the exec ledger: a cited check counts only if the kernel-attested ledger
//! shows a process that ran that command and ended with the cited exit status.
//!
//! The CLIs run a model's command through their own shell wrappers; the shapes below were
//! measured on the pinned CLIs under the boundary (fixtures in `tests/fixtures/ledger/`):
//!
//! | CLI | command event | ledgered exec (same pid ends with the command's status) |
//! |---|---|---|
//! | Codex 0.169.0 | `/bin/bash -lc '<cmd>'` | `/bin/bash -c <snapshot prelude…; exec '/bin/bash' -c '<cmd>'>`, then `["/bin/bash", "-c", "<cmd>"]` (inside codex-linux-sandbox → bwrap) |
//! | Claude Code 2.1.328 | `<cmd>` | `["/bin/bash", "-c", "source <snapshot> … && eval '<cmd>' < /dev/null && pwd -P >| /tmp/claude-…-cwd"]`; without `< /dev/null` when the command has a heredoc or its own input redirection |
//! | OpenCode 1.18.33 | `<cmd>` | `["/bin/bash", "-c", "<cmd>"]` |
//!
//! Only entries the keeper attested (`Attestation::Attested`: the exec succeeded, argv\[0\]
//! named the program the kernel ran, and the argv that ran is the argv read) are evidence.
//! Nothing here reads files or processes: it is a pure function of the ledger.

use serde::{Deserialize, Serialize};

use super::evidence::{
    CommandRecord, EvidenceFinding, EvidenceProblem, UNNAMED_EVENT_REF, normalize_command,
};
use crate::supervise::{Attestation, LedgerEntry, LedgerExit};

/// Why a cited command has no ledger entry to back it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum LedgerMismatch {
    /// No exec in the ledger ran this command (through a shell wrapper or directly).
    #[error("no exec of this command is in the ledger")]
    NoExec,
    /// The command ran, but its process ended otherwise than cited (or its end is unknown).
    #[error("the ledgered run of this command ended otherwise")]
    ExitDiffers,
    /// Only execs the keeper judged implausible (no such executable) name this command.
    #[error("the only exec of this command could not have run")]
    ExecImplausible,
    /// Execs of this command are in the ledger, but none is attested: the exec failed, the
    /// caller had other threads, its argv changed, argv[0] was not the program that ran, or
    /// the process was never seen again after its exec.
    #[error("no exec of this command is attested by the keeper")]
    Unattested,
    /// No exec matches this command, but one whose shell payload the ledger keeps only the ends
    /// of (a text over its cap) shares text with it and has a form no digest compares (Claude
    /// Code's `eval` wrapper): it may have run the command, which is not evidence, and not a
    /// proven forgery either.
    #[error("the only exec that may have run this command is kept cut in the ledger")]
    CutText,
}

/// The outcome of matching one cited command against the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum LedgerMatch {
    /// The entry (its `seq`) that ran the command and ended with the cited status.
    Matched { seq: u64 },
    NotMatched {
        reason: LedgerMismatch,
        /// The closest entry, when one ran the command (for the message).
        seq: Option<u64>,
        /// How that entry ended, when known.
        recorded: Option<LedgerExit>,
    },
}

/// The shells whose `-c` payload is a command.
const SHELLS: [&str; 4] = ["bash", "sh", "zsh", "dash"];

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Reads one shell word at the start of `text` (quotes, escapes, adjacent segments); returns it
/// and the rest. `None` when a quote does not close or there is no word.
fn read_word(text: &str) -> Option<(String, &str)> {
    let text = text.trim_start();
    let mut out = String::new();
    let mut chars = text.char_indices();
    let mut end = text.len();
    let mut any = false;
    while let Some((at, c)) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()?.1 {
                    '\'' => break,
                    ch => out.push(ch),
                }
            },
            '"' => loop {
                match chars.next()?.1 {
                    '"' => break,
                    '\\' => {
                        let next = chars.next()?.1;
                        if !matches!(next, '\\' | '"' | '$' | '`' | '\n') {
                            out.push('\\');
                        }
                        if next != '\n' {
                            out.push(next);
                        }
                    }
                    ch => out.push(ch),
                }
            },
            '\\' => match chars.next()?.1 {
                '\n' => {}
                ch => out.push(ch),
            },
            ch if ch.is_whitespace() || matches!(ch, ';' | '&' | '|' | '<' | '>') => {
                end = at;
                break;
            }
            ch => out.push(ch),
        }
        any = true;
    }
    any.then(|| (out, text.get(end..).unwrap_or_default()))
}

/// Splits a simple command (no operators) into words; `None` when it is not one.
fn simple_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut rest = command.trim();
    while !rest.is_empty() {
        let (word, after) = read_word(rest)?;
        words.push(word);
        rest = after.trim_start();
        if rest.starts_with([';', '&', '|', '<', '>']) {
            return None;
        }
    }
    (!words.is_empty()).then_some(words)
}

/// The payload of a shell `-c` invocation: `[shell, flags…, "-c"/"-lc"/…, payload, …]`.
fn shell_payload(argv: &[String]) -> Option<&str> {
    argv.get(shell_payload_index(argv)?).map(String::as_str)
}

/// The index in `argv` of [`shell_payload`].
fn shell_payload_index(argv: &[String]) -> Option<usize> {
    let shell = argv.first()?;
    if !SHELLS.contains(&basename(shell)) {
        return None;
    }
    for (index, arg) in argv.iter().enumerate().skip(1) {
        let flags = arg.strip_prefix('-')?;
        if flags.contains('c') {
            return (index + 1 < argv.len()).then_some(index + 1);
        }
    }
    None
}

/// How an entry whose argv the ledger file kept cut (`argv_cut`) bears on a cited command.
#[derive(Debug, PartialEq, Eq)]
enum CutBearing {
    /// Nothing cut, or nothing in common with the command.
    Unrelated,
    /// The digests of the whole strings show it ran the command.
    Ran,
    /// Its shell payload is cut, shares text with the command, and has a form no digest
    /// compares: it may have run it ([`LedgerMismatch::CutText`]).
    Maybe,
}

/// How a run of this many bytes of a command, found in a cut payload's kept ends, makes the
/// entry one that may have run it.
const SHARED_RUN: usize = 32;

/// [`CutBearing`] of `entry` for `cited` (normalized) and its simple words, if any. The cut
/// payload's digest of words is that of its whitespace-collapsed text, the form
/// [`commands_of`] compares as well; a simple command compares each word's digest.
fn cut_bearing(
    entry: &LedgerEntry,
    raw: &str,
    cited: &str,
    words: Option<&[String]>,
) -> CutBearing {
    if entry.argv_cut.is_empty() || entry.argv_truncated {
        return CutBearing::Unrelated;
    }
    let cut = |index: usize| entry.argv_cut.iter().find(|cut| cut.index == index);
    let payload = shell_payload_index(&entry.argv);
    if let Some(cut) = payload.and_then(cut)
        && cut.words_sha256 == crate::supervise::words_sha256(cited)
    {
        return CutBearing::Ran;
    }
    if let Some(words) = words
        && words.len() == entry.argv.len()
        && entry
            .argv
            .iter()
            .zip(words)
            .enumerate()
            .all(|(index, (arg, word))| match cut(index) {
                Some(cut) => cut.sha256 == super::evidence::sha256_hex(word.as_bytes()),
                None => arg == word || (index == 0 && !word.contains('/') && basename(arg) == word),
            })
    {
        return CutBearing::Ran;
    }
    // Only Claude Code's wrapper (visible in the kept head) has a form no digest compares.
    let Some(index) = payload.filter(|index| {
        cut(*index).is_some()
            && entry.argv[*index]
                .split_once("\n[… ")
                .is_some_and(|(head, _)| head.contains(" && eval "))
    }) else {
        return CutBearing::Unrelated;
    };
    if claude_cut_ran(
        &entry.argv[index],
        cut(index).map(|c| c.sha256.as_str()),
        raw,
    ) {
        return CutBearing::Ran;
    }
    // A run of the kept ends (from the start of a word, outside the note on what was left
    // out) in the command as the wrapper quotes it: it may be this command, quoted otherwise.
    let quoted = claude_quoted(raw);
    let kept = &entry.argv[index];
    let shares = kept
        .split("\n[… ")
        .flat_map(|part| {
            let part = part.rsplit_once("…]\n").map_or(part, |(_, tail)| tail);
            part.char_indices()
                .filter(|(at, _)| *at == 0 || part[..*at].ends_with(char::is_whitespace))
                .filter_map(move |(at, _)| part.get(at..at + SHARED_RUN))
        })
        .any(|run| quoted.contains(run));
    if shares {
        CutBearing::Maybe
    } else {
        CutBearing::Unrelated
    }
}

/// Claude Code's wrapper: `… && eval '<cmd>' < /dev/null && pwd -P >| <file>`, where the
/// `< /dev/null` is left out when the command reads its own input (a heredoc, an input
/// redirection: `zOa` in the pinned CLI). The quoted word is read as the shell reads it; since
/// `eval` parses the result once more, the forms a `shell-quote` style quoting leaves behind
/// (`\\` in single quotes, `\!` in double quotes) are also read as that second parse does.
fn claude_eval(payload: &str) -> Vec<String> {
    let Some((_, after)) = payload.split_once(" && eval ") else {
        return Vec::new();
    };
    let Some((command, rest)) = read_word(after) else {
        return Vec::new();
    };
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("< /dev/null")
        .unwrap_or(rest)
        .trim_start();
    if !(rest.is_empty() || rest.starts_with("&& pwd -P")) {
        return Vec::new();
    }
    let mut commands = vec![command.clone()];
    match after.trim_start().chars().next() {
        Some('\'') if command.contains("\\\\") => {
            commands.push(command.replace("\\\\", "\\"));
        }
        Some('"') if command.contains("\\!") => commands.push(command.replace("\\!", "!")),
        _ => {}
    }
    commands
}

/// The commands an entry ran, as a cited command would name them.
fn commands_of(entry: &LedgerEntry) -> Vec<String> {
    let mut commands = Vec::new();
    // A cut argv (the keeper's bounds, or a long string the file keeps only the ends of) is
    // not what ran: no command can be read from it (a cut string is compared by digest).
    if entry.argv_truncated || !entry.argv_cut.is_empty() {
        return commands;
    }
    if let Some(payload) = shell_payload(&entry.argv) {
        commands.push(normalize_command(payload));
        // A payload that is itself a shell call (`bash -c 'sh -c …'`) is also cited whole by
        // Codex (`/bin/bash -lc 'sh -c …'`, one level unwrapped).
        commands.push(payload.split_whitespace().collect::<Vec<_>>().join(" "));
        commands.extend(
            claude_eval(payload)
                .iter()
                .map(|inner| normalize_command(inner)),
        );
    }
    commands
}

/// Whether the entry's argv is the cited simple command itself (no shell in between).
fn runs_directly(entry: &LedgerEntry, words: &[String]) -> bool {
    !entry.argv_truncated
        && entry.argv_cut.is_empty()
        && entry.argv.len() == words.len()
        && entry
            .argv
            .iter()
            .zip(words)
            .enumerate()
            .all(|(index, (arg, word))| {
                arg == word || (index == 0 && !word.contains('/') && basename(arg) == word)
            })
}

/// A cited exit code as a wait status would give it (a shell reports death by signal N as
/// 128 + N).
fn same_end(exit: Option<LedgerExit>, cited: i32) -> bool {
    match exit {
        Some(LedgerExit::Code(code)) => code == cited,
        Some(LedgerExit::Signal(signal)) => 128 + signal == cited,
        None => false,
    }
}

/// Matches a cited command and exit code against the ledger.
pub fn ledger_match(command: &str, exit_code: i32, ledger: &[LedgerEntry]) -> LedgerMatch {
    let cited = normalize_command(command);
    let words = simple_words(&cited);
    let ran: Vec<&LedgerEntry> = ledger
        .iter()
        .filter(|entry| ran_command(entry, command, &cited, words.as_deref()))
        .collect();
    let attested: Vec<&&LedgerEntry> = ran
        .iter()
        .filter(|entry| entry.attestation == Attestation::Attested)
        .collect();
    if let Some(entry) = attested
        .iter()
        .find(|entry| same_end(entry.exit, exit_code))
    {
        return LedgerMatch::Matched { seq: entry.seq };
    }
    let not_matched = |reason, entry: Option<&LedgerEntry>| LedgerMatch::NotMatched {
        reason,
        seq: entry.map(|entry| entry.seq),
        recorded: entry.and_then(|entry| entry.exit),
    };
    if let Some(entry) = attested.first() {
        return not_matched(LedgerMismatch::ExitDiffers, Some(entry));
    }
    if let Some(entry) = ran.iter().find(|entry| entry.exec_plausible) {
        return not_matched(LedgerMismatch::Unattested, Some(entry));
    }
    if let Some(entry) = ran.first() {
        return not_matched(LedgerMismatch::ExecImplausible, Some(entry));
    }
    match ledger
        .iter()
        .find(|entry| cut_bearing(entry, command, &cited, words.as_deref()) == CutBearing::Maybe)
    {
        Some(entry) => not_matched(LedgerMismatch::CutText, Some(entry)),
        None => not_matched(LedgerMismatch::NoExec, None),
    }
}

/// Whether `entry` ran the command `raw` (`cited` normalized), read from its argv or, for a
/// string the ledger kept cut, by digest.
fn ran_command(entry: &LedgerEntry, raw: &str, cited: &str, words: Option<&[String]>) -> bool {
    commands_of(entry).iter().any(|command| command == cited)
        || words.is_some_and(|words| runs_directly(entry, words))
        || cut_bearing(entry, raw, cited, words) == CutBearing::Ran
}

/// `raw` as Claude Code quotes a multi-line or heredoc command for its `eval`: single quotes,
/// each `'` as `'"'"'`.
fn claude_quoted(raw: &str) -> String {
    format!("'{}'", raw.replace('\'', r#"'"'"'"#))
}

/// Whether the cut Claude Code payload `kept` (its ends, as the ledger reads them back) whose
/// whole has digest `sha256` is the wrapper around `raw`: its prefix up to `eval ` and its
/// suffix from ` && pwd -P` taken from the kept ends, the command quoted as the CLI quotes a
/// multi-line or heredoc command (single quotes, each `'` as `'"'"'`), with or without
/// ` < /dev/null`.
fn claude_cut_ran(kept: &str, sha256: Option<&str>, raw: &str) -> bool {
    let (Some(sha256), Some((head, tail))) = (sha256, kept.split_once("\n[… ")) else {
        return false;
    };
    let Some((prefix, _)) = head.split_once(" && eval ") else {
        return false;
    };
    let Some(at) = tail.rfind(" && pwd -P") else {
        return false;
    };
    let suffix = &tail[at..];
    let quoted = claude_quoted(raw);
    ["", " < /dev/null"].iter().any(|stdin| {
        let whole = format!("{prefix} && eval {quoted}{stdin}{suffix}");
        super::evidence::sha256_hex(whole.as_bytes()) == sha256
    })
}

/// The exit of the attested entry that ran `command`, when exactly one did (or all that did
/// ended the same way): the evidence for a command event whose CLI reported no exit code.
pub fn attested_exit(command: &str, ledger: &[LedgerEntry]) -> Option<LedgerExit> {
    let cited = normalize_command(command);
    let words = simple_words(&cited);
    let mut exits = ledger
        .iter()
        .filter(|entry| entry.attestation == Attestation::Attested)
        .filter(|entry| ran_command(entry, command, &cited, words.as_deref()))
        .map(|entry| entry.exit);
    let first = exits.next()??;
    exits.all(|exit| exit == Some(first)).then_some(first)
}

/// A ledgered exit as a shell reports it (signal N: 128 + N).
pub fn exit_as_code(exit: LedgerExit) -> i32 {
    match exit {
        LedgerExit::Code(code) => code,
        LedgerExit::Signal(signal) => 128 + signal,
    }
}

/// Applies the ledger to findings of the event check. A check with no problem yet gets
/// [`EvidenceProblem::NotInLedger`] unless the ledger backs it. A check whose event has no
/// exit code from its CLI (Claude Code reports none for a result it does not mark as an
/// error) is backed by the ledger alone: the attested exit of the one process that ran the
/// command must be the cited exit. Other problems are left as they are.
pub fn check_against_ledger(
    findings: Vec<EvidenceFinding>,
    records: &[CommandRecord],
    ledger: &[LedgerEntry],
) -> Vec<EvidenceFinding> {
    findings
        .into_iter()
        .map(|mut finding| {
            let code = i32::try_from(finding.check.exit_code).unwrap_or(i32::MIN);
            match &finding.problem {
                None => {
                    if let LedgerMatch::NotMatched { reason, .. } =
                        ledger_match(&finding.check.command, code, ledger)
                    {
                        finding.problem = Some(EvidenceProblem::NotInLedger {
                            evidence_ref: finding.check.evidence_ref.clone(),
                            reason,
                        });
                        finding.matched = None;
                    }
                }
                Some(EvidenceProblem::UnknownExitCode { evidence_ref }) => {
                    let event = unknown_exit_event(evidence_ref, &finding.check.command, records);
                    let attested = attested_exit(&finding.check.command, ledger);
                    if let Some(event) = event
                        && attested.is_some_and(|exit| exit_as_code(exit) == code)
                    {
                        finding.problem = None;
                        finding.matched = Some(event);
                    }
                }
                Some(_) => {}
            }
            finding
        })
        .collect()
}

/// The one command event with no CLI exit code that `evidence_ref` names (or, for
/// `event:?`, the one such event of that command).
fn unknown_exit_event(
    evidence_ref: &str,
    command: &str,
    records: &[CommandRecord],
) -> Option<String> {
    let cited = normalize_command(command);
    let mut events = records.iter().filter(|record| {
        record.exit_code.is_none()
            && normalize_command(&record.command) == cited
            && (evidence_ref == UNNAMED_EVENT_REF || record.evidence_id == evidence_ref)
    });
    let one = events.next()?;
    events.next().is_none().then(|| one.evidence_id.clone())
}

/// Why a capture receipt is not backed by the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptMismatch {
    /// No attested exec of autocode's own binary ran `capture --output <this receipt> -- <its
    /// command>` and ended as the receipt says.
    #[error("the ledger shows no `autocode capture` that wrote this receipt")]
    NoCapture,
    /// The capture ran, but no attested exec of the receipt's command after it ended as the
    /// receipt says.
    #[error("the ledger shows no run of the receipt's command by its capture")]
    NoCommand,
}

/// The `--output` path and the command of an `autocode capture` argv.
fn capture_call(argv: &[String]) -> Option<(&str, &[String])> {
    let at = argv.iter().position(|arg| arg == "capture")?;
    let rest = argv.get(at + 1..)?;
    let dashes = rest.iter().position(|arg| arg == "--")?;
    let options = rest.get(..dashes)?;
    let output = options.iter().enumerate().find_map(|(index, arg)| {
        arg.strip_prefix("--output=").or_else(|| {
            (arg == "--output")
                .then(|| options.get(index + 1).map(String::as_str))
                .flatten()
        })
    })?;
    Some((output, rest.get(dashes + 1..)?))
}

/// Whether `output` (as the capture was given it, relative to its cwd) names the receipt the
/// report cites (relative to the work tree).
fn names_receipt(output: &str, evidence_ref: &str) -> bool {
    let clean = |path: &str| path.trim_start_matches("./").to_owned();
    let (output, cited) = (clean(output), clean(evidence_ref));
    output == cited || output.ends_with(&format!("/{cited}"))
}

/// Backs a capture receipt with the ledger: an attested exec of autocode itself (`is_autocode`
/// judges the entry's executable) ran `capture --output <receipt> -- <command>` and ended with
/// the receipt's exit, and after it an attested exec ran the receipt's command and ended so too.
/// A receipt a builder wrote itself with the capture context it was given has neither.
pub fn receipt_in_ledger(
    receipt: &super::evidence::CaptureReceipt,
    evidence_ref: &str,
    ledger: &[LedgerEntry],
    is_autocode: impl Fn(&str) -> bool,
) -> Result<u64, ReceiptMismatch> {
    let code = receipt.exit_code.ok_or(ReceiptMismatch::NoCapture)?;
    let capture = ledger
        .iter()
        .filter(|entry| entry.attestation == Attestation::Attested)
        .filter(|entry| entry.exe.as_deref().is_some_and(&is_autocode))
        .filter(|entry| same_end(entry.exit, code.clamp(0, 255)))
        .find(|entry| {
            capture_call(&entry.argv).is_some_and(|(output, command)| {
                names_receipt(output, evidence_ref) && command == receipt.command.as_slice()
            })
        })
        .ok_or(ReceiptMismatch::NoCapture)?;
    ledger
        .iter()
        .filter(|entry| entry.seq > capture.seq && entry.attestation == Attestation::Attested)
        .find(|entry| runs_directly(entry, &receipt.command) && same_end(entry.exit, code))
        .map(|entry| entry.seq)
        .ok_or(ReceiptMismatch::NoCommand)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, argv: &[&str], exit: Option<LedgerExit>, plausible: bool) -> LedgerEntry {
        LedgerEntry {
            seq,
            pid: 100 + seq as i32,
            filename: argv.first().copied().unwrap_or_default().to_owned(),
            argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
            argv_truncated: false,
            argv_cut: Vec::new(),
            cwd: "/w".into(),
            at_ms: seq,
            exec_plausible: plausible,
            exit,
            attestation: if plausible {
                Attestation::Attested
            } else {
                Attestation::ExecFailed
            },
            exe: None,
        }
    }

    const OK: Option<LedgerExit> = Some(LedgerExit::Code(0));

    #[test]
    fn the_measured_wrapper_shapes_match_their_commands() {
        let cmd = r#"grep -qx "hello, world" hello.txt"#;
        let claude = format!(
            "source /h/.claude/shell-snapshots/snapshot-bash-1-x.sh 2>/dev/null || true && \\builtin shopt -u extglob 2>/dev/null || true && eval '{cmd}' < /dev/null && pwd -P >| /tmp/claude-b050-cwd"
        );
        let table: [(&str, Vec<&str>); 4] = [
            ("codex", vec!["/bin/bash", "-c", cmd]),
            ("claude", vec!["/bin/bash", "-c", &claude]),
            ("opencode", vec!["/bin/bash", "-c", cmd]),
            ("codex cited form", vec!["/bin/bash", "-lc", cmd]),
        ];
        for (cli, argv) in table {
            let ledger = [entry(0, &argv, OK, true)];
            assert_eq!(
                ledger_match(cmd, 0, &ledger),
                LedgerMatch::Matched { seq: 0 },
                "{cli}"
            );
            // Codex cites `/bin/bash -lc '<cmd>'`: the same entry backs it.
            assert_eq!(
                ledger_match(&format!("/bin/bash -lc '{cmd}'"), 0, &ledger),
                LedgerMatch::Matched { seq: 0 },
                "{cli}"
            );
        }
    }

    #[test]
    fn claude_eval_unquotes_embedded_single_quotes() {
        let payload = r#"source s 2>/dev/null || true && eval 'echo '"'"'a b'"'"'' < /dev/null && pwd -P >| /tmp/c"#;
        assert_eq!(claude_eval(payload), vec!["echo 'a b'".to_owned()]);
        let ledger = [entry(3, &["/bin/bash", "-c", payload], OK, true)];
        assert_eq!(
            ledger_match("echo 'a b'", 0, &ledger),
            LedgerMatch::Matched { seq: 3 }
        );
    }

    #[test]
    fn a_forged_command_has_no_exec() {
        let ledger = [
            entry(0, &["/bin/bash", "-c", "ls"], OK, true),
            entry(1, &["ls"], OK, true),
        ];
        assert_eq!(
            ledger_match("cargo test", 0, &ledger),
            LedgerMatch::NotMatched {
                reason: LedgerMismatch::NoExec,
                seq: None,
                recorded: None
            }
        );
    }

    #[test]
    fn exit_status_must_agree_and_signals_read_as_128_plus_n() {
        let ledger = [
            entry(
                0,
                &["bash", "-c", "make test"],
                Some(LedgerExit::Code(2)),
                true,
            ),
            entry(
                1,
                &["bash", "-c", "sleep 9"],
                Some(LedgerExit::Signal(9)),
                true,
            ),
            entry(2, &["bash", "-c", "hang"], None, true),
        ];
        assert_eq!(
            ledger_match("make test", 0, &ledger),
            LedgerMatch::NotMatched {
                reason: LedgerMismatch::ExitDiffers,
                seq: Some(0),
                recorded: Some(LedgerExit::Code(2))
            }
        );
        assert_eq!(
            ledger_match("make test", 2, &ledger),
            LedgerMatch::Matched { seq: 0 }
        );
        assert_eq!(
            ledger_match("sleep 9", 137, &ledger),
            LedgerMatch::Matched { seq: 1 }
        );
        assert!(matches!(
            ledger_match("hang", 0, &ledger),
            LedgerMatch::NotMatched {
                reason: LedgerMismatch::ExitDiffers,
                ..
            }
        ));
    }

    #[test]
    fn an_implausible_exec_is_not_evidence() {
        let ledger = [entry(0, &["/nonexistent/bash", "-c", "true"], OK, false)];
        assert!(matches!(
            ledger_match("true", 0, &ledger),
            LedgerMatch::NotMatched {
                reason: LedgerMismatch::ExecImplausible,
                ..
            }
        ));
    }

    #[test]
    fn a_simple_command_run_without_a_shell_matches_its_argv() {
        let ledger = [entry(0, &["/usr/bin/cargo", "test", "-q"], OK, true)];
        assert_eq!(
            ledger_match("cargo test -q", 0, &ledger),
            LedgerMatch::Matched { seq: 0 }
        );
        assert!(matches!(
            ledger_match("cargo test", 0, &ledger),
            LedgerMatch::NotMatched { .. }
        ));
        assert!(matches!(
            ledger_match("cargo test -q | tee log", 0, &ledger),
            LedgerMatch::NotMatched { .. }
        ));
    }

    #[test]
    fn a_cut_argv_is_never_what_ran() {
        let mut shell = entry(0, &["/bin/bash", "-c", "cargo test"], OK, true);
        let mut direct = entry(1, &["/usr/bin/cargo", "test"], OK, true);
        shell.argv_truncated = true;
        direct.argv_truncated = true;
        let ledger = [shell, direct];
        assert!(matches!(
            ledger_match("cargo test", 0, &ledger),
            LedgerMatch::NotMatched {
                reason: LedgerMismatch::NoExec,
                ..
            }
        ));
    }

    #[test]
    fn non_shell_wrappers_never_count() {
        // codex-linux-sandbox carries the command in its argv but ends with its own status.
        let ledger = [entry(
            0,
            &["codex-linux-sandbox", "--", "/bin/bash", "-lc", "true"],
            OK,
            true,
        )];
        assert!(matches!(
            ledger_match("true", 0, &ledger),
            LedgerMatch::NotMatched {
                reason: LedgerMismatch::NoExec,
                ..
            }
        ));
    }

    #[test]
    fn a_receipt_counts_only_with_its_capture_and_its_command_in_the_ledger() {
        let receipt = super::super::evidence::CaptureReceipt {
            format_version: 1,
            command: vec!["python3".into(), "-m".into(), "unittest".into()],
            exit_code: Some(0),
            output: "OK".into(),
            output_sha256: String::new(),
            context: "ctx".into(),
        };
        let with_exe = |mut entry: LedgerEntry, exe: &str| {
            entry.exe = Some(exe.into());
            entry
        };
        let capture = |seq| {
            with_exe(
                entry(
                    seq,
                    &[
                        "autocode",
                        "capture",
                        "--output",
                        ".autocode/evidence/t.json",
                        "--",
                        "python3",
                        "-m",
                        "unittest",
                    ],
                    OK,
                    true,
                ),
                "/opt/autocode",
            )
        };
        let command = |seq| {
            with_exe(
                entry(seq, &["python3", "-m", "unittest"], OK, true),
                "/usr/bin/python3.11",
            )
        };
        let autocode = |exe: &str| exe == "/opt/autocode";
        let cited = ".autocode/evidence/t.json";
        assert_eq!(
            receipt_in_ledger(&receipt, cited, &[capture(0), command(1)], autocode),
            Ok(1)
        );
        // Written by hand (no capture), by another program posing as autocode, for another
        // receipt, or without its command run after it: not evidence.
        assert_eq!(
            receipt_in_ledger(&receipt, cited, &[command(1)], autocode),
            Err(ReceiptMismatch::NoCapture)
        );
        let posing = with_exe(capture(0), "/work/tree/autocode");
        assert_eq!(
            receipt_in_ledger(&receipt, cited, &[posing, command(1)], autocode),
            Err(ReceiptMismatch::NoCapture)
        );
        assert_eq!(
            receipt_in_ledger(
                &receipt,
                ".autocode/evidence/u.json",
                &[capture(0), command(1)],
                autocode
            ),
            Err(ReceiptMismatch::NoCapture)
        );
        assert_eq!(
            receipt_in_ledger(&receipt, cited, &[command(0), capture(1)], autocode),
            Err(ReceiptMismatch::NoCommand)
        );
        let mut failed = command(1);
        failed.exit = Some(LedgerExit::Code(1));
        assert_eq!(
            receipt_in_ledger(&receipt, cited, &[capture(0), failed], autocode),
            Err(ReceiptMismatch::NoCommand)
        );
    }
}
