//! Evidence: every command a report cites must be a command that really ran in this attempt.
//!
//! For event transports a cited check `{command, exit_code, evidence_ref}` names `event:<id>`, and
//! must match exactly one command event of the attempt's own stream with the same command and the
//! same exit code; an event whose exit code is unknown is never evidence. For report-file tools the
//! reference is a capture receipt written by `autocode capture`, bound to the attempt by a nonce
//! and to its output by a sha256. Nothing here trusts the report's own words.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A command event taken from the attempt's own normalized stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandRecord {
    /// `event:<provider id>`.
    pub evidence_id: String,
    pub command: String,
    pub exit_code: Option<i32>,
}

impl CommandRecord {
    /// The record of a finished command event of the attempt's own stream (`None` for any other
    /// event); its exit code only where the event is command evidence.
    pub fn from_event(event: &crate::events::NormalizedEvent) -> Option<Self> {
        match event {
            crate::events::NormalizedEvent::CommandFinished {
                evidence_id,
                command,
                ..
            } => Some(Self {
                evidence_id: evidence_id.to_string(),
                command: command.clone(),
                exit_code: event.command_evidence().map(|(_, code)| code),
            }),
            _ => None,
        }
    }
}

/// A check as a report cites it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CitedCheck {
    pub command: String,
    pub exit_code: i64,
    pub evidence_ref: String,
}

/// The receipt `autocode capture` writes for report-file tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureReceipt {
    pub format_version: u32,
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub output: String,
    pub output_sha256: String,
    /// The value of `AUTOCODE_CAPTURE_CONTEXT` the capture ran under.
    pub context: String,
}

pub const CAPTURE_RECEIPT_FORMAT: u32 = 1;

/// What is wrong with one cited check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum EvidenceProblem {
    #[error("{evidence_ref} is not an event of this attempt")]
    UnknownEvent { evidence_ref: String },
    #[error("{evidence_ref} names {count} command events; evidence must name exactly one")]
    Ambiguous { evidence_ref: String, count: usize },
    #[error("{evidence_ref} ran {recorded:?}, not the cited {cited:?}")]
    CommandMismatch {
        evidence_ref: String,
        cited: String,
        recorded: String,
    },
    #[error("{evidence_ref} exited {recorded}, not the cited {cited}")]
    ExitCodeMismatch {
        evidence_ref: String,
        cited: i64,
        recorded: i32,
    },
    #[error(
        "{evidence_ref} has no known exit code (backgrounded, interrupted or denied) and is never evidence"
    )]
    UnknownExitCode { evidence_ref: String },
    #[error("{evidence_ref:?} is not an event reference (expected event:<id>)")]
    NotAnEventRef { evidence_ref: String },
    #[error("capture receipt {evidence_ref}: {reason}")]
    BadReceipt {
        evidence_ref: String,
        reason: String,
    },
    /// The command event exists, but the kernel-attested exec ledger does not back it.
    #[error("{evidence_ref}: {reason}")]
    NotInLedger {
        evidence_ref: String,
        reason: super::ledger::LedgerMismatch,
    },
}

/// The finding for one cited check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceFinding {
    pub check: CitedCheck,
    /// `None` when the check is backed by exactly one matching command.
    pub problem: Option<EvidenceProblem>,
    /// The command event (`event:<id>`) or receipt the check was matched to, when it was: for
    /// `event:?` this is the one event autocode found, which the report could not name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<String>,
}

/// Collapses runs of whitespace and unwraps one level of `bash -lc '…'` / `sh -c "…"`, the form
/// in which Codex reports the commands its model asked for. The wrapped argument is read with
/// POSIX shell quoting (single quotes, double quotes with their escapes, backslashes, adjacent
/// segments), because Codex re-quotes commands that contain quotes or `!`.
pub fn normalize_command(command: &str) -> String {
    let collapse = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = command.trim_start();
    for shell in [
        "/bin/bash",
        "/usr/bin/bash",
        "bash",
        "/bin/sh",
        "/usr/bin/sh",
        "sh",
        "/bin/zsh",
        "/usr/bin/zsh",
        "zsh",
    ] {
        let Some(rest) = trimmed.strip_prefix(shell) else {
            continue;
        };
        let rest = rest.trim_start();
        for flag in ["-lc", "-c"] {
            if let Some(arg) = rest.strip_prefix(flag)
                && arg.starts_with(char::is_whitespace)
                && let Some(inner) = shell_word(arg.trim())
            {
                return collapse(&inner);
            }
        }
    }
    collapse(command)
}

/// The value of `text` read as exactly one shell word; `None` when it is more than one word
/// or its quotes do not close.
fn shell_word(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    ch => out.push(ch),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => {
                        let next = chars.next()?;
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
            '\\' => match chars.next()? {
                '\n' => {}
                ch => out.push(ch),
            },
            ch if ch.is_whitespace() => return None,
            ch => out.push(ch),
        }
    }
    Some(out)
}

/// Checks cited checks against the attempt's command events.
pub fn check_event_evidence(
    checks: &[CitedCheck],
    records: &[CommandRecord],
) -> Vec<EvidenceFinding> {
    checks
        .iter()
        .map(|check| {
            let problem = event_problem(check, records);
            let matched = problem
                .is_none()
                .then(|| matched_event(check, records))
                .flatten();
            EvidenceFinding {
                check: check.clone(),
                problem,
                matched,
            }
        })
        .collect()
}

/// The id of the one command event a check without problems stands on.
fn matched_event(check: &CitedCheck, records: &[CommandRecord]) -> Option<String> {
    let evidence_ref = check.evidence_ref.trim();
    if evidence_ref != UNNAMED_EVENT_REF {
        return Some(evidence_ref.to_owned());
    }
    let cited = normalize_command(&check.command);
    records
        .iter()
        .find(|r| {
            normalize_command(&r.command) == cited
                && r.exit_code.map(i64::from) == Some(check.exit_code)
        })
        .map(|r| r.evidence_id.clone())
}

fn event_problem(check: &CitedCheck, records: &[CommandRecord]) -> Option<EvidenceProblem> {
    let evidence_ref = check.evidence_ref.trim().to_owned();
    if evidence_ref == UNNAMED_EVENT_REF {
        return unnamed_event_problem(check, records);
    }
    if !evidence_ref.starts_with("event:") || evidence_ref.len() <= "event:".len() {
        return Some(EvidenceProblem::NotAnEventRef { evidence_ref });
    }
    let named: Vec<&CommandRecord> = records
        .iter()
        .filter(|r| r.evidence_id == evidence_ref)
        .collect();
    let record = match named.as_slice() {
        [] => return Some(EvidenceProblem::UnknownEvent { evidence_ref }),
        [one] => *one,
        many => {
            return Some(EvidenceProblem::Ambiguous {
                evidence_ref,
                count: many.len(),
            });
        }
    };
    if normalize_command(&record.command) != normalize_command(&check.command) {
        return Some(EvidenceProblem::CommandMismatch {
            evidence_ref,
            cited: check.command.clone(),
            recorded: record.command.clone(),
        });
    }
    match record.exit_code {
        None => Some(EvidenceProblem::UnknownExitCode { evidence_ref }),
        Some(code) if i64::from(code) != check.exit_code => {
            Some(EvidenceProblem::ExitCodeMismatch {
                evidence_ref,
                cited: check.exit_code,
                recorded: code,
            })
        }
        Some(_) => None,
    }
}

/// The reference a model uses when its CLI does not show it the id of its own command events
/// (Codex numbers items client-side). It resolves only when exactly one command event of the
/// attempt ran the same command with the same, known exit code; anything else is rejected.
pub const UNNAMED_EVENT_REF: &str = "event:?";

fn unnamed_event_problem(check: &CitedCheck, records: &[CommandRecord]) -> Option<EvidenceProblem> {
    let evidence_ref = UNNAMED_EVENT_REF.to_owned();
    let cited = normalize_command(&check.command);
    let same_command: Vec<&CommandRecord> = records
        .iter()
        .filter(|r| normalize_command(&r.command) == cited)
        .collect();
    let matching: Vec<&&CommandRecord> = same_command
        .iter()
        .filter(|r| r.exit_code.map(i64::from) == Some(check.exit_code))
        .collect();
    match (matching.len(), same_command.as_slice()) {
        (1, _) => None,
        (0, []) => Some(EvidenceProblem::UnknownEvent { evidence_ref }),
        (0, [one]) => Some(match one.exit_code {
            None => EvidenceProblem::UnknownExitCode { evidence_ref },
            Some(recorded) => EvidenceProblem::ExitCodeMismatch {
                evidence_ref,
                cited: check.exit_code,
                recorded,
            },
        }),
        (0, _) => Some(EvidenceProblem::UnknownEvent { evidence_ref }),
        (count, _) => Some(EvidenceProblem::Ambiguous {
            evidence_ref,
            count,
        }),
    }
}

/// How a finding (as saved in a stage's `evidence.json`) reads for a person: the event or
/// receipt it matched (`verified event:item_3`), or why it was rejected. Never the bare
/// `event:?` the report cited.
pub fn describe_match(finding: &serde_json::Value) -> String {
    let cited = finding["check"]["evidence_ref"]
        .as_str()
        .unwrap_or_default();
    match (finding["matched"].as_str(), finding["problem"].is_null()) {
        (Some(matched), true) => format!("verified {matched}"),
        (None, true) => format!("verified {cited}"),
        (_, false) => format!(
            "REJECTED ({})",
            serde_json::from_value::<EvidenceProblem>(finding["problem"].clone())
                .map(|p| p.to_string())
                .unwrap_or_else(|_| cited.to_owned())
        ),
    }
}

/// sha256 hex of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks one cited check against the bytes of the capture receipt it names.
pub fn check_receipt_evidence(
    check: &CitedCheck,
    receipt_bytes: Option<&[u8]>,
    attempt_context: &str,
) -> EvidenceFinding {
    let problem = receipt_problem(check, receipt_bytes, attempt_context).map(|reason| {
        EvidenceProblem::BadReceipt {
            evidence_ref: check.evidence_ref.clone(),
            reason,
        }
    });
    let matched = problem.is_none().then(|| check.evidence_ref.clone());
    EvidenceFinding {
        check: check.clone(),
        problem,
        matched,
    }
}

fn receipt_problem(
    check: &CitedCheck,
    receipt_bytes: Option<&[u8]>,
    attempt_context: &str,
) -> Option<String> {
    let Some(bytes) = receipt_bytes else {
        return Some("no such receipt file".into());
    };
    let receipt: CaptureReceipt = match serde_json::from_slice(bytes) {
        Ok(receipt) => receipt,
        Err(e) => return Some(format!("not a capture receipt: {e}")),
    };
    if receipt.format_version != CAPTURE_RECEIPT_FORMAT {
        return Some(format!(
            "receipt format {} is not {CAPTURE_RECEIPT_FORMAT}",
            receipt.format_version
        ));
    }
    if receipt.context != attempt_context {
        return Some("the receipt was captured for another attempt".into());
    }
    if sha256_hex(receipt.output.as_bytes()) != receipt.output_sha256 {
        return Some("the receipt's output does not match its sha256 (edited)".into());
    }
    let recorded = receipt.command.join(" ");
    if normalize_command(&recorded) != normalize_command(&check.command) {
        return Some(format!(
            "the receipt ran {recorded:?}, not the cited {:?}",
            check.command
        ));
    }
    match receipt.exit_code {
        None => Some("the captured command has no exit code (killed by a signal)".into()),
        Some(code) if i64::from(code) != check.exit_code => Some(format!(
            "the captured command exited {code}, not the cited {}",
            check.exit_code
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, command: &str, exit: Option<i32>) -> CommandRecord {
        CommandRecord {
            evidence_id: format!("event:{id}"),
            command: command.into(),
            exit_code: exit,
        }
    }

    fn cite(command: &str, exit: i64, evidence_ref: &str) -> CitedCheck {
        CitedCheck {
            command: command.into(),
            exit_code: exit,
            evidence_ref: evidence_ref.into(),
        }
    }

    #[test]
    fn an_accepted_check_names_the_event_it_matched() {
        let records = [
            record("item_1", "cargo build", Some(0)),
            record("item_2", "cargo test", Some(0)),
        ];
        let findings = check_event_evidence(
            &[
                cite("cargo test", 0, UNNAMED_EVENT_REF),
                cite("cargo build", 0, "event:item_1"),
                cite("cargo test", 1, UNNAMED_EVENT_REF),
            ],
            &records,
        );
        let matched: Vec<Option<&str>> = findings.iter().map(|f| f.matched.as_deref()).collect();
        assert_eq!(matched, [Some("event:item_2"), Some("event:item_1"), None]);
    }

    fn problem(check: CitedCheck, records: &[CommandRecord]) -> Option<EvidenceProblem> {
        check_event_evidence(&[check], records).remove(0).problem
    }

    #[test]
    fn normalizes_codex_shell_wrappers() {
        let cases = [
            (
                "/bin/bash -lc 'echo hello > out.txt && cat out.txt'",
                "echo hello > out.txt && cat out.txt",
            ),
            (
                "/bin/bash -lc 'ls /nonexistent; exit 3'",
                "ls /nonexistent; exit 3",
            ),
            ("bash -c \"pytest -q\"", "pytest -q"),
            ("  cargo   test ", "cargo test"),
            ("/bin/bash -lc 'echo '\\''x'\\'''", "echo 'x'"),
            ("python3 -c 'print(1)'", "python3 -c 'print(1)'"),
            // Codex 0.169's own rendering of `grep -qx 'HELLO, ADA!' hello.txt; echo "it's $((1+1))"`.
            (
                r#"/bin/bash -lc "grep -qx 'HELLO, ADA"'!'"' hello.txt; echo \"it's "'$((1+1))"'"#,
                r#"grep -qx 'HELLO, ADA!' hello.txt; echo "it's $((1+1))""#,
            ),
            ("bash -lc 'a' 'b'", "bash -lc 'a' 'b'"),
            ("sh -c 'unclosed", "sh -c 'unclosed"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize_command(input), want, "{input}");
        }
    }

    #[test]
    fn event_evidence_table() {
        let records = vec![
            record("item_2", "/bin/bash -lc 'pytest -q'", Some(0)),
            record("item_4", "/bin/bash -lc 'ls /nope; exit 3'", Some(3)),
            record("toolu_9", "sleep 100 &", None),
            record("dup", "true", Some(0)),
            record("dup", "true", Some(0)),
        ];
        assert_eq!(
            problem(cite("pytest -q", 0, "event:item_2"), &records),
            None
        );
        assert_eq!(
            problem(cite("ls /nope; exit 3", 3, "event:item_4"), &records),
            None
        );
        assert!(matches!(
            problem(cite("ls /nope; exit 3", 0, "event:item_4"), &records),
            Some(EvidenceProblem::ExitCodeMismatch { recorded: 3, .. })
        ));
        assert!(matches!(
            problem(cite("pytest -q", 0, "event:item_99"), &records),
            Some(EvidenceProblem::UnknownEvent { .. })
        ));
        assert!(matches!(
            problem(cite("cargo test", 0, "event:item_2"), &records),
            Some(EvidenceProblem::CommandMismatch { .. })
        ));
        assert!(matches!(
            problem(cite("sleep 100 &", 0, "event:toolu_9"), &records),
            Some(EvidenceProblem::UnknownExitCode { .. })
        ));
        assert!(matches!(
            problem(cite("true", 0, "event:dup"), &records),
            Some(EvidenceProblem::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(
            problem(cite("pytest -q", 0, "item_2"), &records),
            Some(EvidenceProblem::NotAnEventRef { .. })
        ));
        assert!(matches!(
            problem(cite("pytest -q", 0, "event:"), &records),
            Some(EvidenceProblem::NotAnEventRef { .. })
        ));
    }

    #[test]
    fn unnamed_references_resolve_only_to_one_exact_command() {
        let records = vec![
            record("item_2", "/bin/bash -lc 'pytest -q'", Some(0)),
            record("item_4", "/bin/bash -lc 'ls /nope; exit 3'", Some(3)),
            record("item_6", "/bin/bash -lc 'make'", Some(0)),
            record("item_8", "/bin/bash -lc 'make'", Some(0)),
            record("item_9", "sleep 5 &", None),
        ];
        assert_eq!(problem(cite("pytest -q", 0, "event:?"), &records), None);
        assert!(matches!(
            problem(cite("ls /nope; exit 3", 0, "event:?"), &records),
            Some(EvidenceProblem::ExitCodeMismatch { recorded: 3, .. })
        ));
        assert!(matches!(
            problem(cite("cargo test", 0, "event:?"), &records),
            Some(EvidenceProblem::UnknownEvent { .. })
        ));
        assert!(matches!(
            problem(cite("make", 0, "event:?"), &records),
            Some(EvidenceProblem::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(
            problem(cite("sleep 5 &", 0, "event:?"), &records),
            Some(EvidenceProblem::UnknownExitCode { .. })
        ));
    }

    fn receipt(context: &str, output: &str, exit: Option<i32>) -> Vec<u8> {
        serde_json::to_vec(&CaptureReceipt {
            format_version: CAPTURE_RECEIPT_FORMAT,
            command: vec!["pytest".into(), "-q".into()],
            exit_code: exit,
            output: output.into(),
            output_sha256: sha256_hex(output.as_bytes()),
            context: context.into(),
        })
        .unwrap()
    }

    #[test]
    fn receipt_evidence_table() {
        let check = cite("pytest -q", 0, ".autocode/evidence/t.json");
        let ok = receipt("nonce-1", "1 passed", Some(0));
        assert_eq!(
            check_receipt_evidence(&check, Some(&ok), "nonce-1").problem,
            None
        );
        assert!(
            check_receipt_evidence(&check, Some(&ok), "nonce-2")
                .problem
                .is_some()
        );
        assert!(
            check_receipt_evidence(&check, None, "nonce-1")
                .problem
                .is_some()
        );
        let failing = receipt("nonce-1", "1 failed", Some(1));
        assert!(
            check_receipt_evidence(&check, Some(&failing), "nonce-1")
                .problem
                .is_some()
        );
        let mut edited: CaptureReceipt = serde_json::from_slice(&ok).unwrap();
        edited.output = "all good".into();
        let edited = serde_json::to_vec(&edited).unwrap();
        let finding = check_receipt_evidence(&check, Some(&edited), "nonce-1");
        assert!(finding.problem.unwrap().to_string().contains("sha256"));
        assert!(
            check_receipt_evidence(&check, Some(b"not json"), "nonce-1")
                .problem
                .is_some()
        );
    }
}
