//! `result.json`: the record of one case run on one profile, written into its result folder
//! (`<out>/<case>/<profile>/<NNN>/`), next to the copied run directory and the oracle output.
//!
//! Invariant: the file is self-contained (case, profile, repetition, verdict and every number
//! `stats` needs), so any number of out folders can be merged without the catalog.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::oracle::OracleCheckResult;
use super::verdict::{RunEnding, Verdict};
use crate::direct::protocol::Protocol;
use crate::store::{self, StoreError};

pub const RESULT_FILE: &str = "result.json";
pub const RESULT_FORMAT: u64 = 1;

/// Milliseconds spent in each phase of a case run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// Seed repository, scripted model, CLI configuration.
    pub setup_ms: u64,
    /// The autocode run, resumes included.
    pub run_ms: u64,
    pub oracle_ms: u64,
    /// Everything, from the first setup step to the written result.
    pub wall_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    pub format_version: u64,
    pub case: String,
    pub profile: String,
    /// The wire protocol of a `scripted-direct*` job (`None` on the CLI and live profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// 0-based repetition.
    pub repeat: u32,
    pub verdict: Verdict,
    pub ending: RunEnding,
    #[serde(default)]
    pub run_id: Option<String>,
    /// Stage attempts the run made.
    pub stages: u32,
    /// `resume` calls the harness made after the first drive.
    #[serde(default)]
    pub resumes: u32,
    pub tokens: u64,
    /// Known cost; `None` when any attempt's price was unknown (scripted runs: model unpriced).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    #[serde(default)]
    pub oracle: Vec<OracleCheckResult>,
    pub timings: Timings,
    pub started_at: DateTime<Utc>,
}

/// The folder of one result: `<out>/<case>/<profile>/<NNN>` (NNN = repetition + 1).
pub fn result_dir(out: &Path, case: &str, profile: &str, repeat: u32) -> PathBuf {
    out.join(case)
        .join(profile)
        .join(format!("{:03}", repeat.saturating_add(1)))
}

pub fn write(dir: &Path, result: &ScenarioResult) -> Result<(), StoreError> {
    store::write_json(&dir.join(RESULT_FILE), result)
}

pub fn read(path: &Path) -> Result<ScenarioResult, StoreError> {
    store::read_versioned_json(path, RESULT_FORMAT)
}
