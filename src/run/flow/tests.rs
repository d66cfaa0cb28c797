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

fn done() -> Value {
    json!({"status": "done", "summary": "s", "files_changed": [], "checks": [], "blockers": []})
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
        apply_build(&mut state, 0, &done()).unwrap();
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
    apply_build(&mut state, 0, &done()).unwrap();
    apply_test(&mut state, 0, vec![fail(0, "x1")]).unwrap();
    apply_build(&mut state, 0, &done()).unwrap();
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
    apply_build(&mut state, 0, &done()).unwrap();
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
    apply_build(&mut state, 0, &done()).unwrap();
    apply_test(&mut state, 0, vec![fail(0, "c1a")]).unwrap();
    apply_build(&mut state, 0, &done()).unwrap();
    apply_test(&mut state, 0, vec![fail(0, "c1a")]).unwrap();
    apply_build(&mut state, 0, &done()).unwrap();
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
fn a_review_requesting_changes_must_name_a_blocking_concern() {
    let state = new_state();
    let plan = StagePlan {
        role: Role::PlanReviewer,
        kind: ReportKind::PlanReview,
        milestone: None,
        purpose: AttemptPurpose::Fresh,
    };
    let review = |concerns: serde_json::Value| json!({"verdict": "changes_requested", "summary": "s", "concerns": concerns, "uncovered": []});
    let none = semantic_problems(&state, &plan, &review(json!([])));
    assert_eq!(none.len(), 1, "{none:?}");
    assert!(none[0].contains("blocking concern"), "{none:?}");
    let advisory = json!([{"id": "k1", "blocking": false, "text": "t", "requested_change": "c"}]);
    assert_eq!(semantic_problems(&state, &plan, &review(advisory)).len(), 1);
    let blocking = json!([{"id": "k1", "blocking": true, "text": "t", "requested_change": "c"}]);
    assert!(semantic_problems(&state, &plan, &review(blocking)).is_empty());
    let approve = json!({"verdict": "approve", "summary": "s", "concerns": [], "uncovered": []});
    assert!(semantic_problems(&state, &plan, &approve).is_empty());
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
    apply_build(&mut state, 0, &done()).unwrap();
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
    let silent = json!({"decision": "COMPLETE", "summary": "s", "findings": [], "uncovered": []});
    assert_eq!(semantic_problems(&state, &plan1, &silent).len(), 1);
    let complete =
        json!({"decision": "COMPLETE", "summary": "s", "findings": [], "uncovered": not_done});
    assert!(semantic_problems(&state, &plan1, &complete).is_empty());
    apply_build(&mut state, 0, &done()).unwrap();
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

#[test]
fn a_blocked_builder_is_retried_as_the_policy_allows_then_pauses_blocked_without_a_tester() {
    let blocked = json!({"status": "blocked", "summary": "s", "files_changed": [], "checks": [],
                         "blockers": ["the API key for the payment sandbox is missing"]});
    let mut state = approved(1);
    assert_eq!(state.phase, Phase::Build { milestone: 0 });
    // One ordinary retry, the blocker handed to the builder as a finding; never the tester.
    apply_build(&mut state, 0, &blocked).unwrap();
    assert_eq!(state.phase, Phase::Build { milestone: 0 });
    assert!(state.open_findings[0].text.contains("payment sandbox"));
    let pause = apply_build(&mut state, 0, &blocked).unwrap_err();
    assert_eq!(pause.code, PauseCode::PausedBlocked);
    assert!(pause.reason.contains("payment sandbox"), "{}", pause.reason);
    assert!(pause.reason.contains("2 attempts"), "{}", pause.reason);
    assert_eq!(state.phase, Phase::Build { milestone: 0 });
    // With a stronger model configured, that attempt comes first.
    let mut state = approved(1);
    state.builder_retry = Some(crate::run::state::BuilderRetryPolicy {
        strong_model: "strong".into(),
        strong_effort: "high".into(),
        checker_model: "checker".into(),
    });
    apply_build(&mut state, 0, &blocked).unwrap();
    apply_build(&mut state, 0, &blocked).unwrap();
    assert!(state.milestones[&0].strong_attempt_used);
    let pause = apply_build(&mut state, 0, &blocked).unwrap_err();
    assert_eq!(pause.code, PauseCode::PausedBlocked);
    // A done report goes on to the tester.
    let mut state = approved(1);
    apply_build(&mut state, 0, &done()).unwrap();
    assert_eq!(state.phase, Phase::Test { milestone: 0 });
}

#[test]
fn a_brief_sets_aside_an_objective_command_with_a_reason_and_it_is_not_replayed() {
    let objective = "Add `slugify` to text.py. `python3 -m unittest -q` must pass, and `make e2e` must pass too.";
    let mut state = new_state();
    state.objective = objective.into();
    state.verification = crate::verify::Verification::for_objective(objective);
    assert_eq!(
        state.verification.required_checks,
        ["python3 -m unittest -q", "make e2e"]
    );
    let brief = |aside: Value| {
        json!({"summary": "s", "goals": ["g"], "constraints": [],
            "acceptance_criteria": [{"id": "a", "text": "t", "covers": [objective]}],
            "open_questions": [], "set_aside_commands": aside})
    };
    let plan = StagePlan {
        role: Role::Requirements,
        kind: crate::report::ReportKind::Requirements,
        milestone: None,
        purpose: AttemptPurpose::Fresh,
    };
    // A set-aside must name a replayed command of the objective, once, with a real reason.
    let wrong = brief(json!([
        {"command": "make  deploy", "reason": "there is no deploy target on this machine at all"},
        {"command": "make e2e", "reason": "no browser"},
        {"command": "make   e2e", "reason": "the e2e suite needs a browser this machine lacks"}
    ]));
    let problems = semantics::semantic_problems(&state, &plan, &wrong);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`make  deploy`, which is not a command")
                && p.contains("`python3 -m unittest -q`")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("too short")),
        "{problems:?}"
    );
    assert!(problems.iter().any(|p| p.contains("twice")), "{problems:?}");

    let right = brief(json!([
        {"command": "make   e2e", "reason": "the e2e suite drives a browser this machine does not have"}
    ]));
    assert_eq!(
        semantics::semantic_problems(&state, &plan, &right),
        Vec::<String>::new()
    );
    apply_requirements(&mut state, &right);
    assert_eq!(
        state.verification.required_checks,
        ["python3 -m unittest -q"]
    );
    let aside = &state.verification.objective_commands[1];
    assert_eq!(aside.role, crate::verify::objective::CommandRole::SetAside);
    assert!(
        aside
            .why
            .contains("instead of required_check: the e2e suite drives a browser")
    );
    let shown = crate::verify::objective::describe(&state.verification.objective_commands, &[]);
    assert!(
        shown.contains("- `make e2e`: set_aside (set aside by the requirements"),
        "{shown}"
    );

    // A brief written again starts from the objective: without the set-aside, it is replayed.
    apply_requirements(&mut state, &brief(Value::Null));
    assert_eq!(
        state.verification.required_checks,
        ["python3 -m unittest -q", "make e2e"]
    );
}
