//! What autocode's replays say about criteria: the tester's verdicts after every check it
//! reported passing is replayed (a PASS whose replay fails becomes a FAIL, with why), and the
//! final gate's per-criterion results from replaying every check of the approved plan. A check
//! that exits 0 while its test runner says no test ran ([`crate::verify::testcount`]) selected
//! nothing: it fails, wherever it is replayed.

use serde_json::Value;

use super::flow::{self, PauseDecision};
use super::prepare::{self, CheckRan, NOT_PREPARED, PrepareStep};
use super::stage_runner::{ReplayResult, ReplayTree, StageRunner};
use super::state::{CriterionResult, RunState};

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
    let replayed = runner
        .replay(state, &ReplayTree::Final, &prepare, &commands)
        .await?;
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

/// The `prepare` steps of the approved plan's milestones `0..=last` (all when `None`).
pub fn prepare_through(state: &RunState, last: Option<usize>) -> Vec<PrepareStep> {
    state
        .approved_plan()
        .map(|p| prepare::through(&p.plan, last))
        .unwrap_or_default()
}

/// Whether a replay passed: exit 0, and its runner did not say that no test ran.
pub fn passed(r: &ReplayResult) -> bool {
    r.passed && !r.tests.none_ran()
}

/// Why a replay did not pass.
pub fn failure(r: &ReplayResult) -> String {
    if r.passed && r.tests.none_ran() {
        "it exited 0 but its test runner says no test ran (the selection matched nothing): a check that runs no test cannot show that anything holds".to_owned()
    } else {
        r.detail.clone()
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
