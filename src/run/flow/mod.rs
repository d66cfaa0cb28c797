//! The flow: which stage comes next, and how each accepted report moves the run.
//!
//! Pure functions over [`RunState`]: the driver asks [`next`] what to do, runs it, and feeds the
//! accepted, verified result back through one of the `apply_*` functions, which either move the
//! phase on or return the pause to take. Keeping this free of I/O lets every rule (review rounds,
//! the builder's retry ladder, repeated failures, the completion gate) be tested directly.
//!
//! ```text
//! Requirements → Questions → Plan ⇄ PlanReview (≤ 2 rounds) → Approval
//!   → for each milestone: Build → Test (+ autocode's replay) → CompletionReview
//!        ↑ rework (retry, then one stronger attempt) ←┘
//!   → FinalGate (replay every check on the final tree) → Complete
//! ```

use serde_json::Value;

use super::state::{
    Answer, AttemptPurpose, CriterionResult, Finding, Phase, PlanRevision, Question, RunState,
};
use crate::pause::PauseCode;
use crate::report::ReportKind;
use crate::role::Role;

mod semantics;

pub use semantics::semantic_problems;

/// At most this many plan review rounds before `PAUSED_PLANNING_BUDGET`.
pub const MAX_PLAN_REVIEW_ROUNDS: u32 = 2;
/// The same failure this many times at the same source pauses `PAUSED_REPEATED_FAILURE`.
pub const REPEATED_FAILURE_LIMIT: u32 = 3;

/// What the driver should do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Launch(StagePlan),
    /// Open questions need answers (terminal, `--answer`, or `--yes` defaults).
    Questions(Vec<Question>),
    /// The brief revision this token names waits for the person's review (chat mode:
    /// `run::brief_review`).
    BriefReview(String),
    /// The latest plan revision waits for approval.
    Approval(PlanRevision),
    /// Replay every check on the final tree and apply the completion gate.
    FinalGate,
    Done,
}

/// A stage to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagePlan {
    pub role: Role,
    pub kind: ReportKind,
    pub milestone: Option<usize>,
    pub purpose: AttemptPurpose,
}

/// A decision to pause, with the reason shown to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseDecision {
    pub code: PauseCode,
    pub reason: String,
}

impl PauseDecision {
    pub fn new(code: PauseCode, reason: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.into(),
        }
    }
}

/// The milestones of the approved plan.
pub fn milestones(state: &RunState) -> Vec<Value> {
    state
        .approved_plan()
        .and_then(|p| p.plan.get("milestones"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

pub fn next(state: &RunState) -> Next {
    let fresh = |role, kind, milestone| {
        Next::Launch(StagePlan {
            role,
            kind,
            milestone,
            purpose: AttemptPurpose::Fresh,
        })
    };
    match state.phase {
        // Feedback on the brief sends the stage round again as a rework.
        Phase::Requirements if !state.brief_review.feedback.is_empty() => Next::Launch(StagePlan {
            role: Role::Requirements,
            kind: ReportKind::Requirements,
            milestone: None,
            purpose: AttemptPurpose::Rework {
                round: super::brief_review::revision(state) as u32,
                strong: false,
            },
        }),
        Phase::Requirements => fresh(Role::Requirements, ReportKind::Requirements, None),
        Phase::Questions => Next::Questions(unanswered(state)),
        Phase::Plan if state.brief_review.waiting => match super::brief_review::token(state) {
            Some(token) => Next::BriefReview(token),
            None => fresh(Role::Requirements, ReportKind::Requirements, None),
        },
        Phase::Plan => fresh(Role::Planner, ReportKind::Plan, None),
        Phase::PlanReview => fresh(Role::PlanReviewer, ReportKind::PlanReview, None),
        Phase::Approval => match state.latest_plan() {
            Some(plan) => Next::Approval(plan.clone()),
            None => fresh(Role::Planner, ReportKind::Plan, None),
        },
        Phase::Build { milestone } => {
            let progress = state
                .milestones
                .get(&milestone)
                .cloned()
                .unwrap_or_default();
            let purpose = if progress.builder_rounds == 0 {
                AttemptPurpose::Fresh
            } else {
                AttemptPurpose::Rework {
                    round: progress.builder_rounds + 1,
                    strong: progress.strong_attempt_used,
                }
            };
            Next::Launch(StagePlan {
                role: Role::Builder,
                kind: ReportKind::Build,
                milestone: Some(milestone),
                purpose,
            })
        }
        Phase::Test { milestone } => fresh(Role::Tester, ReportKind::Test, Some(milestone)),
        Phase::CompletionReview { milestone } => fresh(
            Role::CompletionReviewer,
            ReportKind::Completion,
            Some(milestone),
        ),
        Phase::FinalGate => Next::FinalGate,
        Phase::Complete => Next::Done,
    }
}

/// Questions without an answer yet.
pub fn unanswered(state: &RunState) -> Vec<Question> {
    state
        .questions
        .iter()
        .filter(|q| !state.answers.contains_key(&q.id))
        .cloned()
        .collect()
}

/// (criterion id, check command or `None` for human review) of one milestone.
pub fn criteria_of(state: &RunState, milestone: usize) -> Vec<(String, Option<String>)> {
    milestones(state)
        .get(milestone)
        .and_then(|m| m["acceptance_criteria"].as_array())
        .into_iter()
        .flatten()
        .map(|c| {
            let check = if c["human_review"].as_bool().unwrap_or(false) {
                None
            } else {
                c["check"].as_str().map(str::to_owned)
            };
            (c["id"].as_str().unwrap_or_default().to_owned(), check)
        })
        .collect()
}

pub fn apply_requirements(state: &mut RunState, report: &Value) {
    state.brief = Some(report.clone());
    // The objective's commands as the brief leaves them: its set-asides are neither replayed
    // nor expected of a prepare step (a brief written again starts from the objective).
    let mut commands = crate::verify::objective::objective_commands(&state.objective);
    crate::verify::objective::apply_set_asides(&mut commands, report);
    state.verification.required_checks = commands
        .iter()
        .filter(|c| c.role == crate::verify::objective::CommandRole::RequiredCheck)
        .map(|c| c.command.clone())
        .collect();
    state.verification.objective_commands = commands;
    state.questions = report["open_questions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| Question {
            id: q["id"].as_str().unwrap_or_default().to_owned(),
            question: q["question"].as_str().unwrap_or_default().to_owned(),
            proposed_default: q["proposed_default"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        })
        .collect();
    state.phase = Phase::Questions;
    if state.accept_defaults {
        accept_defaults(state);
    }
    if unanswered(state).is_empty() {
        state.phase = Phase::Plan;
    }
}

/// Answers every open question with its proposed default (recorded as such).
pub fn accept_defaults(state: &mut RunState) {
    for q in unanswered(state) {
        state.answers.insert(
            q.id.clone(),
            Answer {
                text: q.proposed_default.clone(),
                source: "default".into(),
            },
        );
    }
    if state.phase == Phase::Questions {
        state.phase = Phase::Plan;
    }
}

/// Records user answers; unknown ids are refused so a typo is not silently ignored.
pub fn apply_answers(state: &mut RunState, answers: &[(String, String)]) -> Result<(), String> {
    for (id, _) in answers {
        if !state.questions.iter().any(|q| &q.id == id) {
            let known: Vec<&str> = state.questions.iter().map(|q| q.id.as_str()).collect();
            return Err(format!(
                "no open question {id:?} (questions: {})",
                known.join(", ")
            ));
        }
    }
    for (id, text) in answers {
        state.answers.insert(
            id.clone(),
            Answer {
                text: text.clone(),
                source: "user".into(),
            },
        );
    }
    if state.phase == Phase::Questions && unanswered(state).is_empty() {
        state.phase = Phase::Plan;
    }
    Ok(())
}

pub fn apply_plan(state: &mut RunState, report: &Value) {
    let canonical = serde_json::to_vec(report).unwrap_or_default();
    let revision = state.plan_revisions.len() as u32 + 1;
    state.plan_revisions.push(PlanRevision {
        revision,
        plan: report.clone(),
        sha256: crate::report::evidence::sha256_hex(&canonical),
    });
    state.approved_plan = None;
    state.phase = Phase::PlanReview;
}

pub fn apply_plan_review(state: &mut RunState, report: &Value) -> Result<(), PauseDecision> {
    state.plan_review_rounds += 1;
    let mut blocking: Vec<String> = report["concerns"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["blocking"] == true)
        .map(|c| {
            let change = c["requested_change"].as_str().unwrap_or_default();
            format!(
                "{}: {} {}",
                c["id"].as_str().unwrap_or("?"),
                c["text"].as_str().unwrap_or_default(),
                change
            )
            .trim()
            .to_owned()
        })
        .collect();
    for (sentence, reason) in super::coverage::not_done(report) {
        blocking.push(format!(
            "the plan does not cover this part of the objective: {sentence} ({reason})"
        ));
    }
    if report["verdict"] == "approve" && blocking.is_empty() {
        state.plan_concerns.clear();
        state.phase = Phase::Approval;
        if state.accept_defaults {
            approve_latest(state);
        }
        return Ok(());
    }
    state.plan_concerns = if blocking.is_empty() {
        vec!["the reviewer requested changes without naming a blocking concern".into()]
    } else {
        blocking
    };
    if state.plan_review_rounds >= MAX_PLAN_REVIEW_ROUNDS {
        state.phase = Phase::Approval;
        return Err(PauseDecision::new(
            PauseCode::PausedPlanningBudget,
            format!(
                "the plan reviewer still has blocking concerns after {} rounds: {}",
                state.plan_review_rounds,
                state.plan_concerns.join("; ")
            ),
        ));
    }
    state.phase = Phase::Plan;
    Ok(())
}

fn approve_latest(state: &mut RunState) {
    if let Some(plan) = state.latest_plan() {
        state.approved_plan = Some(plan.token());
        state.phase = Phase::Build { milestone: 0 };
    }
}

/// Approves the latest revision when `token` names exactly it.
pub fn apply_approval(state: &mut RunState, token: &str) -> Result<(), String> {
    let Some(plan) = state.latest_plan() else {
        return Err("there is no plan to approve yet".into());
    };
    if plan.token() != token.trim() {
        return Err(format!(
            "the token does not match the current plan revision (current: {})",
            plan.token()
        ));
    }
    approve_latest(state);
    Ok(())
}

/// Applies a build report. `done` goes on to the tester. `blocked` never does: its blockers go
/// back to the builder as findings while the retry policy allows ([`rework`]), and when it no
/// longer does the run stops with `PAUSED_BLOCKED`, the blockers in its reason.
pub fn apply_build(
    state: &mut RunState,
    milestone: usize,
    report: &Value,
) -> Result<(), PauseDecision> {
    let progress = state.milestones.entry(milestone).or_default();
    progress.builder_rounds += 1;
    let rounds = progress.builder_rounds;
    if report["status"] != "blocked" {
        state.phase = Phase::Test { milestone };
        return Ok(());
    }
    let mut blockers: Vec<String> = report["blockers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|blocker| blocker.as_str().map(str::to_owned))
        .collect();
    if blockers.is_empty() {
        blockers.push(
            report["summary"]
                .as_str()
                .unwrap_or("no reason given")
                .to_owned(),
        );
    }
    let findings = blockers
        .iter()
        .enumerate()
        .map(|(index, text)| Finding {
            id: format!("blocker-{}", index + 1),
            milestone,
            text: text.clone(),
            source: "builder".into(),
        })
        .collect();
    rework(state, milestone, findings, "builder").map_err(|_| {
        PauseDecision::new(
            PauseCode::PausedBlocked,
            format!(
                "the builder reported milestone {} blocked ({rounds} attempt{}): {}",
                milestone + 1,
                if rounds == 1 { "" } else { "s" },
                blockers.join("; ")
            ),
        )
    })
}

/// Applies the verified criteria of a test stage (after autocode's own replay).
pub fn apply_test(
    state: &mut RunState,
    milestone: usize,
    results: Vec<CriterionResult>,
) -> Result<(), PauseDecision> {
    state.criteria.retain(|c| c.milestone != milestone);
    let failing: Vec<Finding> = results
        .iter()
        .filter(|c| c.verdict != "PASS" && c.verdict != "HUMAN_REVIEW")
        .map(|c| Finding {
            id: c.criterion_id.clone(),
            milestone,
            text: c.detail.clone(),
            source: "test".into(),
        })
        .collect();
    state.criteria.extend(results);
    if failing.is_empty() {
        state.phase = Phase::CompletionReview { milestone };
        return Ok(());
    }
    rework(state, milestone, failing, "test")
}

/// Applies a completion review (already checked by [`semantic_problems`]).
pub fn apply_completion(
    state: &mut RunState,
    milestone: usize,
    report: &Value,
) -> Result<(), PauseDecision> {
    let findings: Vec<Finding> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["blocking"] == true)
        .map(|f| Finding {
            id: f["id"].as_str().unwrap_or("?").to_owned(),
            milestone,
            text: f["text"].as_str().unwrap_or_default().to_owned(),
            source: "completion".into(),
        })
        .collect();
    match report["decision"].as_str() {
        Some("CONTINUE") => {
            accept_milestone(state, milestone);
            state.phase = Phase::Build {
                milestone: milestone + 1,
            };
            Ok(())
        }
        Some("COMPLETE") if !super::coverage::not_done(report).is_empty() => {
            let mut findings = findings;
            findings.extend(super::coverage::not_done_findings(report, milestone));
            rework(state, milestone, findings, "completion")
        }
        Some("COMPLETE") => {
            accept_milestone(state, milestone);
            state.phase = Phase::FinalGate;
            Ok(())
        }
        Some("REWORK") => {
            let mut findings = findings;
            findings.extend(super::coverage::not_done_findings(report, milestone));
            rework(state, milestone, findings, "completion")
        }
        _ => Err(PauseDecision::new(
            PauseCode::PausedBlocked,
            format!(
                "the completion reviewer reported milestone {} blocked: {}",
                milestone + 1,
                report["summary"].as_str().unwrap_or_default()
            ),
        )),
    }
}

fn accept_milestone(state: &mut RunState, milestone: usize) {
    state.milestones.entry(milestone).or_default().accepted = true;
    state.open_findings.retain(|f| f.milestone != milestone);
}

/// Routes failing work back to the builder: one ordinary retry, then one stronger attempt (when
/// the provider has a strong model), then `PAUSED_BUILDER_RETRY_LIMIT`; the same failure three
/// times at the same source is `PAUSED_REPEATED_FAILURE`.
pub fn rework(
    state: &mut RunState,
    milestone: usize,
    findings: Vec<Finding>,
    source: &str,
) -> Result<(), PauseDecision> {
    let mut ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
    ids.sort_unstable();
    let signature = format!("m{}:{source}:{}", milestone + 1, ids.join(","));
    let seen = state.failure_counts.entry(signature.clone()).or_insert(0);
    *seen += 1;
    let seen = *seen;
    state.open_findings.retain(|f| f.milestone != milestone);
    let summary: Vec<String> = findings
        .iter()
        .map(|f| format!("{}: {}", f.id, f.text))
        .collect();
    state.open_findings.extend(findings);
    state.phase = Phase::Build { milestone };
    if seen >= REPEATED_FAILURE_LIMIT {
        return Err(PauseDecision::new(
            PauseCode::PausedRepeatedFailure,
            format!(
                "the same failure ({signature}) happened {seen} times: {}",
                summary.join("; ")
            ),
        ));
    }
    let has_strong = state.builder_retry.is_some();
    let progress = state.milestones.entry(milestone).or_default();
    match progress.builder_rounds {
        0 | 1 => Ok(()),
        2 if has_strong && !progress.strong_attempt_used => {
            progress.strong_attempt_used = true;
            Ok(())
        }
        rounds => Err(PauseDecision::new(
            PauseCode::PausedBuilderRetryLimit,
            format!(
                "milestone {} still fails after {rounds} builder attempts{}: {}",
                milestone + 1,
                if has_strong {
                    " (including the stronger attempt)"
                } else {
                    " (no stronger model is configured)"
                },
                summary.join("; ")
            ),
        )),
    }
}

/// Why the completion gate refuses, if it does. Called with the results of replaying every
/// check on the final tree.
pub fn completion_gate(state: &RunState, final_replay: &[CriterionResult]) -> Vec<String> {
    let mut refusals = Vec::new();
    if state.approved_plan().is_none() {
        refusals.push("the latest plan revision is not approved".into());
    }
    let count = milestones(state).len();
    for m in 0..count {
        if !state.milestones.get(&m).is_some_and(|p| p.accepted) {
            refusals.push(format!(
                "milestone {} was not accepted by the completion reviewer",
                m + 1
            ));
        }
        for (id, check) in criteria_of(state, m) {
            let verdict = state
                .criteria
                .iter()
                .find(|c| c.milestone == m && c.criterion_id == id)
                .map(|c| c.verdict.as_str());
            match (check, verdict) {
                // Criteria no check verified wait for a person (`review::pending_reviews`).
                (None, _) | (Some(_), Some("HUMAN_REVIEW")) => {}
                (Some(_), Some("PASS")) => {}
                (Some(_), other) => refusals.push(format!(
                    "criterion {id} of milestone {} is {}",
                    m + 1,
                    other.unwrap_or("unverified")
                )),
            }
        }
    }
    for result in final_replay {
        if result.verdict != "PASS" {
            refusals.push(format!(
                "criterion {} failed when replayed on the final tree: {}",
                result.criterion_id, result.detail
            ));
        }
    }
    for finding in &state.open_findings {
        refusals.push(format!(
            "finding {} is still open: {}",
            finding.id, finding.text
        ));
    }
    refusals
}

#[cfg(test)]
pub(crate) mod tests;
