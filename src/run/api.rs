//! Starting and resuming runs: everything between the command line and the driver.
//!
//! `start` resolves the provider and the routes, applies the cross-model guard *before any
//! launch*, isolates a git workspace in a worktree, creates the run directory and drives;
//! `resume` takes the run's lock, applies the user's answers, approvals and abandonments,
//! checks the transport identity, and drives again. A second autocode on a held run gets
//! `PAUSED_RUN_BUSY` and changes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;

use super::driver::{self, DriveOutcome, Interaction, RunHandle};
use super::flow;
use super::runner::CliRunner;
use super::state::{
    AttemptStatus, Budgets, BuilderRetryPolicy, Isolation, PauseRecord, Phase, Route, RunState,
    Usage,
};
use super::workspace;
use crate::ids::RunId;
use crate::pause::PauseCode;
use crate::provider::{self, OutputMode, Registry, ResolvedProvider, RouteSpec};
use crate::role::Role;
use crate::store::{RunLock, StoreError};

/// What the user asked for when starting a run.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    pub objective: String,
    pub workspace: PathBuf,
    /// `None`: the default provider.
    pub provider: Option<String>,
    /// Per-role model overrides (`--builder-model` ...).
    pub models: BTreeMap<Role, String>,
    /// Per-role effort overrides.
    pub efforts: BTreeMap<Role, String>,
    /// `--reasoning-effort` for every role without its own.
    pub effort: Option<String>,
    /// `--single-model`: every role on one model, independence knowingly waived.
    pub single_model: Option<String>,
    /// `--yes`: accept proposed defaults and approve the plan (recorded).
    pub yes: bool,
    pub in_place: bool,
    pub budgets: Budgets,
    /// Claude Code may run against a loopback endpoint named as scripted/local.
    pub scripted_local: bool,
    /// `--unconfined`: run without the agent's room (recorded in run.json and every stage).
    pub unconfined: bool,
}

/// What the user asked for when resuming.
#[derive(Debug, Clone, Default)]
pub struct ResumeOptions {
    pub workspace: PathBuf,
    pub run: Option<RunId>,
    pub approve_plan: Option<String>,
    pub answers: Vec<(String, String)>,
    pub abandon_stage: Option<String>,
    pub accept_transport_change: bool,
    /// A person's answers to `AWAITING_HUMAN_REVIEW` / `AWAITING_TEST_CHANGE_REVIEW`.
    pub decisions: super::review::Decisions,
    pub wait: bool,
    pub yes: bool,
    /// Budgets raised on resume (only the given ones change).
    pub budgets: Budgets,
    pub scripted_local: bool,
}

/// How a start or resume ended.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub run_id: RunId,
    pub run_dir: PathBuf,
    pub work_tree: PathBuf,
    #[serde(flatten)]
    pub outcome: DriveOutcome,
    pub usage: Usage,
    pub stages: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Driver(#[from] driver::DriverError),
    #[error(transparent)]
    Find(#[from] super::FindRunError),
    #[error("the run-state key is unavailable")]
    Key(#[from] super::integrity::KeyError),
    #[error(transparent)]
    Workspace(#[from] workspace::WorkspaceError),
    /// The host cannot build the agent's room and the run was not started `--unconfined`.
    #[error(
        "this host cannot confine the agents (missing: {missing}); {what} (see `autocode doctor`)"
    )]
    RoomUnavailable { missing: String, what: &'static str },
}

/// Refuses a confined run on a host that cannot build the room.
fn require_room(env: &BTreeMap<String, String>, what: &'static str) -> Result<(), RunError> {
    let missing = super::confine::room_missing(env);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(RunError::RoomUnavailable {
            missing: missing.join("; "),
            what,
        })
    }
}

fn summary(handle: &RunHandle, outcome: DriveOutcome) -> RunSummary {
    RunSummary {
        run_id: handle.state.run_id.clone(),
        run_dir: handle.dir.clone(),
        work_tree: handle.state.work_tree.clone(),
        outcome,
        usage: handle.state.usage,
        stages: handle.state.attempts.len(),
    }
}

/// A new run id: UTC time plus a short random suffix.
pub fn new_run_id() -> RunId {
    let mut bytes = [0u8; 3];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    let suffix: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    RunId::new(format!("{}-{suffix}", Utc::now().format("%Y%m%d-%H%M%S")))
        .unwrap_or_else(|_| RunId::new("run").expect("a constant id is valid"))
}

/// Resolves every role's route: provider defaults, then flags, then `--single-model`.
pub fn resolve_routes(
    provider: &ResolvedProvider,
    opts: &StartOptions,
) -> Result<BTreeMap<Role, Route>, RunError> {
    let defaults = provider.config.resolved_routes();
    let mut routes = BTreeMap::new();
    for role in Role::ALL {
        let spec = defaults.get(&role);
        let model = opts
            .single_model
            .clone()
            .or_else(|| opts.models.get(&role).cloned())
            .or_else(|| spec.map(|s| s.model.clone()))
            .ok_or_else(|| {
                RunError::Usage(format!(
                    "provider {} has no model for the {role}; pass --{}-model",
                    provider.name,
                    role.as_str().replace('_', "-")
                ))
            })?;
        let effort = opts
            .efforts
            .get(&role)
            .cloned()
            .or_else(|| opts.effort.clone())
            .or_else(|| spec.and_then(|s| s.effort.clone()));
        routes.insert(
            role,
            Route {
                provider: provider.name.clone(),
                model,
                effort,
                codex_model_provider: None,
            },
        );
    }
    Ok(routes)
}

/// The verifier pairs on one model family, as pause text (empty: independent).
pub fn cross_model_violations(routes: &BTreeMap<Role, Route>) -> Vec<String> {
    let specs: BTreeMap<Role, RouteSpec> = routes
        .iter()
        .map(|(role, r)| (*role, RouteSpec::new(&r.model, r.effort.as_deref())))
        .collect();
    provider::same_family_pairs(&specs)
        .into_iter()
        .map(|pair| pair.to_string())
        .collect()
}

fn env_strings(env: &provider::registry::Env) -> BTreeMap<String, String> {
    env.iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
        .collect()
}

/// Starts a run and drives it until it completes or pauses.
pub async fn start(
    registry: &Registry,
    env: &provider::registry::Env,
    opts: StartOptions,
    ui: &mut impl Interaction,
) -> Result<RunSummary, RunError> {
    if opts.objective.trim().is_empty() {
        return Err(RunError::Usage("the objective is empty".into()));
    }
    let workspace = std::fs::canonicalize(&opts.workspace)
        .map_err(|e| RunError::Usage(format!("workspace {}: {e}", opts.workspace.display())))?;
    if !opts.unconfined {
        require_room(
            &env_strings(env),
            "nothing was started; pass --unconfined to run with the ownership boundary only (recorded)",
        )?;
    }
    let provider_name = match &opts.provider {
        Some(name) => name.clone(),
        None => registry
            .default_provider(env)
            .map_err(|e| RunError::Usage(e.to_string()))?
            .name
            .to_string(),
    };
    let provider = registry
        .resolve_name(&provider_name)
        .map_err(|e| RunError::Usage(e.to_string()))?;
    let routes = resolve_routes(&provider, &opts)?;
    // The run state is tagged from its first checkpoint: no key, no run.
    super::integrity::key_for_workspace(&workspace)?;
    let env_map = env_strings(env);
    let run_id = new_run_id();
    let run_dir = super::runs_dir(&workspace).join(run_id.as_str());
    std::fs::create_dir_all(&run_dir).map_err(|e| StoreError::Write {
        path: run_dir.clone(),
        source: e,
    })?;
    let _lock = RunLock::acquire(&run_dir.join("lock"))?;
    let builder_retry = provider
        .config
        .builder_retry
        .as_ref()
        .map(|b| BuilderRetryPolicy {
            strong_model: b.strong_model.clone(),
            strong_effort: b.strong_effort.clone(),
            checker_model: b.checker_model.clone(),
        });
    let report_file_roles = if provider.config.output == OutputMode::ReportFile {
        Role::ALL.to_vec()
    } else {
        Vec::new()
    };
    let mut state = RunState::new(
        run_id.clone(),
        opts.objective.clone(),
        workspace.clone(),
        provider.name.clone(),
        routes,
    );
    state.independence_waived = opts.single_model.is_some();
    state.accept_defaults = opts.yes;
    state.budgets = opts.budgets.clone();
    state.builder_retry = builder_retry;
    state.report_file_roles = report_file_roles;
    state.unconfined = opts.unconfined;
    let mut handle = RunHandle::new(run_dir, state);
    handle.activity("run created", Some(&opts.objective))?;
    if opts.unconfined {
        let note =
            "started --unconfined: the agents run without their room (ownership boundary only)";
        ui.note(note);
        handle.activity("unconfined", Some(note))?;
    }
    // The cross-model guard runs before anything is launched.
    let violations = if opts.single_model.is_some() {
        Vec::new()
    } else {
        cross_model_violations(&handle.state.routes)
    };
    if !violations.is_empty() {
        let outcome = pause_now(
            &mut handle,
            PauseCode::PausedCrossModel,
            format!(
                "a verifier runs on the same model family as what it checks: {}",
                violations.join("; ")
            ),
        )?;
        return Ok(summary(&handle, outcome));
    }
    // Isolation: a git workspace gets its own worktree and branch.
    if !opts.in_place && workspace::is_git_repo_with_head(&workspace, &env_map).await {
        let dirty = workspace::uncommitted_changes(&workspace, &env_map).await?;
        if !dirty.is_empty() {
            let names: Vec<&str> = dirty.iter().map(|l| l.get(3..).unwrap_or(l)).collect();
            let note = format!(
                "uncommitted changes in the workspace are NOT in the run's worktree (commit them or use --in-place): {}",
                names.join(", ")
            );
            ui.note(&note);
            handle.activity("uncommitted changes left out", Some(&note))?;
        }
        let (path, branch) = workspace::create_worktree(&workspace, &run_id, &env_map).await?;
        handle.state.work_tree = path.clone();
        handle.state.isolation = Isolation::Worktree { path, branch };
    }
    let mut runner = CliRunner::new(env_map, vec![provider]);
    runner.scripted_local = opts.scripted_local;
    runner.not_utf8_env = crate::agent_env::not_utf8_names(env.iter());
    handle.state.transport_identities = runner.identities(&handle.state.work_tree).await;
    handle.checkpoint()?;
    ui.note(&format!(
        "run {} in {} (run directory {})",
        handle.state.run_id,
        handle.state.work_tree.display(),
        handle.dir.display()
    ));
    let outcome = driver::drive(&mut handle, &mut runner, ui).await?;
    Ok(summary(&handle, outcome))
}

fn pause_now(
    handle: &mut RunHandle,
    code: PauseCode,
    reason: String,
) -> Result<DriveOutcome, StoreError> {
    let record = PauseRecord {
        code,
        next_step: code
            .next_step()
            .replace("RUN", handle.state.run_id.as_str()),
        reason,
        at: Utc::now(),
        attempt: None,
        resume_after: None,
    };
    handle.state.pause = Some(record.clone());
    handle.checkpoint()?;
    handle.activity(&format!("paused {code}"), Some(&record.reason))?;
    Ok(DriveOutcome::Paused { pause: record })
}

/// Continues a paused (or interrupted) run.
pub async fn resume(
    registry: &Registry,
    env: &provider::registry::Env,
    opts: ResumeOptions,
    ui: &mut impl Interaction,
) -> Result<RunSummary, RunError> {
    let workspace = std::fs::canonicalize(&opts.workspace)
        .map_err(|e| RunError::Usage(format!("workspace {}: {e}", opts.workspace.display())))?;
    let env_map = env_strings(env);
    let dir = super::find_run(&workspace, opts.run.as_ref(), &env_map)
        .await?
        .dir;
    let lock = match RunLock::acquire(&dir.join("lock")) {
        Ok(lock) => lock,
        Err(StoreError::Busy { .. }) => {
            let state = super::integrity::verify_run(&workspace, &dir, &env_map)
                .await
                .map_err(super::FindRunError::from)?;
            let record = PauseRecord {
                code: PauseCode::PausedRunBusy,
                reason: format!("another autocode process holds run {}", state.run_id),
                next_step: PauseCode::PausedRunBusy
                    .next_step()
                    .replace("RUN", state.run_id.as_str()),
                at: Utc::now(),
                attempt: None,
                resume_after: None,
            };
            return Ok(RunSummary {
                run_id: state.run_id.clone(),
                run_dir: dir,
                work_tree: state.work_tree.clone(),
                outcome: DriveOutcome::Paused { pause: record },
                usage: state.usage,
                stages: state.attempts.len(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    // Verified again under the lock: what was checked before it may have changed.
    let state = super::integrity::verify_run(&workspace, &dir, &env_map)
        .await
        .map_err(super::FindRunError::from)?;
    if !state.unconfined {
        require_room(
            &env_map,
            "the run was started confined and stays so; nothing was changed",
        )?;
    }
    let mut handle = RunHandle::new(dir, state);
    if handle.state.phase == Phase::Complete {
        drop(lock);
        return Ok(summary(&handle, DriveOutcome::Complete));
    }
    // Budgets may be raised.
    let b = &opts.budgets;
    let budgets = &mut handle.state.budgets;
    for (slot, new) in [
        (&mut budgets.max_minutes, b.max_minutes),
        (&mut budgets.max_stage_minutes, b.max_stage_minutes),
        (&mut budgets.max_idle_minutes, b.max_idle_minutes),
        (&mut budgets.max_tokens, b.max_tokens),
    ] {
        if new.is_some() {
            *slot = new;
        }
    }
    if b.max_usd.is_some() {
        budgets.max_usd = b.max_usd;
    }
    if opts.yes {
        handle.state.accept_defaults = true;
        if handle.state.phase == Phase::Questions {
            flow::accept_defaults(&mut handle.state);
        }
        if handle.state.phase == Phase::Approval
            && let Some(token) = handle.state.latest_plan().map(|p| p.token())
        {
            flow::apply_approval(&mut handle.state, &token).map_err(RunError::Usage)?;
        }
    }
    if !opts.answers.is_empty() {
        flow::apply_answers(&mut handle.state, &opts.answers).map_err(RunError::Usage)?;
        handle.activity("answers recorded", None)?;
    }
    if let Some(token) = &opts.approve_plan {
        flow::apply_approval(&mut handle.state, token).map_err(RunError::Usage)?;
        handle.activity("plan approved", Some(token))?;
    }
    if let Some(attempt) = &opts.abandon_stage {
        let Some(record) = handle.state.attempts.iter_mut().find(|a| &a.dir == attempt) else {
            return Err(RunError::Usage(format!("no attempt {attempt} in this run")));
        };
        record.status = AttemptStatus::Abandoned;
        handle.state.pending_adoption = None;
        handle.activity("attempt abandoned", Some(attempt))?;
    }
    if !opts.decisions.is_empty() {
        super::review::apply_decisions(&mut handle.state, &opts.decisions, Utc::now())
            .map_err(RunError::Usage)?;
        handle.activity("a person's review recorded", None)?;
    }
    // Rebuild the transports: the run keeps its provider; a changed identity pauses.
    let provider = registry
        .resolve(&handle.state.provider)
        .map_err(|e| RunError::Usage(e.to_string()))?;
    let mut runner = CliRunner::new(env_map, vec![provider]);
    runner.scripted_local = opts.scripted_local;
    runner.not_utf8_env = crate::agent_env::not_utf8_names(env.iter());
    let identities = runner.identities(&handle.state.work_tree).await;
    if identities != handle.state.transport_identities {
        if opts.accept_transport_change {
            handle.activity("transport change accepted", None)?;
            handle.state.transport_identities = identities;
        } else {
            let changed: Vec<String> = identities
                .keys()
                .filter(|k| identities.get(*k) != handle.state.transport_identities.get(*k))
                .cloned()
                .collect();
            let outcome = pause_now(
                &mut handle,
                PauseCode::PausedTransportChanged,
                format!(
                    "the transport of {} changed since the run recorded it (executable, version, or a config it reads)",
                    changed.join(", ")
                ),
            )?;
            return Ok(summary(&handle, outcome));
        }
    }
    if opts.wait
        && let Some(until) = handle.state.pause.as_ref().and_then(|p| p.resume_after)
    {
        let wait = (until - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        if !wait.is_zero() {
            ui.note(&format!("waiting until {until} before continuing"));
            tokio::time::sleep(wait).await;
        }
    }
    // A pause for a decision the user has not made yet stays.
    if let Some(pause) = &handle.state.pause {
        let still = match pause.code {
            PauseCode::PausedCrossModel => Some(
                "the routes of a run are fixed; start a new run with independent models (or --single-model)",
            ),
            PauseCode::PausedInterrupted
            | PauseCode::PausedInvalidOutput
            | PauseCode::PausedDiscoveryWrite
            | PauseCode::PausedOutputCap
            | PauseCode::PausedProviderUncertain
                if opts.abandon_stage.is_none() && pause.attempt.is_some() =>
            {
                Some("this pause needs --abandon-stage ATTEMPT to run the stage again")
            }
            PauseCode::AwaitingHumanReview | PauseCode::AwaitingTestChangeReview
                if opts.decisions.is_empty() =>
            {
                Some(
                    "this pause needs a person's decision: --accept CRITERION, --reject CRITERION --because TEXT, or --accept-test-changes",
                )
            }
            _ => None,
        };
        if let Some(why) = still {
            let pause = pause.clone();
            ui.note(why);
            drop(lock);
            return Ok(summary(&handle, DriveOutcome::Paused { pause }));
        }
    }
    handle.checkpoint()?;
    let outcome = driver::drive(&mut handle, &mut runner, ui).await?;
    drop(lock);
    Ok(summary(&handle, outcome))
}

/// Removes a finished (or abandoned) run's worktree and branch.
pub async fn clean(
    workspace: &Path,
    run: Option<&RunId>,
    env: &provider::registry::Env,
) -> Result<RunId, RunError> {
    let workspace = std::fs::canonicalize(workspace)
        .map_err(|e| RunError::Usage(format!("workspace {}: {e}", workspace.display())))?;
    let env_map = env_strings(env);
    let dir = super::find_run(&workspace, run, &env_map).await?.dir;
    let _lock = RunLock::acquire(&dir.join("lock"))?;
    let state = super::integrity::verify_run(&workspace, &dir, &env_map)
        .await
        .map_err(super::FindRunError::from)?;
    workspace::remove_worktree(&workspace, &state.run_id, &env_map).await?;
    Ok(state.run_id)
}
