//! `autocode mcp`: an MCP server (stdio, the official `rmcp` SDK) through which another agent
//! delegates objectives to autocode and a person's decisions reach a run.
//!
//! Observing tools read the run directory (the verified state, `crate::exec`'s lines):
//! `run_status`, `wait_run`, `run_events`, `list_runs`, `explain_pause`. Acting tools start the
//! same commands a person would type, as children of the server (`launch`): `start_run` is
//! `autocode exec`, the decisions (`answer_questions`, `approve_plan`, `review_criterion`,
//! `accept_test_changes`, `resume_run`) are `autocode resume --jsonl` with the CLI's flags,
//! `apply_run` is `autocode apply`, and `stop_run` sends the run's autocode SIGINT (it pauses
//! `PAUSED_INTERRUPTED`, as Ctrl-C does). A decision that was taken is recorded in the run's
//! activity log as made over MCP. `--read-only` offers only the observing tools. A client with
//! the Tasks extension gets `start_run` as a task that follows the run (`task`); the runs'
//! status, diff and reports are resources (`resources`).

pub mod launch;
pub mod params;
pub mod resources;
mod task;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetTaskParams, GetTaskResult, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::TaskManager;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde::Serialize;
use serde_json::{Value, json};

use crate::exec::follow::Follower;
use crate::exec::{PauseLine, ResultLine, Status};
use crate::ids::RunId;
use crate::pause::PauseCode;
use crate::run::state::RunState;
use launch::{Children, Launched};
pub use params::*;

/// The tools that only observe (all `--read-only` offers).
pub const OBSERVING_TOOLS: [&str; 5] = [
    "run_status",
    "wait_run",
    "run_events",
    "list_runs",
    "explain_pause",
];

/// The longest `wait_run` blocks.
const MAX_WAIT: Duration = Duration::from_secs(600);
/// How long a decision waits for the autocode that paused its run to exit.
const FINISHING: Duration = Duration::from_secs(30);
/// The most lines one `run_events` call returns.
const MAX_EVENTS: usize = 500;

#[derive(Clone)]
pub struct Server {
    exe: PathBuf,
    env: BTreeMap<String, String>,
    children: Children,
    /// The MCP Tasks of `start_run` calls that asked for one.
    tasks: TaskManager,
    /// Where runs are looked up for resources: the server's directory and every workspace a
    /// tool call named.
    workspaces: Arc<Mutex<BTreeSet<PathBuf>>>,
    tool_router: ToolRouter<Server>,
}

fn text(value: &impl Serialize) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(value).unwrap_or_default(),
    )])
}

fn refusal(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

fn run_id(run: &str) -> Result<RunId, String> {
    RunId::new(run).map_err(|e| format!("{run:?} is not a run id: {e}"))
}

fn workspace_path(workspace: &str) -> Result<PathBuf, String> {
    std::fs::canonicalize(workspace).map_err(|e| format!("workspace {workspace}: {e}"))
}

/// The run and its (canonical) workspace a tool names.
fn target(run: &str, workspace: &str) -> Result<(RunId, PathBuf), String> {
    Ok((run_id(run)?, workspace_path(workspace)?))
}

/// What a state says of where the run stands.
fn standing(state: &RunState, running_here: bool) -> &'static str {
    if state.completed_at.is_some() {
        "complete"
    } else if state.pause.is_some() {
        "paused"
    } else if running_here {
        "running"
    } else {
        // No pause and no end: an autocode works on it, or it was stopped mid-stage.
        "running_or_interrupted"
    }
}

impl Server {
    pub fn new(exe: PathBuf, env: BTreeMap<String, String>, read_only: bool) -> Server {
        let mut tool_router = Self::tool_router();
        if read_only {
            let acting: Vec<String> = tool_router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .filter(|name| !OBSERVING_TOOLS.contains(&name.as_str()))
                .collect();
            for name in acting {
                tool_router.remove_route(&name);
            }
        }
        let workspaces = std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .into_iter()
            .collect();
        Server {
            exe,
            env,
            children: Children::default(),
            tasks: TaskManager::new(),
            workspaces: Arc::new(Mutex::new(workspaces)),
            tool_router,
        }
    }

    async fn state(&self, workspace: &Path, run: &RunId) -> Result<(PathBuf, RunState), String> {
        let found = crate::run::find_run(workspace, Some(run), &self.env)
            .await
            .map_err(|e| e.to_string())?;
        Ok((found.dir, found.state))
    }

    /// The run a tool observes: the one named, or the workspace's most recent one.
    async fn observed(
        &self,
        run: Option<&str>,
        workspace: &str,
    ) -> Result<(RunId, PathBuf), String> {
        let ws = workspace_path(workspace)?;
        match run {
            Some(run) => Ok((run_id(run)?, ws)),
            None => match crate::run::find_run(&ws, None, &self.env).await {
                Ok(found) => Ok((found.state.run_id, ws)),
                // A run this server just started has no state yet: the newest of those.
                Err(e) => self
                    .children
                    .working_runs()
                    .into_iter()
                    .filter(|id| crate::run::runs_dir(&ws).join(id).is_dir())
                    .max()
                    .and_then(|id| RunId::new(id).ok())
                    .map(|id| (id, ws))
                    .ok_or_else(|| e.to_string()),
            },
        }
    }

    fn status_value(&self, dir: &Path, state: &RunState) -> Value {
        let running_here = self.children.pid(state.run_id.as_str()).is_some();
        let standing = standing(state, running_here);
        let pause = state.pause.as_ref().map(|p| PauseLine::of_state(state, p));
        let result = match standing {
            "complete" => Some(ResultLine::of_state(state, Status::Complete, None)),
            "paused" => Some(ResultLine::of_state(state, Status::Paused, None)),
            _ => None,
        };
        json!({
            "run_id": state.run_id,
            "standing": standing,
            "phase": state.phase,
            "objective": state.objective,
            "run_dir": dir,
            "work_tree": state.work_tree,
            "stages": state.attempts.len(),
            "usage": state.usage,
            "pause": pause,
            "result": result,
        })
    }

    /// Records a decision taken over MCP in the run's activity log.
    fn record_decision(&self, workspace: &Path, run: &RunId, decision: &str) {
        #[derive(Serialize)]
        struct Line<'a> {
            at: chrono::DateTime<chrono::Utc>,
            event: &'a str,
            detail: &'a str,
        }
        let path = crate::run::runs_dir(workspace)
            .join(run.as_str())
            .join("activity.jsonl");
        let line = Line {
            at: chrono::Utc::now(),
            event: "decision over MCP",
            detail: decision,
        };
        if let Err(e) =
            crate::store::append_json_line_as(&path, &line, crate::store::Durability::Now)
        {
            tracing::warn!(error = %e, "cannot record an MCP decision");
        }
    }

    /// Whether this server's autocode on a run that already paused ends within
    /// [`FINISHING`] (it records the pause before it exits): then a decision may follow.
    async fn finishing(&self, ws: &Path, id: &RunId) -> bool {
        let paused = matches!(self.state(ws, id).await, Ok((_, state)) if state.pause.is_some());
        if !paused {
            return false;
        }
        let deadline = tokio::time::Instant::now() + FINISHING;
        while self.children.pid(id.as_str()).is_some() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }

    /// `autocode resume RUN --workspace WS --jsonl EXTRA`, answered once under way or ended; a
    /// decision that was not refused is recorded.
    async fn resume_with(
        &self,
        run: &str,
        workspace: &str,
        extra: Vec<String>,
        decision: String,
    ) -> CallToolResult {
        let (id, ws) = match target(run, workspace) {
            Ok(target) => target,
            Err(e) => return refusal(e),
        };
        if self.children.pid(id.as_str()).is_some() && !self.finishing(&ws, &id).await {
            return refusal(format!(
                "run {id} is being worked on by this server's autocode; wait_run until it pauses"
            ));
        }
        let mut args: Vec<OsString> = vec![
            "resume".into(),
            id.as_str().into(),
            "--workspace".into(),
            ws.clone().into_os_string(),
            "--jsonl".into(),
        ];
        args.extend(extra.into_iter().map(OsString::from));
        let answer = self.launch(args, &ws, launch::UnderWay::StageStarted).await;
        let refused = answer.is_error == Some(true);
        if !refused {
            self.record_decision(&ws, &id, &decision);
        }
        answer
    }

    async fn launch(
        &self,
        args: Vec<OsString>,
        cwd: &Path,
        under_way: launch::UnderWay,
    ) -> CallToolResult {
        match launch::launch(&self.exe, args, cwd, &self.children, under_way).await {
            Err(e) => refusal(e.to_string()),
            Ok(launched) => self.launched(launched),
        }
    }

    /// The answer to a launch: the run under way, still starting, or how it ended.
    fn launched(&self, launched: Launched) -> CallToolResult {
        match launched {
            Launched::UnderWay { run_id } => text(&json!({
                "run_id": run_id,
                "standing": "running",
                "next": "wait_run until it pauses or completes",
            })),
            Launched::Starting => text(&json!({
                "standing": "starting",
                "next": "list_runs shows the run once it exists; then wait_run",
            })),
            Launched::Ended { result } => match result.status {
                Status::Failed | Status::Refused => CallToolResult::error(vec![
                    ContentBlock::text(
                        result.error.clone().unwrap_or_else(|| "refused".to_owned()),
                    ),
                    ContentBlock::text(serde_json::to_string_pretty(&result).unwrap_or_default()),
                ]),
                Status::Complete | Status::Paused => text(&result),
            },
        }
    }
}

/// `autocode exec` for `p`: every value attached to its flag (`--name=value`) and the objective
/// after `--`, so nothing a caller sends can be read as another flag.
fn exec_argv(p: StartRun, ws: &Path) -> Result<Vec<OsString>, String> {
    let mut args: Vec<OsString> = vec!["exec".into(), "--workspace".into(), ws.into()];
    let mut flag = |name: &str, value: String| args.push(format!("--{name}={value}").into());
    if let Some(provider) = p.provider {
        flag("provider", provider);
    }
    for (role, model) in p.models.unwrap_or_default() {
        let name = match role.as_str() {
            "requirements" | "planner" | "plan_reviewer" | "builder" | "tester" | "resolver" => {
                format!("{}-model", role.replace('_', "-"))
            }
            "completion" | "completion_reviewer" => "completion-model".to_owned(),
            other => return Err(format!("no role {other:?} to give a model")),
        };
        flag(&name, model);
    }
    if let Some(v) = p.max_usd {
        flag("max-usd", v.to_string());
    }
    if let Some(v) = p.max_minutes {
        flag("max-minutes", v.to_string());
    }
    if let Some(v) = p.max_tokens {
        flag("max-tokens", v.to_string());
    }
    if p.yes == Some(true) {
        args.push("--yes".into());
    }
    args.push("--".into());
    args.push(p.objective.into());
    Ok(args)
}

#[tool_router]
impl Server {
    #[tool(
        description = "Start an autocode run on an objective (autocode exec). Returns the run id once the run is under way (or how it ended, e.g. a pause for questions); then call wait_run."
    )]
    async fn start_run(&self, Parameters(p): Parameters<StartRun>) -> CallToolResult {
        let ws = match workspace_path(&p.workspace) {
            Ok(ws) => ws,
            Err(e) => return refusal(e),
        };
        match exec_argv(p, &ws) {
            Ok(args) => self.launch(args, &ws, launch::UnderWay::Opened).await,
            Err(e) => refusal(e),
        }
    }

    #[tool(
        description = "Where a run stands: running, paused (with what it asks and the decision that continues it) or complete (with its verified criteria and branch)."
    )]
    async fn run_status(&self, Parameters(p): Parameters<Observed>) -> CallToolResult {
        let (id, ws) = match self.observed(p.run.as_deref(), &p.workspace).await {
            Ok(target) => target,
            Err(e) => return refusal(e),
        };
        match self.state(&ws, &id).await {
            Ok((dir, state)) => text(&self.status_value(&dir, &state)),
            Err(_) if self.children.pid(id.as_str()).is_some() => {
                text(&json!({"run_id": id, "standing": "starting"}))
            }
            Err(e) => refusal(e),
        }
    }

    #[tool(
        description = "Wait until the run changes (a stage, a pause, its completion) or, with settled, until it pauses or completes; or until the timeout passes. Returns its status; at once when nothing works on a paused or complete run."
    )]
    async fn wait_run(
        &self,
        Parameters(p): Parameters<WaitRun>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let until = if p.settled == Some(true) {
            task::Until::Settled
        } else {
            task::Until::Change
        };
        let (id, ws) = match self.observed(p.run.as_deref(), &p.workspace).await {
            Ok(target) => target,
            Err(e) => return refusal(e),
        };
        let timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(50)).min(MAX_WAIT);
        let deadline = tokio::time::Instant::now() + timeout;
        self.follow(
            &id,
            &ws,
            until,
            Some(deadline),
            task::Observer::progress_only(task::Progress::of(&context)),
        )
        .await
    }

    #[tool(
        description = "The run's autocode-exec/1 event lines (stage starts and ends, commands with the exec ledger's verdicts, activity) from a cursor; pass next_cursor to the next call."
    )]
    async fn run_events(&self, Parameters(p): Parameters<RunEvents>) -> CallToolResult {
        let (id, ws) = match self.observed(p.run.as_deref(), &p.workspace).await {
            Ok(target) => target,
            Err(e) => return refusal(e),
        };
        let dir = crate::run::runs_dir(&ws).join(id.as_str());
        if !dir.is_dir() {
            return refusal(format!("no run {id} in {}", ws.display()));
        }
        let cursor = usize::try_from(p.cursor.unwrap_or(0)).unwrap_or(usize::MAX);
        let mut follower = Follower::new(dir);
        let mut lines = Vec::new();
        let mut seen = 0usize;
        follower.poll(&mut |line| {
            if seen >= cursor && lines.len() < MAX_EVENTS {
                lines.push(line);
            }
            seen += 1;
        });
        let next = cursor.min(seen) + lines.len();
        text(&json!({
            "lines": lines,
            "next_cursor": next,
            "more": next < seen,
        }))
    }

    #[tool(description = "The runs of a workspace, newest first, with where each stands.")]
    async fn list_runs(&self, Parameters(p): Parameters<ListRuns>) -> CallToolResult {
        let ws = match workspace_path(&p.workspace) {
            Ok(ws) => ws,
            Err(e) => return refusal(e),
        };
        let mut runs = Vec::new();
        for id in run_ids(&ws) {
            if let Ok((_, state)) = self.state(&ws, &id).await {
                let running_here = self.children.pid(id.as_str()).is_some();
                runs.push(json!({
                    "run_id": state.run_id,
                    "standing": standing(&state, running_here),
                    "pause_code": state.pause.as_ref().map(|p| p.code),
                    "objective": state.objective.lines().next().unwrap_or_default(),
                    "updated_at": state.updated_at,
                }));
            }
        }
        runs.sort_by(|a, b| b["updated_at"].as_str().cmp(&a["updated_at"].as_str()));
        text(&json!({ "runs": runs }))
    }

    #[tool(
        description = "What a pause means and what continues it: give a pause code, or a run and its workspace."
    )]
    async fn explain_pause(&self, Parameters(p): Parameters<ExplainPause>) -> CallToolResult {
        if let (Some(run), Some(workspace)) = (&p.run, &p.workspace) {
            let (id, ws) = match target(run, workspace) {
                Ok(target) => target,
                Err(e) => return refusal(e),
            };
            return match self.state(&ws, &id).await {
                Ok((_, state)) => match &state.pause {
                    Some(pause) => {
                        let mut value = json!(PauseLine::of_state(&state, pause));
                        value["explanation"] = json!(pause.code.explanation());
                        text(&value)
                    }
                    None => refusal(format!("run {id} is not paused")),
                },
                Err(e) => refusal(e),
            };
        }
        let Some(code) = p.code else {
            return refusal("give a pause code, or a run and its workspace");
        };
        match PauseCode::ALL.iter().find(|c| c.as_str() == code.trim()) {
            Some(code) => text(&json!({
                "code": code,
                "explanation": code.explanation(),
                "next": code.next_step(),
            })),
            None => refusal(format!("{code:?} is not a pause code")),
        }
    }

    #[tool(
        description = "Answer a run's open questions (WAITING_FOR_USER) and continue it (autocode resume --answer ID=TEXT)."
    )]
    async fn answer_questions(&self, Parameters(p): Parameters<AnswerQuestions>) -> CallToolResult {
        if p.answers.is_empty() {
            return refusal("no answers given");
        }
        let mut extra = Vec::new();
        for (id, answer) in &p.answers {
            extra.push(format!("--answer={id}={answer}"));
        }
        let ids: Vec<&str> = p.answers.keys().map(String::as_str).collect();
        let decision = format!("answer_questions {}", ids.join(", "));
        self.resume_with(&p.run, &p.workspace, extra, decision)
            .await
    }

    #[tool(
        description = "Approve the exact plan revision whose token you were shown (AWAITING_PLAN_APPROVAL) and continue the run."
    )]
    async fn approve_plan(&self, Parameters(p): Parameters<ApprovePlan>) -> CallToolResult {
        let decision = format!("approve_plan {}", p.token);
        self.resume_with(
            &p.run,
            &p.workspace,
            vec![format!("--approve-plan={}", p.token)],
            decision,
        )
        .await
    }

    #[tool(
        description = "Accept or reject (with a reason) a criterion waiting for a person (AWAITING_HUMAN_REVIEW), and continue the run."
    )]
    async fn review_criterion(&self, Parameters(p): Parameters<ReviewCriterion>) -> CallToolResult {
        let (extra, decision) = if p.accept {
            (
                vec![format!("--accept={}", p.criterion)],
                format!("review_criterion accept {}", p.criterion),
            )
        } else {
            let Some(reason) = p.reason.filter(|r| !r.trim().is_empty()) else {
                return refusal("a rejection needs a reason");
            };
            (
                vec![
                    format!("--reject={}", p.criterion),
                    format!("--because={reason}"),
                ],
                format!("review_criterion reject {}", p.criterion),
            )
        };
        self.resume_with(&p.run, &p.workspace, extra, decision)
            .await
    }

    #[tool(
        description = "Accept the builder's changes to existing tests (AWAITING_TEST_CHANGE_REVIEW) and continue the run."
    )]
    async fn accept_test_changes(&self, Parameters(p): Parameters<RunRef>) -> CallToolResult {
        self.resume_with(
            &p.run,
            &p.workspace,
            vec!["--accept-test-changes".into()],
            "accept_test_changes".into(),
        )
        .await
    }

    #[tool(
        description = "Continue a paused or interrupted run (autocode resume), optionally waiting for a rate limit's reset or setting an attempt aside."
    )]
    async fn resume_run(&self, Parameters(p): Parameters<ResumeRun>) -> CallToolResult {
        let mut extra = Vec::new();
        if p.wait == Some(true) {
            extra.push("--wait".to_owned());
        }
        if let Some(stage) = &p.abandon_stage {
            extra.push(format!("--abandon-stage={stage}"));
        }
        if p.accept_transport_change == Some(true) {
            extra.push("--accept-transport-change".to_owned());
        }
        let decision = format!("resume_run {}", extra.join(" "));
        self.resume_with(&p.run, &p.workspace, extra, decision.trim_end().to_owned())
            .await
    }

    #[tool(
        description = "Stop a run this server's autocode is working on: its running attempt ends and the run pauses PAUSED_INTERRUPTED (resume_run continues it)."
    )]
    async fn stop_run(&self, Parameters(p): Parameters<RunRef>) -> CallToolResult {
        let (id, ws) = match target(&p.run, &p.workspace) {
            Ok(target) => target,
            Err(e) => return refusal(e),
        };
        match self.interrupt(id.as_str()) {
            Ok(()) => {
                self.record_decision(&ws, &id, "stop_run");
                text(&json!({"run_id": id, "stopping": true, "next": "wait_run"}))
            }
            Err(e) => refusal(e),
        }
    }

    #[tool(
        description = "Take a completed run's result (its branch) into the user's current branch (autocode apply), as a merge or one squashed commit."
    )]
    async fn apply_run(&self, Parameters(p): Parameters<ApplyRun>) -> CallToolResult {
        let (id, ws) = match target(&p.run, &p.workspace) {
            Ok(target) => target,
            Err(e) => return refusal(e),
        };
        let mut args: Vec<OsString> = vec![
            "apply".into(),
            id.as_str().into(),
            "--workspace".into(),
            ws.clone().into_os_string(),
            "--json".into(),
        ];
        if p.squash == Some(true) {
            args.push("--squash".into());
        }
        match launch::run_to_end(&self.exe, args, &ws).await {
            Err(e) => refusal(e.to_string()),
            Ok((stdout, _, Some(0))) => {
                self.record_decision(
                    &ws,
                    &id,
                    if p.squash == Some(true) {
                        "apply_run --squash"
                    } else {
                        "apply_run"
                    },
                );
                CallToolResult::success(vec![ContentBlock::text(stdout)])
            }
            Ok((stdout, stderr, code)) => CallToolResult::error(vec![ContentBlock::text(format!(
                "autocode apply exited {code:?}: {}{}",
                stderr.trim(),
                if stdout.trim().is_empty() {
                    String::new()
                } else {
                    format!("\n{}", stdout.trim())
                }
            ))]),
        }
    }
}

#[cfg(test)]
mod tests;

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(ws) = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("workspace"))
            .and_then(Value::as_str)
            .and_then(|ws| std::fs::canonicalize(ws).ok())
            && let Ok(mut known) = self.workspaces.lock()
        {
            known.insert(ws);
        }
        let tasks = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        if tasks && request.name == "start_run" && self.tool_router.has_route("start_run") {
            return self.start_run_task(request, context).await;
        }
        self.tool_router
            .call(ToolCallContext::new(self, request, context))
            .await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(self.run_resources().await)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.read_run_resource(&request.uri)
            .await
            .map(|result| result.into())
            .map_err(|e| McpError::resource_not_found(e.to_string(), None))
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_tasks()
                .build(),
        )
        .with_instructions(
            "autocode takes an objective through a checked pipeline of agents (requirements, plan, review, build, test, completion review) and returns a verified result on a git branch. start_run, then wait_run until it pauses or completes (a client with the Tasks extension gets start_run as a task that follows the run); a pause says what it asks and which decision tool continues it; apply_run takes a completed result. Resources autocode://run/<id>/status, /diff and /report/<stage> show a run's state, its branch's diff and its stages' checked reports.",
        )
    }
}

/// Serves MCP on stdin/stdout until the client closes the connection.
pub async fn serve(server: Server) -> Result<(), String> {
    use rmcp::ServiceExt;
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| e.to_string())?;
    running.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// The ids of the runs a workspace holds (entries that are not run ids are skipped).
fn run_ids(ws: &std::path::Path) -> Vec<RunId> {
    std::fs::read_dir(crate::run::runs_dir(ws))
        .map(|rd| {
            rd.flatten()
                .filter_map(|entry| entry.file_name().to_str().and_then(|n| RunId::new(n).ok()))
                .collect()
        })
        .unwrap_or_default()
}
