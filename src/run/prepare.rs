//! A plan's `prepare` steps (issue 24): commands a milestone declares that autocode runs in the
//! verification tree before the checks of every replay and on the base tree (`npm ci`,
//! `python3 -m venv .venv && .venv/bin/pip install -e .[test]`, `go mod download`,
//! `cargo fetch`), because a clean tree holds no `node_modules/`, `.venv/` or `target/`.
//!
//! They are autocode's own action, never evidence of a criterion: they run once per tree per
//! replay batch, in order, in the same room and through the same launch as the checks (so what
//! they write in the tree the checks see, and nothing else), and the first that does not exit 0
//! stops the batch. Then no check runs: each is "could not prepare" ([`CheckRan::NotPrepared`],
//! the criterion's verdict [`NOT_PREPARED`]), with the step's output tail, never a failing
//! check. What ran is recorded in the run directory (`replays/NNN-<tree>.json`,
//! [`PrepareRecord`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::supervise::Exit;

/// The verdict of a criterion whose check could not run because its tree could not be
/// prepared (beside `PASS`, `FAIL` and `HUMAN_REVIEW`; like `FAIL`, it is not a pass).
pub const NOT_PREPARED: &str = "NOT_PREPARED";

/// How the detail of a check that did not run begins (a base-tree record keeps only the text).
pub const COULD_NOT_PREPARE: &str = "could not prepare:";

/// One `prepare` command of the plan (a shell command run with `bash -c`, as a check is, from the tree's root).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PrepareStep(String);

impl PrepareStep {
    pub fn new(command: impl Into<String>) -> PrepareStep {
        PrepareStep(command.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The `prepare` steps milestone `index` of `plan` declares (none when the field is absent or
/// null: plans before the field, and plans that need none).
pub fn of_milestone(plan: &Value, index: usize) -> Vec<PrepareStep> {
    plan["milestones"][index]["prepare"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .map(PrepareStep::new)
        .collect()
}

/// The steps a replay runs: those of milestones `0..=last` (every milestone when `None`), in
/// plan order, each command once. A later milestone's checks may need what an earlier one
/// prepared (a dependency installed in milestone 1 is still needed in milestone 3).
pub fn through(plan: &Value, last: Option<usize>) -> Vec<PrepareStep> {
    let count = plan["milestones"].as_array().map_or(0, Vec::len);
    let end = last.map_or(count, |l| (l + 1).min(count));
    let mut steps: Vec<PrepareStep> = Vec::new();
    for m in 0..end {
        for step in of_milestone(plan, m) {
            if !steps.contains(&step) {
                steps.push(step);
            }
        }
    }
    steps
}

/// Whether a replayed check ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckRan {
    Ran,
    /// Not run again: the same check ran in an identical batch (same tree, steps, checks
    /// before it, environment and room: `super::replay_cache`), recorded as replay `of`, and
    /// its verdict stands.
    Reused {
        of: super::replay_cache::ReplayNo,
    },
    /// A prepare step of its batch failed: the check never ran.
    NotPrepared,
    /// The tree was not closed (`super::replay::ReplayError::NotClosed`): the check never ran
    /// and fails, naming what opened the tree.
    Refused,
}

impl CheckRan {
    /// Whether the check ran in the tree (in this batch or in the identical one reused).
    pub fn ran(self) -> bool {
        matches!(self, CheckRan::Ran | CheckRan::Reused { .. })
    }

    /// The batch whose verdict was reused, if any.
    pub fn reused_from(self) -> Option<super::replay_cache::ReplayNo> {
        match self {
            CheckRan::Reused { of } => Some(of),
            _ => None,
        }
    }
}

/// How preparing a tree for a batch of checks ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepareOutcome {
    /// Every step exited 0 (or there were none).
    Prepared,
    /// The last step run did not exit 0; no check ran.
    CouldNotPrepare,
}

/// One prepare step as it ran.
#[derive(Debug, Clone, Serialize)]
pub struct StepRun {
    pub command: String,
    pub exit: Exit,
    pub output_tail: String,
    pub duration_ms: u64,
}

/// What preparing one tree for one batch did.
#[derive(Debug, Clone, Serialize)]
pub struct Prepared {
    pub outcome: PrepareOutcome,
    /// The steps in the order they ran (the failing one last).
    pub steps: Vec<StepRun>,
}

impl Prepared {
    /// The outcome of `steps` as they ran, in order, stopped at the first that failed.
    pub fn of(steps: Vec<StepRun>) -> Prepared {
        let outcome = if steps.iter().all(|s| s.exit == Exit::Code(0)) {
            PrepareOutcome::Prepared
        } else {
            PrepareOutcome::CouldNotPrepare
        };
        Prepared { outcome, steps }
    }

    /// Why the tree could not be prepared (`None`: it was), for every check of the batch.
    pub fn failure(&self) -> Option<String> {
        if self.outcome == PrepareOutcome::Prepared {
            return None;
        }
        let step = self.steps.last()?;
        let how = match step.exit {
            Exit::Code(c) => format!("exit {c}"),
            Exit::Signal(s) => format!("killed by signal {s}"),
            Exit::TimedOut => "timed out".into(),
        };
        Some(format!(
            "{COULD_NOT_PREPARE} the prepare step `{}` ended with {how}, so the check did not run: {}",
            step.command,
            step.output_tail.trim()
        ))
    }
}

/// The record of one replay batch's preparation: `<run>/replays/NNN-<tree>.json`.
#[derive(Debug, Clone, Serialize)]
pub struct PrepareRecord {
    /// Which tree: `final`, `base`, `final_with_base_files`, `final_with_base_code` or
    /// `final_with_failing_tests`.
    pub tree: &'static str,
    pub at: chrono::DateTime<chrono::Utc>,
    #[serde(flatten)]
    pub prepared: Prepared,
    /// The checks of the batch (none ran when the tree could not be prepared).
    pub checks: Vec<String>,
    /// The composed tree the batch ran in (`None`: a copy outside git).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_id: Option<crate::gittree::TreeId>,
    /// Set when nothing ran: the identical batch recorded as this replay was reused, its
    /// verdicts in `results` (`super::replay_cache`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<super::replay_cache::ReplayNo>,
    /// Each check's verdict.
    pub results: Vec<CheckVerdict>,
}

/// One check's verdict in a [`PrepareRecord`].
#[derive(Debug, Clone, Serialize)]
pub struct CheckVerdict {
    pub command: String,
    pub passed: bool,
    pub ran: CheckRan,
}

/// Writes `record` as the next file of `<run_dir>/replays/` and returns its path (tagged, made
/// durable by the run's next checkpoint).
pub fn write_record(run_dir: &Path, record: &PrepareRecord) -> Result<PathBuf, String> {
    let dir = run_dir.join("replays");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let next = std::fs::read_dir(&dir)
        .map(|entries| entries.flatten().count())
        .unwrap_or(0)
        + 1;
    let path = dir.join(format!("{next:03}-{}.json", record.tree));
    super::integrity::write_stage_record(&path, record).map_err(|e| e.to_string())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn steps_are_read_per_milestone_and_gathered_in_plan_order_once() {
        let plan = json!({"milestones": [
            {"id": "m1", "prepare": ["npm ci"]},
            {"id": "m2"},
            {"id": "m3", "prepare": null},
            {"id": "m4", "prepare": ["npm ci", "  ", "python3 -m venv .venv"]}
        ]});
        assert_eq!(of_milestone(&plan, 0), [PrepareStep::new("npm ci")]);
        assert!(of_milestone(&plan, 1).is_empty(), "absent: none");
        assert!(of_milestone(&plan, 2).is_empty(), "null: none");
        assert!(of_milestone(&plan, 9).is_empty());
        assert_eq!(through(&plan, Some(2)), [PrepareStep::new("npm ci")]);
        assert_eq!(
            through(&plan, None),
            [
                PrepareStep::new("npm ci"),
                PrepareStep::new("python3 -m venv .venv")
            ]
        );
        assert_eq!(through(&plan, Some(99)), through(&plan, None));
        assert!(through(&json!({"summary": "old plan"}), None).is_empty());
    }

    /// `status` lists each milestone's steps, and the tester of a milestone is told to run the
    /// steps of every milestone up to its own first; a plan without steps shows none.
    #[test]
    fn status_and_the_testers_prompt_show_the_steps() {
        use crate::role::SandboxMode;
        use crate::run::flow::{self, StagePlan};
        use crate::run::prompt::EvidenceStyle;
        use crate::run::state::AttemptPurpose;
        let criterion = json!([{"id": "c", "text": "t", "check": "npm test",
                                "human_review": false, "kind": "fail_to_pass"}]);
        let mut plan = json!({"summary": "s", "milestones": [
            {"id": "m1", "title": "t", "description": "", "prepare": ["npm ci"],
             "acceptance_criteria": criterion},
            {"id": "m2", "title": "t", "description": "", "prepare": null,
             "acceptance_criteria": criterion},
            {"id": "m3", "title": "t", "description": "",
             "prepare": ["npm ci", "npm run build"], "acceptance_criteria": criterion}
        ]});
        let mut state = crate::run::flow::tests::new_state();
        flow::apply_plan(&mut state, &plan);
        // The plan reviewer is told a check whose steps failed on the base did not run there.
        state.verification.base_checks.insert(
            "npm test".into(),
            crate::verify::BaseCheck {
                passed: false,
                detail: format!("{COULD_NOT_PREPARE} the prepare step `npm ci` ended with exit 1"),
                tests: Default::default(),
                test_ids: None,
                reused_from: None,
            },
        );
        let reviewer = StagePlan {
            role: crate::role::Role::PlanReviewer,
            kind: crate::report::ReportKind::PlanReview,
            milestone: None,
            purpose: AttemptPurpose::Fresh,
        };
        let prompt = crate::run::prompt::stage_prompt(
            &state,
            &reviewer,
            SandboxMode::ReadOnly,
            EvidenceStyle::Events,
            None,
        );
        assert!(
            prompt.contains("`npm test` (fail_to_pass): did NOT RUN on the base tree"),
            "{prompt}"
        );
        let status = crate::run::render_status(&state);
        assert!(
            status.contains(
                "prepare steps (run by autocode before the checks of every replay):\n  milestone 1: `npm ci`\n  milestone 3: `npm ci`, `npm run build`\n"
            ),
            "{status}"
        );
        let token = state.latest_plan().unwrap().token();
        flow::apply_approval(&mut state, &token).unwrap();
        let tester = |milestone| StagePlan {
            role: crate::role::Role::Tester,
            kind: crate::report::ReportKind::Test,
            milestone: Some(milestone),
            purpose: AttemptPurpose::Fresh,
        };
        let prompt = crate::run::prompt::stage_prompt(
            &state,
            &tester(1),
            SandboxMode::WorkspaceWrite,
            EvidenceStyle::Events,
            None,
        );
        let section = prompt.split("# Prepare steps").nth(1).expect("{prompt}");
        assert!(section.contains("- `npm ci`\n") && !section.contains("build"));
        let prompt = crate::run::prompt::stage_prompt(
            &state,
            &tester(2),
            SandboxMode::WorkspaceWrite,
            EvidenceStyle::Events,
            None,
        );
        assert!(
            prompt.contains("- `npm ci`\n- `npm run build`\n"),
            "{prompt}"
        );
        for m in plan["milestones"].as_array_mut().unwrap() {
            m.as_object_mut().unwrap().remove("prepare");
        }
        let mut state = crate::run::flow::tests::new_state();
        flow::apply_plan(&mut state, &plan);
        assert!(!crate::run::render_status(&state).contains("prepare"));
    }

    #[test]
    fn a_failed_step_says_why_no_check_ran() {
        let step = |command: &str, exit| StepRun {
            command: command.into(),
            exit,
            output_tail: "npm ERR! missing lockfile\n".into(),
            duration_ms: 5,
        };
        let ok = Prepared::of(vec![step("true", Exit::Code(0))]);
        assert_eq!(ok.outcome, PrepareOutcome::Prepared);
        assert_eq!(ok.failure(), None);
        assert_eq!(Prepared::of(Vec::new()).outcome, PrepareOutcome::Prepared);
        let failed = Prepared::of(vec![
            step("true", Exit::Code(0)),
            step("npm ci", Exit::Code(1)),
        ]);
        assert_eq!(failed.outcome, PrepareOutcome::CouldNotPrepare);
        assert_eq!(
            failed.failure().unwrap(),
            "could not prepare: the prepare step `npm ci` ended with exit 1, so the check did not run: npm ERR! missing lockfile"
        );
        let value = serde_json::to_value(&failed).unwrap();
        assert_eq!(value["outcome"], "could_not_prepare");
        assert_eq!(
            value["steps"][1]["exit"],
            json!({"kind": "code", "value": 1})
        );
    }
}
