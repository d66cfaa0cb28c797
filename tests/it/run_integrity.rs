//! Run state only autocode wrote, end to end: the real binary with the fake agent's harness
//! (`run_e2e`), a run that pauses at its first stage, and then the run directory
//! changed the way a builder, a planted directory or a cloned repository would change it.
//! `status`, `resume` and `clean` must refuse what does not verify, naming the run and what is
//! wrong; bare `status`/`resume` must pick the latest run by the time autocode recorded.
//!
//! Forgeries that need a valid tag (to reach the placement checks behind it) are tagged with the
//! harness user's own key, read from its isolated `XDG_STATE_HOME`: what a stranger cannot do,
//! but what a run committed by the same user elsewhere would carry.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use autocode::run::integrity::{KEY_FILE, context_for};
use autocode::store::{TagKey, seal};
use serde_json::{Value, json};

use super::run_e2e::{Finished, Harness, finish, git, only_run_dir, script_with};

/// The script of a run whose first stage ends without an answer: it pauses at
/// PAUSED_PROVIDER_UNCERTAIN and stays paused on a resume without `--abandon-stage`.
fn stuck_script() -> Value {
    script_with(&[("requirements", json!([[{"exit": 2}]]))])
}

/// A run paused at its first stage (PAUSED_PROVIDER_UNCERTAIN), and its directory.
fn paused_run() -> (Harness, PathBuf, String) {
    let harness = Harness::new(stuck_script());
    harness
        .run(&["--yes"])
        .assert_paused("PAUSED_PROVIDER_UNCERTAIN");
    let dir = only_run_dir(&harness);
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    (harness, dir, id)
}

fn key_dir(harness: &Harness) -> PathBuf {
    harness.home().join(".local/state/autocode")
}

fn key(harness: &Harness) -> TagKey {
    let bytes = fs::read(key_dir(harness).join(KEY_FILE)).expect("key file");
    TagKey::from_bytes(bytes.try_into().expect("a 32-byte key"))
}

fn read_state(dir: &Path) -> Value {
    serde_json::from_slice(&fs::read(dir.join("run.json")).expect("run.json")).expect("json")
}

/// Rewrites `dir/run.json` with `edit` applied, keeping its old (now stale) tag member.
fn rewrite_keeping_tag(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let mut state = read_state(dir);
    edit(&mut state);
    fs::write(
        dir.join("run.json"),
        serde_json::to_vec_pretty(&state).unwrap(),
    )
    .unwrap();
}

/// Rewrites `dir/run.json` with `edit` applied and a tag that verifies under the user's key.
pub(super) fn retag(harness: &Harness, dir: &Path, edit: impl FnOnce(&mut Value)) {
    let mut state = read_state(dir);
    state.as_object_mut().unwrap().remove("integrity");
    edit(&mut state);
    let path = dir.join("run.json");
    let sealed = seal(
        &key(harness),
        &context_for(&path),
        &serde_json::to_vec_pretty(&state).unwrap(),
    )
    .expect("an object");
    fs::write(path, sealed).unwrap();
}

fn mark_complete(state: &mut Value) {
    state["phase"] = json!({"phase": "complete"});
    state["pause"] = Value::Null;
    state["completed_at"] = json!("2026-01-01T00:00:00Z");
}

fn status_of(harness: &Harness, workspace: &Path, run: Option<&str>) -> Finished {
    let ws = workspace.display().to_string();
    let mut args = vec!["status", "--workspace", &ws, "--json"];
    args.extend(run);
    harness.autocode(&args)
}

fn resume_of(harness: &Harness, workspace: &Path, run: Option<&str>) -> Finished {
    let ws = workspace.display().to_string();
    let mut args = vec!["resume", "--workspace", &ws, "--json"];
    args.extend(run);
    harness.autocode(&args)
}

/// Refused as a usage error whose message names the run and says `why`.
fn assert_refused(finished: &Finished, run: &str, why: &str) {
    assert_eq!(finished.code, Some(2), "{finished:?}");
    assert!(finished.stderr.contains(run), "{finished:?}");
    assert!(finished.stderr.contains(why), "{finished:?}");
    assert!(finished.stderr.contains("hint:"), "{finished:?}");
    assert!(!finished.stderr.contains("COMPLETE"), "{finished:?}");
    assert_eq!(finished.json, Value::Null, "{finished:?}");
}

/// `status --json` or `resume --json` of the paused run: exit 3, a pause in the document (a
/// resume without `--abandon-stage` leaves it paused).
fn assert_still_paused(finished: &Finished) {
    assert_eq!(finished.code, Some(3), "{finished:?}");
    assert!(
        finished.json["pause"]["code"]
            .as_str()
            .is_some_and(|code| code.starts_with("PAUSED_")),
        "{finished:?}"
    );
    assert!(finished.json["completed_at"].is_null(), "{finished:?}");
}

#[test]
fn a_run_state_rewritten_to_complete_is_refused() {
    let (harness, dir, id) = paused_run();
    let ws = harness.workspace();
    rewrite_keeping_tag(&dir, mark_complete);
    for finished in [
        resume_of(&harness, &ws, Some(&id)),
        resume_of(&harness, &ws, None),
        status_of(&harness, &ws, Some(&id)),
    ] {
        assert_refused(&finished, &id, "does not verify");
    }
    // Bare status skips it with a warning and finds nothing else.
    let bare = status_of(&harness, &ws, None);
    assert_eq!(bare.code, Some(2), "{bare:?}");
    assert!(
        bare.stderr.contains(&format!("warning: skipping run {id}")),
        "{bare:?}"
    );
    let clean = harness.autocode(&["clean", &id, "--workspace", &ws.display().to_string()]);
    assert_refused(&clean, &id, "does not verify");
    // Without any tag it is named as an older autocode's run.
    rewrite_keeping_tag(&dir, |state| {
        state.as_object_mut().unwrap().remove("integrity");
    });
    assert_refused(
        &status_of(&harness, &ws, Some(&id)),
        &id,
        "made by an older autocode",
    );
}

/// A run state of an older format (properly tagged) is named as such, with what finishes it.
#[test]
fn a_run_state_of_an_older_format_is_refused_with_what_finishes_it() {
    let (harness, dir, id) = paused_run();
    let ws = harness.workspace();
    retag(&harness, &dir, |state| {
        state["format_version"] = json!(1);
    });
    for finished in [
        status_of(&harness, &ws, Some(&id)),
        resume_of(&harness, &ws, Some(&id)),
    ] {
        assert_refused(&finished, &id, "made by an older autocode (format 1;");
        assert!(
            finished
                .stderr
                .contains("finish it with that version of autocode or start a new run"),
            "{finished:?}"
        );
    }
    retag(&harness, &dir, |state| {
        state["format_version"] = json!(99);
    });
    assert_refused(
        &status_of(&harness, &ws, Some(&id)),
        &id,
        "made by a newer autocode (format 99;",
    );
}

#[test]
fn bare_status_and_resume_ignore_a_planted_newer_run() {
    let (harness, dir, id) = paused_run();
    let ws = harness.workspace();
    let runs = dir.parent().unwrap().to_owned();
    // A forged newer, complete run under a later name and a later file time...
    let forged = runs.join("29991231-235959-ffffff");
    fs::create_dir(&forged).unwrap();
    fs::copy(dir.join("run.json"), forged.join("run.json")).unwrap();
    rewrite_keeping_tag(&forged, |state| {
        mark_complete(state);
        state["run_id"] = json!("29991231-235959-ffffff");
        state["updated_at"] = json!("2999-12-31T23:59:59Z");
    });
    // ...and a byte-for-byte copy of the real run state under another name.
    let copied = runs.join("29991231-235959-eeeeee");
    fs::create_dir(&copied).unwrap();
    fs::copy(dir.join("run.json"), copied.join("run.json")).unwrap();
    for finished in [
        status_of(&harness, &ws, None),
        resume_of(&harness, &ws, None),
    ] {
        assert_still_paused(&finished);
        assert_eq!(finished.json["run_id"], id.as_str(), "{finished:?}");
        assert!(
            finished
                .stderr
                .contains("warning: skipping run 29991231-235959-ffffff"),
            "{finished:?}"
        );
        assert!(
            finished
                .stderr
                .contains("warning: skipping run 29991231-235959-eeeeee"),
            "{finished:?}"
        );
    }
}

#[test]
fn the_latest_run_is_the_one_autocode_recorded_last_not_the_newest_file() {
    let harness = Harness::new(stuck_script());
    let ws = harness.workspace();
    for _ in 0..2 {
        harness
            .run(&["--yes"])
            .assert_paused("PAUSED_PROVIDER_UNCERTAIN");
    }
    let mut runs: Vec<PathBuf> = fs::read_dir(ws.join(".autocode/runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runs.sort_by_key(|dir| read_state(dir)["updated_at"].as_str().unwrap().to_owned());
    let (older, newer) = (runs[0].clone(), runs[1].clone());
    let name = |dir: &Path| dir.file_name().unwrap().to_string_lossy().into_owned();
    // A later file time on the older run changes nothing.
    let touched = Command::new("touch")
        .args(["-d", "2099-01-01"])
        .arg(older.join("run.json"))
        .status()
        .unwrap();
    assert!(touched.success());
    let status = status_of(&harness, &ws, None);
    assert_eq!(status.json["run_id"], name(&newer).as_str(), "{status:?}");
    // A later recorded time (tagged) makes the older-named run the latest.
    retag(&harness, &older, |state| {
        state["updated_at"] = json!("2098-01-01T00:00:00Z");
    });
    let status = status_of(&harness, &ws, None);
    assert_eq!(status.json["run_id"], name(&older).as_str(), "{status:?}");
    assert!(!status.stderr.contains("warning"), "{status:?}");
}

#[test]
fn a_run_directory_committed_to_git_is_refused_in_a_clone() {
    let (harness, _dir, id) = paused_run();
    let ws = harness.workspace();
    git(&ws, &["add", "-f", ".autocode/runs"]);
    git(&ws, &["commit", "-qm", "a run comes with the repository"]);
    let clone = ws.parent().unwrap().join("clone");
    git(
        ws.parent().unwrap(),
        &["clone", "-q", &ws.display().to_string(), "clone"],
    );
    assert!(
        clone
            .join(".autocode/runs")
            .join(&id)
            .join("run.json")
            .exists()
    );
    for finished in [
        resume_of(&harness, &clone, Some(&id)),
        status_of(&harness, &clone, Some(&id)),
        // The original workspace, where the tag verifies: tracked is refused all the same.
        status_of(&harness, &ws, Some(&id)),
    ] {
        assert_refused(&finished, &id, "tracked by git");
    }
    let bare = resume_of(&harness, &clone, None);
    assert_eq!(bare.code, Some(2), "{bare:?}");
    assert!(bare.stderr.contains("tracked by git"), "{bare:?}");
}

#[test]
fn a_work_tree_or_workspace_elsewhere_is_refused() {
    let (harness, dir, id) = paused_run();
    let ws = harness.workspace();
    let elsewhere = ws.parent().unwrap().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    retag(&harness, &dir, |state| {
        state["work_tree"] = json!(elsewhere);
    });
    assert_refused(
        &resume_of(&harness, &ws, Some(&id)),
        &id,
        "neither the workspace nor",
    );
    retag(&harness, &dir, |state| {
        state["work_tree"] = json!(elsewhere);
        state["isolation"] = json!({"kind": "worktree", "path": elsewhere, "branch": "x"});
    });
    assert_refused(
        &status_of(&harness, &ws, Some(&id)),
        &id,
        "neither the workspace nor",
    );
    retag(&harness, &dir, |state| {
        state["work_tree"] = json!(elsewhere);
        state["workspace"] = json!(elsewhere);
    });
    assert_refused(
        &resume_of(&harness, &ws, Some(&id)),
        &id,
        "belongs to workspace",
    );
    assert!(
        fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "nothing ran elsewhere"
    );
}

#[test]
fn a_run_id_that_is_not_its_directory_is_refused() {
    let (harness, dir, id) = paused_run();
    let ws = harness.workspace();
    let other = "20990101-000000-abcdef";
    let moved = dir.parent().unwrap().join(other);
    fs::create_dir(&moved).unwrap();
    fs::copy(dir.join("run.json"), moved.join("run.json")).unwrap();
    if dir.join("attempts.jsonl").exists() {
        fs::copy(dir.join("attempts.jsonl"), moved.join("attempts.jsonl")).unwrap();
    }
    // Copied as is: the tag names its place, so it does not verify elsewhere.
    assert_refused(
        &status_of(&harness, &ws, Some(other)),
        other,
        "does not verify",
    );
    // Tagged for its new place but still naming the old run.
    retag(&harness, &moved, |_| {});
    let finished = resume_of(&harness, &ws, Some(other));
    assert_refused(&finished, other, &format!("names run {id}"));
}

#[test]
fn the_key_is_private_and_concurrent_first_runs_share_one() {
    let harness = Harness::new(stuck_script());
    assert!(!key_dir(&harness).exists());
    // Four runs start at once with no key yet: every one must end up under the same key.
    let children: Vec<_> = (0..4)
        .map(|_| {
            harness
                .run_command(&["--yes"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn autocode")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&key_dir(&harness)), 0o700);
    assert_eq!(mode(&key_dir(&harness).join(KEY_FILE)), 0o600);
    assert_eq!(
        fs::read_dir(key_dir(&harness)).unwrap().count(),
        1,
        "only the key is left"
    );
    let runs: Vec<String> = fs::read_dir(harness.workspace().join(".autocode/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(runs.len(), 4);
    for run in &runs {
        assert_still_paused(&status_of(&harness, &harness.workspace(), Some(run)));
    }
    // The key never lands in the workspace.
    let ws_files = Command::new("find")
        .arg(harness.workspace())
        .args(["-name", KEY_FILE])
        .output()
        .unwrap();
    assert!(ws_files.stdout.is_empty());
}

#[test]
fn a_key_directory_inside_the_workspace_is_refused() {
    let harness = Harness::new(stuck_script());
    let ws = harness.workspace();
    let mut command = harness.run_command(&["--yes"]);
    command.env("XDG_STATE_HOME", ws.join("state"));
    let finished = finish(command);
    assert_eq!(finished.code, Some(2), "{finished:?}");
    assert!(
        finished.stderr.contains("inside the workspace"),
        "{finished:?}"
    );
    assert!(!ws.join(".autocode/runs").exists(), "{finished:?}");
}

#[test]
fn runs_lists_verified_runs_and_names_the_refused_ones() {
    let (harness, dir, id) = paused_run();
    let ws = harness.workspace();
    let planted = dir.parent().unwrap().join("20990101-000000-forged");
    fs::create_dir_all(&planted).unwrap();
    fs::copy(dir.join("run.json"), planted.join("run.json")).unwrap();
    let listed = harness.autocode(&["runs", "--workspace", &ws.display().to_string(), "--json"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let runs = listed.json.as_array().expect("a list").clone();
    assert_eq!(runs.len(), 2, "{listed:?}");
    assert_eq!(runs[0]["run_id"], id.as_str(), "{listed:?}");
    assert_eq!(runs[0]["pause"], "PAUSED_PROVIDER_UNCERTAIN", "{listed:?}");
    assert!(runs[0]["refused"].is_null(), "{listed:?}");
    assert_eq!(runs[1]["run_id"], "20990101-000000-forged", "{listed:?}");
    assert!(runs[1]["refused"].as_str().is_some(), "{listed:?}");
}

/// A corrupt run state is called corrupt (not an older autocode's), and a changed run-state key
/// is named with its path and what to do, in the refusal and in bare status's warning.
#[test]
fn a_corrupt_state_and_a_changed_key_say_what_is_wrong() {
    let (harness, dir, id) = paused_run();
    let ws = harness.workspace();
    let original = fs::read(dir.join("run.json")).expect("run.json");
    // Cut off mid-document (no tag left, not JSON).
    fs::write(dir.join("run.json"), &original[..original.len() / 2]).unwrap();
    let corrupt = status_of(&harness, &ws, Some(&id));
    assert_refused(&corrupt, &id, "is corrupt");
    assert!(!corrupt.stderr.contains("older autocode"), "{corrupt:?}");
    assert!(
        corrupt.stderr.contains(&format!("git log autocode/{id}")),
        "{corrupt:?}"
    );
    // The state back as it was, then the key replaced (a new file, newer than the state).
    fs::write(dir.join("run.json"), &original).unwrap();
    assert_still_paused(&status_of(&harness, &ws, Some(&id)));
    let key_file = key_dir(&harness).join(KEY_FILE);
    let old_key = fs::read(&key_file).unwrap();
    fs::remove_file(&key_file).unwrap();
    fs::write(&key_file, [7u8; 32]).unwrap();
    fs::set_permissions(&key_file, fs::Permissions::from_mode(0o600)).unwrap();
    let changed = status_of(&harness, &ws, Some(&id));
    assert_refused(&changed, &id, "the key changed");
    assert!(
        changed.stderr.contains(&key_file.display().to_string())
            && changed.stderr.contains("put the old key back"),
        "{changed:?}"
    );
    let bare = status_of(&harness, &ws, None);
    assert!(
        bare.stderr.contains("the key changed")
            && bare.stderr.contains(&key_file.display().to_string()),
        "{bare:?}"
    );
    // The old key back: the run verifies again.
    fs::write(&key_file, &old_key).unwrap();
    assert_still_paused(&status_of(&harness, &ws, Some(&id)));
}
