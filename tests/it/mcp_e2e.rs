//! `autocode mcp` driven by an `rmcp` client over stdio, with the scripted fake agent of
//! `run_e2e`: start_run, wait_run to the plan-approval pause, a wrong token refused, approve_plan
//! with the token the pause showed, wait_run to completion, run_events with a cursor, apply_run
//! merging the branch, and the decisions recorded as made over MCP. `--read-only` offers only the
//! observing tools.

use std::fs;
use std::process::Command;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::run_e2e::{Harness, script_with};

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
