//! Starting and resuming runs: everything between the command line and the driver.
//!
//! `start` runs the preflight (`super::preflight`: routes, automatic routes, every route's tool,
//! sign-in, models and independence) and decides where the run works (`run::isolation`: a
//! worktree, or in place only when asked) *before anything is created* (a failure creates no
//! run directory, worktree or branch), creates the run directory and the worktree, and drives;
//! `resume` takes the run's lock, applies the user's answers, approvals and abandonments,
//! re-checks verifier independence, checks the transport identity (naming what changed),
//! re-checks where the run works, and drives again. A second autocode on a held run, or a
//! second in-place run in one directory, gets `PAUSED_RUN_BUSY` and changes nothing. A
//! completed worktree run's summary carries its result (`run::commit::RunResult`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;

use super::driver::{self, DriveOutcome, Interaction, RunHandle};
use super::flow;
use super::isolation::{self, Isolation, IsolationError, LockError, Placement};
use super::preflight;
use super::runner::CliRunner;
use super::state::{
    AttemptStatus, Budgets, BuilderRetryPolicy, PauseRecord, Phase, RunState, Usage,
};
use super::workspace;
use crate::ids::RunId;
use crate::pause::PauseCode;
use crate::provider::{self, OutputMode, Registry};
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
    /// `--no-auto-select`: keep the provider's fixed routes even when their verifiers are not
    /// independent (preflight then refuses them).
    pub no_auto_select: bool,
    /// `--recheck`: the readiness canaries of local direct endpoints run again (no cached pass).
    pub recheck: bool,
    /// `--role-transport ROLE=PROVIDER` / `--ROLE-provider`: roles on another provider (saved).
    pub role_transports: preflight::bindings::RoleBindings,
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
    /// Role bindings named on resume: only the run's saved ones are accepted.
    pub role_transports: preflight::bindings::RoleBindings,
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
    /// A completed worktree run: its branch, what changed and how to take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<super::commit::RunResult>,
    /// How the run works: a worktree on its branch, or in place (not committed).
    pub isolation: Isolation,
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
    #[error(transparent)]
    Isolation(#[from] IsolationError),
    /// The host cannot build the agent's room and the run was not started `--unconfined`.
    /// Preflight found a problem: nothing was created.
    #[error("preflight failed; nothing was created (no run, worktree or branch):\n{0}")]
    Preflight(String),
    #[error(
        "this host cannot confine the agents (missing: {missing}); {what} (see `autocode doctor`)"
    )]
    RoomUnavailable { missing: String, what: &'static str },
}

/// Refuses a confined run on a host that cannot build the room (for an in-place run, with its
/// read-only `.git` and `.autocode/`).
fn require_room(
    env: &BTreeMap<String, String>,
    in_place: bool,
    what: &'static str,
) -> Result<(), RunError> {
    let mut missing = super::confine::room_missing(env);
    if in_place && missing.is_empty() {
        missing.extend(crate::supervise::probe().read_only_holes_missing());
    }
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
        result: None,
        isolation: handle.state.isolation.clone(),
    }
}

/// The summary, with the result of a completed worktree run (its branch against the user's
/// HEAD). A result that cannot be computed is noted, never fatal: the branch is still there.
async fn finished_summary(
    handle: &RunHandle,
    outcome: DriveOutcome,
    env: &BTreeMap<String, String>,
    ui: &mut impl Interaction,
) -> RunSummary {
    // The next run's spare checkout, if this run started making one, is finished first.
    super::workspace::settle_spares().await;
    let complete = matches!(outcome, DriveOutcome::Complete);
    let mut summary = summary(handle, outcome);
    if complete {
        match super::commit::run_result(&handle.state.workspace, &handle.state, env).await {
            Ok(result) => summary.result = result,
            Err(e) => ui.note(&format!("cannot summarize the run's branch: {e}")),
        }
    }
    summary
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
    // Where the agents will work, decided before anything exists: never in place silently.
    let placement = isolation::decide(&workspace, opts.in_place, &env_strings(env)).await?;
    if !opts.unconfined {
        require_room(
            &env_strings(env),
            matches!(placement, Placement::InPlace),
            "nothing was started; pass --unconfined to run with the ownership boundary only (recorded)",
        )?;
    }
    // Preflight: every route's tool, version, sign-in, models and independence, before
    // anything exists.
    let checked = preflight::preflight(
        registry,
        env,
        &preflight::Request {
            provider: opts.provider.clone(),
            choice: preflight::RouteChoice {
                models: opts.models.clone(),
                efforts: opts.efforts.clone(),
                effort: opts.effort.clone(),
                single_model: opts.single_model.clone(),
                providers: opts.role_transports.clone(),
            },
            auto_select: !opts.no_auto_select,
            scripted_local: opts.scripted_local,
            workspace: workspace.clone(),
            canaries: if opts.recheck {
                crate::direct::readiness::CanaryMode::Fresh
            } else {
                crate::direct::readiness::CanaryMode::Cached
            },
        },
    )
    .await
    .map_err(|e| RunError::Usage(e.to_string()))?;
    for warning in &checked.warnings {
        ui.note(&format!("warning: {warning}"));
    }
    if !checked.ok {
        return Err(RunError::Preflight(checked.problems_text()));
    }
    let Some(provider) = checked.resolved.first().cloned() else {
        return Err(RunError::Usage("preflight resolved no provider".into()));
    };
    let routes = checked.routes.clone();
    // The run state is tagged from its first checkpoint: no key, no run.
    super::integrity::key_for_workspace(&workspace)?;
    let env_map = env_strings(env);
    let run_id = new_run_id();
    // One run at a time works in place in a directory.
    let _in_place = match placement {
        Placement::InPlace => match isolation::lock_in_place(&workspace, &run_id) {
            Ok(lock) => Some(lock),
            Err(LockError::Busy(busy)) => return Ok(in_place_busy(&workspace, &run_id, busy)),
            Err(LockError::Store(e)) => return Err(e.into()),
        },
        Placement::Worktree { .. } => None,
    };
    exclude_autocode(&workspace, ui);
    let run_dir = super::runs_dir(&workspace).join(run_id.as_str());
    std::fs::create_dir_all(&run_dir).map_err(|e| StoreError::Write {
        path: run_dir.clone(),
        source: e,
    })?;
    let _lock = RunLock::acquire(&run_dir.join("lock"))?;
    // Verification roots of runs that are gone (a deleted workspace, a demo's) are caches of
    // nothing: removed as a run starts.
    let swept = super::vtree::sweep_orphan_roots();
    if swept > 0 {
        tracing::debug!(swept, "verification roots of runs that are gone removed");
    }
    // So are the private layers of runs that are gone: on a thread of their own (a run's
    // layers are megabytes of small files), never this run's (its run directory exists).
    let _ = std::thread::Builder::new()
        .name("sweep layers".into())
        .spawn(|| {
            let swept = super::layers::sweep_orphans();
            if swept > 0 {
                tracing::debug!(swept, "private layers of runs that are gone removed");
            }
        });
    let builder_retry = provider
        .config
        .builder_retry
        .as_ref()
        .map(|b| BuilderRetryPolicy {
            strong_model: b.strong_model.clone(),
            strong_effort: b.strong_effort.clone(),
            checker_model: b.checker_model.clone(),
        });
    // Roles whose route's tool reports through a file.
    let report_file_roles: Vec<Role> = routes
        .iter()
        .filter(|(_, route)| {
            checked
                .resolved
                .iter()
                .any(|p| p.name == route.provider && p.config.output == OutputMode::ReportFile)
        })
        .map(|(role, _)| *role)
        .collect();
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
    state.in_place_requested = opts.in_place;
    state.role_transports = opts.role_transports.clone();
    let mut handle = RunHandle::new(run_dir, state);
    handle.activity("run created", Some(&opts.objective))?;
    ui.run_opened(&handle.dir, &handle.state);
    if opts.unconfined {
        let note =
            "started --unconfined: the agents run without their room (ownership boundary only)";
        ui.note(note);
        handle.activity("unconfined", Some(note))?;
    }
    if let Some(auto) = &checked.auto_routes {
        let note = format!(
            "automatic routes: {}; the {} run on {} (--no-auto-select keeps the fixed routes):\n{}",
            auto.reason,
            auto.roles
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            auto.provider,
            checked.routes_text().trim_end()
        );
        ui.note(&note);
        handle.activity("automatic routes", Some(&note))?;
    }
    // Isolation: the run gets its own worktree and branch (of the top level, for a
    // subdirectory).
    if let Placement::Worktree { subdir, .. } = &placement {
        // The person's uncommitted changes are named while the worktree is made (both read the
        // repository; on a large one each is a pass over its files).
        let (dirty, created) = tokio::join!(
            workspace::uncommitted_changes(&workspace, &env_map),
            isolation::create(&workspace, &run_id, subdir, &env_map)
        );
        let (isolation, work_tree) = created?;
        // The worktree is made: a failure to list the changes is said, not an end (the run
        // would leave the worktree behind).
        let dirty = dirty.unwrap_or_else(|e| {
            let note = format!("could not list the workspace's uncommitted changes: {e}");
            ui.note(&note);
            vec![]
        });
        if !dirty.is_empty() {
            let names: Vec<&str> = dirty.iter().map(|l| l.get(3..).unwrap_or(l)).collect();
            let note = format!(
                "uncommitted changes in the workspace are NOT in the run's worktree (commit them or use --in-place): {}",
                names.join(", ")
            );
            ui.note(&note);
            handle.activity("uncommitted changes left out", Some(&note))?;
        }
        handle.state.work_tree = work_tree;
        handle.state.isolation = isolation;
    } else {
        let note = format!(
            "--in-place: the agents work in {} itself; nothing is committed (the changes stay in your files)",
            workspace.display()
        );
        ui.note(&note);
        handle.activity("in place", Some(&note))?;
    }
    // Roles routed to another provider than the preflight resolved (the direct runtime)
    // bring it along.
    let mut providers = checked.resolved.clone();
    for route in handle.state.routes.values() {
        if !providers.iter().any(|p| p.name == route.provider) {
            providers.push(
                registry
                    .resolve(&route.provider)
                    .map_err(|e| RunError::Usage(e.to_string()))?,
            );
        }
    }
    let mut runner = CliRunner::new(env_map, providers);
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
    Ok(finished_summary(&handle, outcome, &runner.env, ui).await)
}

/// Adds `.autocode/` to the repository's `info/exclude` (every provider's run): autocode's
/// prompts, logs and run state never show in `git status` or a `git add -A`.
fn exclude_autocode(workspace: &Path, ui: &mut impl Interaction) {
    if let Err(e) = crate::transport::opencode::ensure_git_exclusions(workspace) {
        ui.note(&format!(
            "could not add .autocode/ to the repository's info/exclude: {e}"
        ));
    }
}

/// A second run asked to work in place where another one does: nothing was created.
fn in_place_busy(workspace: &Path, run_id: &RunId, busy: isolation::InPlaceBusy) -> RunSummary {
    let holder = busy.holder.unwrap_or_else(|| run_id.clone());
    let record = PauseRecord {
        code: PauseCode::PausedRunBusy,
        reason: format!(
            "run {holder} works in place in {}; one run at a time may (nothing was created)",
            workspace.display()
        ),
        next_step: format!(
            "wait for run {holder} to finish (autocode status {holder}), then start again; or start without --in-place to work in a worktree"
        ),
        at: Utc::now(),
        attempt: None,
        resume_after: None,
    };
    RunSummary {
        run_dir: super::runs_dir(workspace).join(holder.as_str()),
        run_id: holder,
        work_tree: workspace.to_owned(),
        outcome: DriveOutcome::Paused { pause: record },
        usage: Usage::default(),
        stages: 0,
        result: None,
        isolation: Isolation::InPlace,
    }
}

/// Resume re-checks where the run works: a run that never got its worktree (it paused before
/// isolation) gets one now (or is refused, like a new run); an in-place run takes the
/// directory's in-place lock (`Err`: another run holds it); a worktree must still exist.
async fn recheck_isolation(
    workspace: &Path,
    handle: &mut RunHandle,
    env: &BTreeMap<String, String>,
    ui: &mut impl Interaction,
) -> Result<Result<Option<isolation::InPlaceLock>, PauseRecord>, RunError> {
    exclude_autocode(workspace, ui);
    let state = &handle.state;
    match &state.isolation {
        Isolation::Worktree { path, .. } => {
            if !path.is_dir() {
                return Err(RunError::Usage(format!(
                    "run {}: its worktree {} is gone (removed by `autocode clean` or by hand); start a new run",
                    state.run_id,
                    path.display()
                )));
            }
            Ok(Ok(None))
        }
        Isolation::InPlace if !state.in_place_requested && state.attempts.is_empty() => {
            let Placement::Worktree { subdir, .. } =
                isolation::decide(workspace, false, env).await?
            else {
                unreachable!("decide without in_place never places in place")
            };
            let (iso, work_tree) =
                isolation::create(workspace, &state.run_id, &subdir, env).await?;
            handle.state.work_tree = work_tree;
            handle.state.isolation = iso;
            handle.activity(
                "worktree created on resume",
                Some(&handle.state.work_tree.display().to_string()),
            )?;
            Ok(Ok(None))
        }
        Isolation::InPlace => match isolation::lock_in_place(workspace, &state.run_id) {
            Ok(lock) => Ok(Ok(Some(lock))),
            Err(LockError::Busy(busy)) => {
                let holder = busy
                    .holder
                    .map(|h| h.to_string())
                    .unwrap_or_else(|| "another run".into());
                Ok(Err(PauseRecord {
                    code: PauseCode::PausedRunBusy,
                    reason: format!(
                        "run {holder} works in place in {}; one run at a time may",
                        workspace.display()
                    ),
                    next_step: PauseCode::PausedRunBusy
                        .next_step()
                        .replace("RUN", state.run_id.as_str()),
                    at: Utc::now(),
                    attempt: None,
                    resume_after: None,
                }))
            }
            Err(LockError::Store(e)) => Err(e.into()),
        },
    }
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
            let state = super::trust::verify_run(&workspace, &dir, &env_map)
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
                result: None,
                isolation: state.isolation.clone(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    // Verified again under the lock: what was checked before it may have changed.
    let state = super::trust::verify_run(&workspace, &dir, &env_map)
        .await
        .map_err(super::FindRunError::from)?;
    // A role's provider is fixed when the run starts: another binding is a transport change.
    if let Some(refusal) =
        preflight::bindings::changed_binding(&state.role_transports, &opts.role_transports)
    {
        return Err(RunError::Usage(refusal));
    }
    if !state.unconfined {
        require_room(
            &env_map,
            matches!(state.isolation, Isolation::InPlace),
            "the run was started confined and stays so; nothing was changed",
        )?;
    }
    let mut handle = RunHandle::new(dir, state);
    ui.run_opened(&handle.dir, &handle.state);
    if handle.state.phase == Phase::Complete {
        drop(lock);
        return Ok(finished_summary(&handle, DriveOutcome::Complete, &env_map, ui).await);
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
    // Independence is checked again on every resume, before anything else can launch: no
    // flag (not even --accept-transport-change) runs verifiers on the family they check.
    let families = preflight::families::from_os_env(env);
    if let Some(reason) = preflight::resume::independence_violation(&handle.state, &families) {
        let outcome = pause_now(&mut handle, PauseCode::PausedCrossModel, reason)?;
        drop(lock);
        return Ok(summary(&handle, outcome));
    }
    // Rebuild the transports: every provider the routes use; a changed identity pauses.
    let mut providers = Vec::new();
    for name in preflight::resume::route_providers(&handle.state) {
        providers.push(
            registry
                .resolve(&name)
                .map_err(|e| RunError::Usage(e.to_string()))?,
        );
    }
    let mut runner = CliRunner::new(env_map, providers);
    runner.scripted_local = opts.scripted_local;
    runner.not_utf8_env = crate::agent_env::not_utf8_names(env.iter());
    let identities = runner.identities(&handle.state.work_tree).await;
    if handle.state.transport_identities.is_empty() && handle.state.attempts.is_empty() {
        // Nothing ran under a recorded identity (a run paused before its first stage): there is
        // nothing it could have changed from; record it now.
        handle.state.transport_identities = identities;
    } else if identities != handle.state.transport_identities {
        let changes =
            preflight::resume::transport_changes(&handle.state.transport_identities, &identities);
        if opts.accept_transport_change {
            handle.activity("transport change accepted", Some(&changes.join("; ")))?;
            handle.state.transport_identities = identities;
        } else {
            let outcome = pause_now(
                &mut handle,
                PauseCode::PausedTransportChanged,
                format!(
                    "the transport changed since the run recorded it: {}",
                    changes.join("; ")
                ),
            )?;
            return Ok(summary(&handle, outcome));
        }
    }
    // The local endpoints of the run's direct routes must be ready (cached canaries count).
    let mut effective = handle.state.routes.clone();
    effective.extend(handle.state.route_overrides.clone());
    let not_ready = preflight::direct_ready::check_routes(env, &effective).await;
    if !not_ready.is_empty() {
        let text = not_ready
            .iter()
            .map(|p| format!("{} (fix: {})", p.what, p.fix))
            .collect::<Vec<_>>()
            .join("; ");
        let outcome = pause_now(
            &mut handle,
            PauseCode::PausedProviderUncertain,
            format!("a local endpoint of the run's routes is not ready: {text}"),
        )?;
        return Ok(summary(&handle, outcome));
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
            PauseCode::PausedInterrupted
            | PauseCode::PausedInvalidOutput
            | PauseCode::PausedDiscoveryWrite
            | PauseCode::PausedForeignEdit
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
    let _in_place =
        match recheck_isolation(&workspace, &mut handle, &runner.env.clone(), ui).await? {
            Ok(lock) => lock,
            Err(pause) => {
                drop(lock);
                return Ok(summary(&handle, DriveOutcome::Paused { pause }));
            }
        };
    handle.checkpoint()?;
    let outcome = driver::drive(&mut handle, &mut runner, ui).await?;
    drop(lock);
    Ok(finished_summary(&handle, outcome, &runner.env, ui).await)
}
