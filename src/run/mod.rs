//! The run engine: roles, stages, checked reports, evidence, checkpoints, pause codes and resume.
//!
//! - [`state`]: the one typed run state (`run.json`).
//! - [`flow`]: pure rules for what comes next and how accepted reports move the run.
//! - [`driver`]: runs attempts, repairs and pauses, checkpointing after every step.
//! - [`prompt`], [`budget`], [`replay`], [`workspace`]: what the driver uses.
//! - [`integrity`]: the tag key, tagged records, and the checks before acting on a run.
//! - [`verify`], [`review`], [`coverage`], [`treediff`], [`gate`]: what "verified" means (the
//!   base tree, vacuous checks, the objective's own checks, changed tests, human review, coverage
//!   of the objective, the closed copy); see "What verified means" in `docs/run-lifecycle.md`.
//!
//! A run lives in `<workspace>/.autocode/runs/<run-id>/`; see `docs/run-lifecycle.md`.

pub mod api;
pub mod brief_review;
pub mod budget;
pub mod checkpoint;
pub mod clean;
pub mod commit;
pub mod confine;
pub mod coverage;
pub mod driver;
pub mod flow;
pub mod gate;
pub mod handle;
pub mod integrity;
mod interrupt;
pub mod isolation;
pub mod layers;
pub mod loaded_config;
pub mod preflight;
pub mod prepare;
pub mod progress;
pub mod prompt;
pub mod replay;
pub mod replay_cache;
pub mod replay_verdicts;
pub mod review;
pub mod room_refusal;
pub mod runner;
pub mod stage_runner;
pub mod state;
pub mod trust;
pub mod vtree;
pub mod witness;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ids::RunId;
use crate::store::StoreError;
use state::{AttemptStatus, RunState};
use trust::RunIntegrityError;

/// `<workspace>/.autocode/runs`.
pub fn runs_dir(workspace: &Path) -> PathBuf {
    workspace.join(".autocode").join("runs")
}

#[derive(Debug, thiserror::Error)]
pub enum FindRunError {
    #[error("no runs in {dir}")]
    NoRuns { dir: PathBuf },
    #[error("no run in {dir} verifies ({skipped} skipped; see the warnings above)")]
    NoneVerified { dir: PathBuf, skipped: usize },
    #[error("no run {run_id} in {dir}")]
    NotFound { run_id: RunId, dir: PathBuf },
    #[error(transparent)]
    Refused(#[from] RunIntegrityError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl FindRunError {
    /// What the user can do about it, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Refused(e) => Some(e.hint()),
            Self::NoneVerified { .. } => Some(
                "autocode acts only on runs whose state it wrote and can verify; start a new run"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// Loads a run's state: tag and format version checked, placement not (see [`find_run`]).
pub fn load(dir: &Path) -> Result<RunState, StoreError> {
    trust::read_run_state(dir)
}

/// A run found and verified.
#[derive(Debug)]
pub struct FoundRun {
    pub dir: PathBuf,
    pub state: RunState,
}

/// The run `run_id`, or the latest one when none is named, verified before anything acts on it
/// ([`trust::verify_run`]). "Latest" is by the update time autocode recorded in the verified
/// run state, never by file times or names; runs that do not verify are skipped with a warning
/// on stderr. `workspace` is canonical; `env` is what git runs with.
pub async fn find_run(
    workspace: &Path,
    run_id: Option<&RunId>,
    env: &BTreeMap<String, String>,
) -> Result<FoundRun, FindRunError> {
    let dir = runs_dir(workspace);
    if let Some(id) = run_id {
        let path = dir.join(id.as_str());
        if !driver::RunHandle::state_path(&path).exists() {
            return Err(FindRunError::NotFound {
                run_id: id.clone(),
                dir,
            });
        }
        let state = trust::verify_run(workspace, &path, env).await?;
        return Ok(FoundRun { dir: path, state });
    }
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| driver::RunHandle::state_path(path).exists())
        .collect();
    candidates.sort();
    if candidates.is_empty() {
        return Err(FindRunError::NoRuns { dir });
    }
    let tracked = trust::tracked_run_dirs(workspace, env)
        .await
        .map_err(|source| RunIntegrityError::Git {
            run: "(any)".into(),
            source,
        })?;
    let mut best: Option<FoundRun> = None;
    let mut skipped = 0;
    for path in candidates {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let verified = if tracked.contains(&name) {
            Err(RunIntegrityError::Tracked {
                run: name,
                dir: path.clone(),
            })
        } else {
            trust::verify_untracked(workspace, &path)
        };
        match verified {
            Ok(state) => {
                let newer = best.as_ref().is_none_or(|b| {
                    (state.updated_at, state.created_at) > (b.state.updated_at, b.state.created_at)
                });
                if newer {
                    best = Some(FoundRun { dir: path, state });
                }
            }
            Err(e) => {
                skipped += 1;
                // With its causes: "cannot read its run state" alone does not say why.
                let mut text = format!("warning: skipping {e}");
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    text.push_str(&format!(": {c}"));
                    cause = c.source();
                }
                crate::term_text::say_line(&text);
            }
        }
    }
    best.ok_or(FindRunError::NoneVerified { dir, skipped })
}

/// The pause a run shows when an attempt is still recorded `running` but no process drives
/// it (the caller knows nobody holds its lock): autocode was stopped mid-stage. `None` when the
/// run is paused, complete, or has no running attempt. `status` and the dashboard show it.
pub fn cut_off_pause(state: &RunState) -> Option<state::PauseRecord> {
    if state.pause.is_some() || state.completed_at.is_some() {
        return None;
    }
    let attempt = state
        .attempts
        .iter()
        .rev()
        .find(|a| matches!(a.status, AttemptStatus::Running))?;
    Some(state::PauseRecord {
        code: crate::pause::PauseCode::PausedInterrupted,
        reason: format!(
            "autocode is not running, but attempt {} ({}) was left running: autocode was stopped mid-stage",
            attempt.dir, attempt.role
        ),
        next_step: format!(
            "autocode resume {} (it judges the attempt from its artifacts)",
            state.run_id
        ),
        at: chrono::Utc::now(),
        attempt: Some(attempt.dir.clone()),
        resume_after: None,
    })
}

/// One run directory as `autocode runs` lists it: verified, or why not.
#[derive(Debug, serde::Serialize)]
pub struct RunListing {
    pub run_id: String,
    pub dir: PathBuf,
    /// The verified state's summary; `None` when the run does not verify.
    #[serde(flatten)]
    pub summary: Option<RunListingSummary>,
    /// Why autocode will not act on this run (tag, placement, tracked by git).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

#[derive(Debug, serde::Serialize)]
pub struct RunListingSummary {
    pub phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub objective: String,
}

/// Every run directory of the workspace, newest first by the time autocode recorded (runs that
/// do not verify come last, with the reason).
pub async fn list_runs(
    workspace: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Vec<RunListing>, FindRunError> {
    Ok(list_verified_runs(workspace, env)
        .await?
        .into_iter()
        .map(|(listing, _)| listing)
        .collect())
}

/// [`list_runs`], each listing with the state it verified (`None` for a refused run).
pub async fn list_verified_runs(
    workspace: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Vec<(RunListing, Option<RunState>)>, FindRunError> {
    let dir = runs_dir(workspace);
    let tracked = trust::tracked_run_dirs(workspace, env)
        .await
        .map_err(|source| RunIntegrityError::Git {
            run: "(any)".into(),
            source,
        })?;
    let mut listings: Vec<(RunListing, Option<RunState>)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| driver::RunHandle::state_path(path).exists())
        .map(|path| {
            let run_id = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let verified = if tracked.contains(&run_id) {
                Err(RunIntegrityError::Tracked {
                    run: run_id.clone(),
                    dir: path.clone(),
                })
            } else {
                trust::verify_untracked(workspace, &path)
            };
            match verified {
                Ok(state) => (
                    RunListing {
                        run_id,
                        dir: path,
                        summary: Some(RunListingSummary {
                            phase: phase_name(&state),
                            pause: state.pause.as_ref().map(|p| p.code.to_string()),
                            created_at: state.created_at,
                            updated_at: state.updated_at,
                            objective: state
                                .objective
                                .lines()
                                .next()
                                .unwrap_or_default()
                                .to_owned(),
                        }),
                        refused: None,
                    },
                    Some(state),
                ),
                Err(e) => (
                    RunListing {
                        run_id,
                        dir: path,
                        summary: None,
                        refused: Some(e.to_string()),
                    },
                    None,
                ),
            }
        })
        .collect();
    listings.sort_by(|(a, _), (b, _)| {
        let key = |l: &RunListing| l.summary.as_ref().map(|s| s.updated_at);
        key(b).cmp(&key(a)).then_with(|| a.run_id.cmp(&b.run_id))
    });
    Ok(listings)
}

fn phase_name(state: &RunState) -> String {
    serde_json::to_value(state.phase)
        .ok()
        .and_then(|v| v.get("phase").and_then(|p| p.as_str().map(str::to_owned)))
        .unwrap_or_default()
}

/// The plan's `prepare` steps per milestone (the approved plan's, else the latest's).
fn prepare_lines(state: &RunState) -> String {
    let Some(plan) = state.approved_plan().or_else(|| state.latest_plan()) else {
        return String::new();
    };
    let count = plan.plan["milestones"].as_array().map_or(0, Vec::len);
    let mut out = String::new();
    for m in 0..count {
        let steps = prepare::of_milestone(&plan.plan, m);
        if steps.is_empty() {
            continue;
        }
        let commands: Vec<String> = steps.iter().map(|s| format!("`{}`", s.as_str())).collect();
        out.push_str(&format!("  milestone {}: {}\n", m + 1, commands.join(", ")));
    }
    if out.is_empty() {
        return out;
    }
    format!("prepare steps (run by autocode before the checks of every replay):\n{out}")
}

/// One line per attempt plus the pause or completion: what `autocode status` prints.
pub fn render_status(state: &RunState) -> String {
    let mut out = format!(
        "run {}  phase {}  provider {}\nobjective: {}\nwork tree: {}\n",
        state.run_id,
        phase_name(state),
        state.provider,
        state.objective.lines().next().unwrap_or_default(),
        state.work_tree.display()
    );
    if state.unconfined {
        out.push_str(
            "room: none (started --unconfined: the agents ran with the ownership boundary only)\n",
        );
    }
    // Columns as wide as their longest entry, so `006-completion_reviewer-1` fits.
    let dir_width = state
        .attempts
        .iter()
        .map(|a| a.dir.len())
        .max()
        .unwrap_or(0);
    // The route column as wide as the widest route, up to the stage lines' column (a longer
    // route is cut with `…`), so a row fits 80 columns.
    let route_width = state
        .attempts
        .iter()
        .map(|a| a.route.provider.as_str().len() + 1 + a.route.model.len())
        .max()
        .unwrap_or(0)
        .min(progress::ROUTE_COLUMN);
    // A cost column only when some stage's cost is known (the total line says when it is not).
    let any_cost = state.attempts.iter().any(|a| a.usage.cost_usd.is_some());
    for a in &state.attempts {
        let outcome = match &a.status {
            // A pause over a `running` attempt means it was cut off (see `autocode status`).
            AttemptStatus::Running if state.pause.is_some() => "interrupted".to_owned(),
            AttemptStatus::Running => "running".to_owned(),
            AttemptStatus::Accepted => "accepted".to_owned(),
            AttemptStatus::Rejected { reason } => format!("rejected: {reason}"),
            AttemptStatus::Paused { code } => format!("paused {code}"),
            AttemptStatus::Abandoned => "abandoned".to_owned(),
        };
        let secs = a
            .finished_at
            .map(|f| (f - a.started_at).num_milliseconds() as f64 / 1000.0)
            .unwrap_or(0.0);
        let cost = match (any_cost, a.usage.cost_usd) {
            (false, _) => String::new(),
            (true, Some(c)) => format!("{:<8}", format!("${c:.4}")),
            (true, None) => format!("{:<8}", "?"),
        };
        let route = progress::route_cell(&format!("{}/{}", a.route.provider, a.route.model));
        let route: String = route.chars().take(route_width).collect();
        out.push_str(&format!(
            "  {:<dir_width$} {route:<route_width$} {:>6.1}s {:>7} tok  {cost}{}\n",
            a.dir,
            secs,
            a.usage.total_tokens(),
            outcome
        ));
        if a.role == crate::role::Role::Builder
            && let Some(line) =
                runner::builder_attribution_line(&state.run_dir().join("stages").join(&a.dir))
        {
            out.push_str(&format!("    {line}\n"));
        }
    }
    let cost = state
        .usage
        .cost_usd
        .map(|c| format!("${c:.4}"))
        .unwrap_or_else(|| "unknown".into());
    out.push_str(&format!(
        "total: {} tokens, cost {cost}, {:.1} active seconds\n",
        state.usage.total_tokens(),
        state.active_ms as f64 / 1000.0
    ));
    let v = &state.verification;
    if !v.objective_commands.is_empty() {
        out.push_str("commands the objective shows (required checks are replayed by the final gate whatever the plan says):\n");
        out.push_str(&crate::verify::objective::describe(
            &v.objective_commands,
            &flow::milestones(state),
        ));
    } else if !v.required_checks.is_empty() {
        out.push_str(
            "required by the objective (replayed by the final gate whatever the plan says):\n",
        );
        for check in &v.required_checks {
            out.push_str(&format!("  `{check}`\n"));
        }
    }
    out.push_str(&prepare_lines(state));
    if let Some(pause) = &state.pause {
        out.push_str(&format!(
            "paused {}: {}\nnext: {}\n",
            pause.code, pause.reason, pause.next_step
        ));
    } else if state.completed_at.is_some() {
        out.push_str(&review::completion_message(&v.verified).replacen("complete", "COMPLETE", 1));
        out.push('\n');
    }
    out
}
