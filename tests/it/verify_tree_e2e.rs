//! Whole runs (the real binary, the scripted fake agent of `run_e2e`) whose checks need what a
//! clean verification tree used to lack (issue 24): git metadata (`git describe`, `git log`,
//! `git ls-files` in the tester's copy and in every replay, as an overlay and as a checkout),
//! and files a plan's `prepare` step makes, with a failing step reported as "could not
//! prepare" (its own verdict, recorded in the run's `replays/`), never as a failing check.

use std::fs;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::run_e2e::{
    BUILD, Finished, Harness, alive, build_ok, finish, git, requirements_ok, script_with,
    wait_until,
};

fn plan(check: &str, prepare: Value) -> Value {
    json!([{"report": {
        "summary": "One milestone: write hello.txt.",
        "milestones": [{
            "id": "M1",
            "title": "Write hello.txt",
            "description": "Create hello.txt with the single line hello.",
            "prepare": prepare,
            "acceptance_criteria": [
                {"id": "AC1", "text": "hello.txt is exactly hello", "check": check,
                 "human_review": false, "kind": "fail_to_pass"}
            ]
        }]
    }}])
}

/// The tester runs `commands` in its copy and reports AC1 passing, citing the last one.
fn tester(commands: &[&str], attempts: usize) -> Value {
    let mut actions: Vec<Value> = commands.iter().map(|c| json!({"run": c})).collect();
    actions.push(json!({"report": {
        "milestone_id": "M1",
        "summary": "Checked hello.txt.",
        "criteria": [{
            "criterion_id": "AC1",
            "verdict": "PASS",
            "checks": [{"command": commands.last().copied().unwrap_or_default(),
                        "exit_code": 0, "evidence_ref": "{{last_event}}"}],
            "notes": ""
        }]
    }}));
    Value::Array(vec![Value::Array(actions); attempts])
}

fn run_dir(finished: &Finished) -> PathBuf {
    PathBuf::from(finished.json["run_dir"].as_str().expect("run_dir"))
}

/// The run's prepare records (`replays/NNN-<tree>.json`), in order.
fn prepare_records(finished: &Finished) -> Vec<(String, Value)> {
    let dir = run_dir(finished).join("replays");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let record = serde_json::from_slice(&fs::read(dir.join(&name)).expect("record"))
                .expect("a JSON record");
            (name, record)
        })
        .collect()
}

/// A check that asks git about the tree under test passes in the tester's copy and in every
/// replay: the tree's commit is one past the repository's tag (the builder's work over the
/// seed commit), `git ls-files` lists the new file, `git log` has the history, and `git
/// status` is clean. As the overlay of the work tree and as a checkout.
#[test]
fn a_check_that_needs_git_passes_in_the_verification_tree() {
    const GIT_CHECK: &str = "grep -qx hello hello.txt && git describe --tags | grep -q '^v0\\.1-1-g' && test \"$(git ls-files hello.txt)\" = hello.txt && git log -1 --format=%H | grep -q . && git log --format=%s | grep -qx seed && test -z \"$(git status --porcelain)\"";
    for checkout in [false, true] {
        let harness = Harness::new(script_with(&[
            ("planner", json!([plan(GIT_CHECK, Value::Null)])),
            ("tester", tester(&[GIT_CHECK], 1)),
        ]));
        git(&harness.workspace(), &["tag", "-a", "v0.1", "-m", "v0.1"]);
        let mut command = harness.run_command(&["--yes"]);
        if checkout {
            command.env("AUTOCODE_VERIFICATION_TREE", "checkout");
        }
        let finished = finish(command);
        finished.assert_complete();
        assert_eq!(
            harness.roles_called(),
            [
                "requirements",
                "planner",
                "plan_reviewer",
                "builder",
                "tester",
                "completion_reviewer"
            ],
            "the tester's PASS stood when replayed"
        );
        let status = harness.status();
        let criteria = status.json["criteria"].as_array().expect("criteria");
        assert_eq!(criteria[0]["verdict"], "PASS", "{status:?}");
        let base = &status.json["verification"]["base_checks"][GIT_CHECK];
        assert_eq!(
            base["passed"], false,
            "no hello.txt on the base: {status:?}"
        );
        // No plan step: nothing was prepared; each batch is recorded, and the final gate's
        // is the tester's replay of the same tree, reused (not run again), as is its witness
        // replay, which ran beside the tester's.
        let records = prepare_records(&finished);
        assert!(
            records
                .iter()
                .all(|(_, r)| r["steps"].as_array().is_some_and(Vec::is_empty)),
            "{records:?}"
        );
        let reused: Vec<&Value> = records
            .iter()
            .filter_map(|(_, r)| r.get("reused_from"))
            .collect();
        assert_eq!(reused, [&json!(2), &json!(3)], "{records:?}");
    }
}

/// A prepare step makes a file the check reads: autocode runs it before the checks on the base
/// tree, in the tester's replay and in the final gate (each once, recorded), and `status`
/// shows it.
#[test]
fn a_prepare_step_runs_before_every_replay_of_the_checks() {
    const PREPARE: &str = "mkdir -p prepared && printf 'hello\\n' > prepared/expected.txt";
    const CHECK: &str = "cmp hello.txt prepared/expected.txt";
    let builder = json!([[{"run": BUILD},
                          {"report": {"status": "done", "summary": "Wrote it.",
                                      "files_changed": ["hello.txt"], "checks": [],
                                      "blockers": []}}]]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan(CHECK, json!([PREPARE]))])),
        ("builder", builder),
        ("tester", tester(&[PREPARE, CHECK], 1)),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let work_tree = Harness::work_tree(&finished);
    assert!(
        !work_tree.join("prepared").exists(),
        "a prepare step runs in the verification tree only"
    );
    let records = prepare_records(&finished);
    let trees: Vec<&str> = records
        .iter()
        .map(|(_, r)| r["tree"].as_str().expect("tree"))
        .collect();
    // The base tree, the tester's replay and beside it the witness replay of the result's checks
    // against the base code (`docs/run-lifecycle.md`, "What verified means"), then the final
    // gate's two, reused.
    assert_eq!(
        trees,
        [
            "base",
            "final",
            "final_with_base_code",
            "final",
            "final_with_base_code"
        ],
        "{records:?}"
    );
    // The final gate's batch is the tester's replay's (same tree, step, check, environment and
    // room): its verdict is reused, nothing runs, and the record says so; so is its witness.
    let (name, gate) = &records[3];
    assert_eq!(gate["reused_from"], 2, "{name}: {gate}");
    assert_eq!(gate["steps"], json!([]), "{gate}");
    assert_eq!(
        gate["results"],
        json!([{"command": CHECK, "passed": true, "ran": {"reused": {"of": 2}}}]),
        "{gate}"
    );
    assert_eq!(records[1].1["tree_id"], gate["tree_id"]);
    assert_ne!(records[0].1["tree_id"], gate["tree_id"]);
    let (name, witness) = &records[4];
    assert_eq!(witness["reused_from"], 3, "{name}: {witness}");
    assert_eq!(records[2].1["tree_id"], witness["tree_id"]);
    for (name, record) in [&records[0], &records[1], &records[2]] {
        assert_eq!(record["outcome"], "prepared", "{name}: {record}");
        assert!(record.get("reused_from").is_none(), "{record}");
        assert_eq!(
            record["steps"].as_array().map(Vec::len),
            Some(1),
            "{record}"
        );
        assert_eq!(record["steps"][0]["command"], PREPARE, "{record}");
        assert_eq!(
            record["steps"][0]["exit"],
            json!({"kind": "code", "value": 0})
        );
        assert_eq!(record["checks"], json!([CHECK]), "{record}");
    }
    let status = harness.status();
    assert_eq!(
        status.json["verification"]["base_checks"][CHECK]["passed"], false,
        "prepared, the check ran on the base and failed there: {status:?}"
    );
    assert_eq!(
        status.json["verification"]["final_checks"][CHECK]["reused_from"], 2,
        "{status:?}"
    );
    let ws = harness.workspace().display().to_string();
    let out = harness
        .command(&["status", "--workspace", &ws])
        .output()
        .expect("autocode status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "prepare steps (run by autocode before the checks of every replay):\n  milestone 1: `{PREPARE}`"
        )),
        "{text}"
    );
}

/// The objective requires a check the plan does not name: the tester's replay of the last
/// milestone runs it after the plan's check (its `prepare` step once for both), so the final
/// gate's batch is that replay's, reused whole, and the step runs three times in the run (the
/// base tree, the tester's replay, the witness replay beside it), not four (issue 29, point 5).
#[test]
fn the_final_gate_reuses_the_testers_replay_of_the_objectives_required_checks() {
    const PREPARE: &str = "mkdir -p prepared && printf 'hello\\n' > prepared/expected.txt";
    const CHECK: &str = "cmp hello.txt prepared/expected.txt";
    const REQUIRED: &str = "grep -qx hello hello.txt";
    let objective =
        format!("Create hello.txt containing hello. Running `{REQUIRED}` is expected to succeed.");
    let mut requirements = requirements_ok();
    requirements[0]["report"]["acceptance_criteria"][0]["covers"] = json!([objective]);
    let harness = Harness::new(script_with(&[
        ("requirements", json!([requirements])),
        ("planner", json!([plan(CHECK, json!([PREPARE]))])),
        ("builder", json!([build_ok()])),
        ("tester", tester(&[PREPARE, CHECK], 1)),
    ]));
    let finished = finish(harness.run_objective_command(&objective, &["--yes"]));
    finished.assert_complete();
    let status = harness.status();
    assert_eq!(
        status.json["verification"]["required_checks"],
        json!([REQUIRED]),
        "{status:?}"
    );
    let records = prepare_records(&finished);
    let summary: Vec<(&str, &Value)> = records
        .iter()
        .map(|(_, r)| (r["tree"].as_str().expect("tree"), &r["checks"]))
        .collect();
    assert_eq!(
        summary,
        [
            ("base", &json!([REQUIRED, CHECK])),
            ("final", &json!([CHECK, REQUIRED])),
            ("final_with_base_code", &json!([CHECK, REQUIRED])),
            ("final", &json!([CHECK, REQUIRED])),
            ("final_with_base_code", &json!([CHECK, REQUIRED])),
        ],
        "{records:?}"
    );
    for (at, of) in [(3, 2), (4, 3)] {
        let (name, gate) = &records[at];
        assert_eq!(gate["reused_from"], of, "{name}: {gate}");
        assert_eq!(gate["steps"], json!([]), "{gate}");
    }
    let steps_run: usize = records
        .iter()
        .map(|(_, r)| r["steps"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(steps_run, 3, "{records:?}");
    // Only the check the tester cited judged it; the required check's verdict is the gate's.
    assert_eq!(status.json["criteria"][0]["verdict"], "PASS", "{status:?}");
    assert_eq!(
        status.json["verification"]["final_checks"][REQUIRED]["reused_from"], 2,
        "{status:?}"
    );
}

/// The replays the tester's report asks for (its own batch, the witness's beside it) prepare
/// while the tester works, each in its own verification tree (`ahead/` and `side/` of the run's
/// verification root; the tester's copy is the run's `tree/`): each step prints where it ran
/// and when, and the run's activity says when the tester's attempt was accepted. Then the
/// tester's checks run, then the witness's, and the final gate reuses both. A step that fails
/// only in a tree prepared beside the tester makes its batch run again alone, in the run's own
/// tree, after the tester, and only that run is recorded. Both trees are gone after the run.
#[test]
fn the_replays_prepare_while_the_tester_works() {
    const CHECK: &str = "pwd -P; grep -qx hello hello.txt";
    const CITED: &str = "grep -qx hello hello.txt";
    const PREPARE: &str = "pwd -P; date +%s%N; mkdir -p prepared";
    const NOT_AHEAD: &str = "pwd -P; date +%s%N; case \"$(pwd -P)\" in */ahead-1/tree) exit 7;; esac; mkdir -p prepared";
    const NOT_IN_SIDE: &str = "pwd -P; date +%s%N; case \"$(pwd -P)\" in */ahead-2/tree) exit 7;; esac; mkdir -p prepared";
    for (prepare, tester_in, witness_in) in [
        (PREPARE, "/ahead-1/tree", "/ahead-2/tree"),
        (NOT_AHEAD, "/tree", "/ahead-2/tree"),
        (NOT_IN_SIDE, "/ahead-1/tree", "/tree"),
    ] {
        let harness = Harness::new(script_with(&[
            ("planner", json!([plan(CHECK, json!([prepare]))])),
            ("builder", json!([build_ok()])),
            ("tester", tester(&[CITED], 1)),
        ]));
        let finished = harness.run(&["--yes"]);
        finished.assert_complete();
        let records = prepare_records(&finished);
        let ran = trees_run(&records);
        assert_eq!(
            ran,
            [
                ("base", true),
                ("final", true),
                ("final_with_base_code", true),
                ("final", false),
                ("final_with_base_code", false)
            ],
            "{prepare}: {records:?}"
        );
        assert_eq!(records[1].1["checks"], json!([CHECK, CITED]), "{records:?}");
        let step = |at: usize| step_ran(&records[at].1);
        let accepted = tester_accepted_at(&finished);
        for (at, ran_in, batch) in [(1, tester_in, "tester's"), (2, witness_in, "witness")] {
            let (cwd, started) = step(at);
            assert!(
                cwd.ends_with(ran_in) && (ran_in != "/tree" || !cwd.contains("/ahead-")),
                "{prepare}: the {batch} batch ran in {cwd}"
            );
            if ran_in == "/tree" {
                assert!(
                    started > accepted,
                    "{prepare}: the {batch} step that failed beside the tester runs again alone, after it, and only that run is recorded: {records:?}"
                );
            } else {
                assert!(
                    started < accepted,
                    "{prepare}: the {batch} step ran {} ms after the tester's attempt was accepted",
                    (started - accepted) / 1_000_000
                );
            }
        }
        // What the witness's check printed (a failed check keeps its output in its detail).
        let stored: Value = serde_json::from_slice(
            &fs::read(run_dir(&finished).join("replay-results.json")).expect("replay-results.json"),
        )
        .expect("JSON");
        let witness = stored["batches"]
            .as_array()
            .expect("batches")
            .iter()
            .find(|b| b["record"] == 3)
            .expect("the witness batch is kept");
        let detail = witness["checks"][0]["detail"].as_str().expect("detail");
        let cwd = detail.lines().next().unwrap_or_default();
        assert!(
            detail.starts_with("exit 2: ") && cwd.ends_with(witness_in),
            "{prepare}: the code taken back fails the check, in {witness_in}: {detail}"
        );
        let (tester_cwd, _) = step(1);
        assert_only_the_runs_tree_is_left(
            tester_cwd
                .strip_suffix(tester_in)
                .expect("the tree is in the run's verification root"),
        );
        let status = harness.status();
        assert_eq!(
            status.json["verification"]["witnesses"],
            json!([CHECK]),
            "{status:?}"
        );
    }
}

/// Each record's tree, and whether its checks ran (`false`: reused from an identical batch).
fn trees_run(records: &[(String, Value)]) -> Vec<(&str, bool)> {
    records
        .iter()
        .map(|(_, r)| {
            (
                r["tree"].as_str().expect("tree"),
                r.get("reused_from").is_none(),
            )
        })
        .collect()
}

/// Where and when (ns since the epoch) a record's first step ran, as it printed them (`pwd -P;
/// date +%s%N`).
fn step_ran(record: &Value) -> (String, i64) {
    let out = record["steps"][0]["output_tail"]
        .as_str()
        .expect("the step's output");
    let mut lines = out.lines();
    let cwd = lines.next().unwrap_or_default().to_owned();
    let nanos: i64 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("date");
    (cwd, nanos)
}

/// When (ns since the epoch) the run's activity says the tester's attempt was accepted.
fn tester_accepted_at(finished: &Finished) -> i64 {
    let activity =
        fs::read_to_string(run_dir(finished).join("activity.jsonl")).expect("activity.jsonl");
    let accepted = activity
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON line"))
        .find(|row| {
            row["event"] == "attempt accepted"
                && row["detail"].as_str().is_some_and(|d| d.contains("tester"))
        })
        .expect("the tester's attempt was accepted");
    chrono::DateTime::parse_from_rfc3339(accepted["at"].as_str().expect("at"))
        .expect("a time")
        .timestamp_nanos_opt()
        .expect("in range")
}

/// The builder adds to a test of the base tree (honestly: the original still passes on the new
/// code), so the final gate replays its checks with that test as it was. That replay is prepared
/// beside the tester too (`ahead-4/`, after the tester's batch, the witness's and the one with
/// the tests made to fail), its checks run after theirs, and the gate reuses the batches it asks
/// for (the check prints no runner's summary, so the gate does not ask the one with the tests
/// made to fail).
#[test]
fn the_gates_replay_with_the_base_tests_restored_prepares_while_the_tester_works() {
    const CHECK: &str = "sh tests/check.sh";
    const PREPARE: &str = "pwd -P; date +%s%N; mkdir -p prepared";
    let build = json!([
        {"run": "printf 'hello\\n' > hello.txt && printf 'test -s hello.txt\\n' >> tests/check.sh"},
        {"run": CHECK},
        {"report": {"status": "done", "summary": "Wrote hello.txt and a second assertion.",
                    "files_changed": ["hello.txt", "tests/check.sh"],
                    "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{last_event}}"}],
                    "blockers": []}}
    ]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan(CHECK, json!([PREPARE]))])),
        ("builder", json!([build])),
        ("tester", tester(&[CHECK], 1)),
    ]));
    let ws = harness.workspace();
    fs::create_dir_all(ws.join("tests")).expect("tests dir");
    fs::write(ws.join("tests/check.sh"), "grep -qx hello hello.txt\n").expect("seed test");
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "a test"]);
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let records = prepare_records(&finished);
    let ran = trees_run(&records);
    assert_eq!(
        ran,
        [
            ("base", true),
            ("final", true),
            ("final_with_base_code", true),
            ("final_with_failing_tests", true),
            ("final_with_base_files", true),
            ("final", false),
            ("final_with_base_files", false),
            ("final_with_base_code", false)
        ],
        "{records:?}"
    );
    // The gate's test-change replay (the seventh record) reuses the fifth, run beside the tester.
    assert_eq!(records[6].1["reused_from"], 5, "{records:?}");
    let accepted = tester_accepted_at(&finished);
    let (cwd, started) = step_ran(&records[4].1);
    assert!(
        cwd.ends_with("/ahead-4/tree") && started < accepted,
        "the restored tests' batch was prepared beside the tester: {cwd}, {} ms after its acceptance",
        (started - accepted) / 1_000_000
    );
    let activity =
        fs::read_to_string(run_dir(&finished).join("activity.jsonl")).expect("activity.jsonl");
    assert!(
        activity.contains("checks replayed with the original tests")
            && activity.contains("0 of 1 failed"),
        "{activity}"
    );
    assert_only_the_runs_tree_is_left(
        cwd.strip_suffix("/ahead-4/tree")
            .expect("the tree is in the run's verification root"),
    );
}

/// The run's verification root (`root`) keeps its own tree, and no tree of a replay that ran
/// beside another or beside the tester (`ahead-N/`).
fn assert_only_the_runs_tree_is_left(root: &str) {
    let root = std::path::Path::new(root);
    assert!(root.join("tree").is_dir(), "{}", root.display());
    let left: Vec<String> = fs::read_dir(root)
        .expect("the verification root")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("ahead"))
        .collect();
    assert!(left.is_empty(), "left in {}: {left:?}", root.display());
}

/// A tester that fails a criterion of the last milestone asks for no witness replay: what was
/// prepared for it beside the tester goes unused and is removed, the milestone goes back to the
/// builder, and the next tester's round prepares and replays as the first would have. Nothing
/// prepared is left after the run.
#[test]
fn what_a_failing_tester_does_not_ask_for_is_not_kept() {
    const CHECK: &str = "grep -qx hello hello.txt";
    const NOT_YET: &str = "grep -qx goodbye hello.txt";
    const PREPARE: &str = "pwd -P; mkdir -p prepared";
    let failing = json!([{"run": NOT_YET}, {"report": {
        "milestone_id": "M1", "summary": "Not yet.",
        "criteria": [{"criterion_id": "AC1", "verdict": "FAIL", "notes": "hello.txt is not done",
                      "checks": [{"command": NOT_YET, "exit_code": 1,
                                  "evidence_ref": "{{last_event}}"}]}]
    }}]);
    let passing = tester(&[CHECK], 1)[0].clone();
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan(CHECK, json!([PREPARE]))])),
        ("builder", json!([build_ok(), build_ok()])),
        ("tester", json!([failing, passing])),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    let records = prepare_records(&finished);
    let trees: Vec<(&str, bool)> = records
        .iter()
        .map(|(_, r)| {
            (
                r["tree"].as_str().expect("tree"),
                r["steps"].as_array().is_some_and(|s| !s.is_empty()),
            )
        })
        .collect();
    assert_eq!(
        trees,
        [
            ("base", true),
            // The failing tester cited no passing check: nothing of its batch ran.
            ("final", false),
            ("final", true),
            ("final_with_base_code", true),
            ("final", false),
            ("final_with_base_code", false)
        ],
        "{records:?}"
    );
    let out = records[2].1["steps"][0]["output_tail"]
        .as_str()
        .expect("the step's output");
    let cwd = out.lines().next().unwrap_or_default();
    assert_only_the_runs_tree_is_left(
        cwd.strip_suffix("/ahead-1/tree")
            .unwrap_or_else(|| panic!("the second tester's batch was prepared ahead: {cwd}")),
    );
}

/// A prepare step that fails stops the batch: the tester's PASS becomes NOT_PREPARED (not
/// FAIL), saying which step failed with its output, and the record says could_not_prepare.
#[test]
fn a_failing_prepare_step_is_could_not_prepare_not_a_failing_check() {
    const PREPARE: &str = "echo 'npm ERR! missing: left-pad' >&2; exit 9";
    const CHECK: &str = "grep -qx hello hello.txt";
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan(CHECK, json!([PREPARE]))])),
        ("builder", json!([build_ok()])),
        ("tester", tester(&[CHECK], 1)),
    ]));
    let finished = harness.run(&["--yes"]);
    assert_ne!(finished.code, Some(0), "{finished:?}");
    let status = harness.status();
    let criterion = &status.json["criteria"][0];
    assert_eq!(criterion["verdict"], "NOT_PREPARED", "{status:?}");
    let detail = criterion["detail"].as_str().expect("detail");
    assert!(
        detail.contains(&format!(
            "could not prepare: the prepare step `{PREPARE}` ended with exit 9"
        )) && detail.contains("npm ERR! missing: left-pad"),
        "{detail}"
    );
    let finding = status.json["open_findings"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(finding.contains("could not prepare"), "{status:?}");
    let records = prepare_records(&finished);
    assert!(!records.is_empty());
    for (name, record) in &records {
        assert_eq!(record["outcome"], "could_not_prepare", "{name}: {record}");
        assert_eq!(
            record["steps"][0]["exit"],
            json!({"kind": "code", "value": 9})
        );
    }
    // On the base, too, the check did not run: its record says why.
    let base = &status.json["verification"]["base_checks"][CHECK];
    assert!(
        base["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("could not prepare")),
        "{status:?}"
    );
}

/// A check whose prepare step failed on the base tree runs there again for a revised plan that
/// mends the step: the plan review sees what the check does on the base, not the stale "did NOT
/// RUN" of the first plan.
#[test]
fn a_mended_prepare_step_runs_the_check_on_the_base_tree_again() {
    const BROKEN: &str = "exit 9";
    const MENDED: &str = "true";
    const CHECK: &str = "grep -qx hello hello.txt";
    let concern = json!([{"report": {
        "verdict": "changes_requested", "summary": "The prepare step fails.",
        "concerns": [{"id": "C1", "blocking": true, "text": "`exit 9` fails.",
                      "requested_change": "Mend the prepare step."}],
        "uncovered": []}}]);
    let approve = json!([{"report": {"verdict": "approve", "summary": "Sound.",
        "concerns": [], "uncovered": []}}]);
    let harness = Harness::new(script_with(&[
        (
            "planner",
            json!([plan(CHECK, json!([BROKEN])), plan(CHECK, json!([MENDED]))]),
        ),
        ("plan_reviewer", json!([concern, approve])),
        ("builder", json!([build_ok()])),
        ("tester", tester(&[CHECK], 1)),
    ]));
    let finished = harness.run(&["--yes"]);
    finished.assert_complete();
    assert!(
        harness
            .prompt_of("plan_reviewer", 1)
            .contains("did NOT RUN on the base tree")
    );
    let second = harness.prompt_of("plan_reviewer", 2);
    assert!(
        second.contains("fails on the base tree, as a fail_to_pass check must"),
        "{second}"
    );
}

/// A resume reuses the replays the run already made of the same trees: a person rejects the
/// human-review criterion, the builder changes nothing, and the tester's replay, the final gate
/// and the witness replay of the same trees, in the resumed process, read their verdicts back
/// from the run's tagged `replay-results.json`. A results file changed by another hand is
/// refused: the replay pauses, naming it, instead of trusting it.
#[test]
fn a_resume_reuses_the_runs_replays_and_refuses_a_changed_results_file() {
    const CHECK: &str = "grep -qx hello hello.txt";
    let plan = json!([{"report": {
        "summary": "One milestone with a human check.",
        "milestones": [{"id": "M1", "title": "Greeting", "description": "",
                        "acceptance_criteria": [
                            {"id": "AC1", "text": "hello", "check": CHECK, "human_review": false, "kind": "fail_to_pass"},
                            {"id": "AC2", "text": "hello.txt reads well", "check": null,
                             "human_review": true, "kind": "fail_to_pass"}]}]
    }}]);
    let tester = json!([{"run": CHECK}, {"report": {
        "milestone_id": "M1", "summary": "AC1 holds; AC2 needs a person.",
        "criteria": [
            {"criterion_id": "AC1", "verdict": "PASS", "notes": "",
             "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{last_event}}"}]},
            {"criterion_id": "AC2", "verdict": "HUMAN_REVIEW", "notes": "tone", "checks": []}
        ]
    }}]);
    let complete = json!([{"report": {"decision": "COMPLETE", "summary": "Done.",
                                      "findings": [], "uncovered": []}}]);
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan])),
        ("builder", json!([build_ok(), build_ok(), build_ok()])),
        ("tester", json!([tester.clone(), tester.clone(), tester])),
        (
            "completion_reviewer",
            json!([complete.clone(), complete.clone(), complete]),
        ),
    ]));
    let paused = harness.run(&["--yes"]);
    paused.assert_paused("AWAITING_HUMAN_REVIEW");
    let ran = |records: &[(String, Value)]| {
        records
            .iter()
            .filter(|(_, r)| r.get("reused_from").is_none())
            .count()
    };
    let first = prepare_records(&paused);
    assert_eq!(
        first.len(),
        ran(&first) + 2,
        "the final gate reused the tester's replay and the witness replay beside it: {first:?}"
    );
    let reject = ["--reject", "AC2", "--because", "say it louder"];
    let resumed = harness.resume(&reject);
    resumed.assert_paused("AWAITING_HUMAN_REVIEW");
    let again = prepare_records(&resumed);
    assert_eq!(
        again.len(),
        first.len() + 4,
        "the tester's replay and the witness replay beside it, then the final gate's two: {again:?}"
    );
    assert_eq!(
        ran(&again),
        ran(&first),
        "nothing ran again in the resumed process: {again:?}"
    );
    // Another hand turns a verdict around: the file no longer verifies, and is not used.
    let results = run_dir(&paused).join("replay-results.json");
    let text = fs::read_to_string(&results).expect("replay-results.json");
    fs::write(
        &results,
        text.replace("\"passed\":true", "\"passed\":false"),
    )
    .unwrap();
    let refused = harness.resume(&reject);
    refused.assert_paused("PAUSED_PROCESS_CLEANUP");
    assert!(
        refused.json["pause"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("replay-results.json") && r.contains("cannot be trusted")),
        "{refused:?}"
    );
    assert_eq!(
        prepare_records(&refused).len(),
        again.len(),
        "nothing replayed"
    );
}

/// Ctrl-C while the tester works and a replay's `prepare` step runs beside it: the run pauses
/// `PAUSED_INTERRUPTED` as it would without the step, and the step's process does not outlive
/// autocode.
#[test]
fn an_interrupted_tester_leaves_no_step_prepared_beside_it_running() {
    const CHECK: &str = "grep -qx hello hello.txt";
    // Only in the tree prepared beside the tester: it leaves its pid there and waits.
    const PREPARE: &str = "case \"$(pwd -P)\" in */ahead-1/tree) echo $$ > prepare.pid; exec sleep 600;; esac; mkdir -p prepared";
    let harness = Harness::new(script_with(&[
        ("planner", json!([plan(CHECK, json!([PREPARE]))])),
        ("builder", json!([build_ok()])),
        (
            "tester",
            json!([[{"hang": true}], tester(&[CHECK], 1)[0].clone()]),
        ),
    ]));
    let autocode = harness
        .run_command(&["--yes"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn autocode");
    let verify = harness.home().join(".cache/autocode/verify");
    let find_pid = || {
        walk_files(&verify)
            .into_iter()
            .find(|p| p.file_name().is_some_and(|n| n == "prepare.pid"))
            .and_then(|p| fs::read_to_string(p).ok())
            .and_then(|text| text.trim().parse::<i32>().ok())
    };
    let tester_hangs = harness.state().join("tester-1.hanging");
    wait_until(
        "the tester to hang and the step beside it to start",
        std::time::Duration::from_secs(60),
        || tester_hangs.exists() && find_pid().is_some(),
    );
    let step = find_pid().expect("the step's pid");
    assert!(alive(step), "the step runs beside the tester");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(autocode.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("signal autocode");
    let out = autocode.wait_with_output().expect("autocode ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("PAUSED_INTERRUPTED"), "{stderr}");
    wait_until(
        "the step prepared beside the tester to end",
        std::time::Duration::from_secs(30),
        || !alive(step),
    );
    harness.status().assert_paused("PAUSED_INTERRUPTED");
}

/// Every file under `dir` (none when it does not exist).
fn walk_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in fs::read_dir(&next).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(entry.path()),
                Ok(kind) if kind.is_file() => found.push(entry.path()),
                _ => {}
            }
        }
    }
    found
}
