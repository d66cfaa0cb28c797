//! The read-only views: the runs of every workspace, one run, one stage's records and a run's
//! files. Every run is found and verified by `run::list_runs` / `run::find_run` (the code behind
//! `autocode runs` and `autocode status`); records are read through `run::integrity` (their tag
//! verified) and shown as refused when it does not verify.

use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::AppState;
use super::liveness::{self, Holder};
use crate::ids::RunId;
use crate::run::state::{AttemptRecord, AttemptStatus, RunState};
use crate::run::{self, FindRunError, FoundRun};

/// The largest record or file the views read (bigger: refused with its size).
pub const FILE_CAP: u64 = 4 << 20;

/// A view's failure, answered as JSON with its status.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("no workspace #{0} in this dashboard")]
    NoWorkspace(usize),
    #[error("{0}")]
    BadId(#[from] crate::ids::InvalidId),
    #[error(transparent)]
    Find(#[from] FindRunError),
    #[error("run {run} has no stage {stage}")]
    NoStage { run: String, stage: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Bad(String),
    #[error("{0}")]
    Internal(String),
}

impl IntoResponse for ViewError {
    fn into_response(self) -> Response {
        let status = match &self {
            ViewError::NoWorkspace(_)
            | ViewError::NoStage { .. }
            | ViewError::NotFound(_)
            | ViewError::Find(FindRunError::NotFound { .. } | FindRunError::NoRuns { .. }) => {
                StatusCode::NOT_FOUND
            }
            ViewError::Find(FindRunError::Refused(_)) => StatusCode::FORBIDDEN,
            ViewError::BadId(_) | ViewError::Bad(_) => StatusCode::BAD_REQUEST,
            ViewError::Conflict(_) => StatusCode::CONFLICT,
            ViewError::Find(_) | ViewError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let hint = match &self {
            ViewError::Find(e) => e.hint(),
            _ => None,
        };
        (
            status,
            Json(json!({ "error": self.to_string(), "hint": hint })),
        )
            .into_response()
    }
}

/// The workspace `ws` of this dashboard.
pub(crate) fn workspace(state: &AppState, ws: usize) -> Result<&Path, ViewError> {
    state
        .workspaces
        .get(ws)
        .map(PathBuf::as_path)
        .ok_or(ViewError::NoWorkspace(ws))
}

/// The run `run` of workspace `ws`, verified as `autocode status RUN` verifies it.
pub(crate) async fn found(state: &AppState, ws: usize, run: &str) -> Result<FoundRun, ViewError> {
    let workspace = workspace(state, ws)?;
    let id = RunId::new(run)?;
    Ok(run::find_run(workspace, Some(&id), &state.env).await?)
}

/// The revision a page shows and a decision must name: the state's update time.
pub fn revision(state: &RunState) -> String {
    state
        .updated_at
        .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// The attempt that runs now or ran last.
fn current_attempt(state: &RunState) -> Option<&AttemptRecord> {
    state
        .attempts
        .iter()
        .rev()
        .find(|a| matches!(a.status, AttemptStatus::Running))
        .or_else(|| state.attempts.last())
}

/// When the stage's event file last changed.
fn last_event_at(dir: &Path, attempt: Option<&AttemptRecord>) -> Option<DateTime<Utc>> {
    let attempt = attempt?;
    let meta =
        std::fs::metadata(dir.join("stages").join(&attempt.dir).join("events.jsonl")).ok()?;
    meta.modified().ok().map(DateTime::<Utc>::from)
}

#[derive(Serialize)]
struct RunRow {
    workspace: usize,
    run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    objective: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stage: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_event_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Value>,
    /// The process driving the run now, from its lock.
    #[serde(skip_serializing_if = "Option::is_none")]
    driven_by: Option<Holder>,
    /// An attempt is recorded as running but nobody drives the run: it was cut off.
    cut_off: bool,
}

fn stage_json(attempt: &AttemptRecord) -> Value {
    json!({
        "dir": attempt.dir,
        "role": attempt.role,
        "route": attempt.route,
        "status": attempt.status,
        "attempt": attempt.attempt,
    })
}

/// `GET /api/runs`: every run of every workspace, as `autocode runs --json` lists them, with
/// the current stage, usage and liveness.
pub async fn runs(State(state): State<AppState>) -> Result<Json<Value>, ViewError> {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    let locks = liveness::Locks::now();
    for (index, workspace) in state.workspaces.iter().enumerate() {
        let listings = match run::list_verified_runs(workspace, &state.env).await {
            Ok(l) => l,
            Err(e) => {
                problems.push(json!({"workspace": index, "error": e.to_string()}));
                continue;
            }
        };
        for (listing, loaded) in listings {
            let Some(summary) = listing.summary else {
                rows.push(RunRow {
                    workspace: index,
                    run_id: listing.run_id,
                    refused: listing.refused,
                    phase: None,
                    pause: None,
                    objective: None,
                    updated_at: None,
                    stage: None,
                    last_event_at: None,
                    usage: None,
                    driven_by: None,
                    cut_off: false,
                });
                continue;
            };
            let attempt = loaded.as_ref().and_then(current_attempt);
            let driven_by = liveness::holder_among(&locks, &listing.dir.join("lock"));
            let cut_off = driven_by.is_none()
                && loaded
                    .as_ref()
                    .is_some_and(|s| run::cut_off_pause(s).is_some());
            rows.push(RunRow {
                workspace: index,
                run_id: listing.run_id,
                refused: None,
                phase: Some(summary.phase),
                pause: summary.pause,
                objective: Some(summary.objective),
                updated_at: Some(summary.updated_at),
                stage: attempt.map(stage_json),
                last_event_at: last_event_at(&listing.dir, attempt),
                usage: loaded
                    .as_ref()
                    .and_then(|s| serde_json::to_value(s.usage).ok()),
                driven_by,
                cut_off,
            });
        }
    }
    Ok(Json(json!({
        "workspaces": state.workspaces,
        "runs": rows,
        "problems": problems,
        "now": Utc::now(),
    })))
}

/// `GET /api/ws/{ws}/runs/{run}`: the verified state (what `status --json` prints), its pause
/// explained, the decisions it waits for, how each criterion was verified, and liveness.
pub async fn run(
    State(state): State<AppState>,
    UrlPath((ws, run_id)): UrlPath<(usize, String)>,
) -> Result<Json<Value>, ViewError> {
    let FoundRun { dir, state: run } = found(&state, ws, &run_id).await?;
    let driven_by = liveness::holder(&dir.join("lock"));
    let cut_off = if driven_by.is_none() {
        run::cut_off_pause(&run)
    } else {
        None
    };
    let pause = run.pause.as_ref().or(cut_off.as_ref());
    let explained = pause.map(|p| {
        json!({
            "code": p.code,
            "explanation": p.code.explanation(),
            "reason": p.reason,
            "next_step": p.next_step,
        })
    });
    let replays: Vec<String> = std::fs::read_dir(dir.join("replays"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let decisions = state.decisions.for_run(ws, &run_id);
    Ok(Json(json!({
        "workspace": ws,
        "revision": revision(&run),
        "plan_token": run.latest_plan().map(|p| p.token()),
        // What the final gate showed the person (the criterion, why, the diff bearing on it).
        "pending_reviews": run.verification.pending_reviews,
        "test_change_review": run.verification.test_change_review,
        "verified": crate::run::review::verified_summary(&run),
        "pause": explained,
        "cut_off": cut_off.is_some(),
        "driven_by": driven_by,
        "replays": replays,
        "decisions": decisions,
        "state": run,
    })))
}

/// A tagged record of a stage: its value, or why it is not shown.
fn record(path: &Path) -> Value {
    match std::fs::metadata(path) {
        Err(_) => Value::Null,
        Ok(meta) if meta.len() > FILE_CAP => {
            json!({ "refused": format!("{} bytes, over the {FILE_CAP}-byte cap", meta.len()) })
        }
        Ok(_) => match crate::run::integrity::read_record::<Value>(path) {
            Ok(value) => json!({ "verified": value }),
            Err(e) => json!({ "refused": e.to_string() }),
        },
    }
}

/// `GET /api/ws/{ws}/runs/{run}/stages/{stage}`: the stage's report and schema verdict, its
/// evidence, the ledger of commands the boundary saw, its room and its boundary receipt.
pub async fn stage(
    State(state): State<AppState>,
    UrlPath((ws, run_id, stage)): UrlPath<(usize, String, String)>,
) -> Result<Json<Value>, ViewError> {
    let FoundRun { dir, state: run } = found(&state, ws, &run_id).await?;
    let attempt = run
        .attempts
        .iter()
        .find(|a| a.dir == stage)
        .ok_or_else(|| ViewError::NoStage {
            run: run_id.clone(),
            stage: stage.clone(),
        })?;
    let stage_dir = dir.join("stages").join(&attempt.dir);
    let ledger = crate::supervise::read_ledger(&stage_dir.join("ledger.jsonl"))
        .map(|l| l.into_iter().take(1000).collect::<Vec<_>>())
        .ok();
    Ok(Json(json!({
        "attempt": attempt,
        "report": record(&stage_dir.join("report.json")),
        "validation": record(&stage_dir.join("validation.json")),
        "evidence": record(&stage_dir.join("evidence.json")),
        "room": record(&stage_dir.join("room.json")),
        "receipt": record(&stage_dir.join("supervision.json")),
        "ledger": ledger,
    })))
}

#[derive(serde::Deserialize)]
pub struct FileQuery {
    path: String,
}

/// Resolves `relative` inside `root`: no absolute path, no `..`, and the resolved file (links
/// followed) still inside the resolved root.
pub fn contained(root: &Path, relative: &str) -> Result<PathBuf, ViewError> {
    let rel = Path::new(relative);
    let plain = rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if relative.is_empty() || !plain {
        return Err(ViewError::Bad(format!(
            "{relative:?} is not a plain path inside the run directory"
        )));
    }
    let root = std::fs::canonicalize(root).map_err(|e| ViewError::Internal(e.to_string()))?;
    let resolved = std::fs::canonicalize(root.join(rel))
        .map_err(|_| ViewError::NotFound(format!("no file {relative:?}")))?;
    if !resolved.starts_with(&root) {
        return Err(ViewError::Bad(format!(
            "{relative:?} resolves outside the run directory"
        )));
    }
    Ok(resolved)
}

/// `GET /api/ws/{ws}/runs/{run}/files?path=REL`: one file of the run directory (a replay
/// record, a stage's output), as text, contained in the run directory and capped.
pub async fn run_file(
    State(state): State<AppState>,
    UrlPath((ws, run_id)): UrlPath<(usize, String)>,
    Query(query): Query<FileQuery>,
) -> Result<Response, ViewError> {
    let FoundRun { dir, .. } = found(&state, ws, &run_id).await?;
    let path = contained(&dir, &query.path)?;
    let bytes = crate::bounded_read::read_capped(&path, FILE_CAP)
        .map_err(|e| ViewError::Bad(e.to_string()))?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; charset=utf-8",
        )],
        String::from_utf8_lossy(&bytes).into_owned(),
    )
        .into_response())
}
