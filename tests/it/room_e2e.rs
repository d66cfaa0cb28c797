//! The agent's room in whole runs (`docs/run-lifecycle.md`, "The room"): the real binary drives
//! the fake agent, the kernel refuses writes outside the room, and `--unconfined` and a host
//! without the room are handled as documented.

use std::fs;

use serde_json::{Value, json};

use super::run_e2e::{BUILD, CHECK, Harness, build_report, plan_ok, script_with};

/// The stage directories of the run in `finished`, by name.
fn stage_dir(finished: &super::run_e2e::Finished, name_part: &str) -> std::path::PathBuf {
    let run_dir = std::path::PathBuf::from(finished.json["run_dir"].as_str().expect("run_dir"));
    let stages = run_dir.join("stages");
    let mut found: Vec<_> = fs::read_dir(&stages)
        .expect("stages")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(name_part))
        .collect();
    found.sort();
    found.into_iter().next().expect("the stage directory")
}

fn room_of(finished: &super::run_e2e::Finished, stage: &str) -> Value {
    let text = fs::read_to_string(stage_dir(finished, stage).join("room.json")).expect("room.json");
    serde_json::from_str(&text).expect("room.json is JSON")
}

/// A tester that runs `first`, then the check, and reports it passing.
fn tester_after(first: Value) -> Value {
    json!([[
        first,
        {"run": CHECK},
        {"report": {
            "milestone_id": "M1",
            "summary": "Checked hello.txt.",
            "criteria": [{
                "criterion_id": "AC1",
                "verdict": "PASS",
                "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{last_event}}"}],
                "notes": ""
            }]
        }}
    ]])
}

#[test]
fn a_builder_writing_into_home_writes_its_own_layer_which_no_judge_sees() {
    let builder = json!([[
        {"run": "mkdir -p \"$HOME/.local/lib/site-packages\" && printf 'import os\\n' > \"$HOME/.local/lib/site-packages/usercustomize.py\""},
        {"run": "printf 'export PATH=/evil:$PATH\\n' >> \"$HOME/.bashrc\""},
        {"run": "echo planted-by-the-builder > \"$HOME/.planted\" && cat \"$HOME/.planted\""},
        {"run": BUILD}, {"run": CHECK}, build_report()
    ]]);
    let tester = tester_after(json!(
        {"run": "cat \"$HOME/.planted\" 2>/dev/null || echo the-tester-sees-no-planted-file"}
    ));
    let harness = Harness::new(script_with(&[("builder", builder), ("tester", tester)]));
    let finished = harness.run(&["--yes"]);
    // The user's HOME is as it was: the writes landed in the builder's private layer.
    for planted in [
        ".local/lib/site-packages/usercustomize.py",
        ".bashrc",
        ".planted",
    ] {
        assert!(
            !harness.home().join(planted).exists(),
            "{planted} reached the user's HOME: {finished:?}"
        );
    }
    // The builder saw its own writes; the tester, a judge, did not.
    let builder_log =
        fs::read_to_string(stage_dir(&finished, "builder").join("stdout.log")).expect("log");
    assert!(
        builder_log.contains("planted-by-the-builder"),
        "{builder_log}"
    );
    let tester_log =
        fs::read_to_string(stage_dir(&finished, "tester").join("stdout.log")).expect("log");
    assert!(
        tester_log.contains("the-tester-sees-no-planted-file")
            && !tester_log.contains("planted-by-the-builder"),
        "{tester_log}"
    );
    // The legitimate work inside the worktree went through and was judged as usual.
    finished.assert_complete();
    let room = room_of(&finished, "builder");
    assert_eq!(room["confined"], true, "{room}");
    assert_eq!(room["worktree_access"], "write", "{room}");
    let home = fs::canonicalize(harness.home()).expect("home");
    let layers = room["views"]["layers"].as_array().expect("layers");
    let home_layer = layers
        .iter()
        .find(|l| l["dir"] == json!(home.to_str().unwrap()))
        .expect("a layer over HOME");
    assert!(
        std::path::Path::new(home_layer["upper"].as_str().unwrap())
            .join(".planted")
            .exists(),
        "kept in the builder's layer until clean: {room}"
    );
    let tree = Harness::work_tree(&finished);
    let writable: Vec<&str> = room["writable"]
        .as_array()
        .expect("writable")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(writable.contains(&tree.to_str().unwrap()), "{room}");
    assert!(
        !writable
            .iter()
            .any(|w| std::path::Path::new(w) == harness.home()),
        "{room}"
    );
}

#[test]
fn a_toolchain_home_outside_home_gets_each_roles_own_layer() {
    // A container image's CARGO_HOME (`/usr/local/cargo`): outside HOME and /tmp, read-only in
    // the room but for its layer. The builder fetches into it as cargo does; the user's
    // directory stays as it was and the tester, a judge, sees none of the builder's writes.
    let toolchain = tempfile::tempdir_in("/var/tmp").expect("toolchain home");
    let cargo_home = fs::canonicalize(toolchain.path()).expect("canonical");
    fs::create_dir_all(cargo_home.join("registry")).expect("registry");
    fs::write(cargo_home.join("registry/index"), "the-users-index\n").expect("index");
    let builder = json!([[
        {"run": "cat \"$CARGO_HOME/registry/index\" && mkdir -p \"$CARGO_HOME/registry/cache\" && echo fetched-by-the-builder > \"$CARGO_HOME/registry/cache/dep-1.0.0.crate\" && cat \"$CARGO_HOME/registry/cache/dep-1.0.0.crate\""},
        {"run": BUILD}, {"run": CHECK}, build_report()
    ]]);
    let tester = tester_after(json!(
        {"run": "cat \"$CARGO_HOME/registry/cache/dep-1.0.0.crate\" 2>/dev/null || echo the-tester-sees-no-fetched-crate"}
    ));
    let harness = Harness::new(script_with(&[("builder", builder), ("tester", tester)]));
    let mut command = harness.run_command(&["--yes"]);
    command.env("CARGO_HOME", &cargo_home);
    let finished = super::run_e2e::finish(command);
    finished.assert_complete();
    assert!(
        !cargo_home.join("registry/cache").exists(),
        "the builder's fetch reached the user's CARGO_HOME: {finished:?}"
    );
    let builder_log =
        fs::read_to_string(stage_dir(&finished, "builder").join("stdout.log")).expect("log");
    assert!(
        builder_log.contains("the-users-index") && builder_log.contains("fetched-by-the-builder"),
        "the builder reads the user's files and its own writes: {builder_log}"
    );
    let tester_log =
        fs::read_to_string(stage_dir(&finished, "tester").join("stdout.log")).expect("log");
    assert!(
        tester_log.contains("the-tester-sees-no-fetched-crate")
            && !tester_log.contains("fetched-by-the-builder"),
        "{tester_log}"
    );
    let room = room_of(&finished, "builder");
    let layers = room["views"]["layers"].as_array().expect("layers");
    let layer = layers
        .iter()
        .find(|l| l["dir"] == json!(cargo_home.to_str().unwrap()))
        .unwrap_or_else(|| panic!("a layer over CARGO_HOME: {room}"));
    assert!(
        std::path::Path::new(layer["upper"].as_str().unwrap())
            .join("registry/cache/dep-1.0.0.crate")
            .is_file(),
        "kept in the builder's layer for its repairs: {room}"
    );
}

#[test]
fn a_change_a_judges_room_could_not_make_is_not_blamed_on_the_judge() {
    // The tester waits on a FIFO; the test, standing in for the person, edits the run's work
    // tree once the tester has opened it, then lets the tester go on. The FIFO is outside HOME
    // and /tmp, which the room shows as they are (a FIFO in a private view is another pipe).
    let scratch = tempfile::tempdir_in("/var/tmp").expect("scratch");
    let fifo = scratch.path().join("gate");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).expect("fifo");
    let tester = tester_after(json!({"run": format!("cat {}", fifo.display())}));
    let harness = Harness::new(script_with(&[("tester", tester)]));
    let worktrees = harness.workspace().join(".autocode/worktrees");
    let person = std::thread::spawn(move || {
        // Opening for writing waits until the tester opened its end.
        let mut gate = fs::OpenOptions::new()
            .write(true)
            .open(&fifo)
            .expect("gate");
        let tree = fs::read_dir(&worktrees)
            .expect("worktrees")
            .flatten()
            .next()
            .expect("the run's work tree")
            .path();
        fs::write(tree.join("notes-by-the-person.txt"), "mine\n").expect("the person's edit");
        std::io::Write::write_all(&mut gate, b"go\n").expect("go");
    });
    let finished = harness.run(&["--yes"]);
    person.join().expect("the person's thread");
    finished.assert_paused("PAUSED_DISCOVERY_WRITE");
    let reason = finished.json["pause"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("room could not write there")
            && reason.contains("another process")
            && reason.contains("notes-by-the-person.txt"),
        "{reason}"
    );
    assert!(!reason.contains("the tester changed"), "{reason}");
}

#[test]
fn a_read_only_role_cannot_write_the_worktree() {
    let plan = plan_ok();
    let planner = json!([[
        {"run": "printf 'planted\\n' > planted.txt; printf 'x' >> README.md"},
        plan[0].clone()
    ]]);
    let harness = Harness::new(script_with(&[("planner", planner)]));
    let finished = harness.run(&["--yes"]);
    let tree = Harness::work_tree(&finished);
    assert!(!tree.join("planted.txt").exists(), "{finished:?}");
    assert_eq!(
        fs::read_to_string(tree.join("README.md")).expect("README"),
        "seed\n"
    );
    // Nothing changed, so the snapshot comparison had nothing to pause on.
    finished.assert_complete();
    let room = room_of(&finished, "planner");
    assert_eq!(room["worktree_access"], "read_only", "{room}");
}

#[test]
fn unconfined_is_recorded_in_the_run_every_stage_and_status() {
    let harness = Harness::new(script_with(&[]));
    let finished = harness.run(&["--yes", "--unconfined"]);
    finished.assert_complete();
    let run_dir = std::path::PathBuf::from(finished.json["run_dir"].as_str().expect("run_dir"));
    let state: Value =
        serde_json::from_str(&fs::read_to_string(run_dir.join("run.json")).expect("run.json"))
            .expect("run.json is JSON");
    assert_eq!(state["unconfined"], true);
    for entry in fs::read_dir(run_dir.join("stages"))
        .expect("stages")
        .flatten()
    {
        let room: Value = serde_json::from_str(
            &fs::read_to_string(entry.path().join("room.json")).expect("room.json"),
        )
        .expect("room.json is JSON");
        assert_eq!(room["confined"], false, "{}", entry.path().display());
        let receipt: Value = serde_json::from_str(
            &fs::read_to_string(entry.path().join("supervision.json")).expect("receipt"),
        )
        .expect("receipt is JSON");
        assert!(receipt["room"].is_null(), "{receipt}");
    }
    let ws = harness.workspace().display().to_string();
    let status = harness
        .command(&["status", "--workspace", &ws])
        .output()
        .expect("status");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("--unconfined"), "{text}");
}

#[test]
fn a_host_without_the_room_refuses_the_run_before_anything_is_created() {
    let harness = Harness::new(script_with(&[]));
    let output = harness
        .run_command(&["--yes"])
        .env("AUTOCODE_TEST_ROOM_MISSING", "Landlock (simulated)")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Landlock (simulated)"), "{stderr}");
    assert!(stderr.contains("--unconfined"), "{stderr}");
    assert!(
        !harness.workspace().join(".autocode").exists(),
        "nothing was created"
    );
    assert!(harness.calls().is_empty(), "no agent ran");
    // With --unconfined the same host runs, and says so.
    let output = harness
        .run_command(&["--yes", "--unconfined"])
        .env("AUTOCODE_TEST_ROOM_MISSING", "Landlock (simulated)")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    // A confined run cannot be resumed on such a host.
    let harness = Harness::new(script_with(&[("planner", json!([[{"run": "exit 0"}]]))]));
    let first = harness.run(&["--yes"]);
    assert_ne!(first.code, Some(0), "{first:?}");
    let ws = harness.workspace().display().to_string();
    let output = harness
        .command(&["resume", "--workspace", &ws, "--json"])
        .env("AUTOCODE_TEST_ROOM_MISSING", "Landlock (simulated)")
        .output()
        .expect("resume");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
}

/// Forges run.json (phase complete, unconfined) and SIGKILLs the autocode that runs the stage.
const FORGE_AND_KILL: &str = "for f in ../../runs/*/run.json; do python3 -c 'import json,sys; p=sys.argv[1]; s=json.load(open(p)); s[\"phase\"]={\"phase\":\"complete\"}; s[\"unconfined\"]=True; open(p,\"w\").write(json.dumps(s))' \"$f\"; done; p=$$; while [ \"$p\" -gt 1 ]; do if [ \"$(cat /proc/$p/comm)\" = autocode ]; then kill -KILL $p; break; fi; p=$(awk '{print $4}' /proc/$p/stat); done; true";

#[test]
fn a_builder_that_forges_run_state_and_kills_autocode_gains_nothing() {
    let builder =
        json!([[{"run": FORGE_AND_KILL}, {"run": BUILD}, {"run": CHECK}, build_report()]]);
    let harness = Harness::new(script_with(&[("builder", builder)]));
    let finished = harness.run(&["--yes"]);
    let ws = harness.workspace().display().to_string();
    let runs = harness.workspace().join(".autocode/runs");
    let run_json = fs::read_dir(&runs)
        .expect("runs")
        .flatten()
        .map(|e| e.path().join("run.json"))
        .next()
        .expect("a run");
    if finished.code == Some(0) {
        // The room held: neither the forgery nor the signal reached autocode.
        let state: Value =
            serde_json::from_str(&fs::read_to_string(&run_json).expect("run.json")).expect("JSON");
        assert_eq!(state["unconfined"], false, "{state}");
        finished.assert_complete();
        return;
    }
    // autocode died: the forged state must not be taken for a finished run.
    assert_eq!(finished.code, None, "killed by a signal: {finished:?}");
    let output = harness
        .command(&["resume", "--workspace", &ws, "--json"])
        .output()
        .expect("resume");
    let json: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    eprintln!(
        "resume after the kill: {:?} {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.code() != Some(0) || json["outcome"] != "complete",
        "a forged run.json was resumed as complete: {output:?}"
    );
}

/// A builder command that fails on a path the room refuses (outside the work tree, HOME and
/// /tmp) is named in the stage's record with the way to grant it; the honest work around it
/// goes on.
#[test]
fn a_path_the_room_refused_is_named_in_the_stages_record() {
    let refused = "/opt/autocode-refused-by-the-room";
    let builder = json!([[
        {"run": format!("mkdir {refused}")},
        {"run": BUILD}, {"run": CHECK}, build_report()
    ]]);
    let harness = Harness::new(script_with(&[("builder", builder)]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert!(!std::path::Path::new(refused).exists());
    let dir = stage_dir(&finished, "builder");
    let record = fs::read_to_string(dir.join("room_refusals.json")).unwrap_or_else(|e| {
        panic!(
            "the stage's room refusals: {e}\n{}",
            fs::read_to_string(dir.join("room.json")).unwrap_or_default()
        )
    });
    let refusals: Value = serde_json::from_str(&record).expect("json");
    let first = &refusals["refusals"][0];
    assert_eq!(first["path"], refused, "{record}");
    assert!(
        first["line"]
            .as_str()
            .is_some_and(|l| l.contains("Permission denied")),
        "{record}"
    );
}

/// A builder's git stages into throwaway layers over the worktree's metadata and the object
/// store: `git add` works and `git ls-files` sees the new file (a build that lists the index needs
/// it), while nothing the builder's git wrote reaches the repository.
#[test]
fn a_builder_stages_in_layers_of_its_own_and_the_repository_gains_nothing() {
    let stage = "printf 'staged by the builder only 7d1f\\n' > scratch.txt && git add hello.txt scratch.txt \
                 && git ls-files | grep -qx scratch.txt && echo staged-ok; \
                 git rm -q --cached scratch.txt 2>/dev/null; rm -f scratch.txt; \
                 git commit -qm planted >/dev/null 2>&1 || echo commit-refused";
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": BUILD}, {"run": stage}, {"run": CHECK}, build_report()]]),
    )]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let stdout =
        fs::read_to_string(stage_dir(&finished, "builder").join("stdout.log")).unwrap_or_default();
    assert!(stdout.contains("staged-ok"), "{stdout}");
    assert!(stdout.contains("commit-refused"), "{stdout}");
    let ws = harness.workspace();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&ws)
            .output()
            .expect("git")
    };
    // The blob the builder staged (then unstaged and removed) never reached the object store.
    let hashed = std::process::Command::new("sh")
        .args([
            "-c",
            "printf 'staged by the builder only 7d1f\\n' | git hash-object --stdin",
        ])
        .current_dir(&ws)
        .output()
        .expect("hash-object");
    let id = String::from_utf8_lossy(&hashed.stdout).trim().to_owned();
    assert_eq!(id.len(), 40, "{hashed:?}");
    assert!(
        !git(&["cat-file", "-e", &id]).status.success(),
        "{id} reached the repository"
    );
    // No commit of the builder's: the run branch holds autocode's commit of the work only.
    let log = git(&["log", "--all", "--format=%s"]);
    assert!(!String::from_utf8_lossy(&log.stdout).contains("planted"));
    let room = room_of(&finished, "builder");
    let layered: Vec<String> = room["views"]["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .filter_map(|l| l["dir"].as_str().map(str::to_owned))
        .collect();
    assert!(
        layered.iter().any(|d| d.ends_with("/.git/objects"))
            && layered.iter().any(|d| d.contains("/.git/worktrees/")),
        "{room}"
    );
}
