//! `output = "acp"` end to end: the whole demo pipeline through a real pinned ACP agent (OpenCode
//! 1.18.33's `opencode acp`) registered with one TOML file, against the scripted model. autocode
//! is the ACP client; OpenCode runs its commands with its own tools (it never asks for the
//! client's terminal), so its command events count only where the kernel's exec ledger backs
//! them, and every stage records that in `acp.json`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use autocode::acp::PinnedAcpAgent;
use autocode::demo::{
    CHECKER_MODEL, DEMO_OBJECTIVE, DOER_MODEL, ScriptedCli, demo_script, isolated_cli_env,
};
use autocode::provider::{ConfigPaths, Registry};
use autocode::role::RoleKey;
use autocode::run::api::{self, StartOptions};
use autocode::run::driver::DriveOutcome;
use autocode::scripted_model::{Script, ScriptSyntax, ScriptedServer, ServerConfig};

use super::direct_e2e::{Place, Quiet};

fn pinned_bin() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clis/node_modules/.bin");
    assert!(
        dir.join("opencode").exists(),
        "{} is missing: install the pinned CLIs with `npm ci --prefix tests/clis`",
        dir.join("opencode").display()
    );
    dir
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

struct Ran {
    summary: api::RunSummary,
    requests: Vec<autocode::scripted_model::RequestLogEntry>,
    /// Kept alive (with the run's files) until the test has read them.
    _place: Place,
}

/// The demo through the pinned ACP `agent` registered as a tool, its agent set up like its
/// native CLI against the scripted model: every role on `single`, or on the demo's routes
/// (two families).
async fn demo_via(agent: PinnedAcpAgent, single: Option<&str>) -> Ran {
    let name = agent.tool_name();
    let bin = pinned_bin();
    let place = Place::new();
    let script = Script::parse(
        &demo_script().to_string(),
        ScriptSyntax::Json,
        Path::new("demo.json"),
    )
    .unwrap();
    let server = ScriptedServer::start(ServerConfig::new(script))
        .await
        .unwrap();
    let home = place.dir.path().join("home");
    let cli_env = isolated_cli_env(
        agent.cli(),
        &server,
        &home,
        ScriptedCli {
            models: &[DOER_MODEL, CHECKER_MODEL],
            max_retries: 0,
        },
    )
    .unwrap();
    let paths = ConfigPaths::under(&home.join(".config/autocode"));
    let routes = autocode::demo::demo_routes(|m| format!("mock/{m}"));
    let agent_env = agent
        .register(&paths.user_dir, Some(&bin), |key| match single {
            Some(model) => model.to_owned(),
            None => routes
                .iter()
                .find(|(role, _)| RoleKey::for_role(**role) == key)
                .map(|(_, model)| model.clone())
                .unwrap_or_else(|| format!("mock/{DOER_MODEL}")),
        })
        .unwrap();
    let mut env: BTreeMap<OsString, OsString> = place.env();
    for (k, v) in cli_env.into_iter().chain(agent_env) {
        env.insert(k.into(), v.into());
    }
    let path = env
        .get(&OsString::from("PATH"))
        .cloned()
        .unwrap_or_default();
    let mut joined = bin.into_os_string();
    joined.push(":");
    joined.push(path);
    env.insert("PATH".into(), joined);
    let registry = Registry::new(paths);
    let opts = StartOptions {
        objective: DEMO_OBJECTIVE.into(),
        workspace: place.workspace(),
        provider: Some(name.into()),
        models: match single {
            Some(_) => BTreeMap::new(),
            None => routes,
        },
        single_model: single.map(str::to_owned),
        yes: true,
        scripted_local: true,
        ..StartOptions::default()
    };
    let summary = api::start(&registry, &env, opts, &mut Quiet).await.unwrap();
    let requests = server.requests();
    server.shutdown().await;
    let run_dir = summary.run_dir.clone();
    assert!(
        matches!(summary.outcome, DriveOutcome::Complete),
        "{:?}\n{}",
        summary.outcome,
        [
            "validation.json",
            "acp.json",
            "events.jsonl",
            "acp-client.jsonl",
            "stdout.log"
        ]
        .map(|f| format!(
            "{f}: {}",
            std::fs::read_to_string(run_dir.join("stages/004-builder-1").join(f))
                .unwrap_or_default()
        ))
        .join("\n")
    );
    assert_eq!(
        std::fs::read_to_string(summary.work_tree.join("hello.txt")).unwrap(),
        "hello, world\n"
    );
    // `ACP_FIXTURE_OUT=DIR` keeps the builder's and tester's raw streams, unedited, as the
    // fixtures under `tests/fixtures/acp/` were captured.
    if let Some(out) = std::env::var_os("ACP_FIXTURE_OUT") {
        for stage in ["004-builder-1", "005-tester-1"] {
            let to = Path::new(&out).join(name).join(stage);
            std::fs::create_dir_all(&to).unwrap();
            let from = run_dir.join("stages").join(stage);
            std::fs::copy(from.join("stdout.log"), to.join("stdout.jsonl")).unwrap();
            std::fs::copy(from.join("acp-client.jsonl"), to.join("client.jsonl")).unwrap();
        }
    }
    Ran {
        summary,
        requests,
        _place: place,
    }
}

/// Every stage spoke ACP to a prompt answered, with its family proven gone; returns each
/// stage's `acp.json`.
fn stages(run_dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for stage in std::fs::read_dir(run_dir.join("stages")).unwrap() {
        let stage = stage.unwrap().path();
        let acp = read_json(&stage.join("acp.json"));
        assert_eq!(acp["prompt_answered"], true, "{}: {acp}", stage.display());
        assert_eq!(acp["protocol_version"], 1);
        let receipt = read_json(&stage.join("supervision.json"));
        assert_eq!(receipt["verified"], true, "{}", stage.display());
        assert!(stage.join("acp-client.jsonl").exists());
        out.push((
            stage.file_name().unwrap().to_string_lossy().into_owned(),
            acp,
        ));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_completes_through_opencode_acp() {
    let ran = demo_via(PinnedAcpAgent::Opencode, None).await;
    let run_dir = ran.summary.run_dir.clone();
    for (stage, acp) in stages(&run_dir) {
        assert_eq!(
            acp["agent"]["agentInfo"]["name"], "OpenCode",
            "{stage}: {acp}"
        );
        assert!(
            matches!(
                acp["model_selection"].as_str(),
                Some("current" | "config_option")
            ),
            "{stage}: {acp}"
        );
        // OpenCode runs its commands with its own tools: degraded evidence, said so.
        assert_eq!(acp["evidence"], "agent_tools", "{stage}: {acp}");
        assert_eq!(acp["terminals_created"], 0, "{stage}");
    }
    // The tester's check is evidence because the kernel's ledger backs OpenCode's command event.
    let evidence = read_json(&run_dir.join("stages/005-tester-1/evidence.json"));
    assert!(evidence["checks"][0]["problem"].is_null(), "{evidence}");
    assert_eq!(evidence["checks"][0]["check"]["exit_code"], 0, "{evidence}");
    // Each verifying stage asked the scripted model for its route's model.
    assert!(
        ran.requests
            .iter()
            .any(|r| r.model.as_deref() == Some(CHECKER_MODEL)),
        "the checker model was never asked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_completes_through_claude_code_acp_in_autocodes_terminal() {
    // The adapter lists the models `default`, `opus` and `haiku` (one family: the test waives
    // independence).
    let ran = demo_via(PinnedAcpAgent::Claude, Some("default")).await;
    let run_dir = ran.summary.run_dir.clone();
    let stages = stages(&run_dir);
    for (stage, acp) in &stages {
        assert_eq!(
            acp["agent"]["agentInfo"]["name"], "@zed-industries/claude-code-acp",
            "{stage}: {acp}"
        );
    }
    // The builder's and the tester's commands ran in autocode's terminal: full evidence, with
    // the boundary's receipt of each.
    for stage in ["004-builder-1", "005-tester-1"] {
        let acp = &stages.iter().find(|(s, _)| s == stage).unwrap().1;
        assert_eq!(acp["evidence"], "autocode_terminal", "{stage}: {acp}");
        let commands = read_json(&run_dir.join("stages").join(stage).join("commands.json"));
        let receipts = commands["commands"].as_array().unwrap();
        assert!(!receipts.is_empty(), "{stage}: {commands}");
        assert!(
            receipts.iter().all(|c| c["receipt"]["verified"] == true),
            "{stage}: {commands}"
        );
    }
    let evidence = read_json(&run_dir.join("stages/005-tester-1/evidence.json"));
    assert!(evidence["checks"][0]["problem"].is_null(), "{evidence}");
    // The adapter reports no usage over ACP; each stage's comes from Claude Code's transcript
    // in the stage's HOME layer (the scripted model's responses each count 1,000+ input tokens),
    // with the cost Claude Code counted (its `cost-state` line, written at the turn's end).
    let mut costed = 0;
    for (stage, _) in &stages {
        let events =
            std::fs::read_to_string(run_dir.join("stages").join(stage).join("events.jsonl"))
                .unwrap();
        let usage: Vec<Value> = events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["type"] == "usage")
            .collect();
        assert_eq!(usage.len(), 1, "{stage}: {events}");
        assert!(
            usage[0]["usage"]["input_tokens"].as_u64() >= Some(1000),
            "{stage}: {usage:?}"
        );
        assert!(
            usage[0]["usage"]["output_tokens"].as_u64() > Some(0),
            "{stage}: {usage:?}"
        );
        if usage[0]["usage"]["cost_usd"].as_f64() > Some(0.0) {
            costed += 1;
        }
    }
    assert!(costed > 0, "no stage's transcript gave its cost");
}
