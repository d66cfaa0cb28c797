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
        Phase::Requirements => fresh(Role::Requirements, ReportKind::Requirements, None),
        Phase::Questions => Next::Questions(unanswered(state)),
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

pub fn apply_build(state: &mut RunState, milestone: usize) {
    let progress = state.milestones.entry(milestone).or_default();
    progress.builder_rounds += 1;
    state.phase = Phase::Test { milestone };
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
pub(crate) mod tests {
    use super::*;
    use crate::ids::{ProviderName, RunId};
    use serde_json::json;
    use std::collections::BTreeMap;

    pub(crate) fn new_state() -> RunState {
        let mut state = RunState::new(
            RunId::new("r1").unwrap(),
            "do it".into(),
            "/ws".into(),
            ProviderName::new("opencode").unwrap(),
            BTreeMap::new(),
        );
        state.phase = Phase::Requirements;
        state
    }

    fn plan_report(milestones: usize) -> Value {
        let ms: Vec<Value> = (0..milestones)
            .map(|m| {
                json!({"id": format!("m{}", m + 1), "title": "t", "description": "",
                       "acceptance_criteria": [
                           {"id": format!("c{}a", m + 1), "text": "works", "check": "true", "human_review": false},
                           {"id": format!("c{}b", m + 1), "text": "reads well", "check": null, "human_review": true}
                       ]})
            })
            .collect();
        json!({"summary": "s", "milestones": ms})
    }

    fn approved(milestones: usize) -> RunState {
        let mut state = new_state();
        apply_plan(&mut state, &plan_report(milestones));
        let token = state.latest_plan().unwrap().token();
        apply_approval(&mut state, &token).unwrap();
        state
    }

    fn pass(m: usize, id: &str) -> CriterionResult {
        CriterionResult {
            milestone: m,
            criterion_id: id.into(),
            verdict: "PASS".into(),
            checks: vec!["true".into()],
            detail: String::new(),
        }
    }

    fn fail(m: usize, id: &str) -> CriterionResult {
        CriterionResult {
            verdict: "FAIL".into(),
            detail: "exit 1".into(),
            ..pass(m, id)
        }
    }

    #[test]
    fn questions_wait_unless_defaults_are_accepted() {
        let report = json!({"summary": "s", "goals": ["g"], "constraints": [],
            "acceptance_criteria": [{"id": "a", "text": "t"}],
            "open_questions": [{"id": "q1", "question": "DB?", "proposed_default": "sqlite"}]});
        let mut state = new_state();
        apply_requirements(&mut state, &report);
        assert_eq!(next(&state), Next::Questions(state.questions.clone()));
        assert!(apply_answers(&mut state, &[("q9".into(), "x".into())]).is_err());
        apply_answers(&mut state, &[("q1".into(), "postgres".into())]).unwrap();
        assert_eq!(state.phase, Phase::Plan);
        assert_eq!(state.answers["q1"].source, "user");

        let mut state = new_state();
        state.accept_defaults = true;
        apply_requirements(&mut state, &report);
        assert_eq!(state.phase, Phase::Plan);
        assert_eq!(state.answers["q1"].text, "sqlite");
        assert_eq!(state.answers["q1"].source, "default");
    }

    #[test]
    fn two_review_rounds_then_the_planning_budget() {
        let mut state = new_state();
        let blocking = json!({"verdict": "changes_requested", "summary": "s",
            "concerns": [{"id": "k1", "blocking": true, "text": "no tests", "requested_change": "add tests"}]});
        apply_plan(&mut state, &plan_report(1));
        apply_plan_review(&mut state, &blocking).unwrap();
        assert_eq!(state.phase, Phase::Plan);
        assert!(state.plan_concerns[0].contains("no tests"));
        apply_plan(&mut state, &plan_report(1));
        let pause = apply_plan_review(&mut state, &blocking).unwrap_err();
        assert_eq!(pause.code, PauseCode::PausedPlanningBudget);
        assert_eq!(state.plan_revisions.len(), 2);
    }

    #[test]
    fn approval_applies_only_to_the_exact_revision() {
        let mut state = new_state();
        apply_plan(&mut state, &plan_report(1));
        let old = state.latest_plan().unwrap().token();
        apply_plan_review(
            &mut state,
            &json!({"verdict": "approve", "summary": "ok", "concerns": []}),
        )
        .unwrap();
        assert!(matches!(next(&state), Next::Approval(_)));
        let mut revised = plan_report(1);
        revised["summary"] = json!("revised");
        apply_plan(&mut state, &revised);
        assert!(apply_approval(&mut state, &old).is_err());
        let current = state.latest_plan().unwrap().token();
        assert!(current.starts_with("r2:"));
        apply_approval(&mut state, &current).unwrap();
        assert_eq!(state.phase, Phase::Build { milestone: 0 });
        assert!(state.approved_plan().is_some());
    }

    #[test]
    fn builder_ladder_without_a_strong_model() {
        let mut state = approved(1);
        for round in 1..=2 {
            apply_build(&mut state, 0);
            let result = apply_test(&mut state, 0, vec![fail(0, &format!("c1a-{round}"))]);
            if round == 1 {
                result.unwrap();
                assert!(matches!(
                    next(&state),
                    Next::Launch(StagePlan {
                        purpose: AttemptPurpose::Rework {
                            round: 2,
                            strong: false
                        },
                        ..
                    })
                ));
            } else {
                assert_eq!(result.unwrap_err().code, PauseCode::PausedBuilderRetryLimit);
            }
        }
    }

    #[test]
    fn builder_ladder_with_a_strong_attempt() {
        let mut state = approved(1);
        state.builder_retry = Some(crate::run::state::BuilderRetryPolicy {
            strong_model: "strong".into(),
            strong_effort: "xhigh".into(),
            checker_model: "checker".into(),
        });
        apply_build(&mut state, 0);
        apply_test(&mut state, 0, vec![fail(0, "x1")]).unwrap();
        apply_build(&mut state, 0);
        apply_test(&mut state, 0, vec![fail(0, "x2")]).unwrap();
        assert!(matches!(
            next(&state),
            Next::Launch(StagePlan {
                purpose: AttemptPurpose::Rework {
                    round: 3,
                    strong: true
                },
                ..
            })
        ));
        apply_build(&mut state, 0);
        let pause = apply_test(&mut state, 0, vec![fail(0, "x3")]).unwrap_err();
        assert_eq!(pause.code, PauseCode::PausedBuilderRetryLimit);
    }

    #[test]
    fn the_same_failure_three_times_is_a_repeated_failure() {
        let mut state = approved(1);
        state.builder_retry = Some(crate::run::state::BuilderRetryPolicy {
            strong_model: "s".into(),
            strong_effort: "xhigh".into(),
            checker_model: "c".into(),
        });
        apply_build(&mut state, 0);
        apply_test(&mut state, 0, vec![fail(0, "c1a")]).unwrap();
        apply_build(&mut state, 0);
        apply_test(&mut state, 0, vec![fail(0, "c1a")]).unwrap();
        apply_build(&mut state, 0);
        let pause = apply_test(&mut state, 0, vec![fail(0, "c1a")]).unwrap_err();
        assert_eq!(pause.code, PauseCode::PausedRepeatedFailure);
    }

    #[test]
    fn completion_decisions_are_checked_against_the_milestone_position() {
        let state = approved(2);
        let plan0 = StagePlan {
            role: Role::CompletionReviewer,
            kind: ReportKind::Completion,
            milestone: Some(0),
            purpose: AttemptPurpose::Fresh,
        };
        let plan1 = StagePlan {
            milestone: Some(1),
            ..plan0.clone()
        };
        let complete = json!({"decision": "COMPLETE", "summary": "s", "findings": []});
        let cont = json!({"decision": "CONTINUE", "summary": "s", "findings": []});
        let rework_empty = json!({"decision": "REWORK", "summary": "s", "findings": []});
        assert_eq!(semantic_problems(&state, &plan0, &complete).len(), 1);
        assert!(semantic_problems(&state, &plan0, &cont).is_empty());
        assert_eq!(semantic_problems(&state, &plan1, &cont).len(), 1);
        assert!(semantic_problems(&state, &plan1, &complete).is_empty());
        assert_eq!(semantic_problems(&state, &plan1, &rework_empty).len(), 1);
    }

    #[test]
    fn test_reports_must_cover_exactly_the_milestone_criteria() {
        let state = approved(1);
        let plan = StagePlan {
            role: Role::Tester,
            kind: ReportKind::Test,
            milestone: Some(0),
            purpose: AttemptPurpose::Fresh,
        };
        let good = json!({"milestone_id": "m1", "summary": "s", "criteria": [
            {"criterion_id": "c1a", "verdict": "PASS", "checks": [{"command": "true", "exit_code": 0, "evidence_ref": "event:1"}], "notes": ""},
            {"criterion_id": "c1b", "verdict": "HUMAN_REVIEW", "checks": [], "notes": ""}]});
        assert!(semantic_problems(&state, &plan, &good).is_empty());
        let mut lying = good.clone();
        lying["criteria"][0]["checks"][0]["exit_code"] = json!(1);
        assert_eq!(semantic_problems(&state, &plan, &lying).len(), 1);
        let mut missing = good.clone();
        missing["criteria"].as_array_mut().unwrap().remove(1);
        assert_eq!(
            semantic_problems(&state, &plan, &missing),
            vec!["criterion \"c1b\" is not reported".to_string()]
        );
        let plan_plan = StagePlan {
            role: Role::Planner,
            kind: ReportKind::Plan,
            milestone: None,
            purpose: AttemptPurpose::Fresh,
        };
        let mut bad_plan = plan_report(1);
        bad_plan["milestones"][0]["acceptance_criteria"][0]["check"] = json!(null);
        assert_eq!(semantic_problems(&state, &plan_plan, &bad_plan).len(), 1);
    }

    #[test]
    fn plans_with_vacuous_checks_are_rejected() {
        let state = new_state();
        let plan = StagePlan {
            role: Role::Planner,
            kind: ReportKind::Plan,
            milestone: None,
            purpose: AttemptPurpose::Fresh,
        };
        let mut report = plan_report(1);
        report["milestones"][0]["acceptance_criteria"][0]["check"] =
            json!("python3 -m unittest -q test_vowels || true");
        let problems = semantic_problems(&state, &plan, &report);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("vacuous"), "{problems:?}");
        report["milestones"][0]["acceptance_criteria"][0]["check"] =
            json!("python3 -m unittest -q test_vowels");
        assert!(semantic_problems(&state, &plan, &report).is_empty());
    }

    #[test]
    fn the_gate_needs_every_checked_criterion_verified_and_the_final_replay_green() {
        let mut state = approved(1);
        apply_build(&mut state, 0);
        apply_test(&mut state, 0, vec![pass(0, "c1a")]).unwrap();
        assert_eq!(state.phase, Phase::CompletionReview { milestone: 0 });
        apply_completion(
            &mut state,
            0,
            &json!({"decision": "COMPLETE", "summary": "done", "findings": []}),
        )
        .unwrap();
        assert_eq!(state.phase, Phase::FinalGate);
        assert!(completion_gate(&state, &[pass(0, "c1a")]).is_empty());
        assert_eq!(completion_gate(&state, &[fail(0, "c1a")]).len(), 1);
        let mut unverified = state.clone();
        unverified.criteria.clear();
        assert_eq!(completion_gate(&unverified, &[]).len(), 1);
        let mut unapproved = state.clone();
        unapproved.approved_plan = None;
        assert!(!completion_gate(&unapproved, &[]).is_empty());
    }

    #[test]
    fn a_not_done_sentence_blocks_the_plan_and_the_completion() {
        let mut state = approved(1);
        state.objective = "Count vowels in text. Also count the consonants in text.".into();
        state.brief = Some(json!({"acceptance_criteria": [
            {"id": "a", "text": "vowels", "covers": ["Count vowels in text"]}]}));
        let not_done = json!([{"sentence": "Also count the consonants in text.",
                               "verdict": "not_done", "reason": "dropped"}]);
        let plan1 = StagePlan {
            role: Role::CompletionReviewer,
            kind: ReportKind::Completion,
            milestone: Some(0),
            purpose: AttemptPurpose::Fresh,
        };
        let silent =
            json!({"decision": "COMPLETE", "summary": "s", "findings": [], "uncovered": []});
        assert_eq!(semantic_problems(&state, &plan1, &silent).len(), 1);
        let complete =
            json!({"decision": "COMPLETE", "summary": "s", "findings": [], "uncovered": not_done});
        assert!(semantic_problems(&state, &plan1, &complete).is_empty());
        apply_build(&mut state, 0);
        apply_completion(&mut state, 0, &complete).unwrap();
        assert_eq!(state.phase, Phase::Build { milestone: 0 });
        assert!(state.open_findings[0].text.contains("consonants"));

        let mut state = approved(1);
        state.objective = "Count vowels in text. Also count the consonants in text.".into();
        state.brief = Some(json!({"acceptance_criteria": [
            {"id": "a", "text": "vowels", "covers": ["Count vowels in text"]}]}));
        state.phase = Phase::PlanReview;
        let review =
            json!({"verdict": "approve", "summary": "s", "concerns": [], "uncovered": not_done});
        apply_plan_review(&mut state, &review).unwrap();
        assert_eq!(state.phase, Phase::Plan);
        assert!(state.plan_concerns[0].contains("consonants"));
    }

    #[test]
    fn blocked_pauses() {
        let mut state = approved(1);
        let pause = apply_completion(
            &mut state,
            0,
            &json!({"decision": "BLOCKED", "summary": "needs a key", "findings": []}),
        )
        .unwrap_err();
        assert_eq!(pause.code, PauseCode::PausedBlocked);
    }
}
