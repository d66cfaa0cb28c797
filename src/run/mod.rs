//! The run engine: roles, stages, checked reports, evidence, checkpoints, pause codes and resume.
//!
//! - [`state`]: the one typed run state (`run.json`).
//! - [`flow`]: pure rules for what comes next and how accepted reports move the run.
//! - [`driver`]: runs attempts, repairs and pauses, checkpointing after every step.
//! - [`prompt`], [`budget`], [`replay`], [`workspace`]: what the driver uses.
//!
//! A run lives in `<workspace>/.autocode/runs/<run-id>/`; see `docs/run-lifecycle.md`.

pub mod api;
pub mod budget;
pub mod confine;
pub mod driver;
pub mod flow;
pub mod prompt;
pub mod replay;
pub mod runner;
pub mod state;
pub mod workspace;

use std::path::{Path, PathBuf};

use crate::ids::RunId;
use crate::store::{self, StoreError};
use state::{AttemptStatus, RUN_FORMAT, RunState};

/// `<workspace>/.autocode/runs`.
pub fn runs_dir(workspace: &Path) -> PathBuf {
    workspace.join(".autocode").join("runs")
}

#[derive(Debug, thiserror::Error)]
pub enum FindRunError {
    #[error("no runs in {dir}")]
    NoRuns { dir: PathBuf },
    #[error("no run {run_id} in {dir}")]
    NotFound { run_id: RunId, dir: PathBuf },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Loads a run's state (format version checked).
pub fn load(dir: &Path) -> Result<RunState, StoreError> {
    store::read_versioned_json(&driver::RunHandle::state_path(dir), RUN_FORMAT)
}

/// The directory of `run_id`, or of the most recently updated run when none is named.
pub fn find_run(workspace: &Path, run_id: Option<&RunId>) -> Result<PathBuf, FindRunError> {
    let dir = runs_dir(workspace);
    if let Some(id) = run_id {
        let path = dir.join(id.as_str());
        return if driver::RunHandle::state_path(&path).exists() {
            Ok(path)
        } else {
            Err(FindRunError::NotFound {
                run_id: id.clone(),
                dir,
            })
        };
    }
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let state = driver::RunHandle::state_path(&entry.path());
        if let Ok(modified) = std::fs::metadata(&state).and_then(|m| m.modified())
            && best.as_ref().is_none_or(|(t, _)| modified > *t)
        {
            best = Some((modified, entry.path()));
        }
    }
    best.map(|(_, p)| p).ok_or(FindRunError::NoRuns { dir })
}

/// One line per attempt plus the pause or completion: what `autocode status` prints.
pub fn render_status(state: &RunState) -> String {
    let mut out = format!(
        "run {}  phase {}  provider {}\nobjective: {}\nwork tree: {}\n",
        state.run_id,
        serde_json::to_value(state.phase)
            .ok()
            .and_then(|v| v.get("phase").and_then(|p| p.as_str().map(str::to_owned)))
            .unwrap_or_default(),
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
    let route_width = state
        .attempts
        .iter()
        .map(|a| a.route.provider.as_str().len() + 1 + a.route.model.len())
        .max()
        .unwrap_or(0);
    for a in &state.attempts {
        let outcome = match &a.status {
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
        let cost = a
            .usage
            .cost_usd
            .map(|c| format!("${c:.4}"))
            .unwrap_or_else(|| "cost unknown".into());
        out.push_str(&format!(
            "  {:<dir_width$} {:<route_width$} {:>7.1}s {:>8} tokens  {:<13} {}\n",
            a.dir,
            format!("{}/{}", a.route.provider, a.route.model),
            secs,
            a.usage.total_tokens(),
            cost,
            outcome
        ));
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
    if let Some(pause) = &state.pause {
        out.push_str(&format!(
            "paused {}: {}\nnext: {}\n",
            pause.code, pause.reason, pause.next_step
        ));
    } else if state.completed_at.is_some() {
        out.push_str("COMPLETE: every criterion verified and replayed on the final tree\n");
    }
    out
}
