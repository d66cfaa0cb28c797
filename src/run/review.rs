//! People in the completion gate: which criteria no check can verify, what a person is shown
//! about each, how `resume --accept/--reject/--accept-test-changes` records their answer, and how
//! the final message says per criterion how it was verified.
//!
//! A criterion needs a person when the plan marks it `human_review`, or when its `fail_to_pass`
//! check already passed on the base tree and does not fail against the base code with the work's
//! tests either (passing it cannot show the change; `run::witness`). An acceptance binds
//! to the sha256 of the exact text shown; when the work changes, the text changes and the
//! criterion is asked again.

use chrono::{DateTime, Utc};

use super::flow::milestones;
use super::state::{Finding, Phase, RunState};
use crate::verify::treediff::Comparison;
use crate::verify::{self, CheckKind, HumanDecision, PendingReview, VerifiedCriterion};

/// One acceptance criterion of the approved plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Criterion {
    pub milestone: usize,
    pub id: String,
    pub text: String,
    /// `None` for a human-review criterion.
    pub check: Option<String>,
    pub kind: CheckKind,
}

/// Every criterion of the approved plan, in order.
pub fn plan_criteria(state: &RunState) -> Vec<Criterion> {
    let mut out = Vec::new();
    for (m, milestone) in milestones(state).iter().enumerate() {
        for c in milestone["acceptance_criteria"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let human = c["human_review"].as_bool().unwrap_or(false);
            out.push(Criterion {
                milestone: m,
                id: c["id"].as_str().unwrap_or_default().to_owned(),
                text: c["text"].as_str().unwrap_or_default().to_owned(),
                check: if human {
                    None
                } else {
                    c["check"].as_str().map(str::to_owned)
                },
                kind: CheckKind::of_criterion(c),
            });
        }
    }
    out
}

/// Why `criterion` needs a person, if it does.
pub fn why_person(state: &RunState, criterion: &Criterion) -> Option<String> {
    if criterion.check.is_some()
        && let Some(result) = state.criteria.iter().find(|c| {
            c.milestone == criterion.milestone
                && c.criterion_id == criterion.id
                && c.verdict == "HUMAN_REVIEW"
        })
    {
        return Some(format!(
            "the tester reported HUMAN_REVIEW for it although it has a check{}",
            if result.detail.trim().is_empty() {
                String::new()
            } else {
                format!(" ({})", result.detail.trim())
            }
        ));
    }
    match &criterion.check {
        None => Some("the plan marks it for human review: no command can decide it".into()),
        Some(check) if criterion.kind == CheckKind::FailToPass => state
            .verification
            .base_checks
            .get(check)
            .filter(|b| b.held() && !state.verification.witnesses.contains(check))
            .map(|_| {
                format!(
                    "its fail_to_pass check `{check}` already passes on the base tree and does not fail against the base code with the work's tests (or no code changed), so passing it cannot show the change"
                )
            }),
        Some(_) => None,
    }
}

/// The text a person is shown for `criterion`: what it says, why a person is asked, and the part
/// of the diff (base → work tree) that bears on it.
pub fn review_text(criterion: &Criterion, why: &str, base: Option<&Comparison>) -> String {
    let mut out = format!(
        "Criterion {} of milestone {}: {}\nWhy a person is asked: {why}\n",
        criterion.id,
        criterion.milestone + 1,
        criterion.text
    );
    if let Some(check) = &criterion.check {
        out.push_str(&format!(
            "Its check: `{check}` ({})\n",
            criterion.kind.as_str()
        ));
    }
    match base {
        Some(comparison) => {
            let changes = comparison.changes();
            if changes.is_empty() {
                out.push_str("\nThe work tree does not differ from the base tree.\n");
            } else {
                let files = crate::verify::treediff::files_bearing_on(
                    changes,
                    &criterion.text,
                    criterion.check.as_deref(),
                );
                out.push_str(&format!(
                    "\nThe diff bearing on it ({} of {} changed files):\n\n",
                    files.len(),
                    changes.len()
                ));
                out.push_str(&comparison.diff_of(&files, 6000));
            }
        }
        None => out.push_str("\n(The base tree was not saved for this run: no diff.)\n"),
    }
    out
}

/// The pseudo-criterion a person answers when no replayed check shows the change.
pub const CHANGE_SHOWN: &str = "change-shown";

/// The pseudo-criterion [`CHANGE_SHOWN`], asked when `Verification::unwitnessed` says why.
fn change_criterion(state: &RunState) -> Option<(Criterion, String)> {
    let why = state.verification.unwitnessed.clone()?;
    Some((
        Criterion {
            milestone: milestones(state).len().saturating_sub(1),
            id: CHANGE_SHOWN.into(),
            text: "the work makes the change the objective asks for (no replayed check shows it: accept only if you checked the change yourself)".into(),
            check: None,
            kind: CheckKind::FailToPass,
        },
        why,
    ))
}

/// The criteria that still need a person, with the text they would be shown.
pub fn pending_reviews(state: &RunState, base: Option<&Comparison>) -> Vec<PendingReview> {
    let mut out = Vec::new();
    let asked = plan_criteria(state)
        .into_iter()
        .filter_map(|c| why_person(state, &c).map(|why| (c, why)))
        .chain(change_criterion(state));
    for (criterion, why) in asked {
        let (shown, sha) = verify::shown(review_text(&criterion, &why, base));
        if state
            .verification
            .accepted(criterion.milestone, &criterion.id, &sha)
            .is_none()
        {
            out.push(PendingReview {
                milestone: criterion.milestone,
                criterion_id: criterion.id,
                why,
                shown,
                shown_sha256: sha,
            });
        }
    }
    out
}

/// A person's answers given to `resume`.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    pub accept: Vec<String>,
    /// `(criterion, because)`.
    pub reject: Option<(String, String)>,
    pub accept_test_changes: bool,
}

impl Decisions {
    pub fn is_empty(&self) -> bool {
        self.accept.is_empty() && self.reject.is_none() && !self.accept_test_changes
    }
}

/// Records a person's answers. Only criteria the run is waiting on can be accepted or rejected;
/// a rejection sends the criterion's milestone back to the builder with the reason as a finding.
pub fn apply_decisions(
    state: &mut RunState,
    decisions: &Decisions,
    now: DateTime<Utc>,
) -> Result<(), String> {
    let waiting: Vec<String> = state
        .verification
        .pending_reviews
        .iter()
        .map(|p| p.criterion_id.clone())
        .collect();
    let snapshot = state.verification.pending_reviews.clone();
    let known = |id: &str| -> Result<PendingReview, String> {
        snapshot
            .iter()
            .find(|p| p.criterion_id == id)
            .cloned()
            .ok_or_else(|| {
                if waiting.is_empty() {
                    format!("no criterion waits for a person's review (asked: {id})")
                } else {
                    format!(
                        "criterion {id} does not wait for a person's review (waiting: {})",
                        waiting.join(", ")
                    )
                }
            })
    };
    if decisions.accept_test_changes {
        match &mut state.verification.test_change_review {
            Some(review) if review.accepted_at.is_none() => review.accepted_at = Some(now),
            _ => return Err("no test changes wait for a person's acceptance".into()),
        }
    }
    for id in &decisions.accept {
        let pending = known(id)?;
        if decisions.reject.as_ref().is_some_and(|(r, _)| r == id) {
            return Err(format!(
                "criterion {id} cannot be both accepted and rejected"
            ));
        }
        state.verification.human_decisions.push(HumanDecision {
            milestone: pending.milestone,
            criterion_id: pending.criterion_id.clone(),
            accepted: true,
            reason: None,
            at: now,
            shown: pending.shown,
            shown_sha256: pending.shown_sha256,
        });
        state
            .verification
            .pending_reviews
            .retain(|p| p.criterion_id != *id);
    }
    if let Some((id, because)) = &decisions.reject {
        if because.trim().is_empty() {
            return Err("--reject needs --because TEXT (the reason goes to the builder)".into());
        }
        let pending = known(id)?;
        let m = pending.milestone;
        state.verification.human_decisions.push(HumanDecision {
            milestone: m,
            criterion_id: pending.criterion_id.clone(),
            accepted: false,
            reason: Some(because.clone()),
            at: now,
            shown: pending.shown,
            shown_sha256: pending.shown_sha256,
        });
        state.verification.pending_reviews.clear();
        for (index, progress) in state.milestones.iter_mut() {
            if *index >= m {
                progress.accepted = false;
            }
        }
        let progress = state.milestones.entry(m).or_default();
        // A person's rejection is a new start for the builder, not a step of its retry ladder.
        progress.builder_rounds = 0;
        progress.strong_attempt_used = false;
        state.open_findings.retain(|f| f.milestone != m);
        state.open_findings.push(Finding {
            id: id.clone(),
            milestone: m,
            text: format!("a person rejected criterion {id}: {because}"),
            source: "human_review".into(),
        });
        state.phase = Phase::Build { milestone: m };
    }
    Ok(())
}

/// Per criterion, how it was verified (set when the run completes).
pub fn verified_summary(state: &RunState) -> Vec<VerifiedCriterion> {
    let mut out = Vec::new();
    for criterion in plan_criteria(state) {
        let accepted = state.verification.human_decisions.iter().rev().find(|d| {
            d.accepted && d.milestone == criterion.milestone && d.criterion_id == criterion.id
        });
        let how = match (why_person(state, &criterion), accepted, &criterion.check) {
            (Some(_), Some(decision), _) => format!(
                "accepted by a person at {} (the text they were shown is in run.json)",
                decision.at.to_rfc3339()
            ),
            (Some(why), None, _) => format!("NOT verified: {why}"),
            (None, _, Some(check)) => {
                let base = state.verification.base_checks.get(check);
                let before = match (criterion.kind, base) {
                    (CheckKind::FailToPass, Some(b)) if !b.passed => "; it failed on the base tree",
                    (CheckKind::FailToPass, Some(b)) if !b.held() => {
                        "; it ran no test on the base tree"
                    }
                    (CheckKind::FailToPass, Some(_)) => {
                        "; it passed on the base tree, which lacked the work's tests, and failed against the base code with them"
                    }
                    (CheckKind::PassToPass, Some(b)) if b.held() => {
                        "; it also passed on the base tree"
                    }
                    (CheckKind::PassToPass, Some(_)) => "; it failed on the base tree",
                    _ => "",
                };
                let reused = match state
                    .verification
                    .final_checks
                    .get(check)
                    .and_then(|c| c.reused_from)
                {
                    Some(of) => format!(
                        "; not run again: the verdict of {of}, the same check after the same steps in the same tree, reused"
                    ),
                    None => String::new(),
                };
                format!(
                    "replayed `{check}` on the final tree ({}){before}{reused}",
                    criterion.kind.as_str()
                )
            }
            (None, _, None) => "NOT verified".into(),
        };
        out.push(VerifiedCriterion {
            milestone: criterion.milestone,
            criterion_id: criterion.id,
            how,
        });
    }
    let last = milestones(state).len().saturating_sub(1);
    let witnesses = &state.verification.witnesses;
    if !witnesses.is_empty() {
        out.push(VerifiedCriterion {
            milestone: last,
            criterion_id: CHANGE_SHOWN.into(),
            how: format!(
                "replayed: {} failed on the base tree, passes on the result, and fails with the code changes taken back",
                witnesses
                    .iter()
                    .map(|w| format!("`{w}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    } else if let Some((_, why)) = change_criterion(state) {
        let accepted = state
            .verification
            .human_decisions
            .iter()
            .rev()
            .find(|d| d.accepted && d.criterion_id == CHANGE_SHOWN);
        out.push(VerifiedCriterion {
            milestone: last,
            criterion_id: CHANGE_SHOWN.into(),
            how: match accepted {
                Some(d) => format!("accepted by a person at {} ({why})", d.at.to_rfc3339()),
                None => format!("NOT verified: {why}"),
            },
        });
    }
    for (i, check) in state.verification.required_checks.iter().enumerate() {
        out.push(VerifiedCriterion {
            milestone: milestones(state).len().saturating_sub(1),
            criterion_id: required_id(i),
            how: format!("the objective's own check `{check}`, replayed on the final tree"),
        });
    }
    out
}

/// The pseudo-criterion id of the objective's `index`th required check.
pub fn required_id(index: usize) -> String {
    format!("objective-check-{}", index + 1)
}

/// What a person's terminal shows at completion: the completion line's headline, how many
/// criteria it covers and where each one's account is (`autocode status`; the activity log
/// and `status --json` keep [`completion_message`] whole).
pub fn completion_headline(verified: &[VerifiedCriterion], run_id: &str) -> String {
    let message = completion_message(verified);
    let headline = message.lines().next().unwrap_or_default();
    match verified.len() {
        0 => headline.to_owned(),
        n => format!(
            "{headline} ({n} criteri{}; `autocode status {run_id}` shows how each was verified)",
            if n == 1 { "on" } else { "a" }
        ),
    }
}

/// The completion line: per criterion, how it was verified.
pub fn completion_message(verified: &[VerifiedCriterion]) -> String {
    let all_replayed = verified
        .iter()
        .all(|v| v.how.starts_with("replayed") || v.how.starts_with("the objective"));
    let mut out = if verified.is_empty() {
        "complete".to_owned()
    } else if all_replayed {
        "complete: every criterion verified and replayed on the final tree".to_owned()
    } else {
        "complete: every criterion verified (see how, per criterion)".to_owned()
    };
    for v in verified {
        out.push_str(&format!(
            "\n  {} (milestone {}): {}",
            v.criterion_id,
            v.milestone + 1,
            v.how
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::flow::tests::new_state;
    use crate::run::flow::{apply_approval, apply_plan};
    use crate::verify::BaseCheck;
    use serde_json::json;

    fn approved() -> RunState {
        let mut state = new_state();
        apply_plan(
            &mut state,
            &json!({"summary": "s", "milestones": [{"id": "M1", "title": "t", "description": "",
                "acceptance_criteria": [
                    {"id": "AC1", "text": "works", "check": "pytest", "human_review": false, "kind": "fail_to_pass"},
                    {"id": "AC2", "text": "reads well", "check": null, "human_review": true, "kind": "fail_to_pass"},
                    {"id": "AC3", "text": "old stays", "check": "make old", "human_review": false, "kind": "pass_to_pass"},
                    {"id": "AC4", "text": "vacuous", "check": "python3 -c 1", "human_review": false, "kind": "fail_to_pass"}]}]}),
        );
        let token = state.latest_plan().unwrap().token();
        apply_approval(&mut state, &token).unwrap();
        for (check, passed) in [
            ("pytest", false),
            ("make old", true),
            ("python3 -c 1", true),
        ] {
            state.verification.base_checks.insert(
                check.into(),
                BaseCheck {
                    passed,
                    detail: String::new(),
                    tests: Default::default(),
                    test_ids: None,
                    reused_from: None,
                },
            );
        }
        state
    }

    #[test]
    fn a_fail_to_pass_check_that_ran_no_test_on_the_base_failed_there() {
        // `python3 -m unittest discover -p test_new.py` before the work adds test_new.py: Python
        // 3.11 prints "Ran 0 tests" and exits 0. Its tests do not exist yet: it did not pass.
        let mut state = approved();
        let base = state.verification.base_checks.get_mut("pytest").unwrap();
        base.passed = true;
        base.tests = crate::verify::testcount::TestTally::Counted(0);
        let pending = pending_reviews(&state, None);
        let ids: Vec<&str> = pending.iter().map(|p| p.criterion_id.as_str()).collect();
        assert_eq!(ids, ["AC2", "AC4"]);
        // One test run on the base tree and a pass: that check is vacuous.
        let base = state.verification.base_checks.get_mut("pytest").unwrap();
        base.tests = crate::verify::testcount::TestTally::Counted(1);
        let pending = pending_reviews(&state, None);
        let ids: Vec<&str> = pending.iter().map(|p| p.criterion_id.as_str()).collect();
        assert_eq!(ids, ["AC1", "AC2", "AC4"]);
    }

    #[test]
    fn a_fail_to_pass_suite_that_passed_on_the_base_is_shown_by_failing_against_the_base_code() {
        // `npm test` passes on the base tree, which lacks the test the work adds; with the work's
        // code taken back it fails (the witness replay): the change is shown, no person asked.
        let mut state = approved();
        assert_eq!(
            super::super::witness::passed_on_base_though_fail_to_pass(&state),
            ["python3 -c 1"]
        );
        state.verification.witnesses = vec!["python3 -c 1".into()];
        let pending = pending_reviews(&state, None);
        let ids: Vec<&str> = pending.iter().map(|p| p.criterion_id.as_str()).collect();
        assert_eq!(ids, ["AC2"]);
        let summary = verified_summary(&state);
        assert!(
            summary[3]
                .how
                .contains("failed against the base code with them"),
            "{summary:?}"
        );
    }

    #[test]
    fn human_and_vacuous_criteria_need_a_person_until_accepted() {
        let mut state = approved();
        let work = tempfile::tempdir().unwrap();
        state.work_tree = work.path().to_owned();
        let pending = pending_reviews(&state, None);
        let ids: Vec<&str> = pending.iter().map(|p| p.criterion_id.as_str()).collect();
        assert_eq!(ids, ["AC2", "AC4"]);
        let mut unsure = state.clone();
        unsure.criteria.push(crate::run::state::CriterionResult {
            milestone: 0,
            criterion_id: "AC1".into(),
            verdict: "HUMAN_REVIEW".into(),
            checks: vec![],
            detail: "cannot tell".into(),
        });
        let pending_unsure = pending_reviews(&unsure, None);
        assert_eq!(pending_unsure.len(), 3);
        assert!(
            pending_unsure[0]
                .why
                .contains("the tester reported HUMAN_REVIEW")
        );
        assert!(pending[1].why.contains("already passes on the base tree"));
        state.verification.pending_reviews = pending;
        let now = Utc::now();
        assert!(
            apply_decisions(
                &mut state,
                &Decisions {
                    accept: vec!["AC1".into()],
                    ..Default::default()
                },
                now
            )
            .is_err()
        );
        apply_decisions(
            &mut state,
            &Decisions {
                accept: vec!["AC2".into(), "AC4".into()],
                ..Default::default()
            },
            now,
        )
        .unwrap();
        assert!(pending_reviews(&state, None).is_empty());
        assert_eq!(state.verification.human_decisions[0].shown_sha256.len(), 64);
        let summary = verified_summary(&state);
        assert!(
            summary[0].how.starts_with("replayed `pytest`"),
            "{summary:?}"
        );
        assert!(summary[0].how.contains("failed on the base tree"));
        assert!(summary[1].how.starts_with("accepted by a person"));
        assert!(summary[2].how.contains("also passed on the base tree"));
        let message = completion_message(&summary);
        assert!(
            !message.contains("every criterion verified and replayed"),
            "{message}"
        );
        // The terminal's line: the headline, the count, and where the account is.
        let headline = completion_headline(&summary, "R1");
        assert_eq!(
            headline,
            format!(
                "{} ({} criteria; `autocode status R1` shows how each was verified)",
                message.lines().next().unwrap(),
                summary.len()
            )
        );
        assert_eq!(completion_headline(&[], "R1"), "complete");
    }

    #[test]
    fn a_change_no_check_shows_waits_for_a_person() {
        let mut state = approved();
        state
            .verification
            .base_checks
            .get_mut("python3 -c 1")
            .unwrap()
            .passed = false;
        assert!(
            pending_reviews(&state, None)
                .iter()
                .all(|p| p.criterion_id != CHANGE_SHOWN)
        );
        state.verification.unwitnessed = Some("only a guard".into());
        let pending = pending_reviews(&state, None);
        let change = pending
            .iter()
            .find(|p| p.criterion_id == CHANGE_SHOWN)
            .expect("change-shown is asked");
        assert!(change.shown.contains("only a guard"), "{}", change.shown);
        assert!(
            verified_summary(&state)
                .iter()
                .any(|v| v.criterion_id == CHANGE_SHOWN && v.how.starts_with("NOT verified"))
        );
        state.verification.pending_reviews = pending;
        apply_decisions(
            &mut state,
            &Decisions {
                accept: vec![CHANGE_SHOWN.into(), "AC2".into()],
                ..Default::default()
            },
            Utc::now(),
        )
        .unwrap();
        assert!(pending_reviews(&state, None).is_empty());
        assert!(
            verified_summary(&state).iter().any(
                |v| v.criterion_id == CHANGE_SHOWN && v.how.starts_with("accepted by a person")
            )
        );
        state.verification.unwitnessed = None;
        state.verification.witnesses = vec!["pytest".into()];
        let how = verified_summary(&state);
        assert!(how.iter().any(|v| v.criterion_id == CHANGE_SHOWN
            && v.how.contains("`pytest` failed on the base tree")));
    }

    #[test]
    fn an_acceptance_binds_to_the_text_shown() {
        let mut state = approved();
        let base = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        std::fs::write(base.path().join("a.txt"), "old\n").unwrap();
        std::fs::write(work.path().join("a.txt"), "new\n").unwrap();
        state.work_tree = work.path().to_owned();
        let compare = || Comparison::of_dirs(base.path(), work.path());
        state.verification.pending_reviews = pending_reviews(&state, Some(&compare()));
        assert!(state.verification.pending_reviews[0].shown.contains("+new"));
        apply_decisions(
            &mut state,
            &Decisions {
                accept: vec!["AC2".into(), "AC4".into()],
                ..Default::default()
            },
            Utc::now(),
        )
        .unwrap();
        assert!(pending_reviews(&state, Some(&compare())).is_empty());
        std::fs::write(work.path().join("a.txt"), "newer\n").unwrap();
        assert_eq!(pending_reviews(&state, Some(&compare())).len(), 2);
    }

    #[test]
    fn a_rejection_sends_the_milestone_back_with_the_reason() {
        let mut state = approved();
        state.verification.pending_reviews = pending_reviews(&state, None);
        state.milestones.entry(0).or_default().accepted = true;
        state.milestones.entry(0).or_default().builder_rounds = 2;
        state.phase = Phase::FinalGate;
        let reject = Decisions {
            reject: Some(("AC2".into(), String::new())),
            ..Default::default()
        };
        assert!(apply_decisions(&mut state, &reject, Utc::now()).is_err());
        let reject = Decisions {
            reject: Some(("AC2".into(), "the wording is rude".into())),
            ..Default::default()
        };
        apply_decisions(&mut state, &reject, Utc::now()).unwrap();
        assert_eq!(state.phase, Phase::Build { milestone: 0 });
        assert!(!state.milestones[&0].accepted);
        assert_eq!(state.milestones[&0].builder_rounds, 0);
        assert!(state.open_findings[0].text.contains("the wording is rude"));
        assert!(!state.verification.human_decisions[0].accepted);
    }

    #[test]
    fn test_changes_are_accepted_only_when_asked() {
        let mut state = approved();
        let accept = Decisions {
            accept_test_changes: true,
            ..Default::default()
        };
        assert!(apply_decisions(&mut state, &accept, Utc::now()).is_err());
        state.verification.test_change_review = Some(verify::TestChangeReview {
            shown: "diff".into(),
            diff_sha256: "x".into(),
            accepted_at: None,
        });
        apply_decisions(&mut state, &accept, Utc::now()).unwrap();
        assert!(
            state
                .verification
                .test_change_review
                .unwrap()
                .accepted_at
                .is_some()
        );
    }
}
