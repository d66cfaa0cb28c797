//! The run's directory and its typed state as the driver holds them: one durable commit per
//! change (`super::checkpoint`), `activity.jsonl` lines, and a pause recorded with its code,
//! reason and next step. How a drive ends ([`DriveOutcome`]) and fails ([`DriverError`]).

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::flow::PauseDecision;
use super::state::{PauseRecord, RunState};
use crate::pause::PauseCode;
use crate::store::{self, StoreError};
use crate::transport::Route;

/// How a drive ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum DriveOutcome {
    Complete,
    Paused { pause: PauseRecord },
}

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The run's directory and its state, committed durably on every change (`run::checkpoint`).
pub struct RunHandle {
    pub dir: PathBuf,
    pub state: RunState,
    /// What of the attempts is already on disk.
    log: super::checkpoint::AttemptLog,
}

#[derive(Serialize)]
struct Activity<'a> {
    at: DateTime<Utc>,
    event: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

impl RunHandle {
    /// A handle on a state just read from `dir`, or just created for it.
    pub fn new(dir: PathBuf, state: RunState) -> RunHandle {
        let log = super::checkpoint::AttemptLog::of(&state);
        RunHandle { dir, state, log }
    }

    pub fn state_path(dir: &Path) -> PathBuf {
        super::checkpoint::state_path(dir)
    }

    /// One durable commit of the state (and of the stage files and activity written since).
    pub fn checkpoint(&mut self) -> Result<(), StoreError> {
        self.state.updated_at = Utc::now();
        let started = std::time::Instant::now();
        let committed = super::checkpoint::commit(&self.dir, &mut self.state, &mut self.log);
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "checkpoint committed"
        );
        committed
    }

    /// An `activity.jsonl` line, made durable with the next checkpoint.
    pub fn activity(&self, event: &str, detail: Option<&str>) -> Result<(), StoreError> {
        store::append_json_line_as(
            &self.dir.join("activity.jsonl"),
            &Activity {
                at: Utc::now(),
                event,
                detail,
            },
            store::Durability::Deferred,
        )
    }

    pub(super) fn pause(
        &mut self,
        decision: PauseDecision,
        attempt: Option<String>,
    ) -> Result<DriveOutcome, StoreError> {
        self.pause_until(decision, attempt, None)
    }

    pub(super) fn pause_until(
        &mut self,
        decision: PauseDecision,
        attempt: Option<String>,
        resume_after: Option<DateTime<Utc>>,
    ) -> Result<DriveOutcome, StoreError> {
        let mut next_step = decision.code.next_step().to_owned();
        if decision.code == PauseCode::PausedOutputCap
            && let Some(record) = attempt
                .as_deref()
                .and_then(|dir| self.state.attempts.iter().find(|a| a.dir == dir))
        {
            let setting = output_cap_setting(&self.state, &record.route);
            next_step = next_step.replace(crate::pause::OUTPUT_CAP_PHRASE, &setting);
        }
        let next_step = next_step
            .replace("RUN", self.state.run_id.as_str())
            .replace("ATTEMPT", attempt.as_deref().unwrap_or("ATTEMPT"));
        let reason = match (&attempt, decision.code) {
            // Name the log the pause refers to.
            (Some(dir), PauseCode::PausedProviderUncertain) => {
                let stage = self.dir.join("stages").join(dir);
                format!(
                    "{} (stage log: {}; its event stream: {})",
                    decision.reason,
                    stage.join("stderr.log").display(),
                    stage.join("stdout.log").display()
                )
            }
            _ => decision.reason,
        };
        let record = PauseRecord {
            code: decision.code,
            reason,
            next_step,
            at: Utc::now(),
            attempt,
            resume_after,
        };
        self.state.pause = Some(record.clone());
        self.checkpoint()?;
        self.activity(&format!("paused {}", record.code), Some(&record.reason))?;
        Ok(DriveOutcome::Paused { pause: record })
    }
}

/// What raises the response cap of `route`, for `PAUSED_OUTPUT_CAP`'s next step: the direct
/// runtime's own per-endpoint setting (read from the run's transport identity: the endpoint's
/// kind and its cap), OpenCode's and Claude Code's variables for their routes, and for any other
/// provider its own setting, unnamed (autocode does not know it).
pub fn output_cap_setting(state: &RunState, route: &Route) -> String {
    match route.provider.as_str() {
        crate::direct::PROVIDER_NAME => direct_output_cap_setting(state, &route.model),
        "opencode" => format!(
            "the response cap of OpenCode: set {} (autocode passes 64000 unless your environment holds a number) to more",
            crate::transport::opencode::OUTPUT_TOKEN_MAX_VAR
        ),
        "claude" => "the response cap of Claude Code: set CLAUDE_CODE_MAX_OUTPUT_TOKENS in your environment to more".to_owned(),
        other => format!("the response cap of provider {other} (its own output-token setting)"),
    }
}

fn direct_output_cap_setting(state: &RunState, model: &str) -> String {
    let endpoints = state
        .transport_identities
        .get(crate::direct::PROVIDER_NAME)
        .and_then(|i| i["transport"]["endpoints"].as_array().cloned())
        .unwrap_or_default();
    // `ENDPOINT/MODEL`, or `MODEL` alone when one endpoint serves it.
    let endpoint = model
        .split_once('/')
        .and_then(|(name, _)| endpoints.iter().find(|e| e["endpoint"] == name))
        .or_else(|| {
            endpoints.iter().find(|e| {
                e["models"]
                    .as_array()
                    .is_some_and(|ms| ms.iter().any(|m| m["id"] == model))
            })
        });
    let Some(endpoint) = endpoint else {
        return "the direct runtime's response cap (autocode connections setup --name ENDPOINT --kind KIND --max-output-tokens TOKENS; the resume then needs --accept-transport-change)".to_owned();
    };
    let cap = endpoint["max_output_tokens"]
        .as_u64()
        .unwrap_or(u64::from(crate::direct::runtime::DEFAULT_MAX_OUTPUT_TOKENS));
    format!(
        "the direct runtime's response cap of endpoint {name} ({cap} tokens now): autocode connections setup --name {name} --kind {kind} --max-output-tokens {more} (the resume then needs --accept-transport-change)",
        name = endpoint["endpoint"].as_str().unwrap_or("ENDPOINT"),
        kind = endpoint["kind"].as_str().unwrap_or("KIND"),
        more = cap.saturating_mul(2),
    )
}
