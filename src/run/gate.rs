//! The verification steps around the stages and in the final gate (issue 11): saving the base
//! tree and running the plan's checks on it, replaying the checks with the builder's changed
//! tests restored to their originals, and asking a person about the criteria no check verifies.
//! The rules themselves are pure (`verify`, `review`, `treediff`); this module does the I/O and
//! the checkpoints, for the driver.

use super::driver::{DriverError, ReplayResult, ReplayTree, RunHandle, StageRunner};
use super::flow::{self, PauseDecision, StagePlan};
use super::review;
use super::state::{CriterionResult, RunState};
use super::treediff::Comparison;
use super::verify;
use crate::pause::PauseCode;
use crate::role::Role;

/// Saves the base tree before the first stage, and runs the plan's checks on it before the plan
/// review and before a build (each check once). `Ok(Err(pause))` pauses.
pub(super) async fn prepare_base<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    plan: &StagePlan,
) -> Result<Result<(), PauseDecision>, DriverError> {
    let built = run.state.attempts.iter().any(|a| a.role == Role::Builder);
    if !run.state.verification.base_saved && !built {
        match runner.save_base(&run.state).await {
            Ok(unclosed) => run.state.verification.base_unclosed = unclosed,
            Err(pause) => return Ok(Err(pause)),
        }
        run.state.verification.base_saved = true;
        run.activity("base tree saved", None)?;
        run.checkpoint()?;
    }
    if !run.state.verification.base_saved {
        return Ok(Ok(()));
    }
    let plan_value = match plan.role {
        Role::PlanReviewer => run.state.latest_plan().map(|p| p.plan.clone()),
        Role::Builder => run.state.approved_plan().map(|p| p.plan.clone()),
        _ => None,
    };
    let Some(plan_value) = plan_value else {
        return Ok(Ok(()));
    };
    let mut missing: Vec<String> = Vec::new();
    for milestone in plan_value["milestones"].as_array().into_iter().flatten() {
        for c in milestone["acceptance_criteria"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if c["human_review"].as_bool().unwrap_or(false) {
                continue;
            }
            if let Some(check) = c["check"].as_str()
                && !run.state.verification.base_checks.contains_key(check)
                && !missing.iter().any(|m| m == check)
            {
                missing.push(check.to_owned());
            }
        }
    }
    if missing.is_empty() {
        return Ok(Ok(()));
    }
    let prepare = super::prepare::through(&plan_value, None);
    let replayed = match runner
        .replay(&run.state, &ReplayTree::Base, &prepare, &missing)
        .await
    {
        Ok(replayed) => replayed,
        Err(pause) => return Ok(Err(pause)),
    };
    for r in replayed {
        run.state.verification.base_checks.insert(
            r.command,
            verify::BaseCheck {
                passed: r.passed,
                detail: r.detail,
            },
        );
    }
    run.activity("checks run on the base tree", Some(&missing.join("; ")))?;
    run.checkpoint()?;
    Ok(Ok(()))
}

/// Tests of the base tree the builder modified or deleted (`comparison`: the work tree against
/// the base, `None` when no base was saved): the checks are replayed with those files restored;
/// if they fail, a person must accept the new tests (`Some(pause)`).
pub(super) async fn judge_test_changes<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    comparison: Option<&Comparison>,
    commands: &[String],
) -> Result<Option<PauseDecision>, DriverError> {
    let Some(comparison) = comparison else {
        return Ok(None);
    };
    let changed = comparison.changed_tests(commands);
    if changed.is_empty() {
        return Ok(None);
    }
    let diff = comparison.diff_of(&changed, 20_000);
    let diff_sha = crate::report::evidence::sha256_hex(diff.as_bytes());
    if let Some(review) = &run.state.verification.test_change_review
        && review.diff_sha256 == diff_sha
        && review.accepted_at.is_some()
    {
        return Ok(None);
    }
    let replayed = match runner
        .replay(
            &run.state,
            &ReplayTree::FinalWithBaseFiles(changed.clone()),
            &super::replay_verdicts::prepare_through(&run.state, None),
            commands,
        )
        .await
    {
        Ok(replayed) => replayed,
        Err(pause) => return Ok(Some(pause)),
    };
    let failing: Vec<&ReplayResult> = replayed.iter().filter(|r| !r.passed).collect();
    run.activity(
        "checks replayed with the original tests",
        Some(&format!("{} of {} failed", failing.len(), replayed.len())),
    )?;
    if failing.is_empty() {
        return Ok(None);
    }
    let mut shown = format!(
        "The builder changed tests that exist on the base tree ({}), and with the original tests restored these checks fail:\n",
        changed.join(", ")
    );
    for r in &failing {
        shown.push_str(&format!(
            "- `{}`: {}\n",
            r.command,
            super::treediff::cut(&r.detail, 1500)
        ));
    }
    shown.push_str("\nThe test diff (base → final):\n\n");
    shown.push_str(&diff);
    let path = run.dir.join("review").join("test-changes.md");
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let _ = std::fs::write(&path, &shown);
    run.state.verification.test_change_review = Some(verify::TestChangeReview {
        shown: shown.clone(),
        diff_sha256: diff_sha,
        accepted_at: None,
    });
    Ok(Some(PauseDecision::new(
        PauseCode::AwaitingTestChangeReview,
        format!(
            "the checks fail with the original tests ({}); the test diff and the output are in {}:\n{}",
            changed.join(", "),
            path.display(),
            super::treediff::cut(&shown, 4000)
        ),
    )))
}

/// Criteria no check can verify wait for a person (`Some(pause)`), with what they are shown
/// (the diff from `comparison`, the work tree against the base, when one was saved).
pub(super) fn ask_people(
    run: &mut RunHandle,
    comparison: Option<&Comparison>,
) -> Result<Option<PauseDecision>, DriverError> {
    let pending = review::pending_reviews(&run.state, comparison);
    if pending.is_empty() {
        run.state.verification.pending_reviews.clear();
        return Ok(None);
    }
    let dir = run.dir.join("review");
    let _ = std::fs::create_dir_all(&dir);
    let mut reason = format!(
        "{} criteria need a person (every check passed on the final tree):",
        pending.len()
    );
    for p in &pending {
        let path = dir.join(format!("{}.md", p.criterion_id));
        let _ = std::fs::write(&path, &p.shown);
        reason.push_str(&format!(
            "\n- {} (milestone {}): {}; review text: {}\n{}",
            p.criterion_id,
            p.milestone + 1,
            p.why,
            path.display(),
            super::treediff::cut(&p.shown, 2000)
        ));
    }
    run.activity("awaiting human review", None)?;
    run.state.verification.pending_reviews = pending;
    Ok(Some(PauseDecision::new(
        PauseCode::AwaitingHumanReview,
        reason,
    )))
}

/// The objective's own checks as pseudo-criteria of the last milestone.
pub(super) fn required_results(
    state: &RunState,
    replayed: &[ReplayResult],
) -> Vec<CriterionResult> {
    let last = flow::milestones(state).len().saturating_sub(1);
    state
        .verification
        .required_checks
        .iter()
        .enumerate()
        .map(|(i, check)| {
            let (verdict, detail) = match replayed.iter().find(|r| &r.command == check) {
                Some(r) if r.passed => ("PASS", String::new()),
                Some(r) => (
                    "FAIL",
                    format!(
                        "the objective requires `{check}` to pass, and it failed on the final tree: {}",
                        r.detail
                    ),
                ),
                None => ("FAIL", format!("`{check}` was not replayed")),
            };
            CriterionResult {
                milestone: last,
                criterion_id: review::required_id(i),
                verdict: verdict.into(),
                checks: vec![check.clone()],
                detail,
            }
        })
        .collect()
}
