//! The arguments of `autocode mcp`'s tools (their JSON Schemas are what clients are shown).

use std::collections::BTreeMap;

use rmcp::schemars;
use serde::Deserialize;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct StartRun {
    /// What you want done, as you would tell a colleague.
    pub objective: String,
    /// The project (a git repository) to work on: an absolute path.
    pub workspace: String,
    /// The provider (default: the user's default provider).
    pub provider: Option<String>,
    /// Per-role models: keys requirements, planner, plan_reviewer, builder, tester,
    /// completion, resolver.
    pub models: Option<BTreeMap<String, String>>,
    /// Accept the proposed defaults of open questions and approve the reviewed plan (recorded).
    pub yes: Option<bool>,
    /// Pause when the run's known cost reaches this many US dollars.
    pub max_usd: Option<f64>,
    /// Pause when the run has spent this many active minutes in stages.
    pub max_minutes: Option<u64>,
    /// Pause when the run has used this many tokens.
    pub max_tokens: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunRef {
    /// The run id (as start_run or list_runs returned it).
    pub run: String,
    /// The project the run belongs to: an absolute path.
    pub workspace: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Observed {
    /// The run id (default: the workspace's most recent run, as the CLI's `status`).
    pub run: Option<String>,
    /// The project the run belongs to: an absolute path.
    pub workspace: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WaitRun {
    /// The run id (default: the workspace's most recent run).
    pub run: Option<String>,
    pub workspace: String,
    /// How long to wait, in seconds (default 50, at most 600).
    pub timeout_seconds: Option<u64>,
    /// Wait until the run pauses or completes (and nothing works on it) instead of for any
    /// change.
    pub settled: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RunEvents {
    /// The run id (default: the workspace's most recent run).
    pub run: Option<String>,
    pub workspace: String,
    /// The `next_cursor` of the previous call (default 0: from the start).
    pub cursor: Option<u64>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ListRuns {
    pub workspace: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExplainPause {
    /// A pause code (WAITING_FOR_USER ...); or give run and workspace for the run's pause.
    pub code: Option<String>,
    pub run: Option<String>,
    pub workspace: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AnswerQuestions {
    pub run: String,
    pub workspace: String,
    /// Question id → answer.
    pub answers: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ApprovePlan {
    pub run: String,
    pub workspace: String,
    /// The plan token you were shown (`r<N>:<sha256>`): only that exact revision is approved.
    pub token: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReviewCriterion {
    pub run: String,
    pub workspace: String,
    pub criterion: String,
    pub accept: bool,
    /// Why, when rejecting (handed to the builder as a finding).
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ResumeRun {
    pub run: String,
    pub workspace: String,
    /// For a pause with a known reset time (rate limit), wait until then.
    pub wait: Option<bool>,
    /// Set this attempt aside (its directory name, e.g. 004-builder-1) and run the stage again.
    pub abandon_stage: Option<String>,
    /// Accept that the CLI, its version or its configuration changed.
    pub accept_transport_change: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ApplyRun {
    pub run: String,
    pub workspace: String,
    /// One commit on the user's branch instead of the run's own commits.
    pub squash: Option<bool>,
}
