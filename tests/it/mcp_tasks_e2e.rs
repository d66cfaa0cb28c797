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

        // Progress: a notification per change the server's 250 ms reads of the run see, the
        // builder's stage (running, or already ended when it took less than a read's interval)
        // and the completion among them.
        let seen = progress.lock().expect("progress").clone();
        assert!(
            seen.iter()
                .any(|m| m.contains("(builder) running") || m.contains("(builder) ended")),
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

    let harness = Harness::new(Value::Null);
    let wait = harness.wait_for_gate();
    harness.set_script(script_with(&[(
        "builder",
        json!([[{"run": wait}, {"run": BUILD}, {"run": CHECK}, build_report()]]),
    )]));
    let ws = fs::canonicalize(harness.workspace())
        .expect("workspace")
        .display()
        .to_string();
    let runtime = runtime();
    let run = runtime.block_on(async {
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
    // Nothing the client left behind may hold the test up.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    harness.open_gate();
    // `events --follow` returns once no autocode works on the run: its last line says how the
    // run ended. Bounded, so a run that never ends fails here with what it left instead of
    // holding the suite.
    let follow = harness
        .command(&["events", "--follow", &run, "--workspace", &ws, "--jsonl"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("events --follow");
    let (out, finished) = output_within(follow, FOLLOW_LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let context = format!(
        "events --follow {}: {}\nstdout:\n{stdout}\nstderr:\n{}\nthe run left:\n{}",
        if finished { "ended" } else { "was stopped" },
        out.status,
        String::from_utf8_lossy(&out.stderr),
        run_dir_summary(&harness.workspace(), &run),
    );
    assert!(finished, "{context}");
    let last: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("a result line: {context}"));
    assert_eq!(last["type"], "result", "{context}");
    assert_eq!(last["status"], "complete", "{context}");
    assert_eq!(out.status.code(), Some(0), "{context}");
}

/// How long the killed server's run may take to finish once its builder's gate opens (it takes
/// about a second).
const FOLLOW_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

/// The child's output once it ends, or once `limit` passed (then it is killed first): `true`
/// when it ended by itself.
fn output_within(
    child: std::process::Child,
    limit: std::time::Duration,
) -> (std::process::Output, bool) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let timed_out = ended.recv_timeout(limit).is_err();
        if timed_out {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        timed_out
    });
    let out = child.wait_with_output().expect("wait for the child");
    let _ = done.send(());
    let timed_out = watchdog.join().expect("watchdog");
    (out, !timed_out)
}

/// The run directory's record of what happened, for a failure message: its attempts, its
/// activity, and the last lines of each stage's stderr.
fn run_dir_summary(workspace: &std::path::Path, run: &str) -> String {
    let dir = workspace.join(".autocode/runs").join(run);
    let mut text = String::new();
    for name in ["attempts.jsonl", "activity.jsonl"] {
        let body = fs::read_to_string(dir.join(name)).unwrap_or_else(|e| format!("({e})"));
        text.push_str(&format!("--- {name}\n{body}\n"));
    }
    if let Ok(stages) = fs::read_dir(dir.join("stages")) {
        for stage in stages.flatten() {
            for log in ["stderr.log", "events.jsonl"] {
                let body = fs::read_to_string(stage.path().join(log)).unwrap_or_default();
                let tail: Vec<&str> = body.lines().rev().take(12).collect();
                text.push_str(&format!(
                    "--- {}/{log} (last lines, newest first)\n",
                    stage.file_name().to_string_lossy()
                ));
                for line in tail {
                    text.push_str(&line.chars().take(400).collect::<String>());
                    text.push('\n');
                }
            }
        }
    }
    // The processes still alive, to tell a run that waits from one that is gone.
    if let Ok(ps) = Command::new("ps")
        .args(["-eo", "pid,ppid,pgid,sid,stat,etime,args"])
        .output()
    {
        text.push_str("--- ps\n");
        text.push_str(&String::from_utf8_lossy(&ps.stdout));
    }
    text
}

/// `tasks/cancel` stops the run the task follows as `stop_run` does: the run pauses
/// `PAUSED_INTERRUPTED` (resumable) and the task ends `cancelled`.
#[test]
fn cancelling_the_task_pauses_the_run_resumably() {
    let harness = Harness::new(Value::Null);
    let wait = harness.wait_for_gate();
    harness.set_script(script_with(&[(
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
