//! One attempt on autocode's own runtime (`--provider autocode`, `src/direct/`): the same
//! places, room, records and judgement as a CLI's attempt (`attempt`), but the model loop runs in
//! autocode's process and only the model's shell commands run under the boundary, one
//! supervised family per command, in the stage's room.
//!
//! What differs from a CLI attempt, and why it is stronger evidence: the command events are
//! autocode's own (it ran each command and saw its exit code), held in memory and judged from
//! there; `events.jsonl` is a record of them, never read back. No command can write into the
//! stream, so a forged command event has nothing to forge. The endpoint's key stays in
//! autocode's memory: the direct-connections directory is unreadable in the room, the key is in
//! no environment and no launch record.

mod pause;

use std::time::{Duration, Instant};

use serde_json::json;

use super::CliRunner;
use super::attempt::StagePlaces;
use super::foreign;
use super::judge::{command_records, judge_report, usage_totals};
use crate::direct::connections::{self, Connections};
use crate::direct::http::Client;
use crate::direct::runtime::{self, Bounds, StageEnd, StageInput};
use crate::direct::tools::ShellContext;
use crate::events::FinalReport;
use crate::pause::PauseCode;
use crate::run::confine::{self, GitLink, WorktreeAccess};
use crate::run::integrity;
use crate::run::stage_runner::{AttemptContext, AttemptOutcome, AttemptResult};
use crate::run::state::{RunState, Usage};
use crate::store;

pub use pause::pause_for;

/// What the runtime tells every model before the stage's prompt.
pub const SYSTEM_PROMPT: &str = "You are one stage of autocode's pipeline, working through tools that autocode runs for you. \
Use `shell` to run commands (each result gives the command's event id and exit code), `read_file` to read files and, when offered, `write_file` to write them. \
When the stage asks for a final JSON report, do not write it as text: call the `report` tool once with the report as its arguments. \
Cite a command you ran as {\"command\": <its exact text>, \"exit_code\": <its exit code>, \"evidence_ref\": <its event id, e.g. \"event:ac-1\">}.";

/// The time limit of a stage on a local (loopback) endpoint when the run sets none: a small
/// model on a CPU can otherwise ramble for as long as its server lets it.
pub const LOCAL_STAGE_TIMEOUT: Duration = Duration::from_secs(600);

/// What the endpoint offers to steer the model (`runtime::Steering`): a tool call is always
/// required; a local server is asked (GET requests, no model request) for the context it runs
/// with and whether it constrains an answer to a schema. A server that does not say gets neither.
async fn steering_for(
    endpoint: &connections::Endpoint,
    model: &str,
    client: &Client,
    local: bool,
) -> runtime::Steering {
    let mut steering = runtime::Steering {
        require_tool: true,
        ..runtime::Steering::default()
    };
    if !local {
        return steering;
    }
    let (endpoint, model, client) = (endpoint.clone(), model.to_owned(), client.clone());
    let metadata = tokio::task::spawn_blocking(move || {
        crate::direct::preflight::metadata(
            &client,
            &crate::direct::preflight::PreflightInput {
                endpoint: &endpoint,
                model: &model,
                needed_context: crate::direct::preflight::STAGE_CONTEXT,
                canary_tokens: crate::direct::preflight::CANARY_TOKENS,
                marker: "",
            },
        )
    })
    .await;
    if let Ok(metadata) = metadata {
        steering.answer_schema = metadata.constrains_answers();
        steering.context = metadata.context;
    }
    steering
}

impl CliRunner {
    /// The direct connections of autocode's environment (never a project file).
    pub(super) fn direct_connections(&self) -> Result<Connections, connections::ConnectionsError> {
        let dir = connections::dir_from_env(|k| self.env.get(k).cloned())?;
        Connections::load(&dir)
    }

    /// The direct runtime's transport identity: every configured endpoint's kind, URL, protocol
    /// and models (never a key), so a changed endpoint, model or protocol is a transport change
    /// for a saved run; rotating a key is not.
    pub(super) fn direct_identity(&self) -> serde_json::Value {
        match self.direct_connections() {
            Ok(c) => json!({
                "runtime": "autocode direct",
                "endpoints": c.file.endpoints.iter().map(|e| e.identity()).collect::<Vec<_>>(),
            }),
            Err(e) => json!({"runtime": "autocode direct", "error": e.to_string()}),
        }
    }

    pub(super) async fn direct_attempt(
        &mut self,
        state: &RunState,
        ctx: &AttemptContext,
    ) -> AttemptOutcome {
        let started = Instant::now();
        let stopped = |code, reason: String| AttemptOutcome {
            session: None,
            usage: Usage::default(),
            duration: Duration::ZERO,
            result: AttemptResult::Stopped {
                code,
                reason,
                retryable_transport: false,
                resume_after: None,
            },
        };
        let dir = &ctx.stage_dir;
        if let Err(e) = std::fs::create_dir_all(dir) {
            return stopped(
                PauseCode::PausedProviderUncertain,
                format!("cannot create {}: {e}", dir.display()),
            );
        }
        let _ = store::write_atomic(&dir.join("prompt.md"), ctx.prompt.as_bytes());
        let route = ctx.record.route.clone();
        let Some(provider) = self.provider(&route.provider).cloned() else {
            return stopped(
                PauseCode::PausedTransportChanged,
                format!("provider {} is no longer available", route.provider),
            );
        };
        // The endpoint, its key and a client: any problem is a setup problem, before any launch.
        let setup = self.direct_connections().and_then(|c| {
            let resolved = c.resolve(&route.model)?;
            let auth = c.auth(&resolved.endpoint)?;
            let client = Client::new(&resolved.endpoint.base_url, auth)?;
            Ok((c, resolved, client))
        });
        let (connections, resolved, client) = match setup {
            Ok(found) => found,
            Err(e) => {
                return stopped(
                    PauseCode::PausedProviderUncertain,
                    format!("direct connection for `{}`: {e}", route.model),
                );
            }
        };
        let check_env = self.check_env();
        let copy_root = match self.tester_copy_root() {
            Ok(root) => root,
            Err(e) => {
                return stopped(
                    PauseCode::PausedProviderUncertain,
                    format!("cannot prepare the tester's copy folder: {e}"),
                );
            }
        };
        // Everything but the builder must leave the source as it found it; the tester works
        // in its copy.
        let (before, tester_tree) = match self
            .before_stage(state, ctx.plan.role, dir, &check_env, false)
            .await
        {
            Ok(prepared) => prepared,
            Err(message) => return stopped(PauseCode::PausedProviderUncertain, message),
        };
        let places =
            match StagePlaces::prepare(state, ctx, &check_env, &copy_root, tester_tree).await {
                Ok(places) => places,
                Err(e) => {
                    return stopped(
                        PauseCode::PausedProviderUncertain,
                        format!("cannot prepare the stage's room: {e}"),
                    );
                }
            };
        let cwd = places.cwd(&state.work_tree);
        let mut env = self.agent_env(Some(&provider));
        env.kept.insert(
            "TMPDIR".into(),
            places.tmpdir.path().to_string_lossy().into_owned(),
        );
        let layers = if state.unconfined {
            None
        } else {
            match confine::StageLayers::new(
                &state.run_dir(),
                ctx.plan.role,
                &env.kept,
                &[&state.workspace, &state.work_tree, &state.run_dir()],
            )
            .and_then(|mut layers| {
                layers.add_git_scratch(ctx.plan.role, &state.work_tree, &state.isolation)?;
                Ok(layers)
            }) {
                Ok(layers) => Some(layers),
                Err(e) => {
                    return stopped(
                        PauseCode::PausedProviderUncertain,
                        format!("cannot prepare the stage's private layers: {e}"),
                    );
                }
            }
        };
        let room_input = confine::StageRoomInput {
            role: ctx.plan.role,
            work_tree: &state.work_tree,
            isolation: &state.isolation,
            cwd: &cwd,
            tmpdir: places.tmpdir.path(),
            outbox: &places.outbox,
            overlay: places.overlay.as_ref(),
            provider_templates: &[],
            allow_connect: &[],
            env: &env.kept,
            workspace: &state.workspace,
            layers: layers.as_ref().map(|l| l.overlays()).unwrap_or_default(),
        };
        let (mut room, mut room_record) = confine::stage_room(&room_input, !state.unconfined);
        // The keys' directory is never readable from the room.
        if let Some(room) = room.as_mut()
            && connections.dir().exists()
        {
            room.unreadable.push(connections.dir().to_owned());
            room_record.unreadable.push(connections.dir().to_owned());
        }
        let _ = integrity::write_record(&dir.join("room.json"), &room_record);
        let bounds = Bounds {
            max_output_tokens: resolved.endpoint.output_cap(),
            ..Bounds::default()
        };
        let local = crate::direct::readiness::is_local(&resolved.endpoint);
        let steering = steering_for(&resolved.endpoint, &resolved.model.id, &client, local).await;
        // A local model's stage is bounded in time even when the run sets no limit.
        let stage_limit = ctx.limits.timeout.or(local.then_some(LOCAL_STAGE_TIMEOUT));
        let _ = integrity::write_record(
            &dir.join("launch.json"),
            &json!({
                "runtime": "autocode direct",
                "endpoint": resolved.endpoint.identity(),
                "model": resolved.model.id,
                "shell": ["sh", "-c", "COMMAND"],
                "cwd": cwd,
                "env_names": env.kept.keys().collect::<Vec<_>>(),
                "withheld_env": env.withheld,
                "output_token_cap": bounds.max_output_tokens,
                "steering": {
                    "require_tool": steering.require_tool,
                    "answer_schema": steering.answer_schema,
                    "server_context": steering.context,
                },
                "stage_limit_secs": stage_limit.map(|d| d.as_secs()),
                "bounds": {
                    "max_responses": bounds.max_responses,
                    "max_calls_per_response": bounds.max_calls_per_response,
                    "tool_timeout_secs": bounds.tool_timeout.as_secs(),
                    "http_read_timeout_secs": crate::direct::http::READ_TIMEOUT.as_secs(),
                },
                "transport_identity": state.transport_identities.get(route.provider.as_str()),
                "room": room_record,
            }),
        );
        let git_link = GitLink::read(&state.work_tree);
        let access = WorktreeAccess::for_role(ctx.plan.role);
        // What another process writes in the work tree meanwhile is not the builder's work
        // (`super::foreign`; autocode's own `write_file` is left out by pid).
        let watch = (ctx.plan.role == crate::role::Role::Builder)
            .then(|| foreign::start(&state.work_tree, room.as_ref()));
        let input = StageInput {
            client,
            protocol: resolved.endpoint.protocol,
            token_field: resolved.endpoint.token_field,
            stream: resolved.endpoint.stream,
            model: resolved.model.id.clone(),
            system: SYSTEM_PROMPT.to_owned(),
            prompt: ctx.prompt.clone(),
            kind: ctx.plan.kind,
            quotable: quotable(ctx.plan.kind, state),
            writable: access != WorktreeAccess::ReadOnly,
            root: cwd.clone(),
            shell: ShellContext {
                cwd: cwd.clone(),
                env: env.kept.clone(),
                room,
                timeout: bounds.tool_timeout,
            },
            bounds,
            steering,
            tokens_left: ctx.limits.tokens_left,
            events_log: dir.join("events.jsonl"),
            label: format!("stage {}", ctx.record.dir),
        };
        let run = match stage_limit {
            Some(limit) => tokio::time::timeout(limit, runtime::run_stage(input))
                .await
                .ok(),
            None => Some(runtime::run_stage(input).await),
        };
        let attribution = watch.map(foreign::Attribution::of);
        drop(places);
        drop(layers);
        let Some(run) = run else {
            // The loop was dropped mid-stage: what it spent is in the events it had written.
            let spent = runtime::usage_in_events_log(&dir.join("events.jsonl"));
            let usage = usage_totals(&spent, &resolved.model.id, &self.catalogue());
            let _ = integrity::write_record(&dir.join("usage.json"), &usage);
            return self.finish_record(
                dir,
                AttemptOutcome {
                    session: None,
                    usage,
                    duration: started.elapsed(),
                    result: AttemptResult::Stopped {
                        code: ctx.limits.timeout_code,
                        reason: format!("{} ran out of time and was stopped", ctx.record.dir),
                        retryable_transport: false,
                        resume_after: None,
                    },
                },
                None,
                None,
            );
        };
        // What the room refused the commands autocode ran for the model (`run::room_refusal`).
        let mut failed_commands = Vec::new();
        for event in &run.events {
            super::attempt::keep_failed_command(&mut failed_commands, event);
        }
        let room_refused = super::attempt::record_room_refusals(
            dir,
            &ctx.record.dir,
            &failed_commands,
            &room_record,
        );
        let room_refused = room_refused.as_deref();
        // The boundary's word on every command autocode ran for the model.
        let receipts: Vec<serde_json::Value> = run
            .receipts
            .iter()
            .map(|(id, receipt)| json!({"evidence_id": id, "receipt": receipt}))
            .collect();
        let _ =
            integrity::write_record(&dir.join("commands.json"), &json!({ "commands": receipts }));
        let usage = usage_totals(&run.usage, &resolved.model.id, &self.catalogue());
        let _ = integrity::write_record(&dir.join("usage.json"), &usage);
        let mut out = AttemptOutcome {
            session: None,
            usage,
            duration: started.elapsed(),
            result: AttemptResult::Rejected {
                problems: vec![],
                shell_command: None,
            },
        };
        let stop_with = |code: PauseCode, reason: String| AttemptResult::Stopped {
            code,
            reason,
            retryable_transport: false,
            resume_after: None,
        };
        if let Some(reason) =
            git_link.restore_after(&state.work_tree, ctx.plan.role, &dir.join("quarantine"))
        {
            out.result = stop_with(PauseCode::PausedDiscoveryWrite, reason);
            return self.finish_record(dir, out, room_refused, None);
        }
        let foreign_edit = match attribution {
            Some(a) => foreign::judge(state, a, dir, &check_env).await,
            None => None,
        };
        if let Some(reason) = foreign_edit {
            out.result = stop_with(PauseCode::PausedForeignEdit, reason);
            return self.finish_record(dir, out, room_refused, None);
        }
        let report = match run.end {
            StageEnd::Failed(failure) => {
                let mapped = pause_for(&failure, chrono::Utc::now());
                out.result = AttemptResult::Stopped {
                    code: mapped.code,
                    reason: format!(
                        "{} ({} via {}): {failure}",
                        resolved.endpoint.name,
                        resolved.model.id,
                        resolved.endpoint.protocol.as_str()
                    ),
                    retryable_transport: mapped.retryable_transport,
                    resume_after: mapped.resume_after,
                };
                return self.finish_record(dir, out, room_refused, None);
            }
            StageEnd::NoReport(reason) => Err((reason, None)),
            StageEnd::ShellCommand { problem, command } => Err((problem, Some(command))),
            StageEnd::Reported(report) => Ok(report),
        };
        if let Some(before) = &before
            && let Some((code, message)) = self
                .changed_since(state, ctx.plan.role, before, dir, &check_env)
                .await
        {
            out.result = stop_with(code, message);
            return self.finish_record(dir, out, room_refused, None);
        }
        let report = match report {
            Ok(report) => report,
            Err((reason, shell_command)) => {
                out.result = AttemptResult::Rejected {
                    problems: vec![reason],
                    shell_command,
                };
                return self.finish_record(dir, out, room_refused, None);
            }
        };
        // The evidence: autocode's own command events, from memory.
        let records = command_records(&run.events);
        out.result = match judge_report(
            ctx.plan.kind,
            Some(&FinalReport::Structured(report)),
            &records,
            None,
            None,
            Some(&dir.join("evidence.json")),
        ) {
            Ok(report) => {
                let _ = integrity::write_record(&dir.join("report.json"), &report);
                AttemptResult::Report(report)
            }
            Err(rejection) => rejection,
        };
        self.finish_record(dir, out, room_refused, None)
    }
}

/// What the stage's report may quote, for the fields that must quote it (the lists its prompt
/// shows).
fn quotable(
    kind: crate::report::ReportKind,
    state: &crate::run::state::RunState,
) -> runtime::Quotable {
    use crate::report::ReportKind;
    use crate::verify::objective::{self, CommandRole};
    match kind {
        ReportKind::Requirements => runtime::Quotable {
            objective_units: objective::units(&state.objective),
            commands: state
                .verification
                .objective_commands
                .iter()
                .filter(|c| matches!(c.role, CommandRole::RequiredCheck | CommandRole::Setup))
                .map(|c| c.command.clone())
                .collect(),
            ..runtime::Quotable::default()
        },
        ReportKind::PlanReview | ReportKind::Completion => runtime::Quotable {
            uncovered: crate::run::coverage::uncovered(state),
            ..runtime::Quotable::default()
        },
        _ => runtime::Quotable::default(),
    }
}
