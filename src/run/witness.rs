//! Which replayed check shows the change (issue 25): a run whose work changes more than
//! documentation completes only when at least one check failed on the base tree, passed on the
//! result having run at least one test, and fails again on the result with its code changes taken
//! back (the result's tests against the base code). A `pass_to_pass` guard passes on both trees,
//! so it never shows a change; a check that fails on the base only because its test file did not
//! exist yet passes against the base code and shows nothing either. When no check shows the
//! change, a person is asked (`review::pending_reviews`), with why.

use super::flow::{criteria_of, milestones};
use super::state::RunState;
use super::treediff::{Comparison, TestMatcher};

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
/// code with the result's tests.
pub fn code_changes(comparison: &Comparison, checks: &[String]) -> Vec<String> {
    let matcher = TestMatcher::new(checks);
    comparison
        .changes()
        .iter()
        .filter(|(rel, _)| !is_documentation(rel) && !matcher.is_test(rel))
        .map(|(rel, _)| rel.clone())
        .collect()
}

/// Checks that failed on the base tree and passed on the final tree having run at least one test
/// (when their runner says how many): the candidates to show the change.
pub fn candidates(state: &RunState) -> Vec<String> {
    let v = &state.verification;
    all_checks(state)
        .into_iter()
        .filter(|c| {
            let base_failed = v.base_checks.get(c).is_some_and(|b| !b.passed);
            let final_passed = v
                .final_checks
                .get(c)
                .is_some_and(|f| f.passed && !f.tests.none_ran());
            base_failed && final_passed
        })
        .collect()
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
        "the work changes {} but no replayed check failed on the base tree and passed on the result having run a test: a pass_to_pass guard passes on both trees, so it cannot show the change",
        changed.join(", ")
    ))
}
