//! `autocode mcp` driven by an `rmcp` client over stdio, with the scripted fake agent of
//! `run_e2e`: start_run, wait_run to the plan-approval pause, a wrong token refused, approve_plan
//! with the token the pause showed, wait_run to completion, run_events with a cursor, apply_run
//! merging the branch, and the decisions recorded as made over MCP. `--read-only` offers only the
//! observing tools. And the pinned Claude Code, with `autocode mcp` as its MCP server and the
//! scripted model as its model, delegates an objective whose inner run completes.

use std::fs;
use std::process::Command;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::run_e2e::{BUILD, CHECK, Harness, build_report, script_with};

type Client = RunningService<rmcp::RoleClient, ()>;

async fn connect(harness: &Harness, args: &[&str]) -> Client {
    let command: Command = harness.command(args);
    let transport = TokioChildProcess::builder(tokio::process::Command::from(command))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn autocode mcp")
        .0;
    ().serve(transport).await.expect("MCP handshake")
}

/// Calls `tool`; the answer's first text as JSON (or as a string), and whether it is an error.
async fn call(client: &Client, tool: &'static str, arguments: Value) -> (Value, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let value = serde_json::to_value(&result).expect("result JSON");
    let text = value["content"][0]["text"].as_str().unwrap_or_default();
    let body = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()));
    (body, value["isError"] == true)
}

/// wait_run until the run stands as `want` (a bounded number of waits).
async fn wait_for(client: &Client, run: &str, ws: &str, want: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..40 {
        let (status, error) = call(
            client,
            "wait_run",
            json!({"run": run, "workspace": ws, "timeout_seconds": 30}),
        )
        .await;
        assert!(!error, "{status}");
        if status["standing"] == want {
            return status;
        }
        last = status;
    }
    panic!("run never stood {want}: {last:#}");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn an_mcp_client_starts_a_run_approves_its_plan_and_applies_the_result() {
    let harness = Harness::new(script_with(&[]));
    let ws_path = fs::canonicalize(harness.workspace()).expect("workspace");
    let ws = ws_path.display().to_string();
    runtime().block_on(async {
        let client = connect(&harness, &["mcp"]).await;
        let tools: Vec<String> = client
            .list_all_tools()
            .await
            .expect("tools")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        for name in ["start_run", "wait_run", "approve_plan", "apply_run", "stop_run"] {
            assert!(tools.iter().any(|t| t == name), "{name} in {tools:?}");
        }

        let (started, error) = call(
            &client,
            "start_run",
            json!({"objective": "Create hello.txt containing hello", "workspace": ws, "provider": "fake"}),
        )
        .await;
        assert!(!error, "{started}");
        let run = started["run_id"].as_str().expect("run id").to_owned();

        let paused = wait_for(&client, &run, &ws, "paused").await;
        assert_eq!(paused["pause"]["code"], "AWAITING_PLAN_APPROVAL", "{paused:#}");
        let token = paused["pause"]["asks"]["token"]
            .as_str()
            .expect("the plan token")
            .to_owned();

        // A token for another revision is refused, and nothing changes.
        let (wrong, error) = call(
            &client,
            "approve_plan",
            json!({"run": run, "workspace": ws, "token": "r1:0000"}),
        )
        .await;
        assert!(error, "{wrong}");
        let (still, _) = call(&client, "run_status", json!({"run": run, "workspace": ws})).await;
        assert_eq!(still["pause"]["code"], "AWAITING_PLAN_APPROVAL", "{still:#}");

        let (approved, error) = call(
            &client,
            "approve_plan",
            json!({"run": run, "workspace": ws, "token": token}),
        )
        .await;
        assert!(!error, "{approved}");
        let done = wait_for(&client, &run, &ws, "complete").await;
        assert!(
            done["result"]["criteria"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["verdict"] == "PASS")),
            "{done:#}"
        );

        // The events, in two pages of a cursor.
        let (events, _) = call(&client, "run_events", json!({"run": run, "workspace": ws})).await;
        let lines = events["lines"].as_array().expect("lines");
        assert!(
            lines
                .iter()
                .any(|l| l["type"] == "stage_start" && l["role"] == "builder"),
            "{events:#}"
        );
        let cursor = events["next_cursor"].as_u64().expect("cursor");
        let (rest, _) = call(
            &client,
            "run_events",
            json!({"run": run, "workspace": ws, "cursor": cursor}),
        )
        .await;
        assert_eq!(rest["lines"], json!([]), "{rest:#}");

        let (applied, error) =
            call(&client, "apply_run", json!({"run": run, "workspace": ws})).await;
        assert!(!error, "{applied}");
        client.cancel().await.expect("close");
    });
    assert_eq!(
        fs::read_to_string(ws_path.join("hello.txt")).expect("merged into the user's branch"),
        "hello\n"
    );
    let activity = fs::read_to_string(
        fs::read_dir(ws_path.join(".autocode/runs"))
            .expect("runs")
            .flatten()
            .next()
            .expect("one run")
            .path()
            .join("activity.jsonl"),
    )
    .expect("activity");
    let decisions: Vec<String> = activity
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["event"] == "decision over MCP")
        .map(|l| l["detail"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    assert!(
        decisions[0].starts_with("approve_plan r1:"),
        "{decisions:?}"
    );
    assert_eq!(decisions[1], "apply_run");
}

#[test]
fn a_read_only_server_offers_only_the_observing_tools() {
    let harness = Harness::new(script_with(&[]));
    runtime().block_on(async {
        let client = connect(&harness, &["mcp", "--read-only"]).await;
        let mut tools: Vec<String> = client
            .list_all_tools()
            .await
            .expect("tools")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        tools.sort();
        assert_eq!(
            tools,
            [
                "explain_pause",
                "list_runs",
                "run_events",
                "run_status",
                "wait_run"
            ]
        );
        let refused = client
            .call_tool(
                CallToolRequestParams::new("start_run").with_arguments(
                    json!({"objective": "x y", "workspace": "/"})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                ),
            )
            .await;
        let refused_as_error = match refused {
            Err(_) => true,
            Ok(result) => result.is_error == Some(true),
        };
        assert!(refused_as_error, "start_run is not offered");
        let (explained, error) = call(
            &client,
            "explain_pause",
            json!({"code": "AWAITING_PLAN_APPROVAL"}),
        )
        .await;
        assert!(!error, "{explained}");
        assert!(
            explained["next"]
                .as_str()
                .is_some_and(|n| n.contains("--approve-plan")),
            "{explained}"
        );
        client.cancel().await.expect("close");
    });
}

/// The pinned Claude Code, configured with `autocode mcp` as its MCP server and driven by the
/// scripted model, delegates an objective: it calls start_run, then wait_run until the run
/// settles, and the inner run (through the fake agent's CLI) completes.
#[test]
fn claude_code_delegates_an_objective_to_autocode_over_mcp() {
    use autocode::scripted_model::{Action, Script, ScriptSyntax, ScriptedServer, ServerConfig};
    use std::path::Path;
    use std::process::Stdio;

    let claude = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clis/node_modules/.bin/claude");
    assert!(
        claude.exists(),
        "{} is missing: `npm ci --prefix tests/clis`",
        claude.display()
    );
    let harness = Harness::new(script_with(&[]));
    let ws = fs::canonicalize(harness.workspace())
        .expect("workspace")
        .display()
        .to_string();
    let outer = json!({"conversation": [{"name": "delegate", "step": [
        {"kind": "tool", "name": "mcp__autocode__start_run",
         "arguments": {"objective": "Create hello.txt containing hello", "workspace": ws,
                       "provider": "fake", "yes": true}},
        {"kind": "tool", "name": "mcp__autocode__wait_run",
         "arguments": {"workspace": ws, "settled": true, "timeout_seconds": 300}},
        {"kind": "text", "text": "autocode completed the objective; its result is on its branch."}
    ]}]});
    let script = Script::parse(
        &outer.to_string(),
        ScriptSyntax::Json,
        Path::new("outer.json"),
    )
    .expect("the outer script");
    let rt = runtime();
    let server = rt
        .block_on(ScriptedServer::start(ServerConfig::new(script)))
        .expect("scripted model");
    let mcp_config = json!({"mcpServers": {"autocode": {
        "type": "stdio", "command": env!("CARGO_BIN_EXE_autocode"), "args": ["mcp"]
    }}});
    let home = harness.home();
    let mut command = Command::new(&claude);
    command
        .env_clear()
        .current_dir(&ws)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("MCP_TOOL_TIMEOUT", "300000")
        .args(["-p", "--output-format", "stream-json", "--verbose"])
        .args(["--model", "mock-model", "--tools", "Bash"])
        .arg("--mcp-config")
        .arg(mcp_config.to_string())
        .arg("--strict-mcp-config")
        .args(["--permission-mode", "dontAsk"])
        .args([
            "--allowedTools",
            "mcp__autocode__start_run,mcp__autocode__wait_run",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("claude starts");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = stdin.write_all(b"Delegate to autocode: create hello.txt containing hello.\n");
    }
    let out = child.wait_with_output().expect("claude ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let describe = format!(
        "rc {:?}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = server.requests();
    rt.block_on(server.shutdown());
    assert_eq!(out.status.code(), Some(0), "{describe}");
    let called: Vec<String> = log
        .iter()
        .filter(|e| e.action == Action::ToolCall)
        .filter_map(|e| e.tool.clone())
        .collect();
    assert_eq!(
        called,
        ["mcp__autocode__start_run", "mcp__autocode__wait_run"],
        "{describe}"
    );
    // What wait_run answered Claude Code: the run complete, with its verified criterion.
    let results: Vec<String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "user")
        .flat_map(|e| {
            e["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|block| block["type"] == "tool_result")
        .map(|block| block["content"].to_string())
        .collect();
    assert_eq!(results.len(), 2, "{describe}");
    assert!(
        results[1].contains("complete") && results[1].contains("PASS"),
        "{describe}"
    );
    let status = harness.status();
    assert_eq!(status.code, Some(0), "{status:?}");
    assert!(!status.json["completed_at"].is_null(), "{status:?}");
}

/// `mcp install` registers the server the client's own way: the pinned Claude Code and Codex
/// CLIs' `mcp add` (their configuration files then name it), OpenCode's `opencode.json` (other
/// members kept); `--dry-run` only prints.
#[test]
fn mcp_install_registers_the_server_with_each_client() {
    let harness = Harness::new(script_with(&[]));
    let home = harness.home();
    let clis =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clis/node_modules/.bin");
    let path = format!(
        "{}:{}",
        clis.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let install = |client: &str, extra: &[&str]| {
        let mut args = vec!["mcp", "install", "--client", client];
        args.extend_from_slice(extra);
        let out = harness
            .command(&args)
            .env("PATH", &path)
            .output()
            .expect("autocode mcp install");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let bin = env!("CARGO_BIN_EXE_autocode");

    let (code, stdout, stderr) = install("claude", &["--dry-run", "--read-only"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.trim(),
        format!("claude mcp add --scope user autocode -- {bin} mcp --read-only")
    );
    assert!(
        !home.join(".claude.json").exists(),
        "a dry run changes nothing"
    );

    let (code, _, stderr) = install("claude", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let claude: Value = serde_json::from_str(
        &fs::read_to_string(home.join(".claude.json")).expect("claude's user config"),
    )
    .expect("JSON");
    assert_eq!(
        claude["mcpServers"]["autocode"]["command"], bin,
        "{claude:#}"
    );
    assert_eq!(claude["mcpServers"]["autocode"]["args"], json!(["mcp"]));

    let (code, _, stderr) = install("codex", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let codex = fs::read_to_string(home.join(".codex/config.toml")).expect("codex config");
    assert!(codex.contains("[mcp_servers.autocode]"), "{codex}");
    assert!(codex.contains(&format!("command = \"{bin}\"")), "{codex}");

    let opencode_json = home.join(".config/opencode/opencode.json");
    fs::create_dir_all(opencode_json.parent().expect("dir")).expect("mkdir");
    fs::write(&opencode_json, r#"{"model": "mock/mock-model"}"#).expect("seed");
    let (code, stdout, _) = install("opencode", &["--dry-run"]);
    assert_eq!(code, Some(0));
    let shown: Value = serde_json::from_str(&stdout).expect("the config it would write");
    assert_eq!(shown["mcp"]["autocode"]["command"], json!([bin, "mcp"]));
    assert_eq!(
        fs::read_to_string(&opencode_json).expect("unchanged"),
        r#"{"model": "mock/mock-model"}"#
    );
    let (code, _, stderr) = install("opencode", &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let written: Value =
        serde_json::from_str(&fs::read_to_string(&opencode_json).expect("written")).expect("JSON");
    assert_eq!(written["model"], "mock/mock-model");
    assert_eq!(
        written["mcp"]["autocode"],
        json!({"type": "local", "command": [bin, "mcp"], "enabled": true})
    );
}

/// stop_run ends the running attempt of a run the server works on: it pauses
/// PAUSED_INTERRUPTED (the run's own Ctrl-C path), and resume_run continues it to completion.
#[test]
fn stop_run_pauses_a_working_run_and_resume_run_continues_it() {
    let harness = Harness::new(Value::Null);
    let wait = harness.wait_for_gate();
    harness.set_script(script_with(&[(
        "builder",
        json!([
            [{"run": wait}, {"run": BUILD}, {"run": CHECK}, build_report()],
            [{"run": BUILD}, {"run": CHECK}, build_report()]
        ]),
    )]));
    let ws = fs::canonicalize(harness.workspace())
        .expect("workspace")
        .display()
        .to_string();
    runtime().block_on(async {
        let client = connect(&harness, &["mcp"]).await;
        let (started, error) = call(
            &client,
            "start_run",
            json!({"objective": "Create hello.txt containing hello", "workspace": ws,
                   "provider": "fake", "yes": true}),
        )
        .await;
        assert!(!error, "{started}");
        let run = started["run_id"].as_str().expect("run id").to_owned();
        // Until the builder's stage is the one running.
        let mut building = false;
        for _ in 0..40 {
            let (events, _) =
                call(&client, "run_events", json!({"run": run, "workspace": ws})).await;
            if events["lines"].as_array().is_some_and(|l| {
                l.iter()
                    .any(|l| l["type"] == "stage_start" && l["role"] == "builder")
            }) {
                building = true;
                break;
            }
            call(
                &client,
                "wait_run",
                json!({"run": run, "workspace": ws, "timeout_seconds": 30}),
            )
            .await;
        }
        assert!(building, "the builder started");
        let (stopped, error) =
            call(&client, "stop_run", json!({"run": run, "workspace": ws})).await;
        assert!(!error, "{stopped}");
        let paused = call(
            &client,
            "wait_run",
            json!({"run": run, "workspace": ws, "settled": true, "timeout_seconds": 120}),
        )
        .await
        .0;
        assert_eq!(paused["pause"]["code"], "PAUSED_INTERRUPTED", "{paused:#}");
        let (again, error) = call(&client, "stop_run", json!({"run": run, "workspace": ws})).await;
        assert!(error, "nothing works on it now: {again}");

        // The stage runs again from the top (the fake agent replays its waiting step): let it pass.
        harness.open_gate();
        // The cut-off attempt is kept; the pause names how to run its stage again.
        let next = paused["pause"]["next"].as_str().unwrap_or_default();
        let attempt = next
            .split_whitespace()
            .skip_while(|w| *w != "--abandon-stage")
            .nth(1)
            .unwrap_or_else(|| panic!("the attempt to set aside: {next}"))
            .to_owned();
        let (resumed, error) = call(
            &client,
            "resume_run",
            json!({"run": run, "workspace": ws, "abandon_stage": attempt}),
        )
        .await;
        assert!(!error, "{resumed}");
        let done = call(
            &client,
            "wait_run",
            json!({"run": run, "workspace": ws, "settled": true, "timeout_seconds": 120}),
        )
        .await
        .0;
        assert_eq!(done["standing"], "complete", "{done:#}");
        client.cancel().await.expect("close");
    });
}
