//! The typed run state: one document (`run.json`) with a format version, never a bag of keys.
//!
//! It records everything needed to continue a run exactly where it stopped: the objective, the
//! routes, the accepted brief and answers, the plan revisions and the approval, per-milestone
//! progress and rework counters, every stage attempt, the usage ledger, the transport identities
//! and the pause. How it is kept on disk (a small tagged head plus an append-only attempt log,
//! one durable commit per change) is `run::checkpoint`'s; see `docs/run-lifecycle.md`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::isolation::Isolation;
use crate::ids::{ProviderName, RunId, SessionId};
use crate::pause::PauseCode;
use crate::report::ReportKind;
use crate::role::Role;

/// The run state's on-disk format. 2: a compact head `run.json` without the attempts, which live
/// in the append-only `attempts.jsonl` the head commits to (`run::checkpoint`); one usage type.
/// 1: everything in one pretty `run.json` (refused with an "older autocode" error).
pub const RUN_FORMAT: u64 = 2;

pub use crate::transport::Route;

/// How much of the attempt log (`attempts.jsonl`) belongs to the state (recorded in the tagged head).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogCommit {
    /// Committed bytes from the start of the log.
    pub bytes: u64,
    /// Committed lines among them.
    pub lines: u64,
    /// Hash chain over the committed lines, in hex: `c0` = 32 zero bytes,
    /// `cN = SHA-256(cN-1 ‖ lineN)` where a line includes its newline; empty for an empty log.
    pub chain: String,
}

/// Budgets checked before each stage and enforced during it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    pub max_usd: Option<f64>,
    pub max_minutes: Option<u64>,
    pub max_stage_minutes: Option<u64>,
    pub max_idle_minutes: Option<u64>,
    pub max_tokens: Option<u64>,
}

/// The usage ledger's type: one convention for events and the run (`crate::events::Usage`).
pub use crate::events::{CostSource, Usage};

/// Where the run stands. Milestone indexes are 0-based into the approved plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    Requirements,
    Questions,
    Plan,
    PlanReview,
    Approval,
    Build { milestone: usize },
    Test { milestone: usize },
    CompletionReview { milestone: usize },
    FinalGate,
    Complete,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AttemptStatus {
    /// Started and not yet judged (a crash leaves this; resume judges it from its artifacts).
    Running,
    /// A valid, verified report was accepted.
    Accepted,
    /// The report or the attempt was rejected; `reason` says why.
    Rejected { reason: String },
    /// The attempt ended in a pause.
    Paused { code: PauseCode },
    /// Set aside by `resume --abandon-stage`.
    Abandoned,
}

/// One stage attempt (`stages/<NNN>-<role>-<attempt>/`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Run-wide sequence number (the NNN of the directory).
    pub seq: u32,
    pub role: Role,
    pub report_kind: ReportKind,
    /// 1-based attempt number within this stage (repairs and retries count up).
    pub attempt: u32,
    /// Directory name under `stages/`.
    pub dir: String,
    pub route: Route,
    pub purpose: AttemptPurpose,
    pub session: Option<SessionId>,
    pub status: AttemptStatus,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub usage: Usage,
    /// The milestone this attempt worked on, when any.
    pub milestone: Option<usize>,
    /// The commit autocode made on the run's branch after this builder attempt was accepted
    /// (worktree runs; none when the stage changed nothing). See `run::commit`.
    #[serde(default)]
    pub commit: Option<String>,
}

/// Why an attempt was launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttemptPurpose {
    /// The stage's first attempt.
    Fresh,
    /// A report-only repair of the previous attempt (same session where the transport keeps one).
    ReportRepair { of_seq: u32, problems: Vec<String> },
    /// The one same-session correction of a shell-command final message.
    ShellCommandCorrection { of_seq: u32 },
    /// The one automatic retry of a pure retryable transport error.
    TransportRetry { of_seq: u32 },
    /// Builder rework after failed checks or a REWORK decision.
    Rework { round: u32, strong: bool },
}

/// An open question from the requirements stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    pub proposed_default: String,
}

/// How a question got its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub text: String,
    /// `user` (terminal or `--answer`) or `default` (`--yes`, recorded as such).
    pub source: String,
}

/// An approved or pending plan revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRevision {
    pub revision: u32,
    pub plan: Value,
    pub sha256: String,
}

impl PlanRevision {
    /// `r<N>:<sha256 of the plan>`: an approval applies to exactly this revision.
    pub fn token(&self) -> String {
        format!("r{}:{}", self.revision, self.sha256)
    }
}

/// A finding that must be resolved before completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub milestone: usize,
    pub text: String,
    pub source: String,
}

/// The verified verdict of one acceptance criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionResult {
    pub milestone: usize,
    pub criterion_id: String,
    /// PASS only when the tester said PASS, its evidence verified, and every cited check exited
    /// 0 again when autocode replayed it in a clean copy.
    pub verdict: String,
    pub checks: Vec<String>,
    pub detail: String,
}

/// Per-milestone rework counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MilestoneProgress {
    /// Builder attempts that were judged (first, retry, strong).
    pub builder_rounds: u32,
    pub strong_attempt_used: bool,
    pub accepted: bool,
}

/// A pause, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseRecord {
    pub code: PauseCode,
    pub reason: String,
    pub next_step: String,
    pub at: DateTime<Utc>,
    /// The attempt directory the pause concerns, when any.
    pub attempt: Option<String>,
    /// When the pause ends by itself (a rate limit's reset time), if known.
    pub resume_after: Option<DateTime<Utc>>,
}

/// The one typed run state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub format_version: u64,
    pub run_id: RunId,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub objective: String,
    /// The workspace the user named.
    pub workspace: PathBuf,
    /// Where the agents work (the worktree, or the workspace in place).
    pub work_tree: PathBuf,
    pub isolation: Isolation,
    pub provider: ProviderName,
    pub routes: BTreeMap<Role, Route>,
    /// `--single-model`: verifier independence knowingly waived.
    pub independence_waived: bool,
    /// `--yes`: defaults and plan approval accepted up front (recorded).
    pub accept_defaults: bool,
    pub budgets: Budgets,
    pub phase: Phase,
    pub questions: Vec<Question>,
    pub answers: BTreeMap<String, Answer>,
    pub brief: Option<Value>,
    pub plan_revisions: Vec<PlanRevision>,
    /// Blocking concerns of the last plan review, handed to the planner's revision.
    pub plan_concerns: Vec<String>,
    pub plan_review_rounds: u32,
    pub approved_plan: Option<String>,
    pub milestones: BTreeMap<usize, MilestoneProgress>,
    pub open_findings: Vec<Finding>,
    pub criteria: Vec<CriterionResult>,
    /// Failure signature → how often it was seen (three times at one source pauses).
    pub failure_counts: BTreeMap<String, u32>,
    pub attempts: Vec<AttemptRecord>,
    pub usage: Usage,
    /// Active milliseconds spent in stages (wall time of attempts).
    pub active_ms: u64,
    /// Transport identity per provider, recorded at the first stage.
    pub transport_identities: BTreeMap<String, Value>,
    pub pause: Option<PauseRecord>,
    pub completed_at: Option<DateTime<Utc>>,
    /// The builder's stronger attempt, resolved from the provider when the run was created.
    pub builder_retry: Option<BuilderRetryPolicy>,
    /// Routes moved for the stronger attempt of one milestone (builder and checkers).
    pub route_overrides: BTreeMap<Role, Route>,
    pub overrides_milestone: Option<usize>,
    /// Roles whose transport reports through a file (their evidence is capture receipts).
    pub report_file_roles: Vec<Role>,
    /// The shell command a stage returned instead of its report, for the correction prompt.
    pub last_shell_command: Option<String>,
    /// A report adopted from an attempt interrupted by a crash, applied on the next step.
    pub pending_adoption: Option<Value>,
    /// Started with `--unconfined`: stages and replays run without the agent's room (ownership
    /// boundary only). Fixed for the life of the run (`docs/run-lifecycle.md`, "The room").
    #[serde(default)]
    pub unconfined: bool,
    /// What the completion gate's verification rules recorded (required checks, base-tree
    /// checks, human reviews, accepted test changes): see `verify`.
    #[serde(default)]
    pub verification: crate::verify::Verification,
    /// Started with `--in-place`: the only way a run works in the user's own files. A run
    /// without it that has no worktree yet (paused before isolation) gets one on resume.
    #[serde(default)]
    pub in_place_requested: bool,
    /// What `attempts.jsonl` held when this head was written (its length and hash chain): the
    /// head's tag covers it, so the attempts are as verified as the head (`run::checkpoint`).
    #[serde(default)]
    pub attempts_log: LogCommit,
    /// The brief's review in chat mode: feedback per revision, the approved digest
    /// (`run::brief_review`).
    #[serde(default)]
    pub brief_review: super::brief_review::BriefReview,
    /// `--role-transport ROLE=PROVIDER`: roles a person put on another provider (their routes
    /// carry it); fixed for the life of the run, never moved by the automatic cross-model move.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub role_transports: BTreeMap<Role, ProviderName>,
}

/// The builder's stronger attempt and where checkers move during it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuilderRetryPolicy {
    pub strong_model: String,
    pub strong_effort: String,
    pub checker_model: String,
}

impl RunState {
    /// A new run at its first phase, working in `workspace` in place until isolation moves it.
    pub fn new(
        run_id: RunId,
        objective: String,
        workspace: PathBuf,
        provider: ProviderName,
        routes: BTreeMap<Role, Route>,
    ) -> RunState {
        let now = Utc::now();
        let verification = crate::verify::Verification::for_objective(&objective);
        RunState {
            format_version: RUN_FORMAT,
            run_id,
            created_at: now,
            updated_at: now,
            objective,
            work_tree: workspace.clone(),
            workspace,
            isolation: Isolation::InPlace,
            provider,
            routes,
            independence_waived: false,
            accept_defaults: false,
            budgets: Budgets::default(),
            phase: Phase::Requirements,
            questions: vec![],
            answers: BTreeMap::new(),
            brief: None,
            plan_revisions: vec![],
            plan_concerns: vec![],
            plan_review_rounds: 0,
            approved_plan: None,
            milestones: BTreeMap::new(),
            open_findings: vec![],
            criteria: vec![],
            failure_counts: BTreeMap::new(),
            attempts: vec![],
            usage: Usage::default(),
            active_ms: 0,
            transport_identities: BTreeMap::new(),
            pause: None,
            completed_at: None,
            builder_retry: None,
            route_overrides: BTreeMap::new(),
            overrides_milestone: None,
            report_file_roles: vec![],
            last_shell_command: None,
            pending_adoption: None,
            unconfined: false,
            verification,
            in_place_requested: false,
            attempts_log: Default::default(),
            brief_review: Default::default(),
            role_transports: BTreeMap::new(),
        }
    }

    pub fn latest_plan(&self) -> Option<&PlanRevision> {
        self.plan_revisions.last()
    }

    /// The approved plan, if the approval matches the latest revision exactly.
    pub fn approved_plan(&self) -> Option<&PlanRevision> {
        let latest = self.latest_plan()?;
        (self.approved_plan.as_deref() == Some(latest.token().as_str())).then_some(latest)
    }

    /// The route `role` runs on for `milestone`, with the stronger attempt's overrides.
    pub fn route_for(&self, role: Role, milestone: Option<usize>) -> Route {
        if milestone.is_some()
            && milestone == self.overrides_milestone
            && let Some(route) = self.route_overrides.get(&role)
        {
            return route.clone();
        }
        self.routes.get(&role).cloned().unwrap_or_else(|| Route {
            provider: self.provider.clone(),
            model: String::new(),
            effort: None,
            codex_model_provider: None,
        })
    }

    /// `<workspace>/.autocode/runs/<run-id>`.
    pub fn run_dir(&self) -> PathBuf {
        super::runs_dir(&self.workspace).join(self.run_id.as_str())
    }

    pub fn next_seq(&self) -> u32 {
        self.attempts.iter().map(|a| a.seq).max().unwrap_or(0) + 1
    }

    /// The attempt still marked running, if autocode stopped in the middle of one.
    pub fn running_attempt(&self) -> Option<&AttemptRecord> {
        self.attempts
            .iter()
            .rev()
            .find(|a| a.status == AttemptStatus::Running)
    }

    /// The latest session of `role` on `route`, for resuming a same-stage correction.
    pub fn last_session(&self, seq: u32) -> Option<&SessionId> {
        self.attempts
            .iter()
            .find(|a| a.seq == seq)
            .and_then(|a| a.session.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_addition_keeps_unknown_unknown() {
        let mut total = Usage::default();
        total.accumulate(&Usage {
            input_tokens: Some(400),
            output_tokens: Some(40),
            ..Default::default()
        });
        assert_eq!(total.cost_usd, None);
        assert_eq!(total.cache_read_tokens, None);
        total.accumulate(&Usage {
            input_tokens: Some(500),
            cache_read_tokens: Some(610),
            cost_usd: Some(0.01),
            cost_source: Some(CostSource::Provider),
            ..Default::default()
        });
        assert_eq!(total.input_tokens, Some(900));
        assert_eq!(total.cache_read_tokens, Some(610));
        assert_eq!(total.cost_usd, Some(0.01));
        assert_eq!(total.cost_source, Some(CostSource::Provider));
        assert_eq!(total.total_tokens(), 900 + 610 + 40);
    }

    #[test]
    fn plan_tokens_bind_revision_and_hash() {
        let rev = PlanRevision {
            revision: 2,
            plan: serde_json::json!({}),
            sha256: "ab".repeat(32),
        };
        assert_eq!(rev.token(), format!("r2:{}", "ab".repeat(32)));
    }
}
