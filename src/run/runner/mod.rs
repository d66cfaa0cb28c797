//! The real stage runner: launches one attempt of a CLI through the boundary, streams its output
//! into the stage log and the normalized events, and judges the result — receipt, stop class,
//! workspace snapshot, final message, schema and evidence — into an [`AttemptOutcome`].
//!
//! Nothing the agent says is taken on trust: a report counts only when its schema validates and
//! every check it cites matches a real command event of this attempt (or a capture receipt bound
//! to this attempt by its nonce). Every artifact lands in the attempt's directory
//! (`docs/run-lifecycle.md`).
//!
//! Sub-modules: [`attempt`] (one attempt: plan, launch, stream, judge in order), [`direct`]
//! (one attempt on autocode's own runtime, `src/direct/`), [`acp`] (the ACP session of an
//! `output = "acp"` attempt), [`intake`] (where a stage's events go), [`foreign`] (who else
//! wrote the work tree during a builder stage), [`judge`] (the report, its schema and its
//! evidence; usage; reset hints).

mod acp;
mod ahead;
mod attempt;
mod direct;
mod failing_tree;
mod foreign;
mod intake;
mod judge;
mod replays;
mod trees;
mod witness_tree;

pub use foreign::status_line as builder_attribution_line;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::flow::PauseDecision;
use super::integrity;
use super::prepare::PrepareStep;
use super::progress::{ProgressSink, StageProgress, StageStart};
use super::replay;
use super::stage_runner::{AttemptContext, AttemptOutcome, ReplayResult, ReplayTree, StageRunner};
use super::state::{AttemptRecord, RunState};
use crate::agent_env::{self, AgentEnvironment};
use crate::events::{self, TransportKind};
use crate::gittree::watch::WatchProof;
use crate::ids::ProviderName;
use crate::pause::PauseCode;
use crate::provider::{OutputMode, ResolvedProvider};
use crate::role::Role;
use crate::run::vtree::LowerView;
use crate::snapshot::Snapshotter;
use crate::supervise::Receipt;
use crate::transport::{BuiltinTransport, identity};

pub use judge::{FORGED_EVENT, resume_after_from_hint};

/// 32 hex digits no other attempt can predict (attempt nonces, preflight markers).
pub fn nonce_hex() -> String {
    attempt::nonce()
}
use judge::{command_records, judge_report};

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
    /// The folder of the tester's throwaway copy, one for the runner's life (removed with it).
    tester_copies: Option<tempfile::TempDir>,
    /// One per work tree: its private index is the snapshots' stat cache.
    snapshotters: BTreeMap<PathBuf, Snapshotter>,
    /// Whether an overlay mounts with its upper layer in each verification root (tried once
    /// per root: `None` when it does, else what is missing).
    overlay_roots: BTreeMap<PathBuf, Option<String>>,
    /// What the last overlay read of the work tree, kept while the snapshots' fast path proves
    /// it unchanged (`trees::layer`).
    lower_view: Option<(WatchProof, LowerView)>,
    /// Where live progress goes (the command line's renderer), if anywhere.
    progress: Option<Arc<dyn ProgressSink>>,
    /// The run's replay verdicts (`super::replay_cache`), read on first use, by run directory.
    replay_results: Option<(PathBuf, super::replay_cache::ReplayResults)>,
    /// How each ACP tool's agent continues a session, from its last `initialize` answer
    /// (`None`: it offers neither `session/resume` nor `session/load`; a repair starts fresh).
    acp_continuations: BTreeMap<ProviderName, Option<crate::acp::Continuation>>,
    /// Batches whose `prepare` steps run (or ran) while the tester worked (`ahead`).
    ahead: Vec<ahead::AheadBatch>,
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
            tester_copies: None,
            snapshotters: BTreeMap::new(),
            overlay_roots: BTreeMap::new(),
            lower_view: None,
            progress: None,
            replay_results: None,
            acp_continuations: BTreeMap::new(),
            ahead: Vec::new(),
        }
    }

    /// The folder the tester's copy lives in (created on first use).
    pub(super) fn tester_copy_root(&mut self) -> std::io::Result<PathBuf> {
        if self.tester_copies.is_none() {
            self.tester_copies = Some(
                tempfile::Builder::new()
                    .prefix("autocode-tester-")
                    .tempdir()?,
            );
        }
        Ok(self
            .tester_copies
            .as_ref()
            .map(|d| d.path().to_owned())
            .unwrap_or_default())
    }

    /// The model catalogue the cost ledger prices from: the built-in one with the user's
    /// `models.toml` (of autocode's environment) merged over it; a file that does not load is
    /// logged and the built-in catalogue used (`autocode models` names the problem).
    pub(super) fn catalogue(&self) -> crate::models::Catalogue {
        let file = crate::models::user_file(|k| self.env.get(k).cloned());
        crate::models::Catalogue::load(file.as_deref()).unwrap_or_else(|e| {
            tracing::warn!(
                "the user's model catalogue does not load, prices from the built-in one: {e}"
            );
            crate::models::Catalogue::builtin()
        })
    }

    pub(super) fn provider(&self, name: &ProviderName) -> Option<&ResolvedProvider> {
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
        if let Ok(exe) = std::env::current_exe()
            && let Some(dir) = exe.parent()
        {
            let path = env.kept.get("PATH").cloned().unwrap_or_default();
            if let Some(path) = with_own_dir(&path, dir, &exe) {
                env.kept.insert("PATH".into(), path);
            }
        }
        env
    }

    /// The environment replayed checks (and their `prepare` steps) run in: the agents' rules,
    /// credentials withheld except those the person names in `AUTOCODE_PASS_ENV` (a test's
    /// `DATABASE_URL`), as for the agents that ran the same checks; no provider's `forbid_env`
    /// (it names billing routes, not what a check may see).
    pub(super) fn check_env(&self) -> BTreeMap<String, String> {
        let pass = self.env.get(agent_env::PASS_ENV_VAR).cloned();
        agent_env::agent_environment(
            self.env.iter().map(|(k, v)| (k.clone(), v.clone())),
            &[],
            pass.as_deref(),
        )
        .kept
    }

    /// `env` as a batch key digests it: each value that is there only because
    /// `AUTOCODE_PASS_ENV` lets it through (a credential) replaced by its keyed digest under the
    /// run-state key, so the key still changes with it but the record cannot be used to guess
    /// it; by a fixed word when no key is at hand.
    pub(super) fn env_for_key(&self, env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let unpassed = agent_env::agent_environment(
            self.env.iter().map(|(k, v)| (k.clone(), v.clone())),
            &[],
            None,
        );
        let key = crate::run::integrity::process_key().ok();
        env.iter()
            .map(|(name, value)| {
                let value = if unpassed.kept.contains_key(name) {
                    value.clone()
                } else {
                    match key {
                        Some(key) => format!(
                            "passed:{}",
                            key.keyed_digest("check environment value", value.as_bytes())
                        ),
                        None => "passed".to_owned(),
                    }
                };
                (name.clone(), value)
            })
            .collect()
    }

    fn transport_kind(&self, provider: &ResolvedProvider) -> Option<TransportKind> {
        match provider.config.output {
            OutputMode::OpencodeEvents => Some(TransportKind::Opencode),
            OutputMode::CodexEvents => Some(TransportKind::Codex),
            OutputMode::ClaudeEvents => Some(TransportKind::Claude),
            OutputMode::Acp => Some(TransportKind::Acp),
            OutputMode::ReportFile => None,
            OutputMode::DirectRuntime => None,
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
            if name.as_str() == crate::direct::PROVIDER_NAME {
                out.insert(
                    name.to_string(),
                    json!({
                        "provider_fingerprint": provider.fingerprint,
                        "transport": self.direct_identity(),
                    }),
                );
                continue;
            }
            let env = self.agent_env(Some(&provider));
            let probe = crate::provider::ProbeContext {
                env: env.kept.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                cwd: std::env::temp_dir(),
                timeout: Duration::from_secs(30),
                version_cache: crate::provider::ProbeContext::user_version_cache(),
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
            // An ACP agent driving a built-in CLI loads that CLI's configuration; any other
            // registered tool what its `[loads]` names.
            let loader = crate::run::loaded_config::Loader::of(&name, &provider.config);
            let registered_project = loader.registered_project();
            let transport_identity = identity::TransportIdentity::collect(
                &identity::IdentityInput {
                    transport: name.as_str(),
                    builtin: loader.builtin(),
                    executable,
                    version,
                    provider_toml: None,
                    registered_project: &registered_project,
                    workspace: work_tree,
                    env: &env.kept,
                },
                &|p| crate::bounded_read::read(p, crate::bounded_read::CONFIG_CAP),
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

impl StageRunner for CliRunner {
    async fn run_attempt(&mut self, state: &RunState, ctx: AttemptContext) -> AttemptOutcome {
        let started = Instant::now();
        let mut progress = StageProgress::start(
            self.progress.clone(),
            StageStart {
                dir: ctx.record.dir.clone(),
                role: ctx.record.role,
                route: format!("{}/{}", ctx.record.route.provider, ctx.record.route.model),
            },
        );
        let mut outcome = self.attempt(state, &ctx, &mut progress).await;
        outcome.duration = started.elapsed();
        outcome
    }

    fn git_env(&self) -> BTreeMap<String, String> {
        self.env.clone()
    }

    fn set_progress(&mut self, sink: Option<Arc<dyn ProgressSink>>) {
        self.progress = sink;
    }

    fn keeps_sessions(&self, state: &RunState, role: Role) -> bool {
        let route = state.route_for(role, None);
        match self.provider(&route.provider) {
            Some(p) if BuiltinTransport::for_provider(&p.name).is_some() => true,
            // An ACP agent says in its `initialize` answer whether it can continue a session;
            // a stage's first attempt has asked it before any repair.
            Some(p) if p.config.output == OutputMode::Acp => self
                .acp_continuations
                .get(&p.name)
                .is_some_and(Option::is_some),
            Some(p) => p.config.resume.is_some(),
            None => false,
        }
    }

    fn model_family(&self, route: &crate::transport::Route) -> String {
        crate::run::preflight::Families::from_env(|k| self.env.get(k).cloned())
            .of(route)
            .as_str()
            .to_owned()
    }

    async fn replay(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
        commands: &[String],
    ) -> Result<Vec<ReplayResult>, PauseDecision> {
        self.replay_batch(state, tree, prepare, commands).await
    }

    async fn replay_ahead(
        &mut self,
        state: &RunState,
        batches: &[crate::run::stage_runner::OwnedReplayAsk],
    ) {
        self.start_ahead(state, batches).await
    }

    async fn replay_side_by_side(
        &mut self,
        state: &RunState,
        batches: &[crate::run::stage_runner::ReplayAsk<'_>],
    ) -> Vec<Result<Vec<ReplayResult>, PauseDecision>> {
        self.replay_together(state, batches).await
    }

    async fn save_base(&mut self, state: &RunState) -> Result<Vec<String>, PauseDecision> {
        let env = self.check_env();
        match self.save_base_tree(state, &env).await {
            Ok(Some(unclosed)) => return Ok(unclosed),
            Ok(None) => {}
            Err(e) => {
                return Err(PauseDecision::new(
                    PauseCode::PausedProcessCleanup,
                    format!("autocode could not save the base tree: {e}"),
                ));
            }
        }
        let dest = super::vtree::base_copy_dir(&state.run_dir());
        replay::save_tree(&state.work_tree, &dest, &env)
            .await
            .map(|report| report.unclosed)
            .map_err(|e| {
                PauseDecision::new(
                    PauseCode::PausedProcessCleanup,
                    format!("autocode could not save the base tree: {e}"),
                )
            })
    }

    async fn compare_base(
        &mut self,
        state: &RunState,
    ) -> Result<Option<crate::verify::treediff::Comparison>, PauseDecision> {
        let env = self.check_env();
        self.compare_with_base(state, &env).await.map_err(|e| {
            PauseDecision::new(
                PauseCode::PausedProcessCleanup,
                format!("autocode could not compare the work tree with the base tree: {e}"),
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
        // An ACP stage's evidence is not all in its stdout.log (autocode's terminal commands
        // and their ledgers are its own; a `session/load` replay is there): never adopted.
        if provider.config.output == OutputMode::Acp {
            return None;
        }
        let kind = self.transport_kind(&provider)?;
        let stdout = crate::bounded_read::open_regular(&dir.join("stdout.log")).ok()?;
        // An interrupted stage's report file is still in its outbox.
        let report_file = read_report_file(&dir.join(attempt::REPORT_FILE))
            .or_else(|_| read_report_file(&dir.join("outbox").join(attempt::REPORT_FILE)))
            .ok();
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
        // Adoption needs the kernel's ledger too: without it, nothing backs the cited commands.
        let ledger = crate::supervise::read_ledger(&dir.join("ledger.jsonl")).ok()?;
        judge_report(
            attempt.report_kind,
            normalized.summary.final_report.as_ref(),
            &records,
            Some(&ledger),
            None,
            None,
        )
        .ok()
    }
}

/// An agent-written report file: regular, non-blocking, at most [`REPORT_CAP`] bytes.
///
/// [`REPORT_CAP`]: crate::bounded_read::REPORT_CAP
/// The agents' `PATH` with autocode's own directory `dir` (holding `exe`) on it, so that
/// `autocode` there is this autocode; `None`: it already is. At the end when no other `autocode`
/// comes first (every other command is looked up where it was, without a failed `execve` in
/// this directory first), at the front when another one would.
fn with_own_dir(path: &str, dir: &Path, exe: &Path) -> Option<String> {
    let dir_text = dir.to_string_lossy();
    if path.split(':').any(|p| p == dir_text) {
        return None;
    }
    if path.is_empty() {
        return Some(dir_text.into_owned());
    }
    let found = crate::provider::resolve_on_path("autocode", std::ffi::OsStr::new(path));
    let same = |a: &Path, b: &Path| {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    };
    match found {
        None => Some(format!("{path}:{dir_text}")),
        Some(other) if same(&other, exe) => None,
        Some(_) => Some(format!("{dir_text}:{path}")),
    }
}

fn read_report_file(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::bounded_read::read(path, crate::bounded_read::REPORT_CAP)
}
/// Why a person's edits during a builder stage in `work_tree`'s mount could not be told apart
/// from the builder's (`None`: they can; every builder stage then watches, `docs/supervision.md`).
pub fn foreign_edit_watch_missing(work_tree: &Path) -> Option<String> {
    foreign::probe(work_tree).err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::{Continuation, PinnedAcpAgent};

    #[test]
    fn autocode_s_own_directory_goes_last_unless_another_autocode_would_come_first() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours");
        let other = dir.path().join("other");
        let bin = dir.path().join("bin");
        for d in [&ours, &other, &bin] {
            std::fs::create_dir_all(d).unwrap();
        }
        let exe = ours.join("autocode");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = bin.display().to_string();
        let ours_text = ours.display().to_string();
        // No other autocode: last, so every other lookup is as before.
        assert_eq!(
            with_own_dir(&path, &ours, &exe),
            Some(format!("{path}:{ours_text}"))
        );
        // Already there, or an empty PATH.
        assert_eq!(
            with_own_dir(&format!("{path}:{ours_text}"), &ours, &exe),
            None
        );
        assert_eq!(with_own_dir("", &ours, &exe), Some(ours_text.clone()));
        // Another autocode would win: first.
        let theirs = other.join("autocode");
        std::fs::write(&theirs, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
        let with_other = format!("{}:{path}", other.display());
        assert_eq!(
            with_own_dir(&with_other, &ours, &exe),
            Some(format!("{ours_text}:{with_other}"))
        );
        // The same file under another name on PATH: nothing to add.
        std::fs::remove_file(&theirs).unwrap();
        std::fs::hard_link(&exe, &theirs).unwrap();
        assert_eq!(with_own_dir(&with_other, &ours, &exe), None);
    }
    use crate::ids::RunId;

    #[test]
    fn an_acp_tool_keeps_sessions_once_its_agent_offered_to_continue_them() {
        let dir = tempfile::tempdir().unwrap();
        let paths = crate::provider::ConfigPaths::under(dir.path());
        PinnedAcpAgent::Claude
            .register(&paths.user_dir, None, |_| "default".into())
            .unwrap();
        let provider = crate::provider::Registry::new(paths)
            .resolve_name(PinnedAcpAgent::Claude.tool_name())
            .unwrap();
        let name = provider.name.clone();
        let mut runner = CliRunner::new(BTreeMap::new(), vec![provider]);
        let state = RunState::new(
            RunId::new("r1").unwrap(),
            "o".into(),
            "/ws".into(),
            name.clone(),
            BTreeMap::new(),
        );
        assert!(
            !runner.keeps_sessions(&state, Role::Builder),
            "no session has told yet"
        );
        runner.acp_continuations.insert(name.clone(), None);
        assert!(!runner.keeps_sessions(&state, Role::Builder));
        for how in [Continuation::Resume, Continuation::Load] {
            runner.acp_continuations.insert(name.clone(), Some(how));
            assert!(runner.keeps_sessions(&state, Role::Builder), "{how:?}");
        }
    }
}
