//! What autocode's replays say about criteria: the tester's verdicts after every check it
//! reported passing is replayed (a PASS whose replay fails becomes a FAIL, with why), and the
//! final gate's per-criterion results from replaying every check of the approved plan. A check
//! that exits 0 while its test runner says no test ran ([`crate::verify::testcount`]) selected
//! nothing: it fails, wherever it is replayed.

use serde_json::Value;

use super::flow::{self, PauseDecision};
use super::prepare::{self, CheckRan, NOT_PREPARED, PrepareStep};
use super::stage_runner::{OwnedReplayAsk, ReplayAsk, ReplayResult, ReplayTree, StageRunner};
use super::state::{CriterionResult, RunState};
use crate::verify::treediff::Comparison;

/// The tester's verdicts after autocode replays every check it reported passing.
pub async fn verify_test_report<R: StageRunner>(
    runner: &mut R,
    state: &RunState,
    milestone: usize,
    report: &Value,
) -> Result<Vec<CriterionResult>, PauseDecision> {
    let criteria = report["criteria"].as_array().cloned().unwrap_or_default();
    let mut commands = Vec::new();
    for c in &criteria {
        if c["verdict"] == "PASS" {
            for check in c["checks"].as_array().into_iter().flatten() {
                if let Some(command) = check["command"].as_str() {
                    commands.push(command.to_owned());
                }
            }
        }
    }
    let prepare = prepare_through(state, Some(milestone));
    let (batch, heads_to_the_gate) = tester_batch(state, milestone, &criteria, commands);
    let replayed = if heads_to_the_gate {
        replay_beside_the_gates(runner, state, &prepare, &batch).await?
    } else {
        runner
            .replay(state, &ReplayTree::Final, &prepare, &batch)
            .await?
    };
    let mut results = Vec::new();
    for c in criteria {
        let id = c["criterion_id"].as_str().unwrap_or_default().to_owned();
        let verdict = c["verdict"].as_str().unwrap_or("FAIL").to_owned();
        let checks: Vec<String> = c["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k["command"].as_str().map(str::to_owned))
            .collect();
        let (verdict, detail) = if verdict == "PASS" {
            let failed: Vec<&ReplayResult> = replayed
                .iter()
                .filter(|r| checks.contains(&r.command) && !passed(r))
                .collect();
            if failed.is_empty() {
                ("PASS".to_owned(), "verified by replay".to_owned())
            } else if let Some(r) = failed.iter().find(|r| r.ran == CheckRan::NotPrepared) {
                (
                    NOT_PREPARED.to_owned(),
                    format!(
                        "the tester reported PASS, but autocode could not prepare the tree to replay its checks: {}",
                        r.detail
                    ),
                )
            } else {
                (
                    "FAIL".to_owned(),
                    format!(
                        "the tester reported PASS, but autocode's replay failed: {}",
                        failed
                            .iter()
                            .map(|r| format!("`{}`: {}", r.command, failure(r)))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                )
            }
        } else {
            (verdict, c["notes"].as_str().unwrap_or_default().to_owned())
        };
        results.push(CriterionResult {
            milestone,
            criterion_id: id,
            verdict,
            checks,
            detail,
        });
    }
    Ok(results)
}

/// What the tester's replay runs: the checks the tester reported passing (`cited`), and, when it
/// failed no criterion of the last milestone, the final gate's whole batch first, in the
/// final gate's order. The final gate replays the same tree next (after the completion review,
/// which changes nothing), so its batch is then reused whole (`super::replay_cache`) instead of
/// running the objective's required checks the plan does not name as a batch of their own,
/// `prepare` steps included. Only the cited checks' verdicts judge the tester; the others are
/// kept for the final gate. A tester that failed a criterion sends the milestone back, so no
/// check of the final gate's runs for it. The last milestone's `prepare` steps are the final
/// gate's (every milestone's). The second value says whether the tester heads to the final gate
/// (the batch is then the gate's).
fn tester_batch(
    state: &RunState,
    milestone: usize,
    criteria: &[Value],
    cited: Vec<String>,
) -> (Vec<String>, bool) {
    let last = flow::milestones(state).len().checked_sub(1);
    // As `flow::apply_test` reads the report: a verdict other than these sends the milestone back.
    let heads_to_the_gate = !criteria.is_empty()
        && criteria
            .iter()
            .all(|c| c["verdict"] == "PASS" || c["verdict"] == "HUMAN_REVIEW");
    if last != Some(milestone) || !heads_to_the_gate {
        return (cited, false);
    }
    let mut batch: Vec<String> = Vec::new();
    for command in super::witness::all_checks(state).into_iter().chain(cited) {
        if !batch.contains(&command) {
            batch.push(command);
        }
    }
    (batch, true)
}

/// The replays the final gate asks for besides its own batch when the result passes, as the
/// work tree shows them before the gate (the tester and the completion reviewer change
/// nothing): the witness search's (`witness::expected_replay`: the result's checks against the
/// base code), the one with the result's tests made to fail (`gate::judge_test_changes`: the
/// checks that may run tests, [`may_report_tests`]) and, when the builder changed tests of the
/// base tree that can be put back, the test-change judgment's (the gate's checks with those
/// tests as they were).
fn gate_replays(state: &RunState, comparison: &Comparison) -> Vec<OwnedReplayAsk> {
    let prepare = prepare_through(state, None);
    let mut asks = Vec::new();
    if let Some((code, checks)) = super::witness::expected_replay(state, comparison) {
        asks.push((ReplayTree::FinalWithBaseCode(code), prepare.clone(), checks));
    }
    let commands = super::witness::all_checks(state);
    // The gate asks for the checks that ran tests and passed on the result: not known yet, so
    // every check that may (the gate's ask reuses their verdicts).
    let may_report_tests: Vec<String> = commands
        .iter()
        .filter(|c| may_report_tests(state, c))
        .cloned()
        .collect();
    if !may_report_tests.is_empty() {
        asks.push((
            ReplayTree::FinalWithFailingTests(commands.clone()),
            prepare.clone(),
            may_report_tests,
        ));
    }
    let restorable = comparison.test_changes(&commands).restorable;
    if !restorable.is_empty() {
        asks.push((
            ReplayTree::FinalWithBaseFiles(restorable),
            prepare,
            commands,
        ));
    }
    asks
}

/// Whether the final gate may ask `check` to fail with the result's tests made to fail
/// (`gate::checks_blind_to_failing_tests`): not a check that passed on the base tree with no test
/// runner's summary in its output (a build, a linter, a type check) and runs no test file with
/// its interpreter.
fn may_report_tests(state: &RunState, check: &str) -> bool {
    let shows_no_runner = state
        .verification
        .base_checks
        .get(check)
        .is_some_and(|b| b.passed && b.tests == crate::verify::testcount::TestTally::Unknown);
    !shows_no_runner || crate::verify::canary::runs_a_test_directly(check)
}

/// The tester's replay of the tree that heads to the final gate, and beside it (their `prepare`
/// steps at once, each in its own tree: `StageRunner::replay_side_by_side`) the replays the gate
/// asks for when the result passes ([`gate_replays`]). Their verdicts are kept for the gate,
/// which reuses them; they judge nothing here. A replay whose processes were not proven gone
/// pauses, whichever it was.
async fn replay_beside_the_gates<R: StageRunner>(
    runner: &mut R,
    state: &RunState,
    prepare: &[PrepareStep],
    batch: &[String],
) -> Result<Vec<ReplayResult>, PauseDecision> {
    let comparison = runner.compare_base(state).await?;
    let beside = comparison
        .as_ref()
        .map(|c| gate_replays(state, c))
        .unwrap_or_default();
    if beside.is_empty() {
        return runner
            .replay(state, &ReplayTree::Final, prepare, batch)
            .await;
    }
    let mut asks: Vec<ReplayAsk<'_>> = vec![(&ReplayTree::Final, prepare, batch)];
    asks.extend(
        beside
            .iter()
            .map(|(tree, prepare, checks)| (tree, prepare.as_slice(), checks.as_slice())),
    );
    let mut results = runner.replay_side_by_side(state, &asks).await.into_iter();
    let tested = results.next().ok_or_else(|| {
        PauseDecision::new(
            crate::pause::PauseCode::PausedProcessCleanup,
            "autocode could not replay the tester's checks: the runner returned no verdicts",
        )
    })??;
    for beside in results {
        beside?;
    }
    Ok(tested)
}

/// Before the tester of `milestone` starts: the replays its report will ask for when it holds
/// (the tester's replay of the work tree with the milestone's `prepare` steps and, for the last
/// milestone, the final gate's replays beside it: [`replay_beside_the_gates`]), handed to the
/// runner, which may run their steps while the tester works (`StageRunner::replay_ahead`). The
/// work tree cannot change meanwhile (the tester works in its copy), so these are the batches
/// [`verify_test_report`] asks for unless the tester fails a criterion; a batch asked for that
/// differs runs as it would have.
pub async fn replay_ahead<R: StageRunner>(runner: &mut R, state: &RunState, milestone: usize) {
    let prepare = prepare_through(state, Some(milestone));
    if prepare.is_empty() {
        return;
    }
    let last = flow::milestones(state).len().checked_sub(1) == Some(milestone);
    // The last milestone's tester replays the final gate's batch first (`tester_batch`); which
    // checks it cites is not known yet.
    let known = if last {
        super::witness::all_checks(state)
    } else {
        Vec::new()
    };
    let mut batches = vec![(ReplayTree::Final, prepare, known)];
    if last && let Ok(Some(comparison)) = runner.compare_base(state).await {
        batches.extend(gate_replays(state, &comparison));
    }
    runner.replay_ahead(state, &batches).await;
}

/// The `prepare` steps of the approved plan's milestones `0..=last` (all when `None`).
pub fn prepare_through(state: &RunState, last: Option<usize>) -> Vec<PrepareStep> {
    state
        .approved_plan()
        .map(|p| prepare::through(&p.plan, last))
        .unwrap_or_default()
}

/// Whether a replay passed: exit 0, and its runner neither said that no test ran nor stopped
/// before its end.
pub fn passed(r: &ReplayResult) -> bool {
    r.passed && !r.tests.shows_nothing()
}

/// Why a replay did not pass.
pub fn failure(r: &ReplayResult) -> String {
    match r.tests.why_nothing() {
        Some(why) if r.passed => why.to_owned(),
        _ => r.detail.clone(),
    }
}

/// Every check command of every milestone of the approved plan.
pub fn all_checks(state: &RunState) -> Vec<String> {
    let count = flow::milestones(state).len();
    (0..count)
        .flat_map(|m| flow::criteria_of(state, m))
        .filter_map(|(_, check)| check)
        .collect()
}

/// Each criterion of the approved plan, judged by its check's replay on the final tree.
pub fn final_replay_results(state: &RunState, replayed: &[ReplayResult]) -> Vec<CriterionResult> {
    let count = flow::milestones(state).len();
    let mut out = Vec::new();
    for m in 0..count {
        for (id, check) in flow::criteria_of(state, m) {
            let Some(check) = check else { continue };
            let result = replayed.iter().find(|r| r.command == check);
            let (verdict, detail) = match result {
                Some(r) if passed(r) => ("PASS", String::new()),
                Some(r) if r.ran == CheckRan::NotPrepared => (
                    NOT_PREPARED,
                    format!("`{check}` on the final tree: {}", r.detail),
                ),
                Some(r) => (
                    "FAIL",
                    format!("`{check}` failed on the final tree: {}", failure(r)),
                ),
                None => ("FAIL", format!("`{check}` was not replayed")),
            };
            out.push(CriterionResult {
                milestone: m,
                criterion_id: id,
                verdict: verdict.into(),
                checks: vec![check],
                detail,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::flow::tests::new_state;
    use crate::run::flow::{apply_approval, apply_plan};
    use serde_json::json;

    fn cited(commands: &[&str]) -> Vec<String> {
        commands.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn the_testers_replay_of_the_last_milestone_runs_the_final_gates_batch_first() {
        let mut state = new_state();
        apply_plan(
            &mut state,
            &json!({"summary": "s", "milestones": [
                {"id": "M1", "title": "t", "description": "", "prepare": ["npm ci"],
                 "acceptance_criteria": [{"id": "AC1", "text": "t", "check": "npm test", "human_review": false}]},
                {"id": "M2", "title": "t", "description": "",
                 "acceptance_criteria": [
                    {"id": "AC2", "text": "t", "check": "npx mocha --grep IEC", "human_review": false},
                    {"id": "AC3", "text": "t", "check": null, "human_review": true}]}]}),
        );
        let token = state.latest_plan().unwrap().token();
        apply_approval(&mut state, &token).unwrap();
        state.verification.required_checks = cited(&["npm run lint", "npm test"]);
        assert_eq!(
            crate::run::witness::all_checks(&state),
            ["npm test", "npx mocha --grep IEC", "npm run lint"]
        );
        let pass = |id: &str, check: &str| json!({"criterion_id": id, "verdict": "PASS", "checks": [{"command": check}]});
        // The last milestone, no criterion failed: the final gate's checks in its order
        // (each once), then the tester's own.
        let passed = [
            pass("AC2", "npx mocha --grep IEC"),
            pass("extra", "node t.js"),
            json!({"criterion_id": "AC3", "verdict": "HUMAN_REVIEW", "checks": []}),
        ];
        assert_eq!(
            tester_batch(
                &state,
                1,
                &passed,
                cited(&["npx mocha --grep IEC", "node t.js"])
            ),
            (
                cited(&[
                    "npm test",
                    "npx mocha --grep IEC",
                    "npm run lint",
                    "node t.js"
                ]),
                true
            )
        );
        // An earlier milestone, a failed criterion, or no criterion: only what the tester cited.
        let m1 = [pass("AC1", "npm test")];
        assert_eq!(
            tester_batch(&state, 0, &m1, cited(&["npm test"])),
            (cited(&["npm test"]), false)
        );
        let failed = [
            pass("AC2", "npx mocha --grep IEC"),
            json!({"criterion_id": "AC3", "verdict": "FAIL", "checks": []}),
        ];
        assert_eq!(
            tester_batch(&state, 1, &failed, cited(&["npx mocha --grep IEC"])),
            (cited(&["npx mocha --grep IEC"]), false)
        );
        assert_eq!(
            tester_batch(&state, 1, &[], Vec::new()),
            (Vec::new(), false)
        );
        // The last milestone's steps are the final gate's.
        assert_eq!(
            prepare_through(&state, Some(1)),
            prepare_through(&state, None)
        );
    }

    /// The replays the gate will ask for beside its own batch, known before the tester: the
    /// witness's (the code taken back, the checks that failed on the base), the one with the
    /// tests made to fail (the checks that may run tests) and, when a base test was changed, the
    /// restored tests' (the gate's checks); each with every milestone's steps.
    #[test]
    fn the_gates_replays_are_known_from_the_work_tree() {
        let mut state = new_state();
        apply_plan(
            &mut state,
            &json!({"summary": "s", "milestones": [
                {"id": "M1", "title": "t", "description": "", "prepare": ["npm ci"],
                 "acceptance_criteria": [
                    {"id": "AC1", "text": "t", "check": "node --test", "human_review": false, "kind": "fail_to_pass"},
                    {"id": "AC2", "text": "t", "check": "npm run lint", "human_review": false, "kind": "pass_to_pass"}]}]}),
        );
        let token = state.latest_plan().unwrap().token();
        apply_approval(&mut state, &token).unwrap();
        for (check, passed) in [("node --test", false), ("npm run lint", true)] {
            state.verification.base_checks.insert(
                check.into(),
                crate::verify::BaseCheck {
                    passed,
                    detail: String::new(),
                    tests: crate::verify::testcount::TestTally::Unknown,
                    test_ids: None,
                    reused_from: None,
                },
            );
        }
        let base = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        for (dir, code, test) in [(&base, "a\n", "t\n"), (&work, "b\n", "t2\n")] {
            std::fs::write(dir.path().join("conv.mjs"), code).unwrap();
            std::fs::write(dir.path().join("conv.test.mjs"), test).unwrap();
        }
        let steps = prepare_through(&state, None);
        let compared = Comparison::of_dirs(base.path(), work.path());
        assert_eq!(
            gate_replays(&state, &compared),
            [
                (
                    ReplayTree::FinalWithBaseCode(cited(&["conv.mjs"])),
                    steps.clone(),
                    cited(&["node --test"])
                ),
                // The lint passed on the base with no runner's summary: not asked.
                (
                    ReplayTree::FinalWithFailingTests(cited(&["node --test", "npm run lint"])),
                    steps.clone(),
                    cited(&["node --test"])
                ),
                (
                    ReplayTree::FinalWithBaseFiles(cited(&["conv.test.mjs"])),
                    steps.clone(),
                    cited(&["node --test", "npm run lint"])
                )
            ]
        );
        // Only the test added to: no witness replay is known (nothing to take back).
        std::fs::write(work.path().join("conv.mjs"), "a\n").unwrap();
        let compared = Comparison::of_dirs(base.path(), work.path());
        assert_eq!(
            gate_replays(&state, &compared),
            [
                (
                    ReplayTree::FinalWithFailingTests(cited(&["node --test", "npm run lint"])),
                    steps.clone(),
                    cited(&["node --test"])
                ),
                (
                    ReplayTree::FinalWithBaseFiles(cited(&["conv.test.mjs"])),
                    steps.clone(),
                    cited(&["node --test", "npm run lint"])
                )
            ]
        );
        // When every check passed on the base tree with no runner's summary, no check is asked.
        for check in ["node --test", "npm run lint"] {
            state
                .verification
                .base_checks
                .get_mut(check)
                .unwrap()
                .passed = true;
        }
        assert_eq!(
            gate_replays(&state, &compared),
            [(
                ReplayTree::FinalWithBaseFiles(cited(&["conv.test.mjs"])),
                steps,
                cited(&["node --test", "npm run lint"])
            )]
        );
    }
}
