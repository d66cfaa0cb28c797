//! The assessment of one probe step: pure rules over what the runner judged and what autocode
//! observed itself (the stream re-read from `stdout.log`, the receipt, the workspace).
//!
//! Invariant: a step passes only when no rule names a problem; every problem carries the
//! [`ProblemKind`] a fault variant is matched against, plus a human detail.

use serde::Serialize;
use serde_json::Value;

use super::fault::ProblemKind;
use super::script::ProbeIdentity;
use crate::events::{StopClass, Usage};
use crate::pause::PauseCode;

/// The probe's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeStep {
    /// The builder copies the nonce and runs the two probe commands.
    Build,
    /// A fresh tester session checks without writing.
    Check,
    /// The tester's session resumed for one more turn.
    Resume,
}

impl ProbeStep {
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeStep::Build => "build",
            ProbeStep::Check => "check",
            ProbeStep::Resume => "resume",
        }
    }
}

/// One named problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    pub step: ProbeStep,
    pub detail: String,
}

/// What the runner made of the attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Judged {
    Report(Value),
    Rejected {
        problems: Vec<String>,
        shell_command: bool,
    },
    Stopped {
        code: PauseCode,
        reason: String,
    },
}

/// What autocode read back from the attempt's stream (absent for report-file tools).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFacts {
    pub session_id: Option<String>,
    pub conflicting_session_id: Option<String>,
    pub stop: StopClass,
    pub provider_errors: usize,
    /// Answers the CLI itself refused against the schema (Claude Code's `StructuredOutput`).
    pub structured_output_rejections: usize,
    pub usage: Usage,
}

/// Everything the rules look at for one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepFacts {
    pub step: ProbeStep,
    pub judged: Judged,
    /// `problem` tags of the runner's evidence findings (`evidence.json`).
    pub evidence_problems: Vec<String>,
    pub stream: Option<StreamFacts>,
    /// `None` when the supervision receipt could not be read.
    pub receipt_verified: Option<bool>,
    /// Workspace paths changed by the step (build only; checkers are checked by the runner).
    pub changed_files: Vec<String>,
    pub head_moved: bool,
    /// `output.txt` after the step, trimmed.
    pub output_txt: Option<String>,
    /// The session the step must answer from (resume), and sessions it must not reuse (check).
    pub expected_session: Option<String>,
    pub foreign_sessions: Vec<String>,
    /// The session the runner recorded.
    pub session: Option<String>,
}

fn classify_stop(stop: Option<StopClass>, code: PauseCode, reason: &str) -> ProblemKind {
    match stop {
        Some(StopClass::Authentication) => ProblemKind::Authentication,
        Some(StopClass::RateLimit) => ProblemKind::RateLimited,
        Some(
            StopClass::OutputCap
            | StopClass::CutStream
            | StopClass::EndedWithoutAnswer
            | StopClass::StructuredOutputExhausted,
        ) => ProblemKind::IncompleteTurn,
        _ => match code {
            PauseCode::PausedProcessCleanup => ProblemKind::ReceiptUnverified,
            PauseCode::PausedDiscoveryWrite => ProblemKind::UnexpectedWrite,
            _ if reason.contains("answered from session") => ProblemKind::SessionChanged,
            _ => ProblemKind::ProcessFailure,
        },
    }
}

fn evidence_kind(tag: &str) -> ProblemKind {
    match tag {
        "exit_code_mismatch" => ProblemKind::EvidenceExitCode,
        "ambiguous" => ProblemKind::EvidenceAmbiguous,
        _ => ProblemKind::EvidenceForged,
    }
}

/// `conformance probe ID nonce N` read back from a report's summary.
pub fn read_identity(summary: &str) -> Option<ProbeIdentity> {
    let words: Vec<&str> = summary.split_whitespace().collect();
    let after = |key: &str| {
        words
            .windows(2)
            .find(|w| w.first() == Some(&key))
            .and_then(|w| w.get(1))
            .map(|s| s.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-'))
    };
    Some(ProbeIdentity {
        probe_id: after("probe")?.to_owned(),
        nonce: after("nonce")?.to_owned(),
    })
}

/// Every problem of one step.
pub fn assess_step(facts: &StepFacts, identity: &ProbeIdentity) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut add = |kind: ProblemKind, detail: String| {
        out.push(Problem {
            kind,
            step: facts.step,
            detail,
        })
    };
    if facts.receipt_verified != Some(true) {
        add(
            ProblemKind::ReceiptUnverified,
            "the supervision receipt is missing or not verified".into(),
        );
    }
    let stop = facts.stream.as_ref().map(|s| s.stop);
    match &facts.judged {
        Judged::Stopped { code, reason } => {
            add(
                classify_stop(stop, *code, reason),
                format!("{code}: {reason}"),
            );
        }
        Judged::Rejected {
            problems,
            shell_command,
        } => {
            let detail = problems.join("; ");
            if *shell_command {
                add(ProblemKind::ShellCommandFinalMessage, detail);
            } else if !facts.evidence_problems.is_empty() {
                let mut kinds: Vec<ProblemKind> = facts
                    .evidence_problems
                    .iter()
                    .map(|t| evidence_kind(t))
                    .collect();
                kinds.sort();
                kinds.dedup();
                for kind in kinds {
                    add(kind, detail.clone());
                }
            } else if problems
                .iter()
                .any(|p| p.contains("without a final report"))
            {
                let refused = facts
                    .stream
                    .as_ref()
                    .is_some_and(|s| s.structured_output_rejections > 0);
                if refused {
                    add(
                        ProblemKind::ReportSchema,
                        format!("{detail} (the CLI refused the report against the schema)"),
                    );
                } else {
                    add(ProblemKind::NoFinalReport, detail);
                }
            } else if problems.iter().any(|p| p.contains("not a JSON report")) {
                add(ProblemKind::ReportNotJson, detail);
            } else {
                add(ProblemKind::ReportSchema, detail);
            }
        }
        Judged::Report(report) => {
            let summary = report["summary"].as_str().unwrap_or_default();
            match read_identity(summary) {
                None => add(
                    ProblemKind::IdentityMismatch,
                    format!("the report's summary carries no probe identity: {summary:?}"),
                ),
                Some(got) => {
                    if got.probe_id != identity.probe_id {
                        add(
                            ProblemKind::IdentityMismatch,
                            format!(
                                "the report is probe {}'s, not {}'s (stale)",
                                got.probe_id, identity.probe_id
                            ),
                        );
                    } else if got.nonce != identity.nonce {
                        add(
                            ProblemKind::NonceMismatch,
                            format!(
                                "the report carries nonce {}, not {}",
                                got.nonce, identity.nonce
                            ),
                        );
                    }
                }
            }
            if facts.step == ProbeStep::Build {
                let exits: Vec<i64> = report["checks"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["exit_code"].as_i64())
                    .collect();
                if !exits.contains(&0) || !exits.contains(&super::script::FAIL_EXIT) {
                    add(
                        ProblemKind::EvidenceForged,
                        format!(
                            "the build report must cite a probe exiting 0 and one exiting 7; it cites exits {exits:?}"
                        ),
                    );
                }
            }
        }
    }
    if facts.step == ProbeStep::Build {
        if facts.output_txt.as_deref() != Some(identity.nonce.as_str())
            && !matches!(facts.judged, Judged::Stopped { .. })
        {
            add(
                ProblemKind::NonceMismatch,
                format!(
                    "output.txt holds {:?}, not the nonce {}",
                    facts.output_txt, identity.nonce
                ),
            );
        }
        let unexpected: Vec<&String> = facts
            .changed_files
            .iter()
            .filter(|p| p.as_str() != "output.txt")
            .collect();
        if !unexpected.is_empty() {
            add(
                ProblemKind::UnexpectedWrite,
                format!("the builder changed more than output.txt: {unexpected:?}"),
            );
        }
    }
    if facts.head_moved {
        add(
            ProblemKind::HeadChanged,
            "the workspace's HEAD moved".into(),
        );
    }
    let answered = matches!(facts.judged, Judged::Report(_) | Judged::Rejected { .. });
    if let (Some(stream), true) = (&facts.stream, answered) {
        if stream.session_id.is_none() || stream.conflicting_session_id.is_some() {
            add(
                ProblemKind::SessionCount,
                format!(
                    "the stream must carry exactly one session (first {:?}, conflicting {:?})",
                    stream.session_id, stream.conflicting_session_id
                ),
            );
        }
        if stream.stop != StopClass::Completed {
            add(
                ProblemKind::IncompleteTurn,
                format!("the turn ended {}", stream.stop),
            );
        } else if stream.provider_errors > 0 {
            add(
                ProblemKind::ProviderError,
                format!(
                    "{} provider error(s) in a completed turn",
                    stream.provider_errors
                ),
            );
        }
        let u = &stream.usage;
        match (u.input_tokens, u.output_tokens) {
            (Some(input), Some(_)) => {
                // The normalized input excludes cache reads; the raw input includes them.
                let cached = u.cache_read_tokens.unwrap_or(0);
                if cached > input.saturating_add(cached) || u.cost_usd.is_some_and(|c| c < 0.0) {
                    add(
                        ProblemKind::UsageInconsistent,
                        format!("cached {cached} is above the input"),
                    );
                }
            }
            _ => add(
                ProblemKind::UsageMissing,
                "the stream reported no input/output token usage".into(),
            ),
        }
    }
    if answered {
        if let Some(expected) = &facts.expected_session
            && facts.session.as_ref() != Some(expected)
        {
            add(
                ProblemKind::SessionChanged,
                format!(
                    "the resumed turn answered from session {:?}, not {expected}",
                    facts.session
                ),
            );
        }
        if let Some(session) = &facts.session
            && facts.foreign_sessions.contains(session)
        {
            add(
                ProblemKind::SessionChanged,
                format!("the fresh session reused session {session}"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn identity() -> ProbeIdentity {
        ProbeIdentity {
            probe_id: "probe-1".into(),
            nonce: "abc".into(),
        }
    }

    fn clean_build() -> StepFacts {
        StepFacts {
            step: ProbeStep::Build,
            judged: Judged::Report(json!({
                "summary": identity().summary_line(),
                "checks": [{"exit_code": 0}, {"exit_code": 7}]
            })),
            evidence_problems: vec![],
            stream: Some(StreamFacts {
                session_id: Some("s1".into()),
                conflicting_session_id: None,
                stop: StopClass::Completed,
                provider_errors: 0,
                structured_output_rejections: 0,
                usage: Usage {
                    input_tokens: Some(10),
                    cache_read_tokens: Some(5),
                    output_tokens: Some(3),
                    ..Usage::default()
                },
            }),
            receipt_verified: Some(true),
            changed_files: vec!["output.txt".into()],
            head_moved: false,
            output_txt: Some("abc".into()),
            expected_session: None,
            foreign_sessions: vec![],
            session: Some("s1".into()),
        }
    }

    fn kinds(facts: &StepFacts) -> Vec<ProblemKind> {
        assess_step(facts, &identity())
            .into_iter()
            .map(|p| p.kind)
            .collect()
    }

    #[test]
    fn a_clean_build_passes() {
        assert_eq!(kinds(&clean_build()), vec![]);
    }

    #[test]
    fn identity_nonce_writes_head_and_usage_are_named() {
        let mut f = clean_build();
        f.judged = Judged::Report(json!({"summary": "conformance probe probe-0 nonce abc",
            "checks": [{"exit_code": 0}, {"exit_code": 7}]}));
        assert_eq!(kinds(&f), vec![ProblemKind::IdentityMismatch]);
        let mut f = clean_build();
        f.output_txt = Some("zzz".into());
        assert_eq!(kinds(&f), vec![ProblemKind::NonceMismatch]);
        let mut f = clean_build();
        f.changed_files.push("stray.txt".into());
        f.head_moved = true;
        assert_eq!(
            kinds(&f),
            vec![ProblemKind::UnexpectedWrite, ProblemKind::HeadChanged]
        );
        let mut f = clean_build();
        if let Some(s) = f.stream.as_mut() {
            s.usage = Usage::default();
            s.conflicting_session_id = Some("s2".into());
        }
        assert_eq!(
            kinds(&f),
            vec![ProblemKind::SessionCount, ProblemKind::UsageMissing]
        );
    }

    #[test]
    fn runner_verdicts_map_to_problems() {
        let mut f = clean_build();
        f.judged = Judged::Rejected {
            problems: vec!["check `x`: event:? exited 7, not the cited 0".into()],
            shell_command: false,
        };
        f.evidence_problems = vec!["exit_code_mismatch".into()];
        assert_eq!(kinds(&f), vec![ProblemKind::EvidenceExitCode]);
        f.evidence_problems = vec!["unknown_event".into()];
        assert_eq!(kinds(&f), vec![ProblemKind::EvidenceForged]);
        f.evidence_problems.clear();
        f.judged = Judged::Rejected {
            problems: vec!["the final message is not a JSON report: eof".into()],
            shell_command: false,
        };
        assert_eq!(kinds(&f), vec![ProblemKind::ReportNotJson]);
        f.judged = Judged::Rejected {
            problems: vec!["x".into()],
            shell_command: true,
        };
        assert_eq!(kinds(&f), vec![ProblemKind::ShellCommandFinalMessage]);
        f.judged = Judged::Stopped {
            code: PauseCode::PausedProviderUncertain,
            reason: "codex stopped".into(),
        };
        if let Some(s) = f.stream.as_mut() {
            s.stop = StopClass::Authentication;
        }
        f.output_txt = None;
        assert_eq!(kinds(&f), vec![ProblemKind::Authentication]);
    }

    #[test]
    fn sessions_must_be_kept_on_resume_and_fresh_otherwise() {
        let mut f = clean_build();
        f.step = ProbeStep::Resume;
        f.expected_session = Some("s0".into());
        assert_eq!(kinds(&f), vec![ProblemKind::SessionChanged]);
        f.expected_session = None;
        f.foreign_sessions = vec!["s1".into()];
        assert_eq!(kinds(&f), vec![ProblemKind::SessionChanged]);
    }

    #[test]
    fn identity_is_read_back_from_prose() {
        let got = read_identity("done: conformance probe probe-9 nonce 00ff.").unwrap();
        assert_eq!(got.probe_id, "probe-9");
        assert_eq!(got.nonce, "00ff");
        assert!(read_identity("nothing here").is_none());
    }
}
