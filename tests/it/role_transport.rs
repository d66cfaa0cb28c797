//! `--tester-provider` / `--role-transport`: one role on another registered tool, end to end
//! through the real binary and the scripted fake agent; the binding is saved, and a resume that
//! names another one is refused.

use std::fs;

use serde_json::Value;

use super::run_e2e::{Harness, only_run_dir, script_with};

/// A second registered tool: the fake agent's command under another name, whose tester route
/// is the `gamma` family (so its launches are recognisable by their model argument).
fn add_second_tool(harness: &Harness) {
    let providers = harness.home().join(".config/autocode/providers");
    let fake = fs::read_to_string(providers.join("fake.toml")).expect("fake.toml");
    let other = fake
        .replace("name = \"fake\"", "name = \"othertool\"")
        .replace(
            "sol = { model = \"beta-large\" }",
            "sol = { model = \"gamma-large\" }",
        );
    assert_ne!(fake, other, "the second tool differs");
    fs::write(providers.join("othertool.toml"), other).expect("othertool.toml");
}

fn tester_launch(harness: &Harness) -> Value {
    let run = only_run_dir(harness);
    let stage = fs::read_dir(run.join("stages"))
        .expect("stages")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().contains("-tester-"))
        .expect("a tester stage");
    serde_json::from_str(&fs::read_to_string(stage.join("launch.json")).expect("launch.json"))
        .expect("launch json")
}

#[test]
fn the_tester_runs_on_the_tool_it_is_bound_to_and_resume_keeps_the_binding() {
    let harness = Harness::new(script_with(&[]));
    add_second_tool(&harness);
    let finished = harness.run(&["--yes", "--tester-provider", "othertool"]);
    finished.assert_complete();
    // The tester's launch ran the bound tool's route: its model, not the run provider's.
    let launch = tester_launch(&harness);
    let args: Vec<&str> = launch["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&"gamma-large"), "{launch:#}");
    assert!(!args.contains(&"beta-large"), "{launch:#}");
    // Saved in the run: the tester's route and the binding itself.
    let status = harness.status();
    let text = status.json.to_string();
    assert!(text.contains("othertool"), "{text}");
    let run = only_run_dir(&harness);
    let state = fs::read_to_string(run.join("run.json")).expect("run.json");
    let state: Value = serde_json::from_str(&state).expect("run json");
    assert_eq!(
        state["routes"]["tester"]["provider"], "othertool",
        "{state:#}"
    );
    assert_eq!(state["role_transports"]["tester"], "othertool", "{state:#}");
    // A resume naming another binding is a transport change: refused, nothing changed.
    let refused = harness.resume(&["--role-transport", "tester=fake"]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("tester=othertool") && refused.stderr.contains("tester=fake"),
        "{refused:?}"
    );
    // The same binding (by its code name) is accepted.
    let same = harness.resume(&["--role-transport", "sol=othertool"]);
    assert_eq!(same.code, Some(0), "{same:?}");
}

#[test]
fn unknown_roles_and_providers_are_refused_before_the_run() {
    let harness = Harness::new(script_with(&[]));
    let role = harness.run(&["--yes", "--role-transport", "reviewer=fake"]);
    assert_eq!(role.code, Some(2), "{role:?}");
    assert!(role.stderr.contains("unknown role `reviewer`"), "{role:?}");
    let tool = harness.run(&["--yes", "--tester-provider", "nosuchtool"]);
    assert_eq!(tool.code, Some(2), "{tool:?}");
    assert!(tool.stderr.contains("tester=nosuchtool"), "{tool:?}");
    assert!(
        !harness.workspace().join(".autocode/runs").exists()
            || fs::read_dir(harness.workspace().join(".autocode/runs"))
                .expect("runs")
                .next()
                .is_none(),
        "no run was created"
    );
}

#[test]
fn a_bound_tester_on_the_builders_family_is_refused_naming_the_binding() {
    let harness = Harness::new(script_with(&[]));
    add_second_tool(&harness);
    // The bound tool's tester on the builder's own family (alpha).
    let refused = harness.run(&[
        "--yes",
        "--role-transport",
        "tester=othertool",
        "--tester-model",
        "alpha-large",
    ]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("tester=othertool") && refused.stderr.contains("never moved"),
        "{refused:?}"
    );
}
