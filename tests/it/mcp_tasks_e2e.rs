//! `autocode mcp` for a client that declared the MCP Tasks extension: `start_run` is answered
//! as a task that follows the run (progress notifications on each change, the task's result the
//! run's settled status); the run's status, diff and reports are resources, read only from the
//! run; `tasks/cancel` pauses the run resumably; and a run started over MCP finishes after the
//! server is killed with its process group.

use std::fs;
use std::process::Command;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, NumberOrString, ProgressNotificationParam, ProgressToken,
    ReadResourceRequestParams, RequestMetaObject, ResourceContents, TaskPayload,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::run_e2e::{BUILD, CHECK, Harness, build_report, script_with};

/// A client with the Tasks extension that keeps every progress message it is sent.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut seen) = self.progress.lock() {
            seen.push(params.message.unwrap_or_default());
        }
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::from_build_env(),
        )
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn arguments(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments are an object"),
    }
}

/// The first text of a tool result, as JSON.
fn body(result: &CallToolResult) -> Value {
    let value = serde_json::to_value(result).expect("result JSON");
    let text = value["content"][0]["text"].as_str().unwrap_or_default();
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

async fn read(client: &RunningService<RoleClient, Recorder>, uri: &str) -> Result<String, String> {
    let response = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .map_err(|e| e.to_string())?;
    match response.contents.into_iter().next() {
        Some(ResourceContents::TextResourceContents { text, .. }) => Ok(text),
        other => Err(format!("not text: {other:?}")),
    }
}

#[test]
fn a_tasks_client_follows_start_run_as_a_task_and_reads_the_run_as_resources() {
    let harness = Harness::new(script_with(&[]));
    let ws_path = fs::canonicalize(harness.workspace()).expect("workspace");
    let ws = ws_path.display().to_string();
    let recorder = Recorder::default();
    let progress = recorder.progress.clone();
    runtime().block_on(async {
        let command: Command = harness.command(&["mcp"]);
        let transport = TokioChildProcess::builder(tokio::process::Command::from(command))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn autocode mcp")
            .0;
        let client = recorder.serve(transport).await.expect("MCP handshake");

        let mut meta = RequestMetaObject::default();
        meta.set_progress_token(ProgressToken(NumberOrString::Number(7)));
        let mut params = CallToolRequestParams::new("start_run").with_arguments(arguments(json!({
            "objective": "Create hello.txt containing hello", "workspace": ws,
            "provider": "fake", "yes": true
        })));
        params.meta = Some(meta);
        let created = match client.call_tool_once(params).await.expect("start_run") {
            CallToolResponse::Task(created) => created,
            other => panic!("a task, not {other:?}"),
        };
        let run = created
            .meta
            .as_ref()
            .and_then(|m| m.0.get("autocode/run_id"))
            .and_then(Value::as_str)
            .expect("the run id in the task's meta")
            .to_owned();
        let task_id = created.task.task_id.clone();
        let mut messages = Vec::new();
        let done = loop {
            let got = client
                .peer()
                .get_task(GetTaskParams::new(task_id.clone()))
                .await
                .expect("tasks/get");
            if let Some(message) = &got.task.task.status_message
                && messages.last() != Some(message)
            {
                messages.push(message.clone());
            }
            if got.task.status().is_terminal() {
                break got.task;
            }
            // The client honours the task's suggested polling interval.
            tokio::time::sleep(std::time::Duration::from_millis(
                got.task.task.poll_interval_ms.unwrap_or(1000),
            ))
            .await;
        };
        let TaskPayload::Completed { result } = done.payload else {
            panic!("completed: {done:?}")
        };
        let result: CallToolResult =
            serde_json::from_value(Value::Object(result)).expect("a tool result");
        let status = body(&result);
        assert_eq!(status["standing"], "complete", "{status:#}");
        assert_eq!(status["run_id"], run.as_str());
        assert!(
            messages.iter().any(|m| m.contains("complete")),
            "{messages:?}"
        );

        // Progress: a notification per change, the builder's stage and the completion among
        // them.
        let seen = progress.lock().expect("progress").clone();
        assert!(
            seen.iter().any(|m| m.contains("(builder) running")),
            "{seen:?}"
        );
        assert!(seen.contains(&format!("run {run} complete")), "{seen:?}");

        // Resources: the run's status, diff and reports.
        let listed: Vec<String> = client
            .list_all_resources()
            .await
            .expect("resources/list")
            .into_iter()
            .map(|r| r.uri.clone())
            .collect();
        let prefix = format!("autocode://run/{run}/");
        assert!(listed.contains(&format!("{prefix}status")), "{listed:?}");
        assert!(listed.contains(&format!("{prefix}diff")), "{listed:?}");
        let builder_report = listed
            .iter()
            .find(|u| u.starts_with(&format!("{prefix}report/")) && u.contains("-builder-"))
            .unwrap_or_else(|| panic!("a builder report in {listed:?}"))
            .clone();
        let diff = read(&client, &format!("{prefix}diff")).await.expect("diff");
        assert!(
            diff.contains("+++ b/hello.txt") && diff.contains("+hello"),
            "{diff}"
        );
        let report: Value =
            serde_json::from_str(&read(&client, &builder_report).await.expect("report"))
                .expect("JSON");
        assert!(report.is_object(), "{report}");
        let status: Value = serde_json::from_str(
            &read(&client, &format!("{prefix}status"))
                .await
                .expect("status"),
        )
        .expect("JSON");
        assert_eq!(status["standing"], "complete");
        // Nothing outside the run's own attempts is served.
        for bad in [
            format!("{prefix}report/.."),
            format!("{prefix}report/..%2Fstate.json"),
            format!("{prefix}report/999-builder-9"),
            format!("{prefix}state.json"),
            "autocode://run/20000101-000000-000000/status".to_owned(),
        ] {
            assert!(read(&client, &bad).await.is_err(), "{bad} was served");
        }
        client.cancel().await.expect("close");
    });
}

/// A run started over MCP is the server's child in a session of its own: killing the server and
/// its whole process group mid-stage does not cut the run off; it finishes.
#[test]
fn a_run_started_over_mcp_finishes_after_its_server_is_killed() {
    use std::os::unix::process::CommandExt;

    let gate = tempfile::tempdir().expect("tempdir");
    let go = gate.path().join("go");
    let wait = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": wait}, {"run": BUILD}, {"run": CHECK}, build_report()]]),
    )]));
    let ws = fs::canonicalize(harness.workspace())
        .expect("workspace")
        .display()
        .to_string();
    let run = runtime().block_on(async {
        let mut command: Command = harness.command(&["mcp"]);
        command.process_group(0);
        let (transport, _) = TokioChildProcess::builder(tokio::process::Command::from(command))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn autocode mcp");
        let server_pid = transport.id().expect("the server's pid");
        let client = ().serve(transport).await.expect("MCP handshake");
        let started = client
            .call_tool(
                CallToolRequestParams::new("start_run").with_arguments(arguments(
                    json!({"objective": "Create hello.txt containing hello", "workspace": ws,
                       "provider": "fake", "yes": true}),
                )),
            )
            .await
            .expect("start_run");
        let run = body(&started)["run_id"]
            .as_str()
            .expect("run id")
            .to_owned();
        // Until the builder's stage runs (it waits at the gate).
        let mut building = false;
        for _ in 0..40 {
            let waited = client
                .call_tool(
                    CallToolRequestParams::new("wait_run").with_arguments(arguments(
                        json!({"run": run, "workspace": ws, "timeout_seconds": 30}),
                    )),
                )
                .await
                .expect("wait_run");
            let events = client
                .call_tool(
                    CallToolRequestParams::new("run_events")
                        .with_arguments(arguments(json!({"run": run, "workspace": ws}))),
                )
                .await
                .expect("run_events");
            if body(&events)["lines"].as_array().is_some_and(|l| {
                l.iter()
                    .any(|l| l["type"] == "stage_start" && l["role"] == "builder")
            }) {
                building = true;
                break;
            }
            assert_ne!(body(&waited)["standing"], "complete");
        }
        assert!(building, "the builder started");
        let group = nix::unistd::Pid::from_raw(-i32::try_from(server_pid).expect("pid"));
        nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL)
            .expect("kill the server's process group");
        drop(client);
        run
    });
    fs::write(&go, "").expect("open the gate");
    // `events --follow` returns once no autocode works on the run: its last line says how the
    // run ended.
    let out = harness
        .command(&["events", "--follow", &run, "--workspace", &ws, "--jsonl"])
        .output()
        .expect("events --follow");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("a result line");
    assert_eq!(last["type"], "result", "{stdout}");
    assert_eq!(last["status"], "complete", "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
}

/// `tasks/cancel` stops the run the task follows as `stop_run` does: the run pauses
/// `PAUSED_INTERRUPTED` (resumable) and the task ends `cancelled`.
#[test]
fn cancelling_the_task_pauses_the_run_resumably() {
    let gate = tempfile::tempdir().expect("tempdir");
    let go = gate.path().join("go");
    let wait = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    let harness = Harness::new(script_with(&[(
        "builder",
        json!([[{"run": wait}, {"run": BUILD}, {"run": CHECK}, build_report()]]),
    )]));
    let ws = fs::canonicalize(harness.workspace())
        .expect("workspace")
        .display()
        .to_string();
    let status = runtime().block_on(async {
        let command: Command = harness.command(&["mcp"]);
        let transport = TokioChildProcess::builder(tokio::process::Command::from(command))
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn autocode mcp")
            .0;
        let client = Recorder::default()
            .serve(transport)
            .await
            .expect("MCP handshake");
        let params = CallToolRequestParams::new("start_run").with_arguments(arguments(json!({
            "objective": "Create hello.txt containing hello", "workspace": ws,
            "provider": "fake", "yes": true
        })));
        let CallToolResponse::Task(created) = client.call_tool_once(params).await.expect("start")
        else {
            panic!("a task")
        };
        let task_id = created.task.task_id.clone();
        // Until the task says the builder's stage runs (it waits at the gate).
        loop {
            let got = client
                .peer()
                .get_task(GetTaskParams::new(task_id.clone()))
                .await
                .expect("tasks/get");
            assert!(!got.task.status().is_terminal(), "{got:?}");
            if got
                .task
                .task
                .status_message
                .as_deref()
                .is_some_and(|m| m.contains("(builder) running"))
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        client
            .peer()
            .cancel_task(rmcp::model::CancelTaskParams::new(task_id.clone()))
            .await
            .expect("tasks/cancel");
        let done = loop {
            let got = client
                .peer()
                .get_task(GetTaskParams::new(task_id.clone()))
                .await
                .expect("tasks/get");
            if got.task.status().is_terminal() {
                break got.task;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        assert!(matches!(done.payload, TaskPayload::Cancelled), "{done:?}");
        client.cancel().await.expect("close");
        harness
            .command(&["status", "--workspace", &ws, "--json"])
            .output()
    });
    let out = status.expect("autocode status");
    let status: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(status["pause"]["code"], "PAUSED_INTERRUPTED", "{status:#}");
}
