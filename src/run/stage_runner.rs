//! The seam between the driver and whoever runs stages: what one attempt is given
//! ([`AttemptContext`]) and comes to ([`AttemptOutcome`], [`AttemptResult`]), the replays it may
//! ask for ([`ReplayTree`], [`ReplayResult`]), the [`StageRunner`] that performs them (the real
//! CLIs in `runner`, a fake in tests) and the [`Interaction`] with a person.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::budget::StageLimits;
use super::flow::{PauseDecision, StagePlan};
use super::prepare::{CheckRan, PrepareStep};
use super::progress::ProgressSink;
use super::state::{AttemptRecord, PlanRevision, Question, RunState, Usage};
use crate::ids::SessionId;
use crate::pause::PauseCode;
use crate::role::Role;

/// What one attempt came to, as judged by the runner (schema, evidence, snapshot, cleanup).
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub session: Option<SessionId>,
    pub usage: Usage,
    pub duration: Duration,
    pub result: AttemptResult,
}

#[derive(Debug, Clone)]
pub enum AttemptResult {
    /// A report that validated against its schema and whose evidence verified.
    Report(Value),
    /// The report was rejected; a repair may fix it. `shell_command` is set when the final
    /// message was a shell command (the reference's defect), which gets one correction first.
    Rejected {
        problems: Vec<String>,
        shell_command: Option<String>,
    },
    /// The attempt cannot be repaired by asking again: pause (or retry once when
    /// `retryable_transport`).
    Stopped {
        code: PauseCode,
        reason: String,
        retryable_transport: bool,
        resume_after: Option<DateTime<Utc>>,
    },
}

/// Everything a runner needs to launch one attempt.
#[derive(Debug, Clone)]
pub struct AttemptContext {
    pub plan: StagePlan,
    pub record: AttemptRecord,
    pub stage_dir: PathBuf,
    pub prompt: String,
    /// The session to continue (repairs and corrections on session-keeping transports).
    pub resume_session: Option<SessionId>,
    pub limits: StageLimits,
}

/// A check replayed by autocode itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayResult {
    pub command: String,
    pub passed: bool,
    pub detail: String,
    /// Whether it ran: not when a prepare step of its batch failed (`passed` is then false and
    /// `detail` says why: `super::prepare`).
    pub ran: CheckRan,
    /// How many tests the check's output says ran.
    pub tests: crate::verify::testcount::TestTally,
    /// Which tests it names as run (`testids`), when its runner names them.
    pub test_ids: Option<crate::verify::testids::TestIds>,
}

/// A replay asked for: its tree, its `prepare` steps and its checks.
pub type ReplayAsk<'a> = (&'a ReplayTree, &'a [PrepareStep], &'a [String]);

/// A replay asked for, owned (its checks as far as they are known).
pub type OwnedReplayAsk = (ReplayTree, Vec<PrepareStep>, Vec<String>);

/// Which tree a replay runs in (always a clean, closed copy of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayTree {
    /// The run's work tree.
    Final,
    /// The base tree saved before any stage ran.
    Base,
    /// The work tree with these files restored to their base version (absent there: removed).
    FinalWithBaseFiles(Vec<String>),
    /// The work tree with these code files taken back to their base version (absent there:
    /// removed), except that a file holding tests beside its code keeps the result's tests over
    /// its base code (a Rust file's top-level `#[cfg(test)]` items, a Python module's doctests:
    /// `verify::inline`): the base code with the result's tests, the witness's tree.
    FinalWithBaseCode(Vec<String>),
    /// The work tree with every file a runner could load as a test made to fail when loaded
    /// (`verify::canary`; tests named by these checks included): a check that ran tests and
    /// passes there does not report the tree's tests.
    FinalWithFailingTests(Vec<String>),
}

/// Launches and judges attempts. The real runner drives CLIs through the boundary.
pub trait StageRunner {
    fn run_attempt(
        &mut self,
        state: &RunState,
        ctx: AttemptContext,
    ) -> impl Future<Output = AttemptOutcome>;

    /// Whether repairs of this role can continue the same session (asked after each attempt:
    /// an ACP agent says whether it can only when a session starts).
    fn keeps_sessions(&self, state: &RunState, role: Role) -> bool;

    /// The model family of `route` (the cross-model rules use it): a direct route's declared
    /// family, else the one inferred from its model's name.
    fn model_family(&self, route: &crate::transport::Route) -> String;

    /// Replays check commands in a clean copy of `tree`, after the `prepare` steps (once for
    /// the batch: `super::prepare`). `Err` is a pause.
    fn replay(
        &mut self,
        state: &RunState,
        tree: &ReplayTree,
        prepare: &[PrepareStep],
        commands: &[String],
    ) -> impl Future<Output = Result<Vec<ReplayResult>, PauseDecision>>;

    /// Before a tester's stage: the replays its report will most likely ask for (each batch's
    /// tree, `prepare` steps and the checks known so far), whose steps the runner may run while
    /// the stage does (never their checks). A replay asked for later uses what was prepared only
    /// when it is the same batch, and comes to what `replay` would give it. Nothing by default.
    fn replay_ahead(
        &mut self,
        _state: &RunState,
        _batches: &[OwnedReplayAsk],
    ) -> impl Future<Output = ()> {
        async {}
    }

    /// Replays whose `prepare` steps run at once where the runner can (each in its own clean
    /// tree, as `replay` runs it; the checks never at once), else one after the other; each
    /// comes to what `replay` would give it, recorded in this order. One result per batch.
    fn replay_side_by_side(
        &mut self,
        state: &RunState,
        batches: &[ReplayAsk<'_>],
    ) -> impl Future<Output = Vec<Result<Vec<ReplayResult>, PauseDecision>>>;

    /// The work tree compared with the run's base tree (`verify::base_source`): `Ok(None)`
    /// before the base is saved. `Err` is a pause.
    fn compare_base(
        &mut self,
        state: &RunState,
    ) -> impl Future<Output = Result<Option<crate::verify::treediff::Comparison>, PauseDecision>>;

    /// Saves the work tree as the run's base tree (`verify::base_source`), before any stage ran.
    /// `Ok` holds what the (closed) copy had to leave out.
    fn save_base(
        &mut self,
        state: &RunState,
    ) -> impl Future<Output = Result<Vec<String>, PauseDecision>>;

    /// The environment autocode's own git commands run with (committing builder stages).
    fn git_env(&self) -> BTreeMap<String, String> {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }

    /// Judges an attempt left `running` by a crash, from its saved artifacts alone: `Some`
    /// with the report when it is complete, valid and verified.
    fn judge_interrupted(&mut self, state: &RunState, attempt: &AttemptRecord) -> Option<Value>;

    /// Where live progress goes (stage start, activity, end); runners without it ignore it.
    fn set_progress(&mut self, _sink: Option<Arc<dyn ProgressSink>>) {}
}

/// Questions and approvals, answered on a terminal or not at all.
pub trait Interaction {
    fn answer_questions(&mut self, questions: &[Question]) -> Option<Vec<(String, String)>>;
    fn approve_plan(&mut self, plan: &PlanRevision) -> bool;
    /// Whether the person reviews each brief here (chat mode on a terminal). None by default.
    fn reviews_brief(&self) -> bool {
        false
    }
    /// Shows the brief revision `token` names (`run::brief_review`) and asks for a decision.
    fn review_brief(
        &mut self,
        _state: &RunState,
        _token: &str,
    ) -> super::brief_review::BriefDecision {
        super::brief_review::BriefDecision::Pause
    }
    /// One line per finished attempt and per pause (stderr for people).
    fn note(&mut self, line: &str);
    /// The sink for live progress, if this interaction shows it.
    fn progress(&self) -> Option<Arc<dyn ProgressSink>> {
        None
    }
    /// The run's directory holds its state: `api::start` says so once the run exists, and
    /// `api::resume` once it holds the run's lock (before anything runs). Nothing by default.
    fn run_opened(&mut self, _dir: &std::path::Path, _state: &RunState) {}
}
