//! The tree the final gate replays to see that a check reports the result's tests: the work
//! tree's snapshot with every file a runner could load as a test given a failure when loaded
//! (`verify::canary`), composed in the run's private store.

use crate::gittree::TreeId;
use crate::run::replay::ReplayError;
use crate::run::vtree::VerifyTree;

use super::trees::other;

/// `target` with every file a runner could load as a test made to fail when loaded
/// (`verify::canary`): the tests by layout or named by `checks`, and code files holding tests.
/// A tree with no such file is no tree to judge a check by (`ReplayError::NoFailingTests`).
pub(super) async fn with_failing_tests(
    vtree: &VerifyTree,
    target: &TreeId,
    checks: &[String],
) -> Result<TreeId, ReplayError> {
    use crate::verify::canary;
    const FILE_CAP: u64 = 1 << 20;
    let store = vtree.store();
    let matcher = crate::verify::testfiles::TestMatcher::new(checks);
    let files: Vec<String> = store
        .entries(target)
        .await
        .map_err(other)?
        .into_iter()
        .filter(|e| e.mode.starts_with("100"))
        .map(|e| e.path)
        .collect();
    // One read for the test files and the configurations that say what the runners collect.
    let read: Vec<String> = files
        .into_iter()
        .filter(|p| canary::may_take_a_failure(p, &matcher) || canary::Collected::reads(p))
        .collect();
    let files = store
        .files_at(target, &read, FILE_CAP)
        .await
        .map_err(other)?;
    let configs: Vec<(String, String)> = files
        .iter()
        .filter(|(rel, _, _)| canary::Collected::reads(rel))
        .map(|(rel, _, bytes)| (rel.clone(), String::from_utf8_lossy(bytes).into_owned()))
        .collect();
    let collected = canary::Collected::of(checks, &configs);
    let failing: Vec<(String, u32, Vec<u8>)> = files
        .into_iter()
        .filter(|(rel, _, _)| canary::may_take_a_failure(rel, &matcher))
        .filter_map(|(rel, mode, bytes)| {
            let text = String::from_utf8(bytes).ok()?;
            let made = canary::with_failure(&rel, &text, matcher.is_test(&rel), collected)?;
            Some((rel, mode, made.into_bytes()))
        })
        .collect();
    if failing.is_empty() {
        return Err(ReplayError::NoFailingTests(
            "the result holds no test file autocode can make fail".to_owned(),
        ));
    }
    store
        .with_contents_anywhere(target, &failing, &vtree.scratch_index())
        .await
        .map_err(other)
}
