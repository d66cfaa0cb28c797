//! The real stage runner: launches one attempt of a CLI through the boundary, streams its output
//! into the stage log and the normalized events, and judges the result — receipt, stop class,
//! workspace snapshot, final message, schema and evidence — into an [`AttemptOutcome`].
//!
//! Nothing the agent says is taken on trust: a report counts only when its schema validates and
//! every check it cites matches a real command event of this attempt (or a capture receipt bound
//! to this attempt by its nonce). Every artifact lands in the attempt's directory
//! (`docs/run-lifecycle.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use super::budget::StageLimits;
use super::driver::{
    AttemptContext, AttemptOutcome, AttemptResult, ReplayResult, ReplayTree, StageRunner,
};
use super::flow::PauseDecision;
use super::integrity;
use super::replay;
use super::state::{AttemptRecord, RunState, UsageTotals};
use crate::agent_env::{self, AgentEnvironment};
use crate::events::{self, AnyParser, FinalReport, NormalizedEvent, ParseOptions, TransportKind};
use crate::ids::{ProviderName, SessionId};
use crate::pause::PauseCode;
use crate::provider::{OutputMode, ResolvedProvider, family_of};
use crate::report::evidence::{self, CitedCheck, CommandRecord};
use crate::report::{self, ReportKind};
use crate::role::Role;
use crate::snapshot::{self, Snapshot, StatCache};
use crate::store;
use crate::supervise::{self, EndedBy, Exit, LaunchOptions, Receipt, StdioMode};
use crate::transport::{self, BuiltinTransport, StageRequest, claude_auth, identity};

/// The longest stdout line handed to a parser; longer lines become one malformed line.
const MAX_LINE: usize = 16 << 20;
/// How much of each raw stream is kept in the stage log.
const LOG_LIMIT: u64 = 256 << 20;

/// Drives real CLIs (built-in or registered with TOML) for the run's stages.
pub struct CliRunner {
    /// autocode's own environment (the agents get it filtered).
    pub env: BTreeMap<String, String>,
    pub providers: BTreeMap<ProviderName, ResolvedProvider>,
    /// Versions probed once per start or resume.
    pub versions: BTreeMap<ProviderName, Option<String>>,
    /// Claude Code may run against a loopback endpoint the user named as scripted or local.
    pub scripted_local: bool,
    pub replay_timeout: Duration,
    /// Variables of autocode's environment dropped because they are not UTF-8 (escaped names),
    /// recorded in each launch's `withheld_env`.
    pub not_utf8_env: Vec<String>,
    caches: BTreeMap<PathBuf, StatCache>,
}

impl CliRunner {
    pub fn new(env: BTreeMap<String, String>, providers: Vec<ResolvedProvider>) -> Self {
        Self {
            env,
            providers: providers.into_iter().map(|p| (p.name.clone(), p)).collect(),
            versions: BTreeMap::new(),
            scripted_local: false,
            replay_timeout: Duration::from_secs(600),
            not_utf8_env: Vec::new(),
            caches: BTreeMap::new(),
        }
    }

    fn provider(&self, name: &ProviderName) -> Option<&ResolvedProvider> {
        self.providers.get(name)
    }

    /// The agents' environment for `provider`, with autocode's own directory on PATH so agents
    /// can run `autocode capture`.
    pub fn agent_env(&self, provider: Option<&ResolvedProvider>) -> AgentEnvironment {
        let forbid = provider
            .and_then(|p| p.config.auth.as_ref())
            .map(|a| a.forbid_env.clone())
            .unwrap_or_default();
        let pass = self.env.get(agent_env::PASS_ENV_VAR).cloned();
        let mut env = agent_env::agent_environment(
            self.env.iter().map(|(k, v)| (k.clone(), v.clone())),
            &forbid,
            pass.as_deref(),
        );
        env.withhold_not_utf8(self.not_utf8_env.iter().cloned());
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
        {
            let path = env.kept.get("PATH").cloned().unwrap_or_default();
            let dir = dir.to_string_lossy().into_owned();
            if !path.split(':').any(|p| p == dir) {
                env.kept.insert(
                    "PATH".into(),
                    if path.is_empty() {
                        dir
                    } else {
                        format!("{dir}:{path}")
                    },
                );
            }
        }
        env
    }

    /// The environment replayed checks run in: credential-free, no pass-through.
    fn check_env(&self) -> BTreeMap<String, String> {
        agent_env::agent_environment(
            self.env.iter().map(|(k, v)| (k.clone(), v.clone())),
            &[],
            None,
        )
        .kept
    }

    fn transport_kind(&self, provider: &ResolvedProvider) -> Option<TransportKind> {
        match provider.config.output {
            OutputMode::OpencodeEvents => Some(TransportKind::Opencode),
            OutputMode::CodexEvents => Some(TransportKind::Codex),
            OutputMode::ClaudeEvents => Some(TransportKind::Claude),
            OutputMode::ReportFile => None,
        }
    }

    /// The identity of every provider the run uses (recorded at start, compared on resume).
    pub async fn identities(&mut self, work_tree: &Path) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        let names: Vec<ProviderName> = self.providers.keys().cloned().collect();
        for name in names {
            let Some(provider) = self.providers.get(&name).cloned() else {
                continue;
            };
            let env = self.agent_env(Some(&provider));
            let probe = crate::provider::ProbeContext {
                env: env.kept.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                cwd: std::env::temp_dir(),
                timeout: Duration::from_secs(30),
            };
            let version = crate::provider::probe_version(&provider.config, &probe)
                .await
                .ok();
            self.versions.insert(name.clone(), version.clone());
            let program = provider.config.program();
            let executable = program.as_deref().and_then(|p| {
                crate::provider::resolve_on_path(
                    p,
                    std::ffi::OsStr::new(
                        env.kept.get("PATH").map(String::as_str).unwrap_or_default(),
                    ),
                )
            });
            let transport_identity = identity::TransportIdentity::collect(
                &identity::IdentityInput {
                    transport: name.as_str(),
                    builtin: BuiltinTransport::for_provider(&name),
                    executable,
                    version,
                    provider_toml: None,
                    workspace: work_tree,
                    env: &env.kept,
                },
                &|p| std::fs::read(p),
            );
            out.insert(
                name.to_string(),
                json!({
                    "provider_fingerprint": provider.fingerprint,
                    "transport": transport_identity,
                }),
            );
        }
        out
    }
}

/// What a stage directory's `validation.json` holds.
#[derive(Debug, Serialize)]
struct Validation<'a> {
    accepted: bool,
    problems: &'a [String],
    stop: Option<&'a events::Stop>,
}

impl StageRunner for CliRunner {
    async fn run_attempt(&mut self, state: &RunState, ctx: AttemptContext) -> AttemptOutcome {
        let started = Instant::now();
        let mut outcome = self.attempt(state, &ctx).await;
        outcome.duration = started.elapsed();
        outcome
    }

    fn keeps_sessions(&self, state: &RunState, role: Role) -> bool {
        let route = state.route_for(role, None);
        match self.provider(&route.provider) {
            Some(p) if BuiltinTransport::for_provider(&p.name).is_some() => true,
            Some(p) => p.config.resume.is_some(),
            None => false,
        }
    }

    fn model_family(&self, model: &str) -> String {
        family_of(model).as_str().to_owned()
    }

    async fn replay(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        commands: &[String],
    ) -> Result<Vec<ReplayResult>, PauseDecision> {
        let mut unique: Vec<String> = Vec::new();
        for c in commands {
            if !unique.contains(c) {
                unique.push(c.clone());
            }
        }
        let base = super::verify::base_dir(state);
        let (root, restore) = match tree {
            ReplayTree::Final => (state.work_tree.clone(), replay::Restore::default()),
            ReplayTree::Base => (base.clone(), replay::Restore::default()),
            ReplayTree::FinalWithBaseFiles(files) => (
                state.work_tree.clone(),
                replay::Restore {
                    from: Some(&base),
                    files,
                },
            ),
        };
        let replayed = match replay::replay_checks_restoring(
            &root,
            restore,
            &state.verification.base_unclosed,
            &unique,
            &self.check_env(),
            self.replay_timeout,
        )
        .await
        {
            // A copy that is not closed fails every check, naming the paths.
            Err(e @ replay::ReplayError::NotClosed { .. }) => {
                return Ok(unique
                    .into_iter()
                    .map(|command| ReplayResult {
                        command,
                        passed: false,
                        detail: e.to_string(),
                    })
                    .collect());
            }
            other => other,
        }
        .map_err(|e| {
            PauseDecision::new(
                PauseCode::PausedProcessCleanup,
                format!("autocode could not replay the checks: {e}"),
            )
        })?;
        if let Some(bad) = replayed.iter().find(|r| !r.receipt.verified) {
            return Err(PauseDecision::new(
                PauseCode::PausedProcessCleanup,
                format!(
                    "the replay of `{}` left processes the boundary could not prove gone",
                    bad.command
                ),
            ));
        }
        Ok(replayed
            .into_iter()
            .map(|r| ReplayResult {
                passed: r.passed(),
                detail: match r.exit {
                    Exit::Code(0) => "exit 0".into(),
                    Exit::Code(c) => format!("exit {c}: {}", r.output_tail.trim()),
                    Exit::Signal(s) => format!("killed by signal {s}"),
                    Exit::TimedOut => "timed out".into(),
                },
                command: r.command,
            })
            .collect())
    }

    async fn save_base(&mut self, state: &RunState) -> Result<Vec<String>, PauseDecision> {
        let dest = super::verify::base_dir(state);
        replay::save_tree(&state.work_tree, &dest, &self.check_env())
            .await
            .map(|report| report.unclosed)
            .map_err(|e| {
                PauseDecision::new(
                    PauseCode::PausedProcessCleanup,
                    format!("autocode could not save the base tree: {e}"),
                )
            })
    }

    fn judge_interrupted(&mut self, state: &RunState, attempt: &AttemptRecord) -> Option<Value> {
        let dir = state.run_dir().join("stages").join(&attempt.dir);
        // Only a receipt autocode tagged is trusted: one the keeper wrote after autocode died
        // carries no tag, so the attempt is judged interrupted.
        let receipt: Receipt = integrity::read_record(&dir.join("supervision.json")).ok()?;
        if !receipt.verified {
            return None;
        }
        let provider = self.provider(&attempt.route.provider)?.clone();
        let kind = self.transport_kind(&provider)?;
        let stdout = std::fs::File::open(dir.join("stdout.log")).ok()?;
        let report_file = std::fs::read(dir.join("report.raw.json")).ok();
        let normalized = events::normalize_stream(
            kind,
            std::io::BufReader::new(stdout),
            report_file.as_deref(),
        )
        .ok()?;
        if normalized.summary.stop.class != events::StopClass::Completed {
            return None;
        }
        let records = command_records(&normalized.events);
        if dir.join("snapshot-before.json").exists() {
            // A judge's or planner's write cannot be ruled out without the after-snapshot.
            return None;
        }
        judge_report(
            attempt.report_kind,
            normalized.summary.final_report.as_ref(),
            &records,
            None,
            None,
        )
        .ok()
    }
}

impl CliRunner {
    async fn attempt(&mut self, state: &RunState, ctx: &AttemptContext) -> AttemptOutcome {
        let stopped = |code, reason: String| AttemptOutcome {
            session: None,
            usage: UsageTotals::default(),
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
        let _ = store::write_atomic(&dir.join("prompt.md"), ctx.prompt.as_bytes());
        let mut env = self.agent_env(Some(&provider));
        let capture_context = format!("{}/{}/{}", state.run_id, ctx.record.dir, nonce());
        env.kept
            .insert("AUTOCODE_CAPTURE_CONTEXT".into(), capture_context.clone());
        let kind = self.transport_kind(&provider);
        let sandbox = ctx.plan.role.sandbox();
        let request = StageRequest {
            role: ctx.plan.role,
            route: route.clone(),
            workspace: state.work_tree.clone(),
            sandbox,
            prompt: ctx.prompt.clone(),
            schema_path: dir.join("schema.json"),
            schema_json: ctx.plan.kind.cli_schema(),
            report_path: dir.join("report.raw.json"),
            run_dir: state.run_dir(),
            stage_dir: dir.clone(),
            resume_session: ctx.resume_session.clone(),
            env: env.clone(),
            cli_version: self.versions.get(&route.provider).cloned().flatten(),
        };
        if provider.name.as_str() == "claude"
            && let Err(refusal) =
                claude_auth::check_workspace_settings(&state.work_tree).and_then(|()| {
                    claude_auth::check_agent_env(&env.kept, self.scripted_local).map(|_| ())
                })
        {
            return stopped(
                PauseCode::PausedBillingRoute,
                format!("{refusal}; {}", refusal.next_step()),
            );
        }
        let plan = match transport::plan_for_provider(&request, &provider.config) {
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
        if kind == Some(TransportKind::Opencode) {
            let _ = transport::opencode::ensure_git_exclusions(&state.work_tree);
        }
        let _ = integrity::write_record(
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
            }),
        );
        // Everything but the builder must leave the source as it found it.
        let check_writes = ctx.plan.role != Role::Builder;
        let check_env = self.check_env();
        let before = if check_writes {
            match self.snapshot(&state.work_tree, &check_env).await {
                Ok(s) => {
                    let _ = integrity::write_record(&dir.join("snapshot-before.json"), &s);
                    Some(s)
                }
                Err(e) => {
                    return stopped(
                        PauseCode::PausedProviderUncertain,
                        format!("cannot snapshot the workspace: {e}"),
                    );
                }
            }
        } else {
            None
        };
        let limits: StageLimits = ctx.limits;
        let spec = plan.into_launch_spec(
            format!("stage {}", ctx.record.dir),
            StdioMode::Captured { limit: 1 << 20 },
            limits.timeout,
        );
        let options = LaunchOptions {
            stdout_log: Some(dir.join("stdout.log")),
            stderr_log: Some(dir.join("stderr.log")),
            log_limit: LOG_LIMIT,
            idle_timeout: limits.idle,
            receipt_path: Some(dir.join("supervision.json")),
            ..LaunchOptions::default()
        };
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
        let mut parser = kind.map(|k| {
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
        let mut records = Vec::new();
        let mut events_log = std::fs::File::create(dir.join("events.jsonl"))
            .ok()
            .map(std::io::BufWriter::new);
        let mut over_budget = false;
        let mut tokens_seen = 0u64;
        let canceller = running.canceller();
        if let Some(stdout) = running.stdout() {
            let mut reader = tokio::io::BufReader::with_capacity(1 << 16, stdout);
            let mut line = Vec::new();
            let mut batch = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let Some(parser) = parser.as_mut() else {
                    continue;
                };
                batch.clear();
                if line.len() > MAX_LINE {
                    events::StreamParser::feed_oversized_line_into(
                        parser,
                        line.len() as u64,
                        MAX_LINE,
                        &mut batch,
                    );
                } else {
                    events::StreamParser::feed_line_into(parser, &line, &mut batch);
                }
                for event in batch.drain(..) {
                    if let Some(record) = command_record(&event) {
                        records.push(record);
                    }
                    if let NormalizedEvent::Usage { usage } = &event {
                        tokens_seen += [
                            usage.input_tokens,
                            usage.cache_read_tokens,
                            usage.cache_write_tokens,
                            usage.output_tokens,
                        ]
                        .into_iter()
                        .flatten()
                        .sum::<u64>();
                        if limits.tokens_left.is_some_and(|left| tokens_seen > left) && !over_budget
                        {
                            over_budget = true;
                            canceller.cancel();
                        }
                    }
                    write_event(&mut events_log, &event);
                }
            }
        }
        let finished = match running.finish().await {
            Ok(finished) => finished,
            Err(e) => {
                return stopped(
                    PauseCode::PausedProcessCleanup,
                    format!("the boundary lost the stage: {e}"),
                );
            }
        };
        let receipt = finished.receipt.clone();
        let _ = integrity::write_record(&dir.join("supervision.json"), &receipt);
        let report_file = std::fs::read(dir.join("report.raw.json")).ok();
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
                write_event(&mut events_log, &event);
            }
            summary
        });
        drop(events_log);
        let usage = summary
            .as_ref()
            .map(|s| usage_totals(&s.usage, &route.model))
            .unwrap_or_default();
        let _ = integrity::write_record(&dir.join("usage.json"), &usage);
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
            return self.finish_record(dir, out, None);
        }
        // 2. Limits.
        if over_budget {
            out.result = stop_with(
                PauseCode::PausedBudget,
                "the stage went over the run's --max-tokens and was stopped".into(),
            );
            return self.finish_record(dir, out, None);
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
            return self.finish_record(dir, out, None);
        }
        // 3. The session must be the one we continued.
        if let (Some(expected), Some(got)) = (&ctx.resume_session, &session)
            && expected != got
        {
            out.result = stop_with(
                PauseCode::PausedProviderUncertain,
                format!("the resumed stage answered from session {got}, not {expected}"),
            );
            return self.finish_record(dir, out, None);
        }
        // 4. The provider's stop.
        let stop = summary.as_ref().map(|s| {
            let tail = std::fs::read(dir.join("stderr.log")).unwrap_or_default();
            let tail = &tail[tail.len().saturating_sub(8192)..];
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
                return self.finish_record(dir, out, Some(stop));
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
                    return self.finish_record(dir, out, Some(stop));
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
            return self.finish_record(dir, out, None);
        }
        // 5. The workspace: planners and judges must not have changed source.
        if let Some(before) = &before {
            match self.snapshot(&state.work_tree, &check_env).await {
                Ok(after) => {
                    let _ = integrity::write_record(&dir.join("snapshot-after.json"), &after);
                    let changes = snapshot::diff(before, &after);
                    if !changes.is_empty() {
                        let names: Vec<String> = changes
                            .iter()
                            .map(|c| format!("{} ({:?})", c.path, c.kind))
                            .collect();
                        out.result = stop_with(
                            PauseCode::PausedDiscoveryWrite,
                            format!(
                                "the {} changed the workspace, which its role forbids: {}",
                                ctx.plan.role,
                                names.join(", ")
                            ),
                        );
                        return self.finish_record(dir, out, stop.as_ref());
                    }
                }
                Err(e) => {
                    out.result = stop_with(
                        PauseCode::PausedProviderUncertain,
                        format!("cannot snapshot the workspace: {e}"),
                    );
                    return self.finish_record(dir, out, stop.as_ref());
                }
            }
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
                work_tree: state.work_tree.clone(),
                context: capture_context,
            })
        } else {
            None
        };
        out.result = match judge_report(
            ctx.plan.kind,
            final_report.as_ref(),
            &records,
            receipts.as_ref(),
            Some(&dir.join("evidence.json")),
        ) {
            Ok(report) => {
                let _ = integrity::write_record(&dir.join("report.json"), &report);
                AttemptResult::Report(report)
            }
            Err(rejection) => rejection,
        };
        self.finish_record(dir, out, stop.as_ref())
    }

    fn finish_record(
        &self,
        dir: &Path,
        out: AttemptOutcome,
        stop: Option<&events::Stop>,
    ) -> AttemptOutcome {
        let problems: Vec<String> = match &out.result {
            AttemptResult::Report(_) => vec![],
            AttemptResult::Rejected { problems, .. } => problems.clone(),
            AttemptResult::Stopped { code, reason, .. } => vec![format!("{code}: {reason}")],
        };
        let _ = integrity::write_record(
            &dir.join("validation.json"),
            &Validation {
                accepted: matches!(out.result, AttemptResult::Report(_)),
                problems: &problems,
                stop,
            },
        );
        out
    }

    async fn snapshot(
        &mut self,
        work_tree: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<Snapshot, String> {
        let files = snapshot::list_files(work_tree, env)
            .await
            .map_err(|e| e.to_string())?;
        let cache = self.caches.entry(work_tree.to_owned()).or_default();
        snapshot::take(work_tree, &files, cache).map_err(|e| e.to_string())
    }
}

/// How report-file tools' capture receipts are checked.
struct ReceiptCheck {
    work_tree: PathBuf,
    context: String,
}

/// Judges a final message: shell-command rule, JSON, schema, evidence.
fn judge_report(
    kind: ReportKind,
    final_report: Option<&FinalReport>,
    records: &[CommandRecord],
    receipts: Option<&ReceiptCheck>,
    evidence_out: Option<&Path>,
) -> Result<Value, AttemptResult> {
    let reject = |problems: Vec<String>| AttemptResult::Rejected {
        problems,
        shell_command: None,
    };
    let report = match final_report {
        None => {
            return Err(reject(vec![
                "the stage ended without a final report".into(),
            ]));
        }
        Some(FinalReport::Structured(value)) => value.clone(),
        Some(FinalReport::Text(text)) => {
            let fields = kind.top_level_fields();
            let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            match events::classify_final_message(text, &fields) {
                events::FinalMessage::Report { object } => Value::Object(object),
                events::FinalMessage::ShellCommandFinalMessage { rejection } => {
                    return Err(AttemptResult::Rejected {
                        problems: vec![format!("{rejection}; it was not run")],
                        shell_command: Some(
                            json!({ rejection.key.clone(): rejection.command.clone() }).to_string(),
                        ),
                    });
                }
                events::FinalMessage::NotJsonObject { error } => {
                    return Err(reject(vec![format!(
                        "the final message is not a JSON report: {error}"
                    )]));
                }
            }
        }
    };
    if let Err(rejection) = report::validate(kind, &report) {
        let problems = match rejection {
            report::ReportRejection::Schema { violations } => violations
                .into_iter()
                .map(|v| {
                    format!(
                        "{}: {}",
                        if v.instance_path.is_empty() {
                            "/"
                        } else {
                            &v.instance_path
                        },
                        v.message
                    )
                })
                .collect(),
            other => vec![other.to_string()],
        };
        return Err(reject(problems));
    }
    let checks = cited_checks(kind, &report);
    let findings = match receipts {
        None => evidence::check_event_evidence(&checks, records),
        Some(rc) => checks
            .iter()
            .map(|check| {
                let path = rc.work_tree.join(&check.evidence_ref);
                let inside = path.starts_with(rc.work_tree.join(".autocode/evidence"))
                    && !check.evidence_ref.contains("..");
                let bytes = if inside {
                    std::fs::read(&path).ok()
                } else {
                    None
                };
                evidence::check_receipt_evidence(check, bytes.as_deref(), &rc.context)
            })
            .collect(),
    };
    if let Some(path) = evidence_out {
        let _ = integrity::write_record(
            path,
            &json!({ "checks": findings, "command_events": records }),
        );
    }
    let problems: Vec<String> = findings
        .iter()
        .filter_map(|f| {
            f.problem
                .as_ref()
                .map(|p| format!("check `{}`: {p}", f.check.command))
        })
        .collect();
    if !problems.is_empty() {
        return Err(reject(problems));
    }
    Ok(report)
}

/// The checks a report cites (build: `checks`; test: every criterion's `checks`).
fn cited_checks(kind: ReportKind, report: &Value) -> Vec<CitedCheck> {
    let parse = |v: &Value| -> Option<CitedCheck> {
        Some(CitedCheck {
            command: v["command"].as_str()?.to_owned(),
            exit_code: v["exit_code"].as_i64()?,
            evidence_ref: v["evidence_ref"].as_str()?.to_owned(),
        })
    };
    match kind {
        ReportKind::Build => report["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(parse)
            .collect(),
        ReportKind::Test => report["criteria"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["checks"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| parse(&v))
            .collect(),
        _ => Vec::new(),
    }
}

fn command_record(event: &NormalizedEvent) -> Option<CommandRecord> {
    match event {
        NormalizedEvent::CommandFinished {
            evidence_id,
            command,
            ..
        } => Some(CommandRecord {
            evidence_id: evidence_id.to_string(),
            command: command.clone(),
            exit_code: event.command_evidence().map(|(_, code)| code),
        }),
        _ => None,
    }
}

fn command_records(events: &[NormalizedEvent]) -> Vec<CommandRecord> {
    events.iter().filter_map(command_record).collect()
}

fn write_event(log: &mut Option<std::io::BufWriter<std::fs::File>>, event: &NormalizedEvent) {
    use std::io::Write;
    if let Some(writer) = log.as_mut()
        && serde_json::to_writer(&mut *writer, event).is_ok()
    {
        let _ = writer.write_all(b"\n");
    }
}

/// The events' usage in the run's convention, with a cost from the provider or the dated
/// price table (else unknown).
fn usage_totals(usage: &events::Usage, model: &str) -> UsageTotals {
    let mut totals = UsageTotals {
        input_tokens: usage.input_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        output_tokens: usage.output_tokens,
        reasoning_tokens: usage.reasoning_tokens,
        cost_usd: None,
        cost_source: None,
    };
    if let Some(cost) = usage.cost_usd.filter(|c| *c > 0.0) {
        totals.cost_usd = Some(cost);
        totals.cost_source = Some("provider".into());
    } else if let Some(cost) = crate::prices::estimate(model, &totals) {
        totals.cost_usd = Some(cost);
        totals.cost_source = Some("price_table".into());
    }
    totals
}

/// When a provider limit with a reset hint ends: epoch seconds (`1767225600`), a number of
/// seconds (`retry-after: 30`), or an hour of the day in UTC (`3pm`, `3pm (UTC)`, `15:00`), the
/// next such moment. Anything else is unknown.
pub fn resume_after_from_hint(
    hint: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::{Duration as Span, NaiveTime, TimeZone};
    let mut text = hint
        .trim()
        .trim_end_matches("(UTC)")
        .trim()
        .to_ascii_lowercase();
    for prefix in [
        "retry-after:",
        "retry after",
        "try again in",
        "resets at",
        "resets",
        "in",
    ] {
        if let Some(rest) = text.strip_prefix(prefix) {
            text = rest.trim().to_owned();
        }
    }
    for suffix in ["seconds", "second", "secs", "sec", "s"] {
        if let Some(rest) = text.strip_suffix(suffix)
            && rest.trim().parse::<i64>().is_ok()
        {
            text = rest.trim().to_owned();
            break;
        }
    }
    if let Ok(n) = text.parse::<i64>() {
        return if n > 1_000_000_000 {
            chrono::Utc.timestamp_opt(n, 0).single()
        } else if n >= 0 {
            Some(now + Span::seconds(n))
        } else {
            None
        };
    }
    let hour_minute = if let Some(h) = text.strip_suffix("am").or_else(|| text.strip_suffix("pm")) {
        let (h, m) = h.trim().split_once(':').unwrap_or((h.trim(), "0"));
        let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
        if !(1..=12).contains(&h) {
            return None;
        }
        let h = match (text.ends_with("pm"), h) {
            (true, 12) => 12,
            (true, h) => h + 12,
            (false, 12) => 0,
            (false, h) => h,
        };
        (h, m)
    } else {
        let (h, m) = text.split_once(':')?;
        (h.parse().ok()?, m.parse().ok()?)
    };
    let time = NaiveTime::from_hms_opt(hour_minute.0, hour_minute.1, 0)?;
    let today = now.date_naive().and_time(time).and_utc();
    Some(if today > now {
        today
    } else {
        today + Span::days(1)
    })
}

/// A value no other attempt can predict (binds capture receipts to this attempt).
fn nonce() -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn reset_hints_become_times() {
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 11, 29, 14, 0, 0)
            .unwrap();
        let at = |h| resume_after_from_hint(h, now).map(|t| t.to_rfc3339());
        assert_eq!(
            at("1767225600").as_deref(),
            Some("2026-01-01T00:00:00+00:00")
        );
        assert_eq!(at("30").as_deref(), Some("2026-11-29T14:00:30+00:00"));
        assert_eq!(
            at("3pm (UTC)").as_deref(),
            Some("2026-11-29T15:00:00+00:00")
        );
        assert_eq!(at("9am").as_deref(), Some("2026-11-30T09:00:00+00:00"));
        assert_eq!(at("12am").as_deref(), Some("2026-11-30T00:00:00+00:00"));
        assert_eq!(at("16:30").as_deref(), Some("2026-11-29T16:30:00+00:00"));
        assert_eq!(
            at("retry-after: 1").as_deref(),
            Some("2026-11-29T14:00:01+00:00")
        );
        assert_eq!(
            at("try again in 30s").as_deref(),
            Some("2026-11-29T14:00:30+00:00")
        );
        assert_eq!(at("soon"), None);
        assert_eq!(at("13pm"), None);
    }
}
