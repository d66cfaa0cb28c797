//! The headless contract `autocode-exec/1`: the JSON lines `autocode exec` (and `run --jsonl`,
//! `resume --jsonl`, `events --follow RUN --jsonl`) print on stdout, one object per line, tagged
//! by `"type"`: a `meta` line first, then `stage_start`, `command` (with the exec ledger's
//! verdict), `stage_end` and `activity` lines as the run goes, a `pause` line when it pauses
//! (what is asked and the command that continues), and a `result` line last.
//!
//! The stream is read from the run directory's durable files by [`follow::Follower`], so a run
//! started elsewhere streams the same lines. The envelope carries evidence (the ledger's word,
//! the replayed criteria), never the agents' own verdicts. `schemas/exec.schema.json` documents
//! it; the strings of the enums here are API.

pub mod follow;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::RunId;
use crate::pause::PauseCode;
use crate::role::Role;
use crate::run::state::{RunState, Usage};

/// The stream's version, in every `meta` line. A change that is not an addition bumps it.
pub const SCHEMA: &str = "autocode-exec/1";

/// The JSON Schema (2020-12) of one line, as shipped in `schemas/exec.schema.json`.
pub const SCHEMA_TEXT: &str = include_str!("../../schemas/exec.schema.json");

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecLine {
    Meta(Meta),
    StageStart(StageStartLine),
    Command(CommandLine),
    StageEnd(StageEndLine),
    Activity(ActivityLine),
    Pause(PauseLine),
    Result(Box<ResultLine>),
}

/// The first line: which run, where, on which routes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// `None` only when the run was refused before anything was created.
    pub run_id: Option<RunId>,
    pub workspace: PathBuf,
    pub run_dir: Option<PathBuf>,
    pub objective: Option<String>,
    pub provider: Option<String>,
    /// Role → `provider/model`.
    pub routes: BTreeMap<Role, String>,
}

impl Meta {
    pub fn of_run(dir: PathBuf, state: &RunState) -> Meta {
        Meta {
            schema: SCHEMA.to_owned(),
            run_id: Some(state.run_id.clone()),
            workspace: state.workspace.clone(),
            run_dir: Some(dir),
            objective: Some(state.objective.clone()),
            provider: Some(state.provider.to_string()),
            routes: state
                .routes
                .iter()
                .map(|(role, route)| (*role, format!("{}/{}", route.provider, route.model)))
                .collect(),
        }
    }

    /// The meta line of a run refused before it existed.
    pub fn refused(workspace: PathBuf) -> Meta {
        Meta {
            schema: SCHEMA.to_owned(),
            run_id: None,
            workspace,
            run_dir: None,
            objective: None,
            provider: None,
            routes: BTreeMap::new(),
        }
    }
}

/// A stage attempt was launched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageStartLine {
    /// The attempt's directory name (`004-builder-1`).
    pub stage: String,
    pub role: Role,
    /// `provider/model`.
    pub route: String,
    /// Why it was launched (`fresh`, `report_repair`, `rework`, ...).
    pub purpose: String,
    pub at: DateTime<Utc>,
}

/// A shell command the stage's CLI reported as finished, and what the kernel-attested exec
/// ledger says of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandLine {
    pub stage: String,
    /// `event:<id>`: what a report cites.
    pub event: String,
    pub command: String,
    /// `None` when the CLI reported no exit code (never evidence).
    pub exit_code: Option<i32>,
    pub ledger: LedgerVerdict,
}

/// The exec ledger's word on one command event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum LedgerVerdict {
    /// An attested ledger entry ran the command and ended as reported.
    Attested { seq: u64 },
    /// The ledger does not back the event.
    NotAttested {
        reason: crate::report::ledger::LedgerMismatch,
    },
    /// The CLI reported no exit code; the ledger's attested exit of the one process that ran
    /// the command, when there is one.
    NoExitCode { attested_exit: Option<i32> },
    /// The stage kept no ledger (it ran unconfined, or the boundary was unavailable).
    NoLedger,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    Accepted,
    Rejected,
    Paused,
    Abandoned,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageEndLine {
    pub stage: String,
    pub role: Role,
    pub status: StageStatus,
    /// Why it was rejected.
    pub reason: Option<String>,
    /// The pause it ended in.
    pub pause_code: Option<PauseCode>,
    pub tokens: u64,
    pub cost_usd: Option<f64>,
    /// The commit autocode made on the run's branch for an accepted builder attempt.
    pub commit: Option<String>,
    pub at: Option<DateTime<Utc>>,
}

/// An `activity.jsonl` line of the run (created, approved, paused, notes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityLine {
    pub at: DateTime<Utc>,
    pub event: String,
    pub detail: Option<String>,
}

/// What a pause asks of the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Asks {
    /// Answers to the requirements stage's open questions.
    Answers { questions: Vec<AskedQuestion> },
    /// Approval of this exact plan revision.
    PlanApproval { revision: u32, token: String },
    /// A person's acceptance or rejection of criteria.
    HumanReview { criteria: Vec<String> },
    /// Acceptance of the builder's changes to existing tests.
    TestChanges,
    /// Anything else: the pause code's explanation says what happened.
    Other { explanation: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskedQuestion {
    pub id: String,
    pub question: String,
    pub proposed_default: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseLine {
    pub code: PauseCode,
    pub reason: String,
    pub asks: Asks,
    /// The command that continues the run (placeholders in capitals: `TEXT`).
    pub next: String,
    pub resume_after: Option<DateTime<Utc>>,
}

/// How the run (or this exec) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Complete,
    Paused,
    /// Something failed after the run was created (exit 1).
    Failed,
    /// Refused before anything was created (exit 2).
    Refused,
}

impl Status {
    /// The exit code of `autocode exec` for this status.
    pub fn exit_code(self) -> u8 {
        use crate::error::exit;
        match self {
            Status::Complete => exit::OK,
            Status::Failed => exit::FAILED,
            Status::Refused => exit::USAGE,
            Status::Paused => exit::PAUSED,
        }
    }
}

/// One criterion and how it was verified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionLine {
    pub milestone: usize,
    pub criterion: String,
    /// PASS only when the tester said PASS, its evidence verified and autocode's replay passed.
    pub verdict: String,
    pub checks: Vec<String>,
    pub detail: String,
    /// How the completion gate verified it (filled when the run completed).
    pub how: Option<String>,
}

/// The last line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultLine {
    pub status: Status,
    pub run_id: Option<RunId>,
    pub work_tree: Option<PathBuf>,
    /// `autocode/<run-id>` for a completed worktree run.
    pub branch: Option<String>,
    /// Commits on the branch the user's HEAD does not have.
    pub commits: Option<u64>,
    pub diff_stat: Option<String>,
    pub criteria: Vec<CriterionLine>,
    pub usage: Usage,
    pub tokens: u64,
    pub cost_usd: Option<f64>,
    pub pause_code: Option<PauseCode>,
    /// What to run next (apply the result, continue the pause, fix the refusal).
    pub next: Option<String>,
    /// The error of a failed or refused exec.
    pub error: Option<String>,
}

impl ResultLine {
    /// The result line of a run as its verified state says.
    pub fn of_state(
        state: &RunState,
        status: Status,
        result: Option<&crate::run::commit::RunResult>,
    ) -> ResultLine {
        let how: BTreeMap<(usize, &str), &str> = state
            .verification
            .verified
            .iter()
            .map(|v| ((v.milestone, v.criterion_id.as_str()), v.how.as_str()))
            .collect();
        let next = match status {
            Status::Complete => Some(match result {
                Some(_) => format!(
                    "autocode apply {} --workspace {}",
                    state.run_id,
                    shell_word(&state.workspace.display().to_string())
                ),
                None => "nothing: the run worked in place and its changes are in the workspace"
                    .to_owned(),
            }),
            Status::Paused => state
                .pause
                .as_ref()
                .map(|p| next_command(state, p, &state.workspace)),
            Status::Failed => Some(format!(
                "autocode status {} --workspace {}",
                state.run_id,
                shell_word(&state.workspace.display().to_string())
            )),
            Status::Refused => None,
        };
        ResultLine {
            status,
            run_id: Some(state.run_id.clone()),
            work_tree: Some(state.work_tree.clone()),
            branch: result.map(|r| r.branch.clone()),
            commits: result.map(|r| r.commits),
            diff_stat: result.map(|r| r.diff_stat.clone()),
            criteria: state
                .criteria
                .iter()
                .map(|c| CriterionLine {
                    milestone: c.milestone,
                    criterion: c.criterion_id.clone(),
                    verdict: c.verdict.clone(),
                    checks: c.checks.clone(),
                    detail: c.detail.clone(),
                    how: how
                        .get(&(c.milestone, c.criterion_id.as_str()))
                        .map(|h| (*h).to_owned()),
                })
                .collect(),
            usage: state.usage,
            tokens: state.usage.total_tokens(),
            cost_usd: state.usage.cost_usd,
            pause_code: state.pause.as_ref().map(|p| p.code),
            next,
            error: None,
        }
    }

    /// The result line of an exec that failed before or without a readable run state.
    pub fn error(status: Status, run_id: Option<RunId>, error: String) -> ResultLine {
        ResultLine {
            status,
            run_id,
            work_tree: None,
            branch: None,
            commits: None,
            diff_stat: None,
            criteria: Vec::new(),
            usage: Usage::default(),
            tokens: 0,
            cost_usd: None,
            pause_code: None,
            next: None,
            error: Some(error),
        }
    }
}

/// A word as a POSIX shell reads it: unchanged when plain, single-quoted otherwise.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The `resume --jsonl` command that continues `pause` (placeholders in capitals).
fn next_command(
    state: &RunState,
    pause: &crate::run::state::PauseRecord,
    workspace: &std::path::Path,
) -> String {
    let head = format!(
        "autocode resume {} --workspace {} --jsonl",
        state.run_id,
        shell_word(&workspace.display().to_string())
    );
    match asks(state, pause) {
        Asks::Answers { questions } => {
            let answers: Vec<String> = questions
                .iter()
                .map(|q| format!("--answer {}=TEXT", shell_word(&q.id)))
                .collect();
            format!("{head} {} (or --yes for the defaults)", answers.join(" "))
        }
        Asks::PlanApproval { token, .. } => format!("{head} --approve-plan {token}"),
        Asks::HumanReview { criteria } => {
            let accept: Vec<String> = criteria
                .iter()
                .map(|c| format!("--accept {}", shell_word(c)))
                .collect();
            format!(
                "{head} {} (or --reject CRITERION --because TEXT)",
                accept.join(" ")
            )
        }
        Asks::TestChanges => format!("{head} --accept-test-changes"),
        Asks::Other { .. } => pause
            .next_step
            .replace(&format!("autocode resume {}", state.run_id), &head),
    }
}

/// What `pause` asks of the caller, from the run's state.
pub fn asks(state: &RunState, pause: &crate::run::state::PauseRecord) -> Asks {
    match pause.code {
        PauseCode::WaitingForUser => Asks::Answers {
            questions: state
                .questions
                .iter()
                .filter(|q| !state.answers.contains_key(&q.id))
                .map(|q| AskedQuestion {
                    id: q.id.clone(),
                    question: q.question.clone(),
                    proposed_default: q.proposed_default.clone(),
                })
                .collect(),
        },
        PauseCode::AwaitingPlanApproval => match state.latest_plan() {
            Some(plan) => Asks::PlanApproval {
                revision: plan.revision,
                token: plan.token(),
            },
            None => Asks::Other {
                explanation: pause.code.explanation().to_owned(),
            },
        },
        PauseCode::AwaitingHumanReview => Asks::HumanReview {
            criteria: state
                .verification
                .pending_reviews
                .iter()
                .map(|r| r.criterion_id.clone())
                .collect(),
        },
        PauseCode::AwaitingTestChangeReview => Asks::TestChanges,
        other => Asks::Other {
            explanation: other.explanation().to_owned(),
        },
    }
}

impl PauseLine {
    pub fn of_state(state: &RunState, pause: &crate::run::state::PauseRecord) -> PauseLine {
        PauseLine {
            code: pause.code,
            reason: pause.reason.clone(),
            asks: asks(state, pause),
            next: next_command(state, pause, &state.workspace),
            resume_after: pause.resume_after,
        }
    }
}

/// Where the lines go: one line per write, flushed at once, shared by the threads that emit.
/// A closed stdout (the caller stopped reading) is remembered and ends the output quietly; the
/// run goes on.
#[derive(Clone)]
pub struct LineOut {
    inner: Arc<Mutex<OutState>>,
}

struct OutState {
    out: Box<dyn Write + Send>,
    closed: bool,
}

impl LineOut {
    pub fn new(out: Box<dyn Write + Send>) -> LineOut {
        LineOut {
            inner: Arc::new(Mutex::new(OutState { out, closed: false })),
        }
    }

    pub fn stdout() -> LineOut {
        LineOut::new(Box::new(std::io::stdout()))
    }

    /// Writes `line` as one JSON line.
    pub fn emit(&self, line: &ExecLine) {
        let Ok(mut bytes) = serde_json::to_vec(line) else {
            return;
        };
        bytes.push(b'\n');
        let Ok(mut state) = self.inner.lock() else {
            return;
        };
        if state.closed {
            return;
        }
        if state
            .out
            .write_all(&bytes)
            .and_then(|()| state.out.flush())
            .is_err()
        {
            state.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validator() -> jsonschema::Validator {
        let schema: serde_json::Value =
            serde_json::from_str(SCHEMA_TEXT).expect("the shipped schema is JSON");
        jsonschema::draft202012::new(&schema).expect("the shipped schema compiles")
    }

    fn state() -> RunState {
        let mut state = RunState::new(
            RunId::new("20260101-000000-abcdef").expect("id"),
            "objective".into(),
            PathBuf::from("/ws"),
            crate::ids::ProviderName::new("fake").expect("name"),
            BTreeMap::new(),
        );
        state.questions.push(crate::run::state::Question {
            id: "Q1".into(),
            question: "Which file?".into(),
            proposed_default: "hello.txt".into(),
        });
        state
    }

    #[test]
    fn every_kind_of_line_validates_and_a_wrong_one_does_not() {
        let validator = validator();
        let state = state();
        let at = Utc::now();
        let pause = crate::run::state::PauseRecord {
            code: PauseCode::WaitingForUser,
            reason: "open questions: Q1".into(),
            next_step: "autocode resume RUN --answer ID=TEXT".into(),
            at,
            attempt: None,
            resume_after: None,
        };
        let lines = [
            ExecLine::Meta(Meta::of_run(PathBuf::from("/ws/.autocode/runs/x"), &state)),
            ExecLine::Meta(Meta::refused(PathBuf::from("/ws"))),
            ExecLine::StageStart(StageStartLine {
                stage: "001-requirements-1".into(),
                role: Role::Requirements,
                route: "fake/alpha".into(),
                purpose: "fresh".into(),
                at,
            }),
            ExecLine::Command(CommandLine {
                stage: "004-builder-1".into(),
                event: "event:c1".into(),
                command: "true".into(),
                exit_code: Some(0),
                ledger: LedgerVerdict::NotAttested {
                    reason: crate::report::ledger::LedgerMismatch::NoExec,
                },
            }),
            ExecLine::Command(CommandLine {
                stage: "004-builder-1".into(),
                event: "event:c2".into(),
                command: "true".into(),
                exit_code: None,
                ledger: LedgerVerdict::NoExitCode {
                    attested_exit: Some(0),
                },
            }),
            ExecLine::StageEnd(StageEndLine {
                stage: "004-builder-1".into(),
                role: Role::Builder,
                status: StageStatus::Paused,
                reason: None,
                pause_code: Some(PauseCode::PausedRateLimit),
                tokens: 10,
                cost_usd: Some(0.5),
                commit: None,
                at: Some(at),
            }),
            ExecLine::Activity(ActivityLine {
                at,
                event: "run created".into(),
                detail: None,
            }),
            ExecLine::Pause(PauseLine::of_state(&state, &pause)),
            ExecLine::Result(Box::new(ResultLine::of_state(&state, Status::Paused, None))),
            ExecLine::Result(Box::new(ResultLine::error(
                Status::Refused,
                None,
                "no".into(),
            ))),
        ];
        for line in &lines {
            let value = serde_json::to_value(line).expect("serializes");
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{value}: {errors:?}");
            let back: ExecLine = serde_json::from_value(value).expect("reads back");
            assert_eq!(&back, line);
        }
        let ExecLine::Pause(pause_line) = &lines[7] else {
            panic!("the pause line")
        };
        assert!(
            pause_line.next.contains("--answer Q1=TEXT") && pause_line.next.contains("--jsonl"),
            "{}",
            pause_line.next
        );
        let mut wrong = serde_json::to_value(&lines[0]).expect("serializes");
        wrong["schema"] = "autocode-exec/2".into();
        assert!(!validator.is_valid(&wrong));
        let mut extra = serde_json::to_value(&lines[6]).expect("serializes");
        extra["verdict"] = "PASS".into();
        assert!(!validator.is_valid(&extra), "lines are closed objects");
    }
}
