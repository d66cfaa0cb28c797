//! The probe's fault variants and the problems the assessment names.
//!
//! Invariant: every [`Fault`] but the two marked as perturbations is realised purely by the
//! scripted model's script (see `script.rs`); a variant passes only when the assessment names one
//! of its [`Fault::expected`] problems (429-then-success must pass the probe instead).

use serde::{Deserialize, Serialize};

/// One problem the assessment can name. The snake_case strings are API (JSON output, matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The final message is not a JSON object (cut off, prose).
    ReportNotJson,
    /// The turn ended without any final report (Claude Code refused every answer that was not
    /// a schema-valid `StructuredOutput` call).
    NoFinalReport,
    /// The report is JSON but fails the stage schema.
    ReportSchema,
    /// The final message is a shell command instead of the report.
    ShellCommandFinalMessage,
    /// A cited check names no command event of this attempt (or the wrong command).
    EvidenceForged,
    /// A cited check's exit code differs from the command event's.
    EvidenceExitCode,
    /// A cited check matches several command events.
    EvidenceAmbiguous,
    /// The report carries another probe's identity.
    IdentityMismatch,
    /// The report or `output.txt` carries another nonce.
    NonceMismatch,
    /// A file other than `output.txt` changed, or a checker wrote.
    UnexpectedWrite,
    /// The workspace's HEAD moved.
    HeadChanged,
    /// The stream holds no session id or more than one.
    SessionCount,
    /// A resumed turn answered from another session (or a fresh stage reused one).
    SessionChanged,
    /// The turn did not complete (output cap, cut stream, no answer).
    IncompleteTurn,
    /// The stream carries a provider error although the turn completed.
    ProviderError,
    /// Token usage is absent.
    UsageMissing,
    /// Token usage is inconsistent (cached above input).
    UsageInconsistent,
    /// The supervision receipt is not verified.
    ReceiptUnverified,
    /// The CLI failed (exit status, server errors after its retries, start failure).
    ProcessFailure,
    /// The provider refused the credential (401/403).
    Authentication,
    /// The provider rate-limited the turn and the CLI gave up.
    RateLimited,
}

impl ProblemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::ReportNotJson => "report_not_json",
            ProblemKind::NoFinalReport => "no_final_report",
            ProblemKind::ReportSchema => "report_schema",
            ProblemKind::ShellCommandFinalMessage => "shell_command_final_message",
            ProblemKind::EvidenceForged => "evidence_forged",
            ProblemKind::EvidenceExitCode => "evidence_exit_code",
            ProblemKind::EvidenceAmbiguous => "evidence_ambiguous",
            ProblemKind::IdentityMismatch => "identity_mismatch",
            ProblemKind::NonceMismatch => "nonce_mismatch",
            ProblemKind::UnexpectedWrite => "unexpected_write",
            ProblemKind::HeadChanged => "head_changed",
            ProblemKind::SessionCount => "session_count",
            ProblemKind::SessionChanged => "session_changed",
            ProblemKind::IncompleteTurn => "incomplete_turn",
            ProblemKind::ProviderError => "provider_error",
            ProblemKind::UsageMissing => "usage_missing",
            ProblemKind::UsageInconsistent => "usage_inconsistent",
            ProblemKind::ReceiptUnverified => "receipt_unverified",
            ProblemKind::ProcessFailure => "process_failure",
            ProblemKind::Authentication => "authentication",
            ProblemKind::RateLimited => "rate_limited",
        }
    }
}

impl std::fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fault variant of the probe. `None` of these is the clean probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    ForgedEvidence,
    MalformedReport,
    WrongExitCode,
    UnexpectedWrite,
    IncompleteTurn,
    WrongSessionOnResume,
    MissingUsage,
    WrongNonce,
    StaleReport,
    ProcessFailure,
    ShellCommandFinalMessage,
    TruncatedOutput,
    RateLimitThenSuccess,
    Unauthorized,
}

impl Fault {
    pub const ALL: [Fault; 14] = [
        Fault::ForgedEvidence,
        Fault::MalformedReport,
        Fault::WrongExitCode,
        Fault::UnexpectedWrite,
        Fault::IncompleteTurn,
        Fault::WrongSessionOnResume,
        Fault::MissingUsage,
        Fault::WrongNonce,
        Fault::StaleReport,
        Fault::ProcessFailure,
        Fault::ShellCommandFinalMessage,
        Fault::TruncatedOutput,
        Fault::RateLimitThenSuccess,
        Fault::Unauthorized,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::ForgedEvidence => "forged_evidence",
            Fault::MalformedReport => "malformed_report",
            Fault::WrongExitCode => "wrong_exit_code",
            Fault::UnexpectedWrite => "unexpected_write",
            Fault::IncompleteTurn => "incomplete_turn",
            Fault::WrongSessionOnResume => "wrong_session_on_resume",
            Fault::MissingUsage => "missing_usage",
            Fault::WrongNonce => "wrong_nonce",
            Fault::StaleReport => "stale_report",
            Fault::ProcessFailure => "process_failure",
            Fault::ShellCommandFinalMessage => "shell_command_final_message",
            Fault::TruncatedOutput => "truncated_output",
            Fault::RateLimitThenSuccess => "rate_limit_then_success",
            Fault::Unauthorized => "unauthorized",
        }
    }

    pub fn parse(text: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.as_str() == text)
    }

    /// Whether the probe must still pass under this fault (the CLI is expected to recover).
    pub fn must_pass(self) -> bool {
        self == Fault::RateLimitThenSuccess
    }

    /// Faults the model server cannot produce: the harness perturbs what it observes instead
    /// (documented in `docs/providers.md`).
    pub fn is_perturbation(self) -> bool {
        matches!(self, Fault::WrongSessionOnResume | Fault::MissingUsage)
    }

    /// The problems that count as catching this fault. Several are listed where the CLIs
    /// legitimately surface the same fault differently (Claude Code enforces the schema itself
    /// and asks again; OpenCode has no exit status for an output cap).
    pub fn expected(self) -> &'static [ProblemKind] {
        use ProblemKind as P;
        match self {
            Fault::ForgedEvidence => &[P::EvidenceForged],
            Fault::MalformedReport => &[P::ReportSchema, P::IncompleteTurn],
            Fault::WrongExitCode => &[P::EvidenceExitCode],
            Fault::UnexpectedWrite => &[P::UnexpectedWrite],
            Fault::IncompleteTurn => &[P::IncompleteTurn, P::ReportNotJson, P::NoFinalReport],
            Fault::WrongSessionOnResume => &[P::SessionChanged],
            Fault::MissingUsage => &[P::UsageMissing],
            Fault::WrongNonce => &[P::NonceMismatch],
            Fault::StaleReport => &[P::IdentityMismatch],
            Fault::ProcessFailure => &[P::ProcessFailure],
            Fault::ShellCommandFinalMessage => &[P::ShellCommandFinalMessage, P::NoFinalReport],
            Fault::TruncatedOutput => &[P::ReportNotJson, P::NoFinalReport],
            Fault::RateLimitThenSuccess => &[],
            Fault::Unauthorized => &[P::Authentication],
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_round_trip_and_match_serde() {
        for fault in Fault::ALL {
            assert_eq!(Fault::parse(fault.as_str()), Some(fault));
            assert_eq!(
                serde_json::to_value(fault).unwrap(),
                serde_json::json!(fault.as_str())
            );
        }
        assert_eq!(Fault::parse("nope"), None);
    }

    #[test]
    fn every_fault_but_the_recoverable_one_names_what_catches_it() {
        for fault in Fault::ALL {
            assert_eq!(fault.expected().is_empty(), fault.must_pass(), "{fault}");
        }
    }

    #[test]
    fn problem_names_match_serde() {
        for p in [
            ProblemKind::ReportNotJson,
            ProblemKind::UsageMissing,
            ProblemKind::RateLimited,
        ] {
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::json!(p.as_str())
            );
        }
    }
}
