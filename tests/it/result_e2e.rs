//! The operator's loop through the real binary: a run's result comes back as commits on
//! `autocode/<run-id>`; `autocode apply` merges (or squashes) it into the user's branch and
//! refuses a dirty checkout or a conflicting merge, leaving the tree as it was; `autocode clean`
//! never drops an unmerged result without `--force`, and without a run id and a terminal it only
//! says what it would remove. Isolation is never lost silently: a directory outside git, or a
//! repository without a commit, is refused with nothing created; a subdirectory gets a worktree
//! of the top level and its agents work in the same subdirectory; a second in-place run in one
//! directory gets `PAUSED_RUN_BUSY`.
//!
//! The agents are the scripted fake agent of `run_e2e` (same harness, same scripts).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::run_e2e::{BUILD, Finished, Harness, alive, build_ok, git, script_with, wait_until};

fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn ws_text(path: &Path) -> String {
    path.display().to_string()
}

fn run_id(finished: &Finished) -> String {
    finished.json["run_id"]
        .as_str()
        .expect("run_id in --json")
        .to_owned()
}

/// A completed worktree run in a fresh harness.
fn completed() -> (Harness, Finished, String) {
    let harness = Harness::new(script_with(&[]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let id = run_id(&finished);
    (harness, finished, id)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_completed_run_is_a_branch_and_apply_merges_it_into_the_users_branch() {
    let (harness, finished, id) = completed();
    let ws = harness.workspace();
    let branch = format!("autocode/{id}");
    // COMPLETE says where the result is and how to take it, on stderr and as data.
    let result = &finished.json["result"];
    assert_eq!(result["branch"], branch.as_str(), "{finished:?}");
    assert_eq!(result["commits"], 1, "{finished:?}");
    assert!(
        result["diff_stat"]
            .as_str()
            .is_some_and(|s| s.contains("hello.txt")),
        "{finished:?}"
    );
    assert!(
        finished.stderr.contains(&format!("autocode apply {id}"))
            && finished.stderr.contains(&format!("git merge {branch}"))
            && finished.stderr.contains("hello.txt"),
        "{finished:?}"
    );
    // The builder's stage is one commit on the run's branch, recorded in its stage record.
    let status = harness.status();
    let builder = status.json["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .find(|a| a["role"] == "builder")
        .expect("a builder attempt")
        .clone();
    let commit = builder["commit"].as_str().expect("the stage's commit");
    assert_eq!(git_out(&ws, &["rev-parse", &branch]), commit);
    assert_eq!(
        git_out(&ws, &["log", "-1", "--format=%s", &branch]),
        "autocode: milestone 1 \"Write hello.txt\" (stage 004-builder-1)"
    );
    // Nothing of autocode's own directory is in it.
    let files = git_out(&ws, &["show", "--name-only", "--format=", &branch]);
    assert_eq!(files, "hello.txt");
    // The user's checkout is untouched until apply.
    assert!(!ws.join("hello.txt").exists());
    let applied = harness.autocode(&["apply", &id, "--workspace", &ws_text(&ws), "--json"]);
    assert_eq!(applied.code, Some(0), "{applied:?}");
    assert_eq!(applied.json["applied"], "merged", "{applied:?}");
    assert_eq!(
        fs::read_to_string(ws.join("hello.txt")).expect("hello.txt merged"),
        "hello\n"
    );
    assert_eq!(git_out(&ws, &["rev-parse", "HEAD"]), commit);
    // `.autocode/` never shows in the user's status: every run excludes it.
    assert_eq!(git_out(&ws, &["status", "--porcelain"]), "");
    // Applying again changes nothing; the merged run's worktree and branch may now go.
    let again = harness.autocode(&["apply", &id, "--workspace", &ws_text(&ws), "--json"]);
    assert_eq!(again.code, Some(0), "{again:?}");
    assert_eq!(again.json["applied"], "already_merged", "{again:?}");
    let cleaned = harness.autocode(&["clean", &id, "--workspace", &ws_text(&ws)]);
    assert_eq!(cleaned.code, Some(0), "{cleaned:?}");
    assert!(!Harness::work_tree(&finished).exists());
    assert_eq!(git_out(&ws, &["branch", "--list", &branch]), "");
}

#[test]
fn apply_squashes_into_one_commit() {
    let (harness, _finished, id) = completed();
    let ws = harness.workspace();
    let before = git_out(&ws, &["rev-parse", "HEAD"]);
    let applied = harness.autocode(&["apply", &id, "--squash", "--workspace", &ws_text(&ws)]);
    assert_eq!(applied.code, Some(0), "{applied:?}");
    assert_eq!(git_out(&ws, &["rev-parse", "HEAD~1"]), before);
    assert!(
        git_out(&ws, &["log", "-1", "--format=%s"]).starts_with(&format!("autocode: run {id}")),
    );
    assert_eq!(
        fs::read_to_string(ws.join("hello.txt")).expect("hello"),
        "hello\n"
    );
    // The squash is recorded: applying again (either way) does nothing, and clean knows the
    // result was taken although the branch's own commit is not in the user's history.
    let squashed = git_out(&ws, &["rev-parse", "HEAD"]);
    for extra in [&["--squash"][..], &[][..]] {
        let mut args = vec!["apply", id.as_str(), "--workspace"];
        let ws_arg = ws_text(&ws);
        args.push(&ws_arg);
        args.push("--json");
        args.extend_from_slice(extra);
        let again = harness.autocode(&args);
        assert_eq!(again.code, Some(0), "{again:?}");
        assert_eq!(again.json["applied"], "already_squashed", "{again:?}");
        assert_eq!(again.json["commit"], squashed.as_str(), "{again:?}");
        assert_eq!(git_out(&ws, &["rev-parse", "HEAD"]), squashed);
    }
    let cleaned = harness.autocode(&["clean", &id, "--workspace", &ws_text(&ws)]);
    assert_eq!(cleaned.code, Some(0), "{cleaned:?}");
    assert!(!cleaned.stderr.contains("autocode apply"), "{cleaned:?}");
    assert_eq!(
        git_out(&ws, &["branch", "--list", &format!("autocode/{id}")]),
        ""
    );
}

#[test]
fn apply_never_replaces_a_file_git_does_not_track() {
    let (harness, _finished, id) = completed();
    let ws = harness.workspace();
    let head = git_out(&ws, &["rev-parse", "HEAD"]);
    // An ignored file of the user's where the run wrote one (a `.env` kept out of git), and an
    // untracked one: neither a merge nor a squash replaces it.
    let exclude = ws.join(".git/info/exclude");
    let mut excluded = fs::read_to_string(&exclude).unwrap_or_default();
    excluded.push_str("hello.txt\n");
    fs::write(&exclude, excluded).expect("exclude");
    for ignored in [true, false] {
        if !ignored {
            let kept = fs::read_to_string(&exclude).expect("exclude");
            fs::write(&exclude, kept.replace("hello.txt\n", "")).expect("exclude");
        }
        fs::write(ws.join("hello.txt"), "SECRET=mine\n").expect("user's file");
        for squash in [false, true] {
            let mut args = vec!["apply", id.as_str(), "--workspace"];
            let ws_arg = ws_text(&ws);
            args.push(&ws_arg);
            if squash {
                args.push("--squash");
            }
            let refused = harness.autocode(&args);
            assert_eq!(refused.code, Some(2), "ignored {ignored}: {refused:?}");
            assert!(
                refused.stderr.contains("hello.txt")
                    && refused.stderr.contains("not track")
                    && refused.stderr.contains("move them out of the way"),
                "{refused:?}"
            );
            assert_eq!(
                fs::read_to_string(ws.join("hello.txt")).expect("kept"),
                "SECRET=mine\n"
            );
            assert_eq!(git_out(&ws, &["rev-parse", "HEAD"]), head);
        }
    }
    // Moved out of the way, the result applies.
    fs::remove_file(ws.join("hello.txt")).expect("move");
    let applied = harness.autocode(&["apply", &id, "--workspace", &ws_text(&ws)]);
    assert_eq!(applied.code, Some(0), "{applied:?}");
    assert_eq!(
        fs::read_to_string(ws.join("hello.txt")).expect("merged"),
        "hello\n"
    );
}

#[test]
fn apply_refuses_a_dirty_checkout_and_aborts_a_conflict() {
    let (harness, _finished, id) = completed();
    let ws = harness.workspace();
    let head = git_out(&ws, &["rev-parse", "HEAD"]);
    fs::write(ws.join("README.md"), "my edit\n").expect("edit");
    let refused = harness.autocode(&["apply", &id, "--workspace", &ws_text(&ws)]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("uncommitted") && refused.stderr.contains("README.md"),
        "{refused:?}"
    );
    assert_eq!(
        fs::read_to_string(ws.join("README.md")).expect("readme"),
        "my edit\n"
    );
    assert!(!ws.join("hello.txt").exists());
    assert_eq!(git_out(&ws, &["rev-parse", "HEAD"]), head);

    // The user commits a hello.txt of their own: the merge conflicts and is aborted.
    git(&ws, &["checkout", "-q", "--", "README.md"]);
    fs::write(ws.join("hello.txt"), "mine\n").expect("mine");
    git(&ws, &["add", "hello.txt"]);
    git(&ws, &["commit", "-qm", "mine"]);
    let head = git_out(&ws, &["rev-parse", "HEAD"]);
    let conflict = harness.autocode(&["apply", &id, "--workspace", &ws_text(&ws), "--json"]);
    assert_eq!(conflict.code, Some(1), "{conflict:?}");
    assert_eq!(conflict.json["applied"], "conflict", "{conflict:?}");
    assert!(conflict.stderr.contains("hello.txt"), "{conflict:?}");
    assert_eq!(
        fs::read_to_string(ws.join("hello.txt")).expect("hello"),
        "mine\n"
    );
    assert_eq!(git_out(&ws, &["rev-parse", "HEAD"]), head);
    assert_eq!(git_out(&ws, &["status", "--porcelain"]), "");
}

#[test]
fn clean_keeps_an_unmerged_result_unless_forced() {
    let (harness, finished, id) = completed();
    let ws = harness.workspace();
    let branch = format!("autocode/{id}");
    let tree = Harness::work_tree(&finished);
    let refused = harness.autocode(&["clean", &id, "--workspace", &ws_text(&ws)]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains(&branch) && refused.stderr.contains("autocode apply"),
        "{refused:?}"
    );
    assert!(tree.join("hello.txt").exists());
    assert_eq!(
        git_out(
            &ws,
            &["branch", "--list", "--format=%(refname:short)", &branch]
        ),
        branch
    );
    // Without a run id and without a terminal: the list, how to name the run, nothing removed.
    let unnamed = harness.autocode(&["clean", "--workspace", &ws_text(&ws), "--force"]);
    assert_eq!(unnamed.code, Some(2), "{unnamed:?}");
    assert!(
        unnamed.stderr.contains(&format!("autocode clean {id}"))
            && unnamed.stderr.contains("worktree"),
        "{unnamed:?}"
    );
    assert!(tree.exists());
    // The run's verification trees (under the cache of its HOME, outside the workspace) go
    // with it.
    let verify_root = harness.home().join(".cache/autocode/verify");
    let verify: Vec<_> = fs::read_dir(&verify_root)
        .expect("verification trees")
        .flatten()
        .map(|workspace| workspace.path().join(&id))
        .filter(|trees| trees.exists())
        .collect();
    assert_eq!(verify.len(), 1, "{verify:?}");
    let verify = verify[0].clone();
    let forced = harness.autocode(&["clean", &id, "--force", "--workspace", &ws_text(&ws)]);
    assert_eq!(forced.code, Some(0), "{forced:?}");
    assert!(!tree.exists());
    assert!(!verify.exists());
    assert_eq!(git_out(&ws, &["branch", "--list", &branch]), "");
}

#[test]
fn a_directory_outside_git_or_without_a_commit_is_refused_with_nothing_created() {
    let harness = Harness::new(script_with(&[]));
    let plain: PathBuf = harness.home().join("plain");
    fs::create_dir_all(&plain).expect("plain dir");
    fs::write(plain.join("notes.txt"), "n\n").expect("notes");
    let args = |ws: &Path| {
        vec![
            "run".to_owned(),
            "Create hello.txt containing hello".into(),
            "--workspace".into(),
            ws_text(ws),
            "--provider".into(),
            "fake".into(),
            "--yes".into(),
            "--json".into(),
        ]
    };
    let argv = args(&plain);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let refused = harness.autocode(&argv);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("not in a git repository")
            && refused.stderr.contains("git init")
            && refused.stderr.contains("--in-place"),
        "{refused:?}"
    );
    assert_eq!(entries(&plain), ["notes.txt"]);
    assert!(harness.calls().is_empty());

    let fresh = harness.home().join("fresh");
    fs::create_dir_all(&fresh).expect("fresh dir");
    git(&fresh, &["init", "-q"]);
    let argv = args(&fresh);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let refused = harness.autocode(&argv);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(refused.stderr.contains("no commit"), "{refused:?}");
    assert_eq!(entries(&fresh), [".git"]);
    assert!(harness.calls().is_empty());
}

#[test]
fn a_subdirectory_run_works_in_that_subdirectory_of_a_worktree() {
    let harness = Harness::new(script_with(&[]));
    let ws = harness.workspace();
    let pkg = ws.join("pkg");
    fs::create_dir_all(&pkg).expect("pkg");
    fs::write(pkg.join("lib.txt"), "lib\n").expect("lib");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "pkg"]);
    let argv = [
        "run",
        "Create hello.txt containing hello",
        "--workspace",
        &ws_text(&pkg),
        "--provider",
        "fake",
        "--yes",
        "--json",
    ];
    let finished = harness.autocode(&argv);
    finished.assert_complete();
    let id = run_id(&finished);
    let tree = Harness::work_tree(&finished);
    assert_eq!(
        tree,
        pkg.join(".autocode/worktrees").join(&id).join("pkg"),
        "{finished:?}"
    );
    assert!(tree.join("lib.txt").exists());
    assert_eq!(
        fs::read_to_string(tree.join("hello.txt")).expect("hello"),
        "hello\n"
    );
    for call in harness.calls() {
        if call["role"] != "tester" {
            assert_eq!(call["cwd"], ws_text(&tree), "{call}");
        }
    }
    // The branch holds pkg/hello.txt; apply from the subdirectory puts it there.
    let files = git_out(
        &ws,
        &[
            "show",
            "--name-only",
            "--format=",
            &format!("autocode/{id}"),
        ],
    );
    assert_eq!(files, "pkg/hello.txt");
    let applied = harness.autocode(&["apply", &id, "--workspace", &ws_text(&pkg)]);
    assert_eq!(applied.code, Some(0), "{applied:?}");
    assert_eq!(
        fs::read_to_string(pkg.join("hello.txt")).expect("hello"),
        "hello\n"
    );
    assert!(!ws.join("hello.txt").exists());
}

#[test]
fn a_second_in_place_run_in_one_directory_gets_run_busy() {
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": BUILD}, {"hang": true}], build_ok()]),
    )]));
    let ws = harness.workspace();
    // In place, the room grants the existing top-level entries: the file must exist.
    fs::write(ws.join("hello.txt"), "").expect("hello.txt");
    let mut first = harness
        .run_command(&["--yes", "--in-place"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn autocode");
    let marker = harness.state().join("builder-1.hanging");
    wait_until("the builder to hang", Duration::from_secs(60), || {
        marker.exists()
    });
    let agent: i32 = fs::read_to_string(&marker)
        .expect("marker")
        .trim()
        .parse()
        .expect("pid");
    let runs_before = entries(&ws.join(".autocode/runs"));
    assert_eq!(runs_before.len(), 1);
    let second = harness.run(&["--yes", "--in-place"]);
    second.assert_paused("PAUSED_RUN_BUSY");
    assert_eq!(second.json["run_id"], runs_before[0].as_str(), "{second:?}");
    assert!(second.stderr.contains("in place"), "{second:?}");
    assert_eq!(entries(&ws.join(".autocode/runs")), runs_before);
    assert_eq!(
        harness
            .roles_called()
            .iter()
            .filter(|r| *r == "requirements")
            .count(),
        1
    );
    assert!(alive(agent), "the busy run disturbed the running stage");
    first.kill().expect("SIGKILL autocode");
    first.wait().expect("reap autocode");
    wait_until("the orphaned agent to die", Duration::from_secs(30), || {
        !alive(agent)
    });
    // The directory is free again: resuming the first run takes it (and judges the attempt).
    let judged = harness.resume(&[]);
    judged.assert_paused("PAUSED_INTERRUPTED");
}

#[test]
fn same_family_routes_never_leave_a_run_that_could_go_in_place() {
    // The tester on the builder's family: the preflight refuses before anything exists, so no
    // run is left paused before its isolation (which a resume would then have to decide).
    let harness = Harness::new(script_with(&[]));
    let ws = harness.workspace();
    let refused = harness.run(&["--yes", "--tester-model", "alpha-small"]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(harness.calls().is_empty());
    assert!(
        !ws.join(".autocode/runs").exists()
            || fs::read_dir(ws.join(".autocode/runs"))
                .expect("runs")
                .next()
                .is_none()
    );
    assert!(!ws.join("hello.txt").exists());
}

#[test]
fn an_in_place_run_says_its_changes_are_not_committed() {
    let harness = Harness::new(script_with(&[]));
    let ws = harness.workspace();
    fs::write(ws.join("hello.txt"), "").expect("hello.txt");
    let head = git_out(&ws, &["rev-parse", "HEAD"]);
    let finished = harness.run(&["--yes", "--in-place"]);
    finished.assert_complete();
    assert_eq!(
        finished.json["isolation"]["kind"], "in_place",
        "{finished:?}"
    );
    assert!(finished.json.get("result").is_none(), "{finished:?}");
    assert!(finished.stderr.contains("not committed"), "{finished:?}");
    assert_eq!(git_out(&ws, &["rev-parse", "HEAD"]), head);
    let id = run_id(&finished);
    let refused = harness.autocode(&["apply", &id, "--workspace", &ws_text(&ws)]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(refused.stderr.contains("in place"), "{refused:?}");
}

/// A cloned repository that ships `.autocode/in-place.lock` (or `.autocode` itself) as a
/// symbolic link: `--in-place` refuses it with its path and creates nothing through it.
#[test]
fn a_planted_link_under_autocode_is_refused_with_its_path() {
    let harness = Harness::new(script_with(&[]));
    let ws = harness.workspace();
    let outside = harness.home().join("outside");
    fs::create_dir_all(&outside).expect("outside");
    fs::create_dir_all(ws.join(".autocode")).expect(".autocode");
    let lock = ws.join(".autocode/in-place.lock");
    std::os::unix::fs::symlink(outside.join("made-through-the-link"), &lock).expect("link");
    let refused = harness.run(&["--yes", "--in-place"]);
    assert_ne!(refused.code, Some(0), "{refused:?}");
    assert!(
        refused.stderr.contains(&lock.display().to_string())
            && refused.stderr.contains("symbolic link"),
        "{refused:?}"
    );
    assert!(!outside.join("made-through-the-link").exists());
    assert_eq!(entries(&outside), Vec::<String>::new());
}
