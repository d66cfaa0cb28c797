//! What a schema-valid report must also satisfy that the schema cannot express: plan criteria
//! that can fail and are unique, test reports that cover exactly the milestone's criteria,
//! verdicts on the objective's uncovered sentences, decisions that fit the milestone's position.

use serde_json::Value;

use super::{StagePlan, criteria_of, milestones};
use crate::report::ReportKind;
use crate::run::state::RunState;

/// Problems with a schema-valid report that the schema cannot express. A non-empty list rejects
/// the report exactly like a schema violation (report-only repair, then `PAUSED_INVALID_OUTPUT`).
pub fn semantic_problems(state: &RunState, plan: &StagePlan, report: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    match plan.kind {
        ReportKind::Plan => {
            let mut ids = std::collections::BTreeSet::new();
            for milestone in report["milestones"].as_array().into_iter().flatten() {
                for criterion in milestone["acceptance_criteria"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let id = criterion["id"].as_str().unwrap_or_default();
                    if !ids.insert(id.to_owned()) {
                        problems.push(format!("criterion id {id:?} is used twice"));
                    }
                    let human = criterion["human_review"].as_bool().unwrap_or(false);
                    let has_check = criterion["check"]
                        .as_str()
                        .is_some_and(|c| !c.trim().is_empty());
                    if human == has_check {
                        problems.push(format!(
                            "criterion {id:?} must have either a check command or human_review: true, not {}",
                            if human { "both" } else { "neither" }
                        ));
                    }
                    if let Some(check) = criterion["check"].as_str().filter(|_| !human)
                        && let Some(why) = crate::verify::vacuous_check(check)
                    {
                        problems.push(format!("criterion {id:?}: the check is vacuous: {why}"));
                    }
                }
            }
        }
        ReportKind::Test => {
            let Some(milestone) = plan.milestone else {
                return problems;
            };
            let wanted: Vec<String> = criteria_of(state, milestone)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let reported: Vec<String> = report["criteria"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["criterion_id"].as_str().map(str::to_owned))
                .collect();
            for id in &wanted {
                match reported.iter().filter(|r| *r == id).count() {
                    1 => {}
                    0 => problems.push(format!("criterion {id:?} is not reported")),
                    n => problems.push(format!("criterion {id:?} is reported {n} times")),
                }
            }
            for id in &reported {
                if !wanted.contains(id) {
                    problems.push(format!(
                        "criterion {id:?} is not in milestone {}",
                        milestone + 1
                    ));
                }
            }
            for criterion in report["criteria"].as_array().into_iter().flatten() {
                let id = criterion["criterion_id"].as_str().unwrap_or_default();
                if criterion["verdict"] == "PASS" {
                    let checks = criterion["checks"].as_array().cloned().unwrap_or_default();
                    if checks.is_empty() {
                        problems.push(format!("criterion {id:?} is PASS without a check"));
                    }
                    if checks.iter().any(|c| c["exit_code"].as_i64() != Some(0)) {
                        problems.push(format!(
                            "criterion {id:?} is PASS but cites a check that did not exit 0"
                        ));
                    }
                }
            }
        }
        ReportKind::Completion => {
            let count = milestones(state).len();
            let last = plan.milestone.is_some_and(|m| m + 1 >= count);
            match report["decision"].as_str() {
                Some("COMPLETE") if !last => problems.push(
                    "COMPLETE is only for the last milestone; answer CONTINUE to move on".into(),
                ),
                Some("CONTINUE") if last => problems
                    .push("this is the last milestone: answer COMPLETE, REWORK or BLOCKED".into()),
                _ => {}
            }
            problems.extend(crate::run::coverage::verdict_problems(state, report));
            match report["decision"].as_str() {
                Some("REWORK")
                    if !report["findings"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|f| f["blocking"] == true)
                        && crate::run::coverage::not_done(report).is_empty() =>
                {
                    problems.push(
                        "REWORK needs at least one blocking finding or a not_done verdict".into(),
                    )
                }
                _ => {}
            }
        }
        ReportKind::Requirements => {
            problems.extend(crate::run::coverage::quote_problems(
                &state.objective,
                report,
            ));
            problems.extend(crate::verify::objective::set_aside_problems(
                &crate::verify::objective::objective_commands(&state.objective),
                report,
            ));
        }
        ReportKind::PlanReview => {
            problems.extend(crate::run::coverage::verdict_problems(state, report));
            // As REWORK above: a request the planner cannot act on would only spend a planning
            // round (measured with a 1.5B reviewer: two rounds of `changes_requested` with no
            // concern ended the run in PAUSED_PLANNING_BUDGET).
            if report["verdict"] == "changes_requested"
                && !report["concerns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["blocking"] == true)
                && crate::run::coverage::not_done(report).is_empty()
            {
                problems.push(
                    "changes_requested needs at least one blocking concern or a not_done verdict: name what must change, or approve".into(),
                );
            }
        }
        ReportKind::Build | ReportKind::Resolution => {}
    }
    problems
}
