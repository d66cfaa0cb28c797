//! Tests of the on-disk run state: round trip, append-only growth, a cut-off tail, tampering,
//! and the older format.

use std::collections::BTreeMap;
use std::fs;

use chrono::Utc;

use super::*;
use crate::ids::{ProviderName, RunId};
use crate::report::ReportKind;
use crate::role::Role;
use crate::run::state::{AttemptPurpose, AttemptStatus, Route};

fn key() -> TagKey {
    TagKey::from_bytes([7; 32])
}

/// A run directory laid out as autocode lays it out (the tag context is its path below
/// `.autocode/runs/`).
fn run_dir(root: &Path) -> PathBuf {
    let dir = root.join(".autocode/runs/r1");
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn state(root: &Path) -> RunState {
    RunState::new(
        RunId::new("r1").unwrap(),
        "objective".into(),
        root.to_owned(),
        ProviderName::new("p").unwrap(),
        BTreeMap::new(),
    )
}

fn attempt(seq: u32) -> AttemptRecord {
    AttemptRecord {
        seq,
        role: Role::Builder,
        report_kind: ReportKind::Build,
        attempt: 1,
        dir: format!("{seq:03}-builder-1"),
        route: Route {
            provider: ProviderName::new("p").unwrap(),
            model: "m".into(),
            effort: None,
            codex_model_provider: None,
        },
        purpose: AttemptPurpose::Fresh,
        session: None,
        status: AttemptStatus::Running,
        started_at: Utc::now(),
        finished_at: None,
        usage: Default::default(),
        milestone: Some(0),
        commit: None,
    }
}

fn log_lines(dir: &Path) -> usize {
    fs::read_to_string(dir.join(ATTEMPTS_LOG))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn a_state_round_trips_and_only_changed_attempts_are_appended() {
    let root = tempfile::tempdir().unwrap();
    let dir = run_dir(root.path());
    let mut state = state(root.path());
    let mut log = AttemptLog::of(&state);
    commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    assert!(!dir.join(ATTEMPTS_LOG).exists());
    assert_eq!(read(&dir, &key()).unwrap(), state);
    for seq in 1..=3 {
        state.attempts.push(attempt(seq));
        commit_with(&dir, &mut state, &mut log, &key()).unwrap();
        state.attempts.last_mut().unwrap().status = AttemptStatus::Accepted;
        commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    }
    assert_eq!(log_lines(&dir), 6);
    // A commit with no attempt changed appends nothing.
    state.plan_review_rounds = 4;
    commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    assert_eq!(log_lines(&dir), 6);
    // An old attempt changed: one line.
    state.attempts[0].status = AttemptStatus::Abandoned;
    commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    assert_eq!(log_lines(&dir), 7);
    assert_eq!(read(&dir, &key()).unwrap(), state);
    // The head is compact, without the attempts.
    let head = fs::read_to_string(dir.join(STATE_FILE)).unwrap();
    assert!(head.contains("\"attempts\":[]"), "{head}");
    assert!(!head.contains("\n  \"run_id\""), "{head}");
}

#[test]
fn the_head_does_not_grow_with_attempts() {
    let root = tempfile::tempdir().unwrap();
    let dir = run_dir(root.path());
    let mut state = state(root.path());
    let mut log = AttemptLog::of(&state);
    state.attempts.push(attempt(1));
    commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    let small = fs::metadata(dir.join(STATE_FILE)).unwrap().len();
    for seq in 2..=200 {
        state.attempts.push(attempt(seq));
        commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    }
    let after = fs::metadata(dir.join(STATE_FILE)).unwrap().len();
    // Only the commit's counters may lengthen by a few digits.
    assert!(after <= small + 8, "{small} → {after}");
    assert_eq!(read(&dir, &key()).unwrap().attempts.len(), 200);
}

#[test]
fn a_tail_cut_off_by_a_crash_is_ignored_then_replaced() {
    let root = tempfile::tempdir().unwrap();
    let dir = run_dir(root.path());
    let mut state = state(root.path());
    let mut log = AttemptLog::of(&state);
    state.attempts.push(attempt(1));
    commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    let committed = state.clone();
    // A log append whose head was never written (killed in between), then a torn line.
    let mut file = OpenOptions::new()
        .append(true)
        .open(dir.join(ATTEMPTS_LOG))
        .unwrap();
    file.write_all(b"{\"index\":1,\"attempt\":{\"seq\":2}}\n{\"index\":1,\"att")
        .unwrap();
    assert_eq!(read(&dir, &key()).unwrap(), committed);
    // The next process continues from what was committed.
    let mut resumed = read(&dir, &key()).unwrap();
    let mut log = AttemptLog::of(&resumed);
    resumed.attempts.push(attempt(2));
    commit_with(&dir, &mut resumed, &mut log, &key()).unwrap();
    assert_eq!(read(&dir, &key()).unwrap(), resumed);
    assert_eq!(log_lines(&dir), 2);
}

#[test]
fn a_changed_or_shortened_log_does_not_verify() {
    let root = tempfile::tempdir().unwrap();
    let dir = run_dir(root.path());
    let mut state = state(root.path());
    let mut log = AttemptLog::of(&state);
    state.attempts.push(attempt(1));
    commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    state.attempts[0].status = AttemptStatus::Rejected {
        reason: "bad".into(),
    };
    commit_with(&dir, &mut state, &mut log, &key()).unwrap();
    let path = dir.join(ATTEMPTS_LOG);
    let original = fs::read_to_string(&path).unwrap();
    // Rewritten to look accepted, same length.
    fs::write(
        &path,
        original.replace(
            "\"rejected\",\"reason\":\"bad\"",
            "\"accepted\",\"reason\":\"bad\"",
        ),
    )
    .unwrap();
    assert!(matches!(
        read(&dir, &key()),
        Err(StoreError::TagMismatch { .. })
    ));
    // The last line dropped (the attempt's rejection hidden).
    let first_line_len = original.lines().next().unwrap().len() + 1;
    fs::write(&path, &original[..first_line_len]).unwrap();
    assert!(matches!(
        read(&dir, &key()),
        Err(StoreError::TagMismatch { .. })
    ));
    // Gone altogether.
    fs::remove_file(&path).unwrap();
    assert!(matches!(read(&dir, &key()), Err(StoreError::Read { .. })));
    fs::write(&path, original).unwrap();
    assert_eq!(read(&dir, &key()).unwrap(), state);
}

#[test]
fn a_format_1_state_is_refused_as_an_older_version() {
    let root = tempfile::tempdir().unwrap();
    let dir = run_dir(root.path());
    let mut value = serde_json::to_value(state(root.path())).unwrap();
    value["format_version"] = 1.into();
    let path = dir.join(STATE_FILE);
    store::write_tagged_json(&path, &value, &key(), &integrity::context_for(&path)).unwrap();
    assert!(matches!(
        read(&dir, &key()),
        Err(StoreError::Version {
            found: 1,
            expected: RUN_FORMAT,
            ..
        })
    ));
}
