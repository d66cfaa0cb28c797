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
        let next_step = decision
            .code
            .next_step()
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
