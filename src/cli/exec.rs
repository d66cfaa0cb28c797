//! `autocode exec "OBJECTIVE"` (the same as `run --jsonl`), `resume --jsonl` and
//! `autocode events --follow RUN --jsonl`: the run engine behind the `autocode-exec/1` stream
//! (`crate::exec`) for a caller that is a program. Nothing is asked on a terminal: a question or
//! an approval is a pause, with what it asks and the command that continues. Exit 0 complete,
//! 1 failed after the run was created, 2 refused before anything was created (or changed),
//! 3 paused.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::context::Context;
use super::notify::{Ended, after_run};
use super::output;
use crate::error::EdgeError;
use crate::exec::follow::Follower;
use crate::exec::{ExecLine, LineOut, Meta, PauseLine, ResultLine, Status};
use crate::ids::RunId;
use crate::run::api::{self, ResumeOptions, RunError, RunSummary, StartOptions};
use crate::run::driver::{DriveOutcome, Interaction};
use crate::run::progress::{ProgressSink, StageActivity, StageStart};
use crate::run::state::{PlanRevision, Question, RunState};

/// How often the run directory is read when nothing woke the follower sooner.
const POLL: Duration = Duration::from_millis(250);

enum Wake {
    /// Something happened (a stage started or ended): read now.
    Poke,
    /// The engine returned: read what is left and stop.
    Stop,
}

/// Wakes the follower when a stage starts or ends.
struct Poker(Mutex<Option<Sender<Wake>>>);

impl Poker {
    fn poke(&self) {
        if let Ok(slot) = self.0.lock()
            && let Some(tx) = slot.as_ref()
        {
            let _ = tx.send(Wake::Poke);
        }
    }
}

impl ProgressSink for Poker {
    fn stage_started(&self, _stage: &StageStart) {
        self.poke();
    }
    fn stage_activity(&self, _dir: &str, _activity: &StageActivity) {}
    fn stage_ended(&self, _dir: &str) {
        self.poke();
    }
}

/// The interaction of a headless run: no questions on a terminal, notes on stderr, and the
/// run directory followed into stdout from the moment it exists.
struct ExecUi {
    out: LineOut,
    poker: Arc<Poker>,
    /// Resume: the lines of what happened before this process are not printed again.
    skip_history: bool,
    opened: Option<Opened>,
}

struct Opened {
    dir: PathBuf,
    run_id: RunId,
    follower: JoinHandle<()>,
}

impl ExecUi {
    fn new(out: LineOut, skip_history: bool) -> ExecUi {
        ExecUi {
            out,
            poker: Arc::new(Poker(Mutex::new(None))),
            skip_history,
            opened: None,
        }
    }

    /// Stops the follower after its last read; the run it followed, if one was opened.
    fn close(&mut self) -> Option<(PathBuf, RunId)> {
        let sender = self.poker.0.lock().ok().and_then(|mut slot| slot.take());
        if let Some(tx) = sender {
            let _ = tx.send(Wake::Stop);
        }
        let opened = self.opened.take()?;
        if opened.follower.join().is_err() {
            tracing::warn!("the run follower panicked");
        }
        Some((opened.dir, opened.run_id))
    }
}

impl Interaction for ExecUi {
    fn answer_questions(&mut self, _questions: &[Question]) -> Option<Vec<(String, String)>> {
        None
    }

    fn approve_plan(&mut self, _plan: &PlanRevision) -> bool {
        false
    }

    fn note(&mut self, line: &str) {
        output::say!("{line}");
    }

    fn progress(&self) -> Option<Arc<dyn ProgressSink>> {
        Some(self.poker.clone())
    }

    fn run_opened(&mut self, dir: &Path, state: &RunState) {
        if self.opened.is_some() {
            return;
        }
        self.out
            .emit(&ExecLine::Meta(Meta::of_run(dir.to_path_buf(), state)));
        let (tx, rx) = mpsc::channel();
        if let Ok(mut slot) = self.poker.0.lock() {
            *slot = Some(tx);
        }
        let mut follower = Follower::new(dir.to_path_buf());
        if self.skip_history {
            follower.poll(&mut |_| {});
        }
        let out = self.out.clone();
        let follower = std::thread::spawn(move || {
            loop {
                follower.poll(&mut |line| out.emit(&line));
                match rx.recv_timeout(POLL) {
                    Ok(Wake::Poke) | Err(RecvTimeoutError::Timeout) => {}
                    Ok(Wake::Stop) | Err(RecvTimeoutError::Disconnected) => {
                        follower.poll(&mut |line| out.emit(&line));
                        return;
                    }
                }
            }
        });
        self.opened = Some(Opened {
            dir: dir.to_path_buf(),
            run_id: state.run_id.clone(),
            follower,
        });
    }
}

/// `exec` / `run --jsonl`.
pub fn start(ctx: &Context, opts: StartOptions) -> Result<ExitCode, EdgeError> {
    let workspace = opts.workspace.clone();
    let out = LineOut::stdout();
    let mut ui = ExecUi::new(out.clone(), false);
    let outcome = super::runtime()?.block_on(api::start(&ctx.registry, &ctx.env, opts, &mut ui));
    finish(ctx, &out, &mut ui, &workspace, outcome)
}

/// `resume --jsonl`: the stream of what this resume does (the meta line, then its stages).
pub fn resume(ctx: &Context, opts: ResumeOptions) -> Result<ExitCode, EdgeError> {
    let workspace = opts.workspace.clone();
    let out = LineOut::stdout();
    let mut ui = ExecUi::new(out.clone(), true);
    let outcome = super::runtime()?.block_on(api::resume(&ctx.registry, &ctx.env, opts, &mut ui));
    finish(ctx, &out, &mut ui, &workspace, outcome)
}

/// A refusal before anything was created: its meta and result lines (and the error on stderr).
pub fn refused(workspace: &Path, error: EdgeError) -> ExitCode {
    let out = LineOut::stdout();
    let text = error.render();
    output::say!("{text}");
    out.emit(&ExecLine::Meta(Meta::refused(workspace.to_path_buf())));
    out.emit(&ExecLine::Result(Box::new(ResultLine::error(
        Status::Refused,
        None,
        text,
    ))));
    ExitCode::from(Status::Refused.exit_code())
}

fn finish(
    ctx: &Context,
    out: &LineOut,
    ui: &mut ExecUi,
    workspace: &Path,
    outcome: Result<RunSummary, RunError>,
) -> Result<ExitCode, EdgeError> {
    let opened = ui.close();
    match (outcome, opened) {
        (Err(e), None) => Ok(refused(workspace, super::run::run_error(e))),
        (Err(e), Some((dir, run_id))) => {
            let text = super::run::run_error(e).render();
            output::say!("{text}");
            out.emit(&ExecLine::Result(Box::new(ResultLine::error(
                Status::Failed,
                Some(run_id.clone()),
                text.clone(),
            ))));
            after_run(
                ctx,
                workspace,
                Ended::Failed {
                    run_id: &run_id,
                    run_dir: &dir,
                    error: &text,
                },
            );
            Ok(ExitCode::from(Status::Failed.exit_code()))
        }
        // Another run held the place (PAUSED_RUN_BUSY): nothing was created or changed.
        (Ok(summary), None) => {
            let mut result = match &summary.outcome {
                DriveOutcome::Paused { pause } => {
                    output::say!("{}: {}", pause.code, pause.reason);
                    let mut result = ResultLine::error(
                        Status::Refused,
                        Some(summary.run_id.clone()),
                        pause.reason.clone(),
                    );
                    result.pause_code = Some(pause.code);
                    result.next = Some(pause.next_step.clone());
                    result
                }
                DriveOutcome::Complete => ResultLine::error(
                    Status::Refused,
                    Some(summary.run_id.clone()),
                    "the run was not opened".into(),
                ),
            };
            result.work_tree = Some(summary.work_tree.clone());
            out.emit(&ExecLine::Meta(Meta::refused(workspace.to_path_buf())));
            out.emit(&ExecLine::Result(Box::new(result)));
            Ok(ExitCode::from(Status::Refused.exit_code()))
        }
        (Ok(summary), Some(opened)) => {
            let state = read_state(ctx, workspace, &opened.0);
            let (status, state) = match (&summary.outcome, state) {
                (_, Err(text)) => {
                    output::say!("{text}");
                    out.emit(&ExecLine::Result(Box::new(ResultLine::error(
                        Status::Failed,
                        Some(opened.1),
                        text,
                    ))));
                    return Ok(ExitCode::from(Status::Failed.exit_code()));
                }
                (DriveOutcome::Complete, Ok(state)) => (Status::Complete, state),
                (DriveOutcome::Paused { .. }, Ok(state)) => (Status::Paused, state),
            };
            if let (Status::Paused, DriveOutcome::Paused { pause }) = (status, &summary.outcome) {
                output::say!("paused {}; next: {}", pause.code, pause.next_step);
                out.emit(&ExecLine::Pause(PauseLine::of_state(&state, pause)));
            } else {
                output::say!("COMPLETE: run {}", state.run_id);
            }
            out.emit(&ExecLine::Result(Box::new(ResultLine::of_state(
                &state,
                status,
                summary.result.as_ref(),
            ))));
            after_run(ctx, workspace, Ended::Summary(&summary));
            Ok(ExitCode::from(status.exit_code()))
        }
    }
}

/// The run's verified state, read again after the engine let go of it.
fn read_state(ctx: &Context, workspace: &Path, dir: &Path) -> Result<RunState, String> {
    let workspace = std::fs::canonicalize(workspace)
        .map_err(|e| format!("workspace {}: {e}", workspace.display()))?;
    let env = env_map(&ctx.env);
    let runtime = super::runtime().map_err(|e| e.render())?;
    runtime
        .block_on(crate::run::trust::verify_run(&workspace, dir, &env))
        .map_err(|e| format!("cannot read the run's state: {e}"))
}

fn env_map(env: &crate::provider::registry::Env) -> std::collections::BTreeMap<String, String> {
    env.iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
        .collect()
}

/// `events --follow RUN --jsonl`: the run's lines from its start, followed while an autocode
/// works on it, then its pause or result (the exit code says which, as `exec`'s does).
pub fn follow(run: &RunId, workspace: &Path) -> Result<ExitCode, EdgeError> {
    // git may run (to find the run, and a completed run's branch): the keeper first.
    crate::supervise::init_before_threads();
    let workspace = std::fs::canonicalize(workspace)
        .map_err(|e| EdgeError::usage(format!("workspace {}: {e}", workspace.display())))?;
    let env: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    // `exec` prints a run's id as soon as the run exists, before its first checkpoint: while an
    // autocode holds the new run, its state is waited for.
    let dir = crate::run::runs_dir(&workspace).join(run.as_str());
    while dir.is_dir() && !crate::run::driver::RunHandle::state_path(&dir).exists() {
        match crate::store::RunLock::acquire(&dir.join("lock")) {
            Err(crate::store::StoreError::Busy { .. }) => std::thread::sleep(POLL),
            _ => break,
        }
    }
    let runtime = super::runtime()?;
    let found = runtime
        .block_on(crate::run::find_run(&workspace, Some(run), &env))
        .map_err(super::run::find_error)?;
    let out = LineOut::stdout();
    out.emit(&ExecLine::Meta(Meta::of_run(
        found.dir.clone(),
        &found.state,
    )));
    let mut follower = Follower::new(found.dir.clone());
    loop {
        follower.poll(&mut |line| out.emit(&line));
        // Free lock: no autocode works on the run; what it wrote is all there is.
        match crate::store::RunLock::acquire(&found.dir.join("lock")) {
            Ok(lock) => {
                drop(lock);
                break;
            }
            Err(crate::store::StoreError::Busy { .. }) => std::thread::sleep(POLL),
            Err(e) => return Err(EdgeError::internal(e)),
        }
    }
    follower.poll(&mut |line| out.emit(&line));
    let state = runtime
        .block_on(crate::run::trust::verify_run(&workspace, &found.dir, &env))
        .map_err(|e| EdgeError::internal(format!("cannot read the run's state: {e}")))?;
    let status = if let Some(pause) = &state.pause {
        out.emit(&ExecLine::Pause(PauseLine::of_state(&state, pause)));
        Status::Paused
    } else if state.completed_at.is_some() {
        Status::Complete
    } else {
        let text = format!(
            "autocode is not working on run {} and it neither paused nor completed: it was stopped mid-stage (autocode resume {} judges it)",
            state.run_id, state.run_id
        );
        output::say!("{text}");
        let mut result = ResultLine::of_state(&state, Status::Failed, None);
        result.error = Some(text);
        out.emit(&ExecLine::Result(Box::new(result)));
        return Ok(ExitCode::from(Status::Failed.exit_code()));
    };
    let result = match status {
        Status::Complete => runtime
            .block_on(crate::run::commit::run_result(&workspace, &state, &env))
            .unwrap_or_else(|e| {
                output::say!("cannot summarize the run's branch: {e}");
                None
            }),
        _ => None,
    };
    out.emit(&ExecLine::Result(Box::new(ResultLine::of_state(
        &state,
        status,
        result.as_ref(),
    ))));
    Ok(ExitCode::from(status.exit_code()))
}
