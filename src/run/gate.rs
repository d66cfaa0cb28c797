//! The verification steps around the stages and in the final gate (issue 11): saving the base
//! tree and running the plan's checks on it, replaying the checks with the builder's changed
//! tests restored to their originals, and asking a person about the criteria no check verifies.
//! The rules themselves are pure (`verify`, `review`, `treediff`); this module does the I/O and
//! the checkpoints, for the driver.

use super::flow::{self, PauseDecision, StagePlan};
use super::handle::{DriverError, RunHandle};
use super::replay_verdicts;
use super::review;
use super::stage_runner::{ReplayResult, ReplayTree, StageRunner};
use super::state::{CriterionResult, RunState};
use super::witness;
use crate::pause::PauseCode;
use crate::role::Role;
use crate::verify;
use crate::verify::testcount::TestTally;
use crate::verify::treediff::Comparison;

/// Saves the base tree before the first stage, and runs the plan's checks on it before the plan
/// review and before a build (each check once, unless its prepare failed). `Ok(Err(pause))`
/// pauses.
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
    run_plan_checks_on_base(run, runner, &plan_value).await
}

/// Runs on the base tree the plan's checks and the objective's required checks that have not
/// run there yet (each check once a run, unless its prepare steps failed), after the plan's
/// prepare steps.
async fn run_plan_checks_on_base<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    plan_value: &serde_json::Value,
) -> Result<Result<(), PauseDecision>, DriverError> {
    // A check whose prepare steps failed did not run: it runs again, as a failed batch is never
    // reused (`replay_cache`), so a revised plan's mended step (or a network back) is seen.
    let settled = |check: &str| {
        run.state
            .verification
            .base_checks
            .get(check)
            .is_some_and(|b| !b.detail.starts_with(super::prepare::COULD_NOT_PREPARE))
    };
    // The objective's required checks run on the base tree too: one of them failing there and
    // passing on the result shows the change as well as a planned check does.
    let mut missing: Vec<String> = run
        .state
        .verification
        .required_checks
        .iter()
        .filter(|c| !settled(c))
        .cloned()
        .collect();
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
                && !settled(check)
                && !missing.iter().any(|m| m == check)
            {
                missing.push(check.to_owned());
            }
        }
    }
    if missing.is_empty() {
        return Ok(Ok(()));
    }
    let prepare = super::prepare::through(plan_value, None);
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
                tests: r.tests,
                reused_from: r.ran.reused_from(),
                test_ids: r.test_ids,
            },
        );
    }
    run.activity("checks run on the base tree", Some(&missing.join("; ")))?;
    run.checkpoint()?;
    Ok(Ok(()))
}

/// What a plan claims about the base tree that autocode measured false, as report problems for
/// the planner's repair: a `pass_to_pass` check that fails on the base tree guards nothing that
/// works now (its kind is `fail_to_pass` if the work will make it pass; otherwise the check is
/// wrong). Checks whose prepare steps failed there did not run and are not judged. The checks run
/// here are the ones the plan review then sees, so no check runs on the base tree twice.
/// Measured with a 1.5B planner: shown the verdict only in the plan review and in its revision
/// prompt, it kept the kind through two review rounds (`PAUSED_PLANNING_BUDGET`).
pub(super) async fn plan_base_problems<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    plan_value: &serde_json::Value,
) -> Result<Result<Vec<String>, PauseDecision>, DriverError> {
    if !run.state.verification.base_saved {
        return Ok(Ok(Vec::new()));
    }
    if let Err(pause) = run_plan_checks_on_base(run, runner, plan_value).await? {
        return Ok(Err(pause));
    }
    let mut problems = Vec::new();
    for milestone in plan_value["milestones"].as_array().into_iter().flatten() {
        for c in milestone["acceptance_criteria"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if c["human_review"].as_bool().unwrap_or(false)
                || verify::CheckKind::of_criterion(c) != verify::CheckKind::PassToPass
            {
                continue;
            }
            let (Some(id), Some(check)) = (c["id"].as_str(), c["check"].as_str()) else {
                continue;
            };
            let Some(base) = run.state.verification.base_checks.get(check) else {
                continue;
            };
            if base.held() || base.detail.starts_with(super::prepare::COULD_NOT_PREPARE) {
                continue;
            }
            problems.push(format!(
                "criterion {id:?}: its pass_to_pass check `{check}` FAILS on the base tree, run by autocode before any change ({}), so it guards nothing that works now: if the work is what will make it pass, its kind is fail_to_pass; otherwise write a check that passes now",
                base.why_not().trim()
            ));
        }
    }
    Ok(Ok(problems))
}

/// Tests the checks no longer run, whatever file held them: a check whose runner reports fewer
/// tests on the result than on the base tree, and the tests a check's run on the base tree named
/// (`testids`) that it no longer runs. Names are compared with `restored`'s run of the check
/// when there is one (the result with the base tree's test files put back: the base tests against
/// the result's code, so a renamed or moved test is not lost), else with the result's.
/// Whether a check that failed with the base tree's test files put back failed only because it
/// selects tests the work added (`pytest -k century` after new tests were appended to a test
/// file of the base tree): its runner says no test ran there, as it said on the base tree. It ran
/// no test of the base tree in either, so its failure says nothing about the base tests against
/// the result's code; the checks that run them (the suite's) are judged in the same replay.
fn runs_only_added_tests(state: &RunState, restored: &ReplayResult) -> bool {
    let ran_nothing = |tally: TestTally| tally == TestTally::Counted(0);
    ran_nothing(restored.tests)
        && state
            .verification
            .base_checks
            .get(&restored.command)
            .is_some_and(|base| !base.held() && ran_nothing(base.tests))
}

pub(super) fn lost_tests(state: &RunState, restored: &[ReplayResult]) -> Vec<String> {
    const SHOWN: usize = 10;
    let v = &state.verification;
    let mut out = Vec::new();
    for (command, now) in &v.final_checks {
        let Some(before) = v.base_checks.get(command) else {
            continue;
        };
        if let (Some(b), Some(a)) = (before.tests.count(), now.tests.count())
            && a < b
        {
            out.push(format!(
                "`{command}` ran {b} tests on the base tree and {a} on the result"
            ));
            continue;
        }
        let again = restored
            .iter()
            .find(|r| &r.command == command && r.ran.ran());
        let (after, against) = match again {
            Some(r) => (&r.test_ids, "with the base tree's test files put back"),
            None => (&now.test_ids, "on the result"),
        };
        let (Some(base_ids), Some(after)) = (&before.test_ids, after) else {
            continue;
        };
        let missing = base_ids.missing_from(after);
        if missing.is_empty() {
            continue;
        }
        let mut names: Vec<String> = missing
            .iter()
            .take(SHOWN)
            .map(|m| format!("`{m}`"))
            .collect();
        if missing.len() > SHOWN {
            names.push(format!("and {} more", missing.len() - SHOWN));
        }
        out.push(format!(
            "`{command}` no longer runs {} of the tests it ran on the base tree ({against}): {}",
            missing.len(),
            names.join(", ")
        ));
    }
    out
}

/// Test changes (`comparison`: the work tree against the base, `None` when no base was saved):
/// base tests modified or deleted, added files that shadow a base test or change collection,
/// inline tests removed or altered, lines that change the test framework (`verify::tamper`), and
/// checks that run fewer tests than on the base tree. The checks are replayed with the
/// restorable files put back to the base; if they fail, or if a change cannot be put back alone
/// (inline tests, tampering, fewer tests run), a person must accept the new tests
/// (`Some(pause)`).
pub(super) async fn judge_test_changes<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    comparison: Option<&Comparison>,
    commands: &[String],
) -> Result<Option<PauseDecision>, DriverError> {
    let Some(comparison) = comparison else {
        return Ok(None);
    };
    let blind = match checks_blind_to_failing_tests(run, runner, commands).await? {
        Ok(blind) => blind,
        Err(pause) => return Ok(Some(pause)),
    };
    let changes = comparison.test_changes(commands);
    if changes.is_empty() && lost_tests(&run.state, &[]).is_empty() && blind.is_empty() {
        return Ok(None);
    }
    let all = changes.all();
    let replayed = if changes.restorable.is_empty() {
        Vec::new()
    } else {
        match runner
            .replay(
                &run.state,
                &ReplayTree::FinalWithBaseFiles(changes.restorable.clone()),
                &super::replay_verdicts::prepare_through(&run.state, None),
                commands,
            )
            .await
        {
            Ok(replayed) => replayed,
            Err(pause) => return Ok(Some(pause)),
        }
    };
    let failing: Vec<&ReplayResult> = replayed
        .iter()
        .filter(|r| !replay_verdicts::passed(r) && !runs_only_added_tests(&run.state, r))
        .collect();
    if !replayed.is_empty() {
        run.activity(
            "checks replayed with the original tests",
            Some(&format!("{} of {} failed", failing.len(), replayed.len())),
        )?;
    }
    let fewer = lost_tests(&run.state, &replayed);
    if failing.is_empty()
        && changes.inline.is_empty()
        && changes.tampering.is_empty()
        && fewer.is_empty()
        && blind.is_empty()
    {
        return Ok(None);
    }
    // Tests no longer run from files that are not tests by name: the person sees every change.
    let diffed: Vec<String> = if all.is_empty() {
        comparison
            .changes()
            .iter()
            .map(|(rel, _)| rel.clone())
            .collect()
    } else {
        all.clone()
    };
    let mut diff = comparison.diff_of(&diffed, 20_000);
    for line in fewer.iter().chain(blind.iter().map(|(command, _)| command)) {
        diff.push_str(&format!("{line}\n"));
    }
    let diff_sha = crate::report::evidence::sha256_hex(diff.as_bytes());
    if let Some(review) = &run.state.verification.test_change_review
        && review.diff_sha256 == diff_sha
        && review.accepted_at.is_some()
    {
        return Ok(None);
    }
    let mut shown = String::new();
    if !failing.is_empty() {
        shown.push_str(&format!(
            "The builder changed tests of the base tree or what the runners collect ({}), and with the originals restored these checks fail:\n",
            changes.restorable.join(", ")
        ));
        for r in &failing {
            shown.push_str(&format!(
                "- `{}`: {}\n",
                r.command,
                crate::verify::treediff::cut(&replay_verdicts::failure(r), 1500)
            ));
        }
    }
    if !changes.inline.is_empty() {
        shown.push_str(&format!(
            "The builder removed or altered inline tests in files that also hold code ({}): the original tests cannot be put back without the original code, so a person reviews them.\n",
            changes.inline.join(", ")
        ));
    }
    if !changes.tampering.is_empty() {
        shown.push_str("The work's code changes the test framework's verdicts from inside the process that runs the tests: every check over it passes whatever the code does, so a person reviews these lines:\n");
        for t in &changes.tampering {
            shown.push_str(&format!("- {t}\n"));
        }
    }
    if !fewer.is_empty() {
        shown.push_str("The test runners no longer run tests they ran on the base tree:\n");
        for line in &fewer {
            shown.push_str(&format!("- {line}\n"));
        }
    }
    if !blind.is_empty() {
        shown.push_str("These checks ran tests on the final tree and still pass with every test file of the result made to fail (autocode added a failing statement to each), so they do not report the tree's tests: something the work changed decides their verdict (a module shadowing the runner or a library it loads, a recipe or script that no longer runs the tests, a setting that leaves them out); the diff shows what:\n");
        for (command, output) in &blind {
            shown.push_str(&format!(
                "- `{command}`: {}\n",
                crate::verify::treediff::cut(output, 1500)
            ));
        }
    }
    shown.push_str(if all.is_empty() {
        "\nThe diff (base → final; no changed file is a test by its name):\n\n"
    } else {
        "\nThe test diff (base → final):\n\n"
    });
    shown.push_str(&comparison.diff_of(&diffed, 20_000));
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
    let what = if !blind.is_empty() && failing.is_empty() && fewer.is_empty() && changes.is_empty()
    {
        format!(
            "checks pass whatever the result's tests say ({})",
            blind
                .iter()
                .map(|(command, _)| format!("`{command}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else if all.is_empty() {
        "the tests changed (fewer tests run)".to_owned()
    } else if failing.is_empty() && changes.inline.is_empty() && fewer.is_empty() {
        format!(
            "the work's code changes the test framework's verdicts ({})",
            all.join(", ")
        )
    } else {
        format!("the tests changed ({})", all.join(", "))
    };
    Ok(Some(PauseDecision::new(
        PauseCode::AwaitingTestChangeReview,
        format!(
            "{what} and the change needs a person; the test diff and the output are in {}:\n{}",
            path.display(),
            crate::verify::treediff::cut(&shown, 4000)
        ),
    )))
}

/// The checks that ran tests on the final tree (its runner's summary counts some, or it runs a
/// test file with its interpreter: `verify::canary::runs_a_test_directly`) and passed there, yet
/// pass again with every test file of the result made to fail
/// (`ReplayTree::FinalWithFailingTests`): each with its output there. A check that negates a
/// command (`! pytest test_old.py`) is not asked. A tree with no test file autocode can make
/// fail judges nothing.
async fn checks_blind_to_failing_tests<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    commands: &[String],
) -> Result<Result<Vec<(String, String)>, PauseDecision>, DriverError> {
    let asked: Vec<String> = commands
        .iter()
        .filter(|c| {
            run.state
                .verification
                .final_checks
                .get(*c)
                .is_some_and(|f| {
                    f.held()
                        && (f.tests.count().is_some_and(|n| n > 0)
                            || (f.tests.count().is_none()
                                && verify::canary::runs_a_test_directly(c)))
                })
                && !verify::testcount::negates_a_command(c)
        })
        .cloned()
        .collect();
    if asked.is_empty() {
        return Ok(Ok(Vec::new()));
    }
    let replayed = match runner
        .replay(
            &run.state,
            &ReplayTree::FinalWithFailingTests(commands.to_vec()),
            &super::replay_verdicts::prepare_through(&run.state, None),
            &asked,
        )
        .await
    {
        Ok(replayed) => replayed,
        Err(pause) => return Ok(Err(pause)),
    };
    let ran: Vec<&ReplayResult> = replayed.iter().filter(|r| r.ran.ran()).collect();
    let blind: Vec<(String, String)> = ran
        .iter()
        .filter(|r| replay_verdicts::passed(r))
        .map(|r| (r.command.clone(), r.detail.clone()))
        .collect();
    if !ran.is_empty() {
        run.activity(
            "checks replayed with the result's tests made to fail",
            Some(&format!(
                "{} of {} still passed there",
                blind.len(),
                ran.len()
            )),
        )?;
    }
    Ok(Ok(blind))
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
            crate::verify::treediff::cut(&p.shown, 2000)
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
                Some(r) if replay_verdicts::passed(r) => ("PASS", String::new()),
                Some(r) if r.ran == super::prepare::CheckRan::NotPrepared => (
                    super::prepare::NOT_PREPARED,
                    format!("the objective requires `{check}` to pass: {}", r.detail),
                ),
                Some(r) => (
                    "FAIL",
                    format!(
                        "the objective requires `{check}` to pass, and it failed on the final tree: {}",
                        replay_verdicts::failure(r)
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

/// Records the final gate's replays in `Verification::final_checks`.
pub(super) fn record_final(state: &mut RunState, replayed: &[ReplayResult]) {
    state.verification.final_checks = replayed
        .iter()
        .map(|r| {
            (
                r.command.clone(),
                verify::BaseCheck {
                    passed: r.passed,
                    detail: r.detail.clone(),
                    tests: r.tests,
                    test_ids: r.test_ids.clone(),
                    reused_from: r.ran.reused_from(),
                },
            )
        })
        .collect();
}

/// Finds the checks that show the change (`run::witness`): the candidates are replayed on the
/// result with its code changes taken back, and those that fail there are the witnesses. Sets
/// `witnesses` and `unwitnessed`; `Err` is a pause of the replay.
pub(super) async fn find_witnesses<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    comparison: Option<&Comparison>,
) -> Result<Result<(), PauseDecision>, DriverError> {
    run.state.verification.witnesses.clear();
    run.state.verification.unwitnessed = None;
    let Some(comparison) = comparison else {
        return Ok(Ok(()));
    };
    if !witness::changes_behaviour(comparison) {
        return Ok(Ok(()));
    }
    if let Some(why) = witness::no_candidate_reason(&run.state, comparison) {
        run.state.verification.unwitnessed = Some(why);
        return Ok(Ok(()));
    }
    let candidates = witness::candidates(&run.state);
    let code = witness::code_changes(comparison, &witness::all_checks(&run.state));
    if code.is_empty() {
        run.state.verification.unwitnessed = Some(format!(
            "the only changes besides documentation are to tests, so the checks that now pass ({}) pass because the tests changed, not the code",
            candidates.join(", ")
        ));
        return Ok(Ok(()));
    }
    let replayed = match runner
        .replay(
            &run.state,
            &ReplayTree::FinalWithBaseCode(code.clone()),
            &super::replay_verdicts::prepare_through(&run.state, None),
            &candidates,
        )
        .await
    {
        Ok(replayed) => replayed,
        Err(pause) => return Ok(Err(pause)),
    };
    let witnesses: Vec<String> = replayed
        .iter()
        .filter(|r| !replay_verdicts::passed(r))
        .map(|r| r.command.clone())
        .collect();
    run.activity(
        "checks replayed against the base code with the result's tests",
        Some(&format!(
            "{} of {} failed there (they show the change)",
            witnesses.len(),
            replayed.len()
        )),
    )?;
    if witnesses.is_empty() {
        run.state.verification.unwitnessed = Some(format!(
            "the checks that failed on the base tree or are the plan's fail_to_pass checks, and pass on the result ({}), also pass with the code changes taken back ({}; the functions and classes the work adds to Python, JavaScript, TypeScript and Rust files standing in, raising when called): they pass because of the tests the work added or changed, not because of the code",
            candidates.join(", "),
            code.join(", ")
        ));
    }
    run.state.verification.witnesses = witnesses;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::flow::tests::new_state;

    #[test]
    fn a_check_that_runs_fewer_tests_than_on_the_base_is_a_test_change() {
        let mut state = new_state();
        let check = |n: Option<u64>| verify::BaseCheck {
            passed: true,
            detail: String::new(),
            tests: n.map(TestTally::Counted).unwrap_or_default(),
            test_ids: None,
            reused_from: None,
        };
        let v = &mut state.verification;
        v.base_checks.insert("cargo test".into(), check(Some(5)));
        v.final_checks.insert("cargo test".into(), check(Some(2)));
        v.base_checks.insert("pytest".into(), check(Some(3)));
        v.final_checks.insert("pytest".into(), check(Some(4)));
        v.base_checks.insert("sh t.sh".into(), check(None));
        v.final_checks.insert("sh t.sh".into(), check(None));
        assert_eq!(
            lost_tests(&state, &[]),
            ["`cargo test` ran 5 tests on the base tree and 2 on the result"]
        );
    }

    #[test]
    fn a_test_no_longer_run_is_named_even_when_the_count_holds() {
        let ids = |names: &[&str]| {
            Some(
                names
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<crate::verify::testids::TestIds>(),
            )
        };
        let check = |passed: bool, names: &[&str]| verify::BaseCheck {
            passed,
            detail: String::new(),
            tests: TestTally::Counted(names.len() as u64),
            test_ids: ids(names),
            reused_from: None,
        };
        let mut state = new_state();
        let v = &mut state.verification;
        v.base_checks.insert(
            "cargo test".into(),
            check(true, &["src/lib.rs a", "src/lib.rs b"]),
        );
        v.final_checks.insert(
            "cargo test".into(),
            check(true, &["src/lib.rs a", "src/lib.rs c"]),
        );
        // A check that failed on the base tree is compared too: its failing test was renamed.
        v.base_checks
            .insert("node --test".into(), check(false, &["x", "y"]));
        v.final_checks
            .insert("node --test".into(), check(true, &["x", "z"]));
        assert_eq!(
            lost_tests(&state, &[]),
            [
                "`cargo test` no longer runs 1 of the tests it ran on the base tree (on the result): `src/lib.rs b`",
                "`node --test` no longer runs 1 of the tests it ran on the base tree (on the result): `y`"
            ]
        );
        // With the base tree's test files put back, the base tests run against the result's code.
        let restored = |names: &[&str]| ReplayResult {
            command: "cargo test".into(),
            passed: true,
            detail: String::new(),
            ran: super::super::prepare::CheckRan::Ran,
            tests: TestTally::Counted(names.len() as u64),
            test_ids: ids(names),
        };
        assert_eq!(
            lost_tests(&state, &[restored(&["src/lib.rs a", "src/lib.rs b"])]).len(),
            1
        );
        assert_eq!(
            lost_tests(&state, &[restored(&["src/lib.rs a", "src/lib.rs d"])]).len(),
            2
        );
    }

    #[test]
    fn a_check_selecting_only_added_tests_is_no_evidence_against_the_base_tests() {
        let mut state = new_state();
        let base = |passed: bool, tests: TestTally| verify::BaseCheck {
            passed,
            detail: String::new(),
            tests,
            test_ids: None,
            reused_from: None,
        };
        let v = &mut state.verification;
        v.base_checks.insert(
            "pytest -k century".into(),
            base(false, TestTally::Counted(0)),
        );
        v.base_checks
            .insert("pytest".into(), base(true, TestTally::Counted(2)));
        v.base_checks
            .insert("pytest -k leap".into(), base(false, TestTally::Counted(1)));
        let restored = |command: &str, tests: TestTally| ReplayResult {
            command: command.into(),
            passed: false,
            detail: String::new(),
            ran: super::super::prepare::CheckRan::Ran,
            tests,
            test_ids: None,
        };
        // Selected nothing there and on the base tree: only the work's new tests match it
        // (whether the runner exits 0 then, as unittest before 3.12, or not).
        v.base_checks.insert(
            "python3 -m unittest -k century".into(),
            base(true, TestTally::Counted(0)),
        );
        assert!(runs_only_added_tests(
            &state,
            &restored("python3 -m unittest -k century", TestTally::Counted(0))
        ));
        assert!(runs_only_added_tests(
            &state,
            &restored("pytest -k century", TestTally::Counted(0))
        ));
        // A check that ran tests on the base tree and runs none with them put back is evidence
        // (what the base tests collect changed), as is one whose base tests failed.
        assert!(!runs_only_added_tests(
            &state,
            &restored("pytest", TestTally::Counted(0))
        ));
        assert!(!runs_only_added_tests(
            &state,
            &restored("pytest -k leap", TestTally::Counted(1))
        ));
        assert!(!runs_only_added_tests(
            &state,
            &restored("pytest -k century", TestTally::Counted(1))
        ));
        assert!(!runs_only_added_tests(
            &state,
            &restored("never run on the base", TestTally::Counted(0))
        ));
    }
}
