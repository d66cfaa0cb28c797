//! One attempt of a stage, in order: the launch plan and its files, the snapshot before, the
//! supervised launch with its output streamed into the stage log and the normalized events,
//! then the judgement — receipt, limits, session, the provider's stop, the workspace, the
//! report — into an [`AttemptOutcome`] and the stage's `validation.json`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::CliRunner;
use super::foreign;
use super::intake::{Intake, write_event};
use super::judge::{
    ReceiptCheck, Validation, command_record, judge_report, resume_after_from_hint, usage_totals,
};
use crate::events::{self, AnyParser, FinalReport, NormalizedEvent, ParseOptions, TransportKind};
use crate::ids::SessionId;
use crate::pause::PauseCode;
use crate::report::evidence;
use crate::run::budget::StageLimits;
use crate::run::confine::{self, GitLink};
use crate::run::integrity;
use crate::run::loaded_config;
use crate::run::progress::StageProgress;
use crate::run::replay;
use crate::run::stage_runner::{AttemptContext, AttemptOutcome, AttemptResult};
use crate::run::state::{RunState, Usage};
use crate::store;
use crate::supervise::{self, EndedBy, Exit, LaunchOptions, StdioMode};
use crate::transport::{self, StageRequest, claude_auth};

/// The longest stdout line handed to a parser; longer lines become one malformed line.
pub(super) const MAX_LINE: usize = 16 << 20;
/// How much of each raw stream is kept in the stage log.
const LOG_LIMIT: u64 = 256 << 20;
/// The report file a CLI writes (Codex `-o`, a registered tool's `{report}`): in the stage's
/// `outbox/` while the family runs, copied beside the logs once it is gone.
pub(super) const REPORT_FILE: &str = "report.raw.json";

/// The places a stage's room is made of, alive for the attempt (the temporary directory is
/// removed when it ends). The tester's copy is made for every tester attempt: in git, its
/// verification tree brought to the work tree's snapshot (`super::trees`); outside git, a
/// fresh copy.
pub(super) struct StagePlaces {
    pub(super) tmpdir: tempfile::TempDir,
    pub(super) outbox: std::path::PathBuf,
    pub(super) copy: Option<std::path::PathBuf>,
    /// The overlay the tester's family mounts over its copy (`None`: a real directory).
    pub(super) overlay: Option<crate::supervise::Overlay>,
}

impl StagePlaces {
    /// `copy_root`: the runner's folder for the tester's copy. The copy keeps one path for the
    /// runner's life, because a CLI binds a session to its directory (OpenCode refuses to
    /// continue a session from another one), so a repair in the same session finds it again.
    pub(super) async fn prepare(
        state: &RunState,
        ctx: &AttemptContext,
        check_env: &BTreeMap<String, String>,
        copy_root: &Path,
        tester_tree: Option<super::trees::TesterTree>,
    ) -> std::io::Result<Self> {
        let tmpdir = tempfile::Builder::new()
            .prefix("autocode-stage-")
            .tempdir()?;
        let outbox = ctx.stage_dir.join("outbox");
        std::fs::create_dir_all(&outbox)?;
        let (tester_tree, overlay) = match tester_tree {
            Some(tree) => (Some(tree.dir), tree.overlay),
            None => (None, None),
        };
        let copy = if tester_tree.is_some() {
            tester_tree
        } else if confine::WorktreeAccess::for_role(ctx.plan.role) == confine::WorktreeAccess::Copy
        {
            let copy = copy_root.join("tree");
            match std::fs::remove_dir_all(&copy) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            std::fs::create_dir_all(&copy)?;
            replay::clean_copy(&state.work_tree, &copy, check_env)
                .await
                .map_err(std::io::Error::other)?;
            Some(copy)
        } else {
            None
        };
        Ok(Self {
            tmpdir,
            outbox,
            copy,
            overlay,
        })
    }

    /// The CLI's cwd: the tester's copy, else the work tree.
    pub(super) fn cwd(&self, work_tree: &Path) -> std::path::PathBuf {
        self.copy.clone().unwrap_or_else(|| work_tree.to_owned())
    }
}

impl CliRunner {
    pub(super) async fn attempt(
        &mut self,
        state: &RunState,
        ctx: &AttemptContext,
        progress: &mut StageProgress,
    ) -> AttemptOutcome {
        if ctx.record.route.provider.as_str() == crate::direct::PROVIDER_NAME {
            return self.direct_attempt(state, ctx).await;
        }
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
        let route = ctx.record.route.clone();
        let Some(provider) = self.provider(&route.provider).cloned() else {
            return stopped(
                PauseCode::PausedTransportChanged,
                format!("provider {} is no longer available", route.provider),
            );
        };
        let _ = store::write_atomic_as(
            &dir.join("prompt.md"),
            ctx.prompt.as_bytes(),
            store::Durability::Deferred,
        );
        let mut env = self.agent_env(Some(&provider));
        let capture_context = format!("{}/{}/{}", state.run_id, ctx.record.dir, nonce());
        env.kept
            .insert("AUTOCODE_CAPTURE_CONTEXT".into(), capture_context.clone());
        let kind = self.transport_kind(&provider);
        let acp = provider.config.output == crate::provider::OutputMode::Acp;
        let sandbox = ctx.plan.role.sandbox();
        let check_env = self.check_env();
        // The room: a private temporary directory, an outbox for the report file, and the
        // tester's throwaway copy of the work tree (its cwd; its writes vanish).
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
            .before_stage(state, ctx.plan.role, dir, &check_env, !acp)
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
        env.kept.insert(
            "TMPDIR".into(),
            places.tmpdir.path().to_string_lossy().into_owned(),
        );
        let request = StageRequest {
            role: ctx.plan.role,
            route: route.clone(),
            workspace: cwd.clone(),
            sandbox,
            prompt: ctx.prompt.clone(),
            schema_path: dir.join("schema.json"),
            schema_json: ctx.plan.kind.cli_schema(),
            report_path: places.outbox.join(REPORT_FILE),
            run_dir: state.run_dir(),
            stage_dir: dir.clone(),
            resume_session: ctx.resume_session.clone(),
            env: env.clone(),
            cli_version: self.versions.get(&route.provider).cloned().flatten(),
            confined: !state.unconfined,
        };
        // In an overlay the tester's settings are the work tree's (autocode does not see the
        // overlay; the work tree holds all it shows and more).
        let settings_dir = if places.overlay.is_some() {
            &state.work_tree
        } else {
            &cwd
        };
        // Claude Code loads the workspace's settings natively and inside Zed's ACP adapter.
        let runs_claude_code = provider.name.as_str() == "claude"
            || (acp && crate::acp::pinned::runs_claude_code(&provider.config.command));
        if runs_claude_code
            && let Err(refusal) =
                claude_auth::check_workspace_settings(settings_dir).and_then(|()| {
                    claude_auth::check_agent_env(&env.kept, self.scripted_local).map(|_| ())
                })
        {
            return stopped(
                PauseCode::PausedBillingRoute,
                format!("{refusal}; {}", refusal.next_step()),
            );
        }
        let drives = crate::acp::pinned::driven_cli(&provider.config);
        let plan = match transport::plan_for_provider(&request, &provider.config, drives) {
            Ok(plan) => plan,
            Err(e) => {
                return stopped(
                    PauseCode::PausedProviderUncertain,
                    format!("cannot plan the launch: {e}"),
                );
            }
        };
        if let Err(e) = plan.write_files() {
            return stopped(
                PauseCode::PausedProviderUncertain,
                format!("cannot write the launch files: {e}"),
            );
        }
        if kind == Some(TransportKind::Opencode) && places.copy.is_none() {
            let _ = transport::opencode::ensure_git_exclusions(&state.work_tree);
        }
        let mut layers = if state.unconfined {
            None
        } else {
            match confine::StageLayers::new(
                &state.run_dir(),
                ctx.plan.role,
                &plan.env,
                &[&state.workspace, &state.work_tree, &state.run_dir()],
            ) {
                Ok(layers) => Some(layers),
                Err(e) => {
                    return stopped(
                        PauseCode::PausedProviderUncertain,
                        format!("cannot prepare the stage's private layers: {e}"),
                    );
                }
            }
        };
        // An ACP tool driving a built-in CLI has that CLI's places too.
        let (writable_templates, write_through_templates) =
            crate::acp::pinned::confine_templates(&provider.config);
        let write_through = confine::write_through(&write_through_templates, &plan.env);
        let home_layer = layers.as_ref().and_then(|l| l.home.clone());
        if let Some(home) = &home_layer {
            super::super::layers::before_stage(home, &write_through);
        }
        // What the CLI loads: never configuration a stage planted in its layer, and for a
        // judge never the builder's changes to the project's agent configuration.
        let loader = loaded_config::Loader::of(&route.provider, &provider.config);
        let acp_cli = match loader {
            loaded_config::Loader::Builtin {
                cli,
                through_acp: true,
            } => Some(cli),
            _ => None,
        };
        let dropped = home_layer
            .as_ref()
            .map(|home| loaded_config::reset_judge_layer(home, &loader.home_places(&env.kept)))
            .unwrap_or_default();
        if let Some(layers) = layers.as_mut()
            && let Err(e) = layers
                .add_cli_scratch(ctx.plan.role, loader.builtin(), &cwd)
                .and_then(|()| {
                    layers.add_git_scratch(ctx.plan.role, &state.work_tree, &state.isolation)
                })
        {
            return stopped(
                PauseCode::PausedProviderUncertain,
                format!("cannot prepare a scratch layer in the project: {e}"),
            );
        }
        if let Some(reason) = loaded_config::record_and_check(
            dir,
            ctx.plan.role,
            route.provider.as_str(),
            &loader,
            &dropped,
            state,
            &env.kept,
        ) {
            return stopped(PauseCode::PausedTransportChanged, reason);
        }
        let room_input = confine::StageRoomInput {
            role: ctx.plan.role,
            work_tree: &state.work_tree,
            isolation: &state.isolation,
            cwd: &cwd,
            tmpdir: places.tmpdir.path(),
            outbox: &places.outbox,
            overlay: places.overlay.as_ref(),
            provider_templates: &writable_templates,
            allow_connect: &provider.config.allow_connect(),
            env: &plan.env,
            workspace: &state.workspace,
            layers: layers.as_ref().map(|l| l.overlays()).unwrap_or_default(),
        };
        let (room, room_record) = confine::stage_room(&room_input, !state.unconfined);
        if room.is_some() {
            confine::create_provider_dirs(&room_record.provider_writable);
        }
        let _ = integrity::write_stage_record(&dir.join("room.json"), &room_record);
        let git_link = GitLink::read(&state.work_tree);
        let _ = integrity::write_stage_record(
            &dir.join("launch.json"),
            &json!({
                "program": plan.program,
                "args": plan.args,
                "cwd": plan.cwd,
                "env_names": plan.env.keys().collect::<Vec<_>>(),
                "withheld_env": env.withheld,
                "removed_env": plan.removed_env,
                "output_token_cap": plan.output_token_cap,
                "resume_session": ctx.resume_session,
                "transport_identity": state.transport_identities.get(route.provider.as_str()),
                "room": room_record,
            }),
        );
        let limits: StageLimits = ctx.limits;
        let mut spec = plan.into_launch_spec(
            format!("stage {}", ctx.record.dir),
            StdioMode::Captured { limit: 1 << 20 },
            limits.timeout,
        );
        // The builder may write the work tree: a write through autocode's own mount of it
        // during the stage is someone else's (`foreign`).
        let watch = (ctx.plan.role == crate::role::Role::Builder)
            .then(|| foreign::start(&state.work_tree, room.as_ref()));
        let acp_launch = acp.then(|| super::acp::AcpLaunch {
            cwd: cwd.clone(),
            env: env.kept.clone(),
            room: room.clone(),
            writable: confine::WorktreeAccess::for_role(ctx.plan.role)
                != confine::WorktreeAccess::ReadOnly,
            prompt: ctx.prompt.clone(),
            resume: ctx.resume_session.as_ref().map(|s| s.to_string()),
            model: route.model.clone(),
            label: format!("stage {}", ctx.record.dir),
            timeout: limits.timeout,
            idle: limits.idle,
            client_log: dir.join(super::acp::CLIENT_LOG),
            replay_log: dir.join(super::acp::REPLAY_LOG),
        });
        if acp {
            spec.stdin = supervise::StdinSource::Pipe;
        }
        spec.room = room;
        let options = LaunchOptions {
            stdout_log: Some(dir.join("stdout.log")),
            stderr_log: Some(dir.join("stderr.log")),
            log_limit: LOG_LIMIT,
            idle_timeout: limits.idle,
            receipt_path: Some(dir.join("supervision.json")),
            ledger_path: Some(dir.join("ledger.jsonl")),
            ..LaunchOptions::default()
        };
        // What the agent writes from here on is this attempt's (Claude Code's transcript).
        let launched_at = chrono::Utc::now();
        let mut running = match supervise::spawn(spec, options).await {
            Ok(running) => running,
            Err(e @ supervise::LaunchError::Refused { .. }) => {
                return stopped(PauseCode::PausedProcessCleanup, e.to_string());
            }
            Err(e) => {
                return stopped(
                    PauseCode::PausedProviderUncertain,
                    format!("the agent did not start: {e}"),
                );
            }
        };
        let parser = kind.map(|k| {
            AnyParser::new(
                k,
                &ParseOptions {
                    report_file: None,
                    codex_previous_total: None,
                    claude_previous_session_cost_usd: None,
                    max_line_bytes: Some(MAX_LINE),
                },
            )
        });
        let events_log = std::fs::File::create(dir.join("events.jsonl"))
            .ok()
            .map(std::io::BufWriter::new);
        let canceller = running.canceller();
        let mut intake = Intake::new(
            parser,
            progress,
            events_log,
            limits.tokens_left,
            canceller.clone(),
        );
        let acp_end = match acp_launch {
            Some(launch) => {
                let end = super::acp::session(&mut running, &mut intake, launch).await;
                // What the agent offers to continue a session decides a repair (`keeps_sessions`).
                if let Some(agent) = &end.agent {
                    self.acp_continuations.insert(
                        provider.name.clone(),
                        crate::acp::Continuation::offered(agent),
                    );
                }
                let ending = super::acp::end_agent(&end, canceller);
                Some((end, ending))
            }
            None => {
                if let Some(stdout) = running.stdout() {
                    intake.read_stdout(stdout, MAX_LINE).await;
                }
                None
            }
        };
        let finished = running.finish().await;
        let acp_end = acp_end.map(|(end, grace)| {
            grace.abort();
            end
        });
        // Claude Code's adapter reports no usage over ACP: Claude Code's transcript has it,
        // whole once its family is gone (its cost is written after the prompt's answer).
        let transcript_usage = acp_end
            .as_ref()
            .filter(|_| !intake.usage_seen && acp_cli == Some(transport::BuiltinTransport::Claude))
            .and_then(|end| end.session.as_deref())
            .and_then(|session| {
                super::acp::claude_transcript_usage(
                    session,
                    &layers
                        .as_ref()
                        .map(confine::StageLayers::overlays)
                        .unwrap_or_default(),
                    &env.kept,
                    launched_at,
                )
            });
        if let Some(usage) = &transcript_usage {
            intake.event(crate::events::NormalizedEvent::Usage { usage: *usage });
        }
        let finished = match finished {
            Ok(finished) => finished,
            Err(e) => {
                return stopped(
                    PauseCode::PausedProcessCleanup,
                    format!("the boundary lost the stage: {e}"),
                );
            }
        };
        let receipt = finished.receipt.clone();
        let _ = integrity::write_stage_record(&dir.join("supervision.json"), &receipt);
        let attribution = watch.map(foreign::Attribution::of);
        if let Some(home) = &home_layer {
            for path in super::super::layers::after_stage(home, &write_through) {
                tracing::info!("{}: written through to {}", ctx.record.dir, path.display());
            }
        }
        drop(layers);
        // The family is gone: what it left in the outbox becomes the stage's report file.
        // Agent-written: regular, non-blocking, capped (a FIFO or /dev/zero link is no report).
        let report_file = crate::bounded_read::read(
            &places.outbox.join(REPORT_FILE),
            crate::bounded_read::REPORT_CAP,
        )
        .ok();
        if let Some(bytes) = &report_file {
            let _ =
                store::write_atomic_as(&dir.join(REPORT_FILE), bytes, store::Durability::Deferred);
        }
        let Intake {
            parser,
            mut records,
            mut failed_commands,
            mut events_log,
            over_budget,
            ..
        } = intake;
        let summary = parser.map(|mut parser| {
            if let (AnyParser::Codex(codex), Some(bytes)) = (&mut parser, &report_file) {
                codex.set_report_file(bytes);
            }
            let mut tail = Vec::new();
            let summary = events::StreamParser::finish_into(parser, &mut tail);
            for event in tail {
                if let Some(record) = command_record(&event) {
                    records.push(record);
                }
                keep_failed_command(&mut failed_commands, &event);
                write_event(&mut events_log, &event);
            }
            summary
        });
        drop(events_log);
        // What the room refused the stage's commands, named with the way to grant it: kept in
        // the stage's record, and said with whatever the attempt comes to.
        let room_refused =
            record_room_refusals(dir, &ctx.record.dir, &failed_commands, &room_record);
        let usage = summary
            .as_ref()
            .map(|s| {
                // Only read when the stream reported no usage.
                let reported = transcript_usage.as_ref().unwrap_or(&s.usage);
                usage_totals(reported, &route.model, &self.catalogue())
            })
            .unwrap_or_default();
        let _ = integrity::write_stage_record(&dir.join("usage.json"), &usage);
        let session = summary
            .as_ref()
            .and_then(|s| s.session_id.clone())
            .and_then(|id| SessionId::new(id).ok())
            .or_else(|| ctx.resume_session.clone());
        let mut out = AttemptOutcome {
            session: session.clone(),
            usage,
            duration: Duration::ZERO,
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
        // 1. The family must be gone, with the kernel's word for it.
        if !receipt.verified {
            out.result = stop_with(
                PauseCode::PausedProcessCleanup,
                format!(
                    "the boundary could not verify that every process of {} is gone (see supervision.json)",
                    ctx.record.dir
                ),
            );
            return self.finish_record(dir, out, room_refused.as_deref(), None);
        }
        // 1a. An ACP session: every terminal's family gone too, the session spoken to its end.
        if let Some(end) = &acp_end {
            super::acp::record(dir, end);
            if let Some((code, reason)) = super::acp::stop_reason(end, &ctx.record.dir) {
                out.result = stop_with(code, reason);
                return self.finish_record(dir, out, room_refused.as_deref(), None);
            }
        }
        // 1b. The worktree's link to its git metadata is not the builder's to change.
        if let Some(reason) =
            git_link.restore_after(&state.work_tree, ctx.plan.role, &dir.join("quarantine"))
        {
            out.result = stop_with(PauseCode::PausedDiscoveryWrite, reason);
            return self.finish_record(dir, out, room_refused.as_deref(), None);
        }
        // 1c. What another process wrote in the work tree is not the builder's work.
        let foreign_edit = match attribution {
            Some(a) => foreign::judge(state, a, dir, &check_env).await,
            None => None,
        };
        if let Some(reason) = foreign_edit {
            out.result = stop_with(PauseCode::PausedForeignEdit, reason);
            return self.finish_record(dir, out, room_refused.as_deref(), None);
        }
        // 2. Limits.
        if over_budget {
            out.result = stop_with(
                PauseCode::PausedBudget,
                "the stage went over the run's --max-tokens and was stopped".into(),
            );
            return self.finish_record(dir, out, room_refused.as_deref(), None);
        }
        if finished.exit == Exit::TimedOut {
            let code = match receipt.ended_by {
                EndedBy::IdleTimeout => PauseCode::PausedStageTimeout,
                _ => limits.timeout_code,
            };
            out.result = stop_with(
                code,
                format!(
                    "{} ran out of time ({:?}) and its family was stopped",
                    ctx.record.dir, receipt.ended_by
                ),
            );
            return self.finish_record(dir, out, room_refused.as_deref(), None);
        }
        // 3. The session must be the one we continued.
        if let (Some(expected), Some(got)) = (&ctx.resume_session, &session)
            && expected != got
        {
            out.result = stop_with(
                PauseCode::PausedProviderUncertain,
                format!("the resumed stage answered from session {got}, not {expected}"),
            );
            return self.finish_record(dir, out, room_refused.as_deref(), None);
        }
        // 4. The provider's stop.
        let stop = summary.as_ref().map(|s| {
            let tail =
                crate::bounded_read::read_tail(&dir.join("stderr.log"), 8192).unwrap_or_default();
            let tail = &tail[..];
            events::stop::stop_with_log_tail(s, tail)
        });
        if let (Some(stop), Some(summary)) = (&stop, &summary) {
            if stop.class != events::StopClass::Completed {
                let code = stop
                    .pause_code
                    .unwrap_or(PauseCode::PausedProviderUncertain);
                let mut reason = format!("{} stopped: {}", provider.name, stop.class);
                if let Some(detail) = &stop.detail {
                    reason.push_str(&format!(" ({detail})"));
                }
                if stop.class == events::StopClass::Authentication && !env.withheld.is_empty() {
                    reason.push_str(&format!(
                        "; withheld variables that might be needed: {} (name them in AUTOCODE_PASS_ENV if the provider requires them)",
                        env.withheld_names().join(", ")
                    ));
                }
                out.result = AttemptResult::Stopped {
                    code,
                    reason,
                    retryable_transport: events::stop::is_retryable_transport_error(summary),
                    resume_after: stop
                        .reset_hint
                        .as_deref()
                        .and_then(|hint| resume_after_from_hint(hint, chrono::Utc::now())),
                };
                return self.finish_record(dir, out, room_refused.as_deref(), Some(stop));
            }
            if provider.name.as_str() == "claude"
                && let Some(source) = &summary.api_key_source
            {
                let route_kind = if self.scripted_local {
                    claude_auth::check_agent_env(&env.kept, true)
                        .unwrap_or(claude_auth::ClaudeBillingRoute::Subscription)
                } else {
                    claude_auth::ClaudeBillingRoute::Subscription
                };
                let row = json!({"type": "system", "subtype": "init", "apiKeySource": source})
                    .to_string();
                if let Err(refusal) = claude_auth::check_init_row(&row, &route_kind) {
                    out.result = stop_with(PauseCode::PausedBillingRoute, refusal.to_string());
                    return self.finish_record(dir, out, room_refused.as_deref(), Some(stop));
                }
            }
        } else if finished.exit != Exit::Code(0) {
            out.result = stop_with(
                PauseCode::PausedProviderUncertain,
                format!(
                    "{} exited with {:?} (see stderr.log)",
                    provider.name, finished.exit
                ),
            );
            return self.finish_record(dir, out, room_refused.as_deref(), None);
        }
        // 5. The workspace: planners and judges must not have changed source.
        if let Some(before) = &before
            && let Some((code, message)) = self
                .changed_since(state, ctx.plan.role, before, dir, &check_env)
                .await
        {
            out.result = stop_with(code, message);
            return self.finish_record(dir, out, room_refused.as_deref(), stop.as_ref());
        }
        // 6. The report itself.
        let final_report = match (&summary, &report_file) {
            (Some(summary), _) => summary.final_report.clone(),
            (None, Some(bytes)) => Some(FinalReport::Text(
                String::from_utf8_lossy(bytes).into_owned(),
            )),
            (None, None) => None,
        };
        let receipts = if kind.is_none() {
            Some(ReceiptCheck {
                // In an overlay, what the family wrote (its receipts) is in the upper layer:
                // autocode does not see the overlay.
                work_tree: match &places.overlay {
                    Some(overlay) => overlay.upper.clone(),
                    None => cwd.clone(),
                },
                context: capture_context,
            })
        } else {
            None
        };
        // The kernel's word on what ran: present wherever the seccomp boundary kept a ledger.
        // The ledger file is the keeper's own journal, each entry written before its exec was
        // let through (the run directory is read-only inside the room); a missing file backs
        // nothing.
        // An ACP agent's terminals ran as families of their own: their ledgers join the agent's.
        let ledger_entries = receipt.session_boundary.is_some().then(|| {
            let mut entries = supervise::read_ledger(&dir.join("ledger.jsonl")).unwrap_or_default();
            if let Some(end) = &acp_end {
                entries.extend(end.ledger.iter().cloned());
            }
            entries
        });
        let ledger = ledger_entries.as_deref();
        out.result = match judge_report(
            ctx.plan.kind,
            final_report.as_ref(),
            &records,
            ledger,
            receipts.as_ref(),
            Some(&dir.join("evidence.json")),
        ) {
            Ok(report) => {
                let _ = integrity::write_stage_record(&dir.join("report.json"), &report);
                AttemptResult::Report(report)
            }
            Err(rejection) => rejection,
        };
        self.finish_record(dir, out, room_refused.as_deref(), stop.as_ref())
    }

    /// Records the attempt's validation; `refusal` (what the room refused its commands, see
    /// `run::room_refusal`) is said with a rejection or a stop.
    pub(super) fn finish_record(
        &self,
        dir: &Path,
        mut out: AttemptOutcome,
        refusal: Option<&str>,
        stop: Option<&events::Stop>,
    ) -> AttemptOutcome {
        if let Some(text) = refusal {
            match &mut out.result {
                AttemptResult::Rejected { problems, .. } => problems.push(text.to_owned()),
                AttemptResult::Stopped { reason, .. } => {
                    reason.push_str("; ");
                    reason.push_str(text);
                }
                AttemptResult::Report(_) => {}
            }
        }
        let problems: Vec<String> = match &out.result {
            AttemptResult::Report(_) => vec![],
            AttemptResult::Rejected { problems, .. } => problems.clone(),
            AttemptResult::Stopped { code, reason, .. } => vec![format!("{code}: {reason}")],
        };
        let _ = integrity::write_stage_record(
            &dir.join("validation.json"),
            &Validation {
                accepted: matches!(out.result, AttemptResult::Report(_)),
                problems: &problems,
                stop,
            },
        );
        out
    }
}

/// Keeps `event` when it is a command that did not succeed, up to a few (the room's refusals
/// are read from their output).
/// What the room refused the stage's `failed` commands, kept in the stage's record
/// (`room_refusals.json`) and returned as the words said with whatever the attempt comes to.
pub(super) fn record_room_refusals(
    dir: &Path,
    stage: &str,
    failed: &[NormalizedEvent],
    room_record: &confine::RoomRecord,
) -> Option<String> {
    let refusals = crate::run::room_refusal::find(failed, room_record);
    (!refusals.is_empty()).then(|| {
        let _ = integrity::write_stage_record(
            &dir.join("room_refusals.json"),
            &serde_json::json!({ "refusals": refusals }),
        );
        let text = crate::run::room_refusal::describe(&refusals);
        tracing::warn!("{stage}: {text}");
        text
    })
}

pub(super) fn keep_failed_command(kept: &mut Vec<NormalizedEvent>, event: &NormalizedEvent) {
    const KEPT: usize = 64;
    if kept.len() < KEPT
        && let NormalizedEvent::CommandFinished { status, .. } = event
        && *status != events::CommandStatus::Succeeded
    {
        kept.push(event.clone());
    }
}

/// A value no other attempt can predict (binds capture receipts to this attempt).
pub(super) fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    evidence::sha256_hex(
        &[
            &bytes[..],
            &now.to_le_bytes(),
            &std::process::id().to_le_bytes(),
        ]
        .concat(),
    )[..32]
        .to_owned()
}
