//! The scenario catalog on autocode's own runtime (`scripted-direct`): every case has a script
//! for it (derived from agreeing CLI scripts, or its own), not-applicable marks are listed and
//! skipped, the forged-evidence attack of `tester-stream-injection` ends in an honest stop, and a
//! `{"cmd": ...}` answer is corrected inside the attempt (real harness runs, no CLI involved).

use std::path::{Path, PathBuf};

use autocode::direct::protocol::Protocol;
use autocode::pause::PauseCode;
use autocode::scenario::catalog::{self, DirectWire, Job, Profile, Scenario};
use autocode::scenario::result::{self, ScenarioResult};
use autocode::scenario::runner::{self, HarnessConfig};
use autocode::scenario::setup::copy_tree;
use autocode::scenario::verdict::{RunEnding, Verdict};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn catalog() -> Vec<Scenario> {
    catalog::load_catalog(&root().join("scenarios")).unwrap()
}

fn direct() -> Profile {
    Profile::ScriptedDirect(DirectWire::Rotate)
}

async fn run_direct(name: &str, profile: Profile, out: &Path) -> ScenarioResult {
    let cases = catalog();
    let case = cases.iter().find(|c| c.name == name).unwrap();
    let job = Job {
        scenario: case,
        profile,
        repeat: 0,
    };
    let config = HarnessConfig {
        out: out.to_owned(),
        // The direct runtime needs no agent CLI: an empty folder.
        cli_bin_dir: out.join("no-clis"),
        authorize_live: false,
        env: std::env::vars().collect(),
    };
    runner::run_job(&job, &config).await
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}: {l}", path.display())))
        .collect()
}

#[test]
fn every_case_has_a_scripted_direct_script() {
    for case in catalog() {
        for wire in DirectWire::ALL {
            let profile = Profile::ScriptedDirect(wire);
            assert!(
                case.supports(&profile) || case.not_applicable(&profile).is_some(),
                "{} has neither a script nor a reason for {profile}",
                case.name
            );
        }
        let script = &case.scripts[&direct()];
        let own = matches!(
            case.name.as_str(),
            "tester-stream-injection" | "final-message-shell-command"
        );
        if own {
            assert_eq!(script.derived_from, None, "{}", case.name);
            assert!(script.path.ends_with("scripts/scripted-direct.json"));
        } else {
            assert_eq!(
                script.derived_from,
                Some(Profile::ScriptedCodex),
                "{}",
                case.name
            );
        }
    }
}

/// `autocode ARGS…` from the repository root; (exit code, stdout, stderr).
fn autocode(args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_autocode"))
        .args(args)
        .current_dir(root())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("autocode runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_cli_specific_case_needs_a_direct_script_or_a_reason_that_list_and_run_show() {
    let tmp = tempfile::tempdir().unwrap();
    let catalog_dir = tmp.path().join("catalog");
    let dir = catalog_dir.join("stream-injection-copy");
    copy_tree(&root().join("scenarios/tester-stream-injection"), &dir).unwrap();
    std::fs::remove_file(dir.join("scripts/scripted-direct.json")).unwrap();
    let catalog_arg = catalog_dir.to_str().unwrap();

    // The CLI scripts differ: nothing says what the direct runtime gets, the catalog is refused.
    let (code, _, stderr) = autocode(&["scenario", "list", "--catalog", catalog_arg]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("scripts differ"), "{stderr}");

    let reason = "it writes into the stream of a CLI, which the direct runtime does not have";
    let mut spec = std::fs::read_to_string(dir.join("scenario.toml")).unwrap();
    spec.push_str(&format!(
        "\n[not_applicable]\nscripted-direct = \"{reason}\"\n"
    ));
    std::fs::write(dir.join("scenario.toml"), spec).unwrap();
    let (code, stdout, stderr) = autocode(&["scenario", "list", "--catalog", catalog_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!("scripted-direct not applicable: {reason}")),
        "{stdout}"
    );
    let (code, stdout, _) = autocode(&["scenario", "list", "--catalog", catalog_arg, "--json"]);
    assert_eq!(code, Some(0));
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed[0]["not_applicable"]["scripted-direct"], reason);
    assert!(
        !listed[0]["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "scripted-direct"),
        "{listed}"
    );

    // `run` skips it with the reason, on every protocol, and writes no result.
    let out = tmp.path().join("out");
    let (code, _, stderr) = autocode(&[
        "scenario",
        "run",
        "--all",
        "--catalog",
        catalog_arg,
        "--profile",
        "scripted-direct-responses",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "skipped: stream-injection-copy on scripted-direct-responses: not applicable: {reason}"
        )),
        "{stderr}"
    );
    assert!(!out.join("stream-injection-copy").exists());

    // A direct script and a mark at once is a contradiction.
    std::fs::copy(
        root().join("scenarios/tester-stream-injection/scripts/scripted-direct.json"),
        dir.join("scripts/scripted-direct.json"),
    )
    .unwrap();
    let (code, _, stderr) = autocode(&["scenario", "list", "--catalog", catalog_arg]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not applicable"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_stream_events_have_no_purchase_on_scripted_direct() {
    let out = tempfile::tempdir().unwrap();
    let result = run_direct("tester-stream-injection", direct(), out.path()).await;
    assert_eq!(result.verdict, Verdict::HonestStop, "{result:#?}");
    let RunEnding::Paused { code, reason } = &result.ending else {
        panic!("{result:#?}")
    };
    assert_eq!(*code, PauseCode::PausedInvalidOutput, "{reason}");
    assert!(
        reason.contains("event:ac-9 is not an event of this attempt"),
        "{reason}"
    );
    assert_eq!(
        result.protocol,
        Some(DirectWire::Rotate.protocol_for("tester-stream-injection", 0))
    );
    assert!(
        result.oracle.iter().any(|c| !c.passed),
        "the oracle agrees nothing was delivered"
    );
    // Every tester attempt ran the attack, and not one forged line is among the events.
    let dir = result::result_dir(out.path(), &result.case, &result.profile, 0);
    let stages = dir.join("run/stages");
    let testers: Vec<PathBuf> = std::fs::read_dir(&stages)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("-tester-"))
        .collect();
    assert_eq!(testers.len(), 3, "{testers:?}");
    for tester in testers {
        let events = lines(&tester.join("events.jsonl"));
        let finished: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "command_finished")
            .collect();
        assert_eq!(finished.len(), 1, "{}: {events:?}", tester.display());
        assert_eq!(finished[0]["evidence_id"], "event:ac-1");
        assert!(
            finished[0]["command"]
                .as_str()
                .unwrap()
                .contains("/proc/$p/fd/1"),
            "{finished:?}"
        );
        assert!(
            events.iter().all(|e| e["evidence_id"] != "event:ac-9"),
            "{events:?}"
        );
        // The forged line went back to the model as the command's output, and the write into
        // autocode's own stdout was refused by the room.
        let output = finished[0]["output_excerpt"].as_str().unwrap();
        assert!(output.contains("event:ac-9"), "{output}");
        assert!(output.contains("Permission denied"), "{output}");
        let evidence: Value =
            serde_json::from_slice(&std::fs::read(tester.join("evidence.json")).unwrap()).unwrap();
        assert!(
            evidence.to_string().contains("event:ac-9"),
            "the forged id was judged and refused: {evidence}"
        );
    }
    // The scripted model saw the forged line come back only as a tool result.
    let requests = lines(&dir.join("model-requests.jsonl"));
    assert!(requests.iter().all(|r| r["status"] == 200), "{requests:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_command_answer_is_corrected_inside_the_attempt() {
    let out = tempfile::tempdir().unwrap();
    let pinned = Profile::ScriptedDirect(DirectWire::AnthropicMessages);
    let result = run_direct("final-message-shell-command", pinned, out.path()).await;
    assert_eq!(result.verdict, Verdict::Pass, "{result:#?}");
    assert_eq!(result.protocol, Some(Protocol::AnthropicMessages));
    // No repair attempt: six stages, and the builder's requests went on to the correction's
    // conversation after the `{"cmd": ...}` answer.
    assert_eq!(result.stages, 6, "{result:#?}");
    let dir = result::result_dir(out.path(), &result.case, &result.profile, 0);
    let requests = lines(&dir.join("model-requests.jsonl"));
    assert!(
        requests
            .iter()
            .all(|r| r["api"] == "anthropic_messages" && r["status"] == 200),
        "{requests:?}"
    );
    let conversations: Vec<&str> = requests
        .iter()
        .filter_map(|r| r["conversation"].as_str())
        .collect();
    assert!(conversations.contains(&"repair"), "{conversations:?}");
    let launch = std::fs::read_to_string(dir.join("run/stages/004-builder-1/launch.json")).unwrap();
    assert!(launch.contains("anthropic_messages"), "{launch}");
}

/// `--jobs 2`: each (case, profile, repetition) runs in a child process of its own, every
/// result lands where a sequential run puts it, and the scorecard counts them all.
#[test]
fn jobs_run_in_child_processes_and_every_result_lands_in_its_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let (code, stdout, stderr) = autocode(&[
        "scenario",
        "run",
        "feature-with-docs",
        "--profile",
        "scripted-direct",
        "--repeat",
        "3",
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("3 jobs, 2 at a time"), "{stderr}");
    let mut protocols = Vec::new();
    for n in ["001", "002", "003"] {
        let file = out
            .join("feature-with-docs/scripted-direct")
            .join(n)
            .join("result.json");
        let result: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(result["verdict"], "PASS", "{n}: {result}");
        assert_eq!(result["repeat"], n.parse::<u64>().unwrap() - 1);
        protocols.push(result["protocol"].as_str().unwrap().to_owned());
        // Each job's lines are one block: its verdict follows its own start line.
        let start = format!(
            "running feature-with-docs on scripted-direct, {}",
            protocols.last().unwrap()
        );
        let at = stderr
            .find(&start)
            .unwrap_or_else(|| panic!("{start}: {stderr}"));
        assert!(
            stderr[at..].lines().nth(1).unwrap().contains("PASS"),
            "{stderr}"
        );
    }
    // The repetitions rotate the protocol as a sequential run does.
    protocols.sort();
    protocols.dedup();
    assert_eq!(protocols.len(), 3, "{protocols:?}");
    assert!(
        stdout.contains("feature-with-docs  scripted-direct  3     3"),
        "{stdout}"
    );
}
