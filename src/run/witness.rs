//! Which replayed check shows the change (issue 25): a run whose work changes more than
//! documentation completes only when at least one check passed on the result having run at least
//! one test and fails on the result with its code changes taken back (the result's tests against
//! the base code). The checks tried so are those that failed on the base tree and the plan's
//! `fail_to_pass` checks that passed there: a suite (`npm test`, `cargo test`) passes on the base
//! tree, which lacks the tests the work adds, and fails against the base code with them. A
//! `pass_to_pass` guard is not tried; a check that fails on the base only because its test file
//! did not exist yet passes against the base code and shows nothing. When no check shows the
//! change, a person is asked (`review::pending_reviews`), with why; a `fail_to_pass` check that
//! passed on the base tree and shows nothing leaves its criterion to a person too.

use super::flow::{criteria_of, milestones};
use super::state::RunState;
use crate::verify::treediff::{Comparison, TestMatcher};
use crate::verify::{BaseCheck, CheckKind};

/// Whether a changed path is documentation (its change cannot alter behaviour).
pub fn is_documentation(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let upper = name.to_ascii_uppercase();
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    matches!(ext.as_str(), "md" | "rst" | "adoc" | "org")
        || [
            "LICENSE",
            "LICENCE",
            "CHANGELOG",
            "AUTHORS",
            "NOTICE",
            "README",
        ]
        .iter()
        .any(|p| upper.starts_with(p))
        || path.starts_with("docs/")
        || path.starts_with("doc/")
}

/// Every check the final gate replays: the approved plan's and the objective's required ones.
pub fn all_checks(state: &RunState) -> Vec<String> {
    let mut out: Vec<String> = (0..milestones(state).len())
        .flat_map(|m| criteria_of(state, m))
        .filter_map(|(_, check)| check)
        .collect();
    for c in &state.verification.required_checks {
        if !out.contains(c) {
            out.push(c.clone());
        }
    }
    out
}

/// Whether the work changes behaviour: a changed path that is not documentation.
pub fn changes_behaviour(comparison: &Comparison) -> bool {
    comparison
        .changes()
        .iter()
        .any(|(rel, _)| !is_documentation(rel))
}

/// The changed paths that are neither tests nor documentation: taking them back gives the base
/// code with the result's tests. A module a check runs the doctests of is code (its doctests
/// stay the result's when it is taken back).
pub fn code_changes(comparison: &Comparison, checks: &[String]) -> Vec<String> {
    let matcher = TestMatcher::new(checks);
    comparison
        .changes()
        .iter()
        .filter(|(rel, _)| {
            !is_documentation(rel)
                && (!matcher.is_test(rel) || comparison.is_code_with_doctests(rel))
        })
        .map(|(rel, _)| rel.clone())
        .collect()
}

/// The plan's `fail_to_pass` checks that passed on the base tree: the base tree alone cannot
/// show their change, the base code with the result's tests may.
pub fn passed_on_base_though_fail_to_pass(state: &RunState) -> Vec<String> {
    let v = &state.verification;
    super::review::plan_criteria(state)
        .into_iter()
        .filter(|c| c.kind == CheckKind::FailToPass)
        .filter_map(|c| c.check)
        .filter(|c| v.base_checks.get(c).is_some_and(BaseCheck::held))
        .collect()
}

/// The final gate's checks to try against the base code with the result's tests, in the gate's
/// order: those that failed on the base tree, and the `fail_to_pass` ones that passed there.
fn to_try(state: &RunState) -> Vec<String> {
    let v = &state.verification;
    let passed_though = passed_on_base_though_fail_to_pass(state);
    all_checks(state)
        .into_iter()
        .filter(|c| v.base_checks.get(c).is_some_and(|b| !b.held()) || passed_though.contains(c))
        .collect()
}

/// The checks to try (`to_try`) that passed on the final tree having run at least one test (when
/// their runner says how many): the candidates to show the change.
pub fn candidates(state: &RunState) -> Vec<String> {
    let v = &state.verification;
    to_try(state)
        .into_iter()
        .filter(|c| {
            v.final_checks
                .get(c)
                .is_some_and(|f| f.passed && !f.tests.shows_nothing())
        })
        .collect()
}

/// The replay the final gate asks for when every check to try passes on the result (the honest
/// case): the code changes to take back, and those checks. `None` when the gate would ask for
/// none (documentation only, no check to try, only tests changed). Run beside the tester's
/// replay, it is the gate's, reused (`super::replay_cache`); when fewer checks pass, the gate's
/// batch is another and runs.
pub fn expected_replay(
    state: &RunState,
    comparison: &Comparison,
) -> Option<(Vec<String>, Vec<String>)> {
    if !changes_behaviour(comparison) {
        return None;
    }
    let checks = to_try(state);
    let code = code_changes(comparison, &all_checks(state));
    (!checks.is_empty() && !code.is_empty()).then_some((code, checks))
}

/// Why no check can show the change before the hybrid replay, if none can.
pub fn no_candidate_reason(state: &RunState, comparison: &Comparison) -> Option<String> {
    if !candidates(state).is_empty() {
        return None;
    }
    let changed: Vec<&str> = comparison
        .changes()
        .iter()
        .filter(|(rel, _)| !is_documentation(rel))
        .map(|(rel, _)| rel.as_str())
        .take(8)
        .collect();
    Some(format!(
        "the work changes {} but no replayed check that failed on the base tree, or is the plan's fail_to_pass check, passed on the result having run a test: a pass_to_pass guard passes on both trees, so it cannot show the change",
        changed.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::flow::tests::new_state;
    use crate::run::flow::{apply_approval, apply_plan};
    use crate::verify::testcount::TestTally;
    use serde_json::json;
    use std::fs;

    fn run(passed: bool, tests: TestTally) -> BaseCheck {
        BaseCheck {
            passed,
            detail: String::new(),
            tests,
            test_ids: None,
            reused_from: None,
        }
    }

    #[test]
    fn a_candidate_failed_on_the_base_or_is_fail_to_pass_and_passed_having_run_tests() {
        let mut state = new_state();
        apply_plan(
            &mut state,
            &json!({"summary": "s", "milestones": [{"id": "M1", "title": "t", "description": "",
                "acceptance_criteria": [
                    {"id": "AC1", "text": "guard", "check": "guard", "human_review": false, "kind": "pass_to_pass"},
                    {"id": "AC2", "text": "empty", "check": "empty", "human_review": false, "kind": "fail_to_pass"},
                    {"id": "AC3", "text": "real", "check": "real", "human_review": false, "kind": "fail_to_pass"},
                    {"id": "AC4", "text": "whole suite", "check": "whole", "human_review": false, "kind": "fail_to_pass"}]}]}),
        );
        let token = state.latest_plan().unwrap().token();
        apply_approval(&mut state, &token).unwrap();
        state.verification.required_checks = vec!["suite".into()];
        let v = &mut state.verification;
        for (c, base, now) in [
            (
                "guard",
                run(true, TestTally::Counted(3)),
                run(true, TestTally::Counted(3)),
            ),
            (
                "empty",
                run(false, TestTally::Counted(1)),
                run(true, TestTally::Counted(0)),
            ),
            (
                "real",
                run(false, TestTally::Unknown),
                run(true, TestTally::Unknown),
            ),
            // The plan's fail_to_pass suite passed on the base tree, which lacked the work's tests:
            // it is tried against the base code with them.
            (
                "whole",
                run(true, TestTally::Counted(2)),
                run(true, TestTally::Counted(3)),
            ),
            // The objective's suite, which the plan does not name as fail_to_pass: not tried.
            (
                "suite",
                run(true, TestTally::Counted(4)),
                run(true, TestTally::Counted(6)),
            ),
            // Exit 0 on the base tree with no test run (the tests it selects are the work's):
            // it failed there.
            (
                "new",
                run(true, TestTally::Counted(0)),
                run(true, TestTally::Counted(2)),
            ),
        ] {
            v.base_checks.insert(c.into(), base);
            v.final_checks.insert(c.into(), now);
        }
        state.verification.required_checks.push("new".into());
        assert_eq!(
            all_checks(&state),
            ["guard", "empty", "real", "whole", "suite", "new"]
        );
        assert_eq!(passed_on_base_though_fail_to_pass(&state), ["whole"]);
        assert_eq!(candidates(&state), ["real", "whole", "new"]);
        state.verification.final_checks.remove("real");
        state.verification.final_checks.remove("new");
        state.verification.final_checks.remove("whole");
        state.verification.required_checks.pop();
        assert!(candidates(&state).is_empty());
        let base = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        fs::write(base.path().join("conv.mjs"), "a\n").unwrap();
        fs::write(work.path().join("conv.mjs"), "b\n").unwrap();
        fs::write(work.path().join("conv.test.mjs"), "t\n").unwrap();
        fs::write(work.path().join("README.md"), "docs\n").unwrap();
        let compared = Comparison::of_dirs(base.path(), work.path());
        assert!(changes_behaviour(&compared));
        assert_eq!(code_changes(&compared, &[]), ["conv.mjs"]);
        // Ahead of the final verdicts: every check that failed on the base tree (the gate's
        // candidates when they all pass on the result), with the code to take back.
        assert_eq!(
            expected_replay(&state, &compared),
            Some((
                vec!["conv.mjs".to_owned()],
                vec!["empty".to_owned(), "real".to_owned(), "whole".to_owned()]
            ))
        );
        let why = no_candidate_reason(&state, &compared).unwrap();
        assert!(
            why.contains("conv.mjs") && why.contains("pass_to_pass"),
            "{why}"
        );
        let docs_only = tempfile::tempdir().unwrap();
        fs::write(docs_only.path().join("conv.mjs"), "a\n").unwrap();
        fs::create_dir(docs_only.path().join("docs")).unwrap();
        fs::write(docs_only.path().join("docs/usage.txt"), "how\n").unwrap();
        let docs_changed = Comparison::of_dirs(base.path(), docs_only.path());
        assert!(!changes_behaviour(&docs_changed));
        assert_eq!(expected_replay(&state, &docs_changed), None);
        state.verification.base_checks.clear();
        assert_eq!(expected_replay(&state, &compared), None);
    }
}
