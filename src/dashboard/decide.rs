//! The decisions a person makes from the page, each through the command the CLI runs for it:
//! `autocode resume RUN` with `--approve-plan TOKEN`, `--answer ID=TEXT`, `--accept C`,
//! `--reject C --because WHY`, `--accept-test-changes`, `--abandon-stage DIR` (or nothing:
//! resume a paused run);
//! `autocode apply RUN`; `autocode clean RUN`; and stop, which is what Ctrl-C does: SIGINT to
//! the autocode process that holds the run's lock. The commands run as children of the server
//! (`supervise::run_in_current_family`; each is the boundary of the agents it starts), in a task
//! of their own, so a resume outlives the HTTP request that asked for it.
//!
//! A decision names the run's revision the page showed (and, to approve a plan, the plan token
//! shown); it is refused when the run moved on since, when another process drives the run, or
//! when the run does not wait for that decision. It carries a request id: the same id again
//! answers the first outcome instead of deciding twice. Each accepted decision is recorded as a
//! line of the run's `activity.jsonl`, marked as made from the dashboard.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::Mutex;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::AppState;
use super::liveness;
use super::view::{ViewError, found, revision, workspace};
use crate::pause::PauseCode;
use crate::run::state::Phase;

/// What a person decides. The strings are API (the page sends them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    ApprovePlan,
    Answer,
    AcceptCriterion,
    RejectCriterion,
    AcceptTestChanges,
    /// Set the paused attempt aside and run its stage again (`--abandon-stage DIR`).
    AbandonStage,
    Resume,
    Stop,
    Apply,
    Clean,
}

/// A decision as the page posts it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub request_id: String,
    /// The run's revision the page showed (`revision` of the run view).
    pub revision: String,
    pub action: Action,
    #[serde(default)]
    pub plan_token: Option<String>,
    #[serde(default)]
    pub answers: Vec<(String, String)>,
    #[serde(default)]
    pub criterion: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// Where a decision stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    Done,
    Failed,
}

/// One decision and its outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub request_id: String,
    pub workspace: usize,
    pub run_id: String,
    pub action: Action,
    pub made_at: DateTime<Utc>,
    pub status: Status,
    /// The command run (`autocode resume …`), or the signal sent.
    pub command: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The command's `--json` document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The end of its stderr (what it told a person).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub messages: String,
}

/// The decisions this server made, by request id.
#[derive(Default)]
pub struct Ledger {
    records: Mutex<HashMap<String, Record>>,
}

impl Ledger {
    fn get(&self, id: &str) -> Option<Record> {
        self.lock().get(id).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The run's decisions, newest first.
    pub fn for_run(&self, ws: usize, run_id: &str) -> Vec<Record> {
        let mut out: Vec<Record> = self
            .lock()
            .values()
            .filter(|r| r.workspace == ws && r.run_id == run_id)
            .cloned()
            .collect();
        out.sort_by_key(|r| std::cmp::Reverse(r.made_at));
        out
    }

    fn finish(&self, id: &str, update: impl FnOnce(&mut Record)) {
        if let Some(record) = self.lock().get_mut(id) {
            update(record);
        }
    }
}

/// The most of a command's output kept.
const OUTPUT_CAP: usize = 1 << 20;
/// The most of its stderr shown.
const MESSAGES_CAP: usize = 8 << 10;

fn refused(status: StatusCode, why: String) -> Response {
    (status, Json(json!({ "error": why }))).into_response()
}

fn valid_request_id(id: &str) -> bool {
    (8..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether the run waits for `action`, and the `resume` flags that make it.
fn flags_for(
    request: &Request,
    pause: Option<PauseCode>,
    run: &crate::run::state::RunState,
) -> Result<Vec<String>, String> {
    let waiting = |code: PauseCode| {
        if pause == Some(code) {
            Ok(())
        } else {
            Err(format!(
                "the run does not wait for this decision (it waits for {}): reload the page",
                pause.map_or_else(|| "nothing".to_owned(), |p| p.to_string())
            ))
        }
    };
    match request.action {
        Action::ApprovePlan => {
            waiting(PauseCode::AwaitingPlanApproval)?;
            let shown = request.plan_token.as_deref().unwrap_or_default();
            let latest = run.latest_plan().map(|p| p.token());
            if latest.as_deref() != Some(shown) {
                return Err(format!(
                    "the plan you saw ({shown}) is not the plan that waits for approval ({}): reload the page",
                    latest.unwrap_or_else(|| "none".into())
                ));
            }
            Ok(vec!["--approve-plan".into(), shown.to_owned()])
        }
        Action::Answer => {
            waiting(PauseCode::WaitingForUser)?;
            if request.answers.is_empty() {
                return Err("no answers given".into());
            }
            let mut flags = Vec::new();
            for (id, text) in &request.answers {
                if !run.questions.iter().any(|q| &q.id == id) {
                    return Err(format!("the run asked no question {id:?}"));
                }
                flags.push("--answer".into());
                flags.push(format!("{id}={text}"));
            }
            Ok(flags)
        }
        Action::AcceptCriterion | Action::RejectCriterion => {
            waiting(PauseCode::AwaitingHumanReview)?;
            let criterion = request.criterion.clone().unwrap_or_default();
            let pending = &run.verification.pending_reviews;
            if !pending.iter().any(|p| p.criterion_id == criterion) {
                return Err(format!(
                    "criterion {criterion:?} does not wait for a person: reload the page"
                ));
            }
            if request.action == Action::AcceptCriterion {
                return Ok(vec!["--accept".into(), criterion]);
            }
            let reason = request.reason.clone().unwrap_or_default();
            if reason.trim().is_empty() {
                return Err("a rejection needs a reason (it is handed to the builder)".into());
            }
            Ok(vec![
                "--reject".into(),
                criterion,
                "--because".into(),
                reason,
            ])
        }
        Action::AcceptTestChanges => {
            waiting(PauseCode::AwaitingTestChangeReview)?;
            Ok(vec!["--accept-test-changes".into()])
        }
        Action::AbandonStage => match run.pause.as_ref().and_then(|p| p.attempt.clone()) {
            Some(dir) => Ok(vec!["--abandon-stage".into(), dir]),
            None => Err("the pause names no attempt to set aside".into()),
        },
        Action::Resume => match pause {
            Some(_) => Ok(vec![]),
            None => Err("the run is not paused".into()),
        },
        Action::Apply if run.phase != Phase::Complete => {
            Err("the run is not complete: there is no result to apply".into())
        }
        Action::Stop | Action::Apply | Action::Clean => Ok(vec![]),
    }
}

/// A line of the run's `activity.jsonl` (the shape `run::handle` writes).
#[derive(Serialize)]
struct Activity<'a> {
    at: DateTime<Utc>,
    event: &'a str,
    detail: Option<&'a str>,
}

/// `POST …/decide`: check the decision against the run as it is now, record it, carry it out.
pub async fn decide(
    State(state): State<AppState>,
    UrlPath((ws, run_id)): UrlPath<(usize, String)>,
    Json(request): Json<Request>,
) -> Result<Response, ViewError> {
    if !valid_request_id(&request.request_id) {
        return Err(ViewError::Bad(
            "request_id: 8 to 64 letters, digits, '-' or '_'".into(),
        ));
    }
    if let Some(record) = state.decisions.get(&request.request_id) {
        if record.workspace != ws || record.run_id != run_id || record.action != request.action {
            return Ok(refused(
                StatusCode::CONFLICT,
                "this request id was used for another decision".into(),
            ));
        }
        return Ok((StatusCode::OK, Json(record)).into_response());
    }
    let found = found(&state, ws, &run_id).await?;
    let workspace = workspace(&state, ws)?.to_owned();
    let now = revision(&found.state);
    if now != request.revision {
        return Ok(refused(
            StatusCode::CONFLICT,
            format!(
                "the run moved on since the page was drawn (revision {}, now {now}): reload the page",
                request.revision
            ),
        ));
    }
    let holder = liveness::holder(&found.dir.join("lock"));
    let pause = found.state.pause.as_ref().map(|p| p.code).or_else(|| {
        holder
            .is_none()
            .then(|| crate::run::cut_off_pause(&found.state).map(|p| p.code))
            .flatten()
    });
    let flags = match flags_for(&request, pause, &found.state) {
        Ok(f) => f,
        Err(why) => return Ok(refused(StatusCode::CONFLICT, why)),
    };
    let command: Vec<String> = match (request.action, &holder) {
        (Action::Stop, None) => {
            return Ok(refused(
                StatusCode::CONFLICT,
                "no autocode process drives this run: there is nothing to stop".into(),
            ));
        }
        (Action::Stop, Some(h)) => vec!["kill".into(), "-INT".into(), h.pid.to_string()],
        (_, Some(h)) => {
            return Ok(refused(
                StatusCode::CONFLICT,
                format!(
                    "autocode process {} drives this run now: stop it first, or wait",
                    h.pid
                ),
            ));
        }
        (action, None) => {
            let verb = match action {
                Action::Apply => "apply",
                Action::Clean => "clean",
                _ => "resume",
            };
            let mut args = vec![
                verb.to_owned(),
                run_id.clone(),
                "--workspace".into(),
                workspace.display().to_string(),
                "--json".into(),
            ];
            if verb == "resume" {
                args.push("--quiet".into());
            }
            args.extend(flags);
            args
        }
    };
    // Claim the request id; a concurrent twin answers the claim.
    let record = Record {
        request_id: request.request_id.clone(),
        workspace: ws,
        run_id: run_id.clone(),
        action: request.action,
        made_at: Utc::now(),
        status: Status::Running,
        command: command.clone(),
        exit_code: None,
        output: None,
        messages: String::new(),
    };
    {
        let mut records = state.decisions.lock();
        if let Some(existing) = records.get(&request.request_id) {
            return Ok((StatusCode::OK, Json(existing.clone())).into_response());
        }
        records.insert(request.request_id.clone(), record.clone());
    }
    let detail = format!("request {}: {}", request.request_id, command.join(" "));
    let event = format!(
        "dashboard decision: {}",
        serde_json::to_value(request.action)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    );
    if let Err(e) = crate::store::append_json_line(
        &found.dir.join("activity.jsonl"),
        &Activity {
            at: Utc::now(),
            event: &event,
            detail: Some(&detail),
        },
    ) {
        tracing::warn!("could not record the decision in the activity log: {e}");
    }
    if let (Action::Stop, Some(h)) = (request.action, holder) {
        let sent = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(h.pid),
            nix::sys::signal::Signal::SIGINT,
        );
        state.decisions.finish(&request.request_id, |r| match sent {
            Ok(()) => r.status = Status::Done,
            Err(e) => {
                r.status = Status::Failed;
                r.messages = format!("could not signal {}: {e}", h.pid);
            }
        });
        let record = state.decisions.get(&request.request_id).unwrap_or(record);
        return Ok((StatusCode::ACCEPTED, Json(record)).into_response());
    }
    let task_state = state.clone();
    let id = request.request_id.clone();
    tokio::spawn(async move {
        let exe = OsString::from(&task_state.exe);
        let args: Vec<OsString> = command.iter().map(OsString::from).collect();
        let out =
            crate::supervise::run_in_current_family(&exe, &args, &workspace, OUTPUT_CAP).await;
        task_state.decisions.finish(&id, |r| match out {
            Ok(out) => {
                r.exit_code = match out.exit {
                    crate::supervise::Exit::Code(c) => Some(c),
                    _ => None,
                };
                // 0: done; 3: paused again (a decision that led to the next pause is done).
                r.status = match r.exit_code {
                    Some(0 | 3) => Status::Done,
                    _ => Status::Failed,
                };
                let stdout = String::from_utf8_lossy(&out.stdout);
                r.output = serde_json::from_str(stdout.trim()).ok().or_else(|| {
                    stdout
                        .lines()
                        .rev()
                        .find_map(|l| serde_json::from_str(l).ok())
                });
                let stderr = String::from_utf8_lossy(&out.stderr);
                let mut start = stderr.len().saturating_sub(MESSAGES_CAP);
                while !stderr.is_char_boundary(start) {
                    start += 1;
                }
                r.messages = stderr[start..].to_owned();
            }
            Err(e) => {
                r.status = Status::Failed;
                r.messages = e.to_string();
            }
        });
    });
    Ok((StatusCode::ACCEPTED, Json(record)).into_response())
}

/// `GET /api/decisions/{id}`: where a decision stands.
pub async fn status(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Record>, ViewError> {
    state
        .decisions
        .get(&id)
        .map(Json)
        .ok_or_else(|| ViewError::NotFound(format!("no decision {id:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_plain_and_bounded() {
        assert!(valid_request_id("abcdefgh-1234_X"));
        assert!(!valid_request_id("short"));
        assert!(!valid_request_id("has space in it"));
        assert!(!valid_request_id(&"x".repeat(65)));
    }

    #[test]
    fn actions_serialize_as_their_api_strings() {
        let text = serde_json::to_string(&Action::AcceptTestChanges).expect("serializes");
        assert_eq!(text, "\"accept_test_changes\"");
    }
}
