//! Following a run for a caller: `wait_run`'s loop, and `start_run` as an MCP Task (the Tasks
//! extension, `io.modelcontextprotocol/tasks`) for a client that declared it. The task is
//! `working` while the run works, its status message says which stage runs (or the pause), and
//! it completes when the run settles (paused or complete, nothing of this server working on
//! it) with what `wait_run` would answer; `tasks/cancel` stops the run as `stop_run` does (it
//! pauses `PAUSED_INTERRUPTED`) and the task ends `cancelled`. When the request carried a
//! progress token, each change of the run (a stage started, a pause, its completion) is a
//! progress notification with the same message.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateTaskResult, MetaObject,
    ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::task_manager::{TaskContext, TaskExit, TaskOptions};
use serde_json::json;

use super::launch::{self, Launched};
use super::{Server, StartRun, exec_argv, refusal, text, workspace_path};
use crate::ids::RunId;
use crate::run::state::RunState;

/// How often the run's state is read while following it.
const POLL: Duration = Duration::from_millis(250);
/// The polling interval a task suggests to its client.
const TASK_POLL_MS: u64 = 1000;

/// When following stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// At the first change after the first read (or at once on a settled run).
    Change,
    /// When the run pauses or completes and nothing of this server works on it.
    Settled,
}

/// Where progress notifications go: the requester's token on its peer.
pub struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    sent: u32,
}

impl Progress {
    /// The progress channel of a request, when it carried a progress token.
    pub fn of(context: &RequestContext<RoleServer>) -> Option<Progress> {
        Some(Progress {
            token: context.meta.get_progress_token()?,
            peer: context.peer.clone(),
            sent: 0,
        })
    }

    async fn send(&mut self, message: &str) {
        self.sent += 1;
        let param = ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent))
            .with_message(message);
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, "a progress notification was not delivered");
        }
    }
}

/// Who is told while a run is followed, and who may stop it.
pub struct Observer<'a> {
    /// The requester's progress channel.
    pub progress: Option<Progress>,
    /// Told each new line on where the run stands (the task's status message).
    pub on_change: &'a (dyn Fn(&str) + Send + Sync),
    /// Polled: once it says so, the run is sent SIGINT (once).
    pub stop: &'a (dyn Fn() -> bool + Send + Sync),
}

impl Observer<'_> {
    /// Nobody but the requester's progress channel.
    pub fn progress_only(progress: Option<Progress>) -> Observer<'static> {
        Observer {
            progress,
            on_change: &|_| {},
            stop: &|| false,
        }
    }
}

/// One line on where the run stands: its pause, its completion, or its running stage.
pub fn describe(state: &RunState) -> String {
    if state.completed_at.is_some() {
        return format!("run {} complete", state.run_id.as_str());
    }
    if let Some(pause) = &state.pause {
        return format!("run {} paused {}", state.run_id.as_str(), pause.code);
    }
    match state.attempts.last() {
        Some(attempt) if attempt.finished_at.is_none() => format!(
            "run {}: stage {} ({}) running",
            state.run_id.as_str(),
            attempt.dir,
            attempt.role
        ),
        Some(attempt) => format!(
            "run {}: stage {} ({}) ended",
            state.run_id.as_str(),
            attempt.dir,
            attempt.role
        ),
        None => format!("run {}: starting", state.run_id.as_str()),
    }
}

type Fingerprint = (String, Option<String>, bool, usize, usize);

fn fingerprint(state: &RunState) -> Fingerprint {
    (
        serde_json::to_string(&state.phase).unwrap_or_default(),
        state.pause.as_ref().map(|p| p.code.to_string()),
        state.completed_at.is_some(),
        state.attempts.len(),
        state
            .attempts
            .iter()
            .filter(|a| a.finished_at.is_some())
            .count(),
    )
}

impl Server {
    /// Follows run `id` until `until` or `deadline`, telling `observer` of each change; returns
    /// the run's status (`changed` says whether it changed).
    pub(super) async fn follow(
        &self,
        id: &RunId,
        ws: &Path,
        until: Until,
        deadline: Option<tokio::time::Instant>,
        observer: Observer<'_>,
    ) -> CallToolResult {
        let Observer {
            mut progress,
            on_change,
            stop,
        } = observer;
        let mut first: Option<Fingerprint> = None;
        let mut last: Option<Fingerprint> = None;
        let mut stopped = false;
        loop {
            if !stopped && stop() {
                stopped = true;
                if let Err(e) = self.interrupt(id.as_str()) {
                    tracing::warn!(run = id.as_str(), error = %e, "cannot stop the run");
                }
            }
            let working = self.children.pid(id.as_str()).is_some();
            let past = deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
            match self.state(ws, id).await {
                Ok((dir, state)) => {
                    let now = fingerprint(&state);
                    let settled =
                        !working && (state.pause.is_some() || state.completed_at.is_some());
                    if !settled
                        && !working
                        && let Some(ended) = self.children.ended(id.as_str())
                    {
                        // This server's autocode ended without settling the run: a failure.
                        return self.launched(Launched::Ended {
                            result: Box::new(ended),
                        });
                    }
                    if last.as_ref() != Some(&now) {
                        let line = describe(&state);
                        on_change(&line);
                        if last.is_some()
                            && let Some(progress) = progress.as_mut()
                        {
                            progress.send(&line).await;
                        }
                        last = Some(now.clone());
                    }
                    let changed = match &first {
                        None if settled => Some(false),
                        None => {
                            first = Some(now);
                            None
                        }
                        Some(_) if until == Until::Settled => settled.then_some(true),
                        Some(before) if *before != now => Some(true),
                        Some(_) => None,
                    };
                    if let Some(changed) = changed.or_else(|| past.then_some(false)) {
                        let mut value = self.status_value(&dir, &state);
                        value["changed"] = json!(changed);
                        return text(&value);
                    }
                }
                Err(e) if !working => return refusal(e),
                Err(_) if past => {
                    return text(&json!({"run_id": id, "standing": "starting", "changed": false}));
                }
                Err(_) => {}
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends the autocode working on `run` SIGINT (it pauses `PAUSED_INTERRUPTED`).
    pub(super) fn interrupt(&self, run: &str) -> Result<(), String> {
        let Some(pid) = self.children.pid(run) else {
            return Err(format!(
                "no autocode of this server works on run {run}; stop a run started elsewhere where it runs (Ctrl-C or SIGINT)"
            ));
        };
        let pid = i32::try_from(pid).map_err(|_| format!("pid {pid} is out of range"))?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGINT,
        )
        .map_err(|e| format!("cannot signal autocode {pid}: {e}"))
    }

    /// `start_run` for a client that declared the Tasks extension: the run is started (as the
    /// tool does) and, once under way, answered as a task that follows it.
    pub(super) async fn start_run_task(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let p: StartRun = serde_json::from_value(serde_json::Value::Object(
            request.arguments.clone().unwrap_or_default(),
        ))
        .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let ws: PathBuf = match workspace_path(&p.workspace) {
            Ok(ws) => ws,
            Err(e) => return Ok(refusal(e).into()),
        };
        let args = match exec_argv(p, &ws) {
            Ok(args) => args,
            Err(e) => return Ok(refusal(e).into()),
        };
        let run_id = match launch::launch(
            &self.exe,
            args,
            &ws,
            &self.children,
            launch::UnderWay::Opened,
        )
        .await
        {
            Err(e) => return Ok(refusal(e.to_string()).into()),
            Ok(Launched::UnderWay { run_id }) => run_id,
            // Ended before it was under way, or still starting: the plain answer.
            Ok(other) => return Ok(self.launched(other).into()),
        };
        let Ok(id) = RunId::new(run_id.as_str()) else {
            return Ok(refusal(format!("autocode named run {run_id:?}")).into());
        };
        let progress = Progress::of(&context);
        let server = self.clone();
        let task = self.tasks.spawn(
            TaskOptions::new()
                .with_ttl_ms(None)
                .with_poll_interval_ms(TASK_POLL_MS)
                .with_status_message(format!("run {run_id}: started")),
            move |ctx: TaskContext| {
                Box::pin(async move {
                    let message_ctx = ctx.clone();
                    let on_change = move |line: &str| message_ctx.set_status_message(line);
                    let stop = || ctx.is_cancel_requested();
                    let result = server
                        .follow(
                            &id,
                            &ws,
                            Until::Settled,
                            None,
                            Observer {
                                progress,
                                on_change: &on_change,
                                stop: &stop,
                            },
                        )
                        .await;
                    if ctx.is_cancel_requested() {
                        return Err(TaskExit::Cancelled);
                    }
                    Ok(result)
                })
            },
        );
        let mut meta = MetaObject::default();
        meta.0.insert("autocode/run_id".into(), json!(run_id));
        Ok(CallToolResponse::Task(
            CreateTaskResult::new(task).with_meta(meta),
        ))
    }
}
