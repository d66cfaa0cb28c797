//! The driver: holds the run state (in a [`RunHandle`], `super::handle`), asks the flow what comes
//! next, runs stage attempts through a [`StageRunner`], handles repairs, corrections, the one
//! transport retry and pauses, and checkpoints after every step.
//!
//! Every change to the state is followed by an atomic `run.json` write and an `activity.jsonl`
//! line, and an attempt is recorded as `running` *before* it launches, so a crash at any point
//! leaves a state that `resume` can judge: a running attempt is adopted only if its artifacts
//! hold a complete, valid, verified report, and is otherwise `PAUSED_INTERRUPTED`.

use std::time::Duration;

use chrono::Utc;
use serde_json::Value;

use super::brief_review::{self, BriefDecision};
use super::budget;
use super::flow::{self, Next, PauseDecision, StagePlan};
use super::gate;
use super::interrupt::{interrupted, stop_requested, watch_stop_signals};
use super::prompt;
use super::replay_verdicts::{self, final_replay_results, prepare_through, verify_test_report};
use super::review;
use super::state::{AttemptPurpose, AttemptRecord, AttemptStatus, Phase, RunState, Usage};
use crate::ids::SessionId;
use crate::pause::PauseCode;
use crate::report::ReportKind;
use crate::role::Role;

pub use super::handle::{DriveOutcome, DriverError, RunHandle};
pub use super::stage_runner::{
    AttemptContext, AttemptOutcome, AttemptResult, Interaction, ReplayResult, ReplayTree,
    StageRunner,
};

/// At most this many report-only repairs per stage before `PAUSED_INVALID_OUTPUT`.
pub const MAX_REPORT_REPAIRS: u32 = 2;

/// Drives the run until it completes or pauses.
pub async fn drive<R: StageRunner, I: Interaction>(
    run: &mut RunHandle,
    runner: &mut R,
    ui: &mut I,
) -> Result<DriveOutcome, DriverError> {
    run.state.pause = None;
    watch_stop_signals();
    runner.set_progress(ui.progress());
    if let Some(outcome) = judge_running_attempt(run, runner)? {
        return Ok(outcome);
    }
    loop {
        if let Some(signal) = stop_requested() {
            return Ok(run.pause(
                PauseDecision::new(
                    PauseCode::PausedInterrupted,
                    format!("autocode received {signal} between stages"),
                ),
                None,
            )?);
        }
        match flow::next(&run.state) {
            Next::Done => return Ok(DriveOutcome::Complete),
            Next::Questions(questions) => {
                if run.state.accept_defaults {
                    flow::accept_defaults(&mut run.state);
                } else if let Some(answers) = ui.answer_questions(&questions) {
                    if let Err(problem) = flow::apply_answers(&mut run.state, &answers) {
                        ui.note(&problem);
                    }
                    if ui.reviews_brief() {
                        brief_review::await_review(&mut run.state);
                    }
                } else {
                    let ids: Vec<String> = questions
                        .iter()
                        .map(|q| {
                            format!("{} ({}; default: {})", q.id, q.question, q.proposed_default)
                        })
                        .collect();
                    return Ok(run.pause(
                        PauseDecision::new(
                            PauseCode::WaitingForUser,
                            format!("open questions: {}", ids.join("; ")),
                        ),
                        None,
                    )?);
                }
                run.checkpoint()?;
            }
            Next::BriefReview(token) => {
                if let Some(outcome) = review_brief(run, ui, &token)? {
                    return Ok(outcome);
                }
                run.checkpoint()?;
            }
            Next::Approval(plan) => {
                if ui.approve_plan(&plan) {
                    let token = plan.token();
                    if let Err(problem) = flow::apply_approval(&mut run.state, &token) {
                        ui.note(&problem);
                    }
                    run.activity("plan approved", Some(&token))?;
                    run.checkpoint()?;
                } else {
                    return Ok(run.pause(
                        PauseDecision::new(
                            PauseCode::AwaitingPlanApproval,
                            format!(
                                "plan revision {} waits for approval: {}",
                                plan.revision,
                                plan.token()
                            ),
                        ),
                        None,
                    )?);
                }
            }
            Next::FinalGate => {
                let commands = super::witness::all_checks(&run.state);
                let prepare = prepare_through(&run.state, None);
                let replayed = match runner
                    .replay(&run.state, &ReplayTree::Final, &prepare, &commands)
                    .await
                {
                    Ok(replayed) => replayed,
                    Err(pause) => return Ok(run.pause(pause, None)?),
                };
                gate::record_final(&mut run.state, &replayed);
                let mut final_results = final_replay_results(&run.state, &replayed);
                final_results.extend(gate::required_results(&run.state, &replayed));
                let refusals = flow::completion_gate(&run.state, &final_results);
                if refusals.is_empty() {
                    let comparison = match runner.compare_base(&run.state).await {
                        Ok(comparison) => comparison,
                        Err(pause) => return Ok(run.pause(pause, None)?),
                    };
                    let comparison = comparison.as_ref();
                    if let Some(pause) =
                        gate::judge_test_changes(run, runner, comparison, &commands).await?
                    {
                        return Ok(run.pause(pause, None)?);
                    }
                    if let Err(pause) = gate::find_witnesses(run, runner, comparison).await? {
                        return Ok(run.pause(pause, None)?);
                    }
                    if let Some(pause) = gate::ask_people(run, comparison)? {
                        return Ok(run.pause(pause, None)?);
                    }
                    let verified = review::verified_summary(&run.state);
                    let message = review::completion_message(&verified);
                    run.state.verification.verified = verified;
                    run.state.phase = Phase::Complete;
                    run.state.completed_at = Some(Utc::now());
                    run.checkpoint()?;
                    run.activity("complete", Some(&message))?;
                    ui.note(&review::completion_headline(
                        &run.state.verification.verified,
                        run.state.run_id.as_str(),
                    ));
                    return Ok(DriveOutcome::Complete);
                }
                run.activity("completion gate refused", Some(&refusals.join("; ")))?;
                ui.note(&format!("completion gate refused: {}", refusals.join("; ")));
                let last = flow::milestones(&run.state).len().saturating_sub(1);
                let findings = final_results
                    .iter()
                    .filter(|r| r.verdict != "PASS")
                    .map(|r| super::state::Finding {
                        id: r.criterion_id.clone(),
                        milestone: last,
                        text: r.detail.clone(),
                        source: "final_gate".into(),
                    })
                    .collect::<Vec<_>>();
                if findings.is_empty() {
                    // Nothing the builder can fix: the gate's refusal is the pause.
                    let pause =
                        PauseDecision::new(PauseCode::PausedRepeatedFailure, refusals.join("; "));
                    let pause = consult_resolver(run, runner, ui, Some(last), pause).await?;
                    return Ok(run.pause(pause, None)?);
                }
                run.state.milestones.entry(last).or_default().accepted = false;
                if let Err(pause) = flow::rework(&mut run.state, last, findings, "final_gate") {
                    let pause = consult_resolver(run, runner, ui, Some(last), pause).await?;
                    return Ok(run.pause(pause, None)?);
                }
                run.checkpoint()?;
            }
            Next::Launch(plan) => {
                if let Some(pause) = budget::check_before_stage(&run.state) {
                    return Ok(run.pause(pause, None)?);
                }
                if let Err(pause) = gate::prepare_base(run, runner, &plan).await? {
                    return Ok(run.pause(pause, None)?);
                }
                let report = match run_stage(run, runner, ui, &plan).await? {
                    Ok(report) => report,
                    Err(outcome) => return Ok(outcome),
                };
                if let Err(pause) = apply_report(run, runner, &plan, &report).await? {
                    let pause = consult_resolver(run, runner, ui, plan.milestone, pause).await?;
                    return Ok(run.pause(pause, None)?);
                }
                if plan.kind == ReportKind::Build {
                    commit_builder(run, runner, ui, plan.milestone).await?;
                }
                if plan.kind == ReportKind::Requirements && ui.reviews_brief() {
                    brief_review::await_review(&mut run.state);
                }
                run.checkpoint()?;
            }
        }
    }
}

/// The brief waits for review (chat mode): `y` approves the revision `token` names, feedback
/// sends the requirements stage round again, anything else pauses `WAITING_FOR_USER` (and
/// `resume` comes back here). `--yes` approves it.
fn review_brief<I: Interaction>(
    run: &mut RunHandle,
    ui: &mut I,
    token: &str,
) -> Result<Option<DriveOutcome>, DriverError> {
    let decision = if run.state.accept_defaults {
        BriefDecision::Approve
    } else {
        ui.review_brief(&run.state, token)
    };
    match decision {
        BriefDecision::Approve => match brief_review::approve(&mut run.state, token) {
            Ok(()) => run.activity("brief approved", Some(token))?,
            Err(problem) => ui.note(&problem),
        },
        BriefDecision::Feedback(text) => {
            brief_review::give_feedback(&mut run.state, &text);
            run.activity("brief feedback", Some(&format!("{token}: {text}")))?;
        }
        BriefDecision::Pause => {
            return Ok(Some(run.pause(
                PauseDecision::new(
                    PauseCode::WaitingForUser,
                    format!(
                        "brief revision {token} waits for review: `autocode resume` on a terminal shows it (or `resume --yes` approves it)"
                    ),
                ),
                None,
            )?));
        }
    }
    Ok(None)
}

/// Commits an accepted builder stage on the run's branch (worktree runs). A failed commit is
/// reported and recorded, never fatal: the changes stay in the worktree and the next builder
/// commit (or `git` by hand) takes them.
async fn commit_builder<R: StageRunner, I: Interaction>(
    run: &mut RunHandle,
    runner: &R,
    ui: &mut I,
    milestone: Option<usize>,
) -> Result<(), DriverError> {
    let env = runner.git_env();
    match super::commit::record_builder_commit(&mut run.state, milestone, &env).await {
        Ok(Some(commit)) => run.activity("builder stage committed", Some(&commit))?,
        Ok(None) => {}
        Err(e) => {
            let line = format!("could not commit the builder stage on the run's branch: {e}");
            ui.note(&line);
            run.activity("builder stage not committed", Some(&line))?;
        }
    }
    Ok(())
}

/// An attempt left running by a crash: adopt it only with a complete, valid, verified report.
fn judge_running_attempt<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
) -> Result<Option<DriveOutcome>, DriverError> {
    let Some(attempt) = run.state.running_attempt().cloned() else {
        return Ok(None);
    };
    let adopted = runner.judge_interrupted(&run.state, &attempt);
    let index = run
        .state
        .attempts
        .iter()
        .position(|a| a.seq == attempt.seq)
        .unwrap_or_default();
    match adopted {
        Some(report) => {
            run.state.attempts[index].status = AttemptStatus::Accepted;
            run.state.attempts[index].finished_at = Some(Utc::now());
            run.activity("adopted interrupted attempt", Some(&attempt.dir))?;
            // The report is applied by replaying the flow step it belongs to.
            run.state.pending_adoption = Some(report);
            run.checkpoint()?;
            Ok(None)
        }
        None => {
            run.state.attempts[index].status = AttemptStatus::Paused {
                code: PauseCode::PausedInterrupted,
            };
            let reason = format!(
                "autocode stopped while attempt {} ({}) was running, and its artifacts hold no complete, valid, verified report",
                attempt.dir, attempt.role
            );
            Ok(Some(run.pause(
                PauseDecision::new(PauseCode::PausedInterrupted, reason),
                Some(attempt.dir.clone()),
            )?))
        }
    }
}

/// Runs a stage's attempts until a report is accepted (`Ok(Ok(report))`) or the run pauses
/// (`Ok(Err(outcome))`).
async fn run_stage<R: StageRunner, I: Interaction>(
    run: &mut RunHandle,
    runner: &mut R,
    ui: &mut I,
    plan: &StagePlan,
) -> Result<Result<Value, DriveOutcome>, DriverError> {
    if let Some(report) = run.state.pending_adoption.take() {
        return Ok(Ok(report));
    }
    if plan.kind == ReportKind::Test {
        replay_verdicts::replay_ahead(runner, &run.state, plan.milestone.unwrap_or_default()).await;
    }
    let mut purpose = plan.purpose.clone();
    let mut resume_session: Option<SessionId> = None;
    let mut repairs = 0u32;
    let mut forgeries = 0u32;
    let mut correction_used = false;
    let mut transport_retry_used = false;
    let mut attempt_no = 1u32;
    loop {
        if let (AttemptPurpose::Rework { strong: true, .. }, Some(milestone)) =
            (&purpose, plan.milestone)
        {
            set_strong_overrides(&mut run.state, runner, milestone);
        }
        let (index, dir, seq, outcome) = launch_attempt(
            run,
            runner,
            plan,
            &purpose,
            attempt_no,
            resume_session.clone(),
        )
        .await?;
        let session = run.state.attempts[index].session.clone();
        let (problems, shell_command) = match outcome.result {
            AttemptResult::Report(report) => {
                let mut problems = flow::semantic_problems(&run.state, plan, &report);
                if problems.is_empty() && plan.kind == ReportKind::Plan {
                    match gate::plan_base_problems(run, runner, &report).await? {
                        Ok(found) => problems = found,
                        Err(pause) => {
                            run.state.attempts[index].status =
                                AttemptStatus::Paused { code: pause.code };
                            return Ok(Err(run.pause(pause, Some(dir))?));
                        }
                    }
                }
                if problems.is_empty() {
                    run.state.attempts[index].status = AttemptStatus::Accepted;
                    run.checkpoint()?;
                    run.activity("attempt accepted", Some(&dir))?;
                    ui.note(&attempt_line(
                        &run.state.attempts[index],
                        "accepted",
                        outcome.duration,
                    ));
                    return Ok(Ok(report));
                }
                (problems, None)
            }
            AttemptResult::Rejected {
                problems,
                shell_command,
            } => (problems, shell_command),
            AttemptResult::Stopped {
                code,
                reason,
                retryable_transport,
                resume_after,
            } => {
                ui.note(&attempt_line(
                    &run.state.attempts[index],
                    &format!("stopped: {code}"),
                    outcome.duration,
                ));
                if !retryable_transport || transport_retry_used {
                    run.state.attempts[index].status = AttemptStatus::Paused { code };
                    return Ok(Err(run.pause_until(
                        PauseDecision::new(code, reason),
                        Some(dir),
                        resume_after,
                    )?));
                }
                transport_retry_used = true;
                run.state.attempts[index].status = AttemptStatus::Rejected {
                    reason: format!("retryable transport error: {reason}"),
                };
                purpose = AttemptPurpose::TransportRetry { of_seq: seq };
                resume_session = None;
                run.checkpoint()?;
                attempt_no += 1;
                continue;
            }
        };
        let reason = problems.join("; ");
        run.state.attempts[index].status = AttemptStatus::Rejected {
            reason: reason.clone(),
        };
        // A forged command event is rejected once (the repair prompt says so); a second one in
        // the same stage pauses the run.
        if problems
            .iter()
            .any(|p| p.starts_with(super::runner::FORGED_EVENT))
        {
            forgeries += 1;
            if forgeries >= 2 {
                let code = PauseCode::PausedForgedEvidence;
                run.state.attempts[index].status = AttemptStatus::Paused { code };
                ui.note(&attempt_line(
                    &run.state.attempts[index],
                    &format!("stopped: {code}"),
                    outcome.duration,
                ));
                return Ok(Err(run.pause(
                    PauseDecision::new(
                        code,
                        format!(
                            "{dir} streamed command events the kernel never saw run, again: {reason}"
                        ),
                    ),
                    Some(dir),
                )?));
            }
        }
        ui.note(&attempt_line(
            &run.state.attempts[index],
            &format!("rejected: {reason}"),
            outcome.duration,
        ));
        // Asked after the attempt: an ACP agent says whether it can continue a session only
        // when a session starts.
        let keeps_sessions = runner.keeps_sessions(&run.state, plan.role);
        if let (Some(command), false, true, Some(_)) =
            (&shell_command, correction_used, keeps_sessions, &session)
        {
            correction_used = true;
            run.state.last_shell_command = Some(command.clone());
            purpose = AttemptPurpose::ShellCommandCorrection { of_seq: seq };
            resume_session = session.clone();
        } else if repairs < MAX_REPORT_REPAIRS {
            repairs += 1;
            let mut problems = problems;
            if shell_command.is_some() {
                problems.push(
                    "the rejected report is a shell command: there is nothing to repair, send the JSON report"
                        .into(),
                );
            }
            purpose = AttemptPurpose::ReportRepair {
                of_seq: seq,
                problems,
            };
            resume_session = if keeps_sessions {
                session.clone()
            } else {
                None
            };
        } else {
            let code = if shell_command.is_some() {
                PauseCode::PausedRepeatedFailure
            } else {
                PauseCode::PausedInvalidOutput
            };
            run.state.attempts[index].status = AttemptStatus::Paused { code };
            return Ok(Err(run.pause(
                PauseDecision::new(
                    code,
                    format!(
                        "the {} report was still rejected after {repairs} repair(s): {reason}",
                        plan.kind.as_str()
                    ),
                ),
                Some(dir),
            )?));
        }
        run.checkpoint()?;
        attempt_no += 1;
        if let Some(pause) = budget::check_before_stage(&run.state) {
            return Ok(Err(run.pause(pause, None)?));
        }
    }
}

/// The builder's stronger attempt: the builder moves to the strong model, and a tester or
/// completion reviewer on the strong model's family moves to the checker model, until the next
/// milestone.
fn set_strong_overrides<R: StageRunner>(state: &mut RunState, runner: &R, milestone: usize) {
    let Some(policy) = state.builder_retry.clone() else {
        return;
    };
    if state.overrides_milestone == Some(milestone) {
        return;
    }
    state.route_overrides.clear();
    state.overrides_milestone = Some(milestone);
    // A role bound to a provider (`--role-transport`) is never moved: no stronger builder.
    if state.role_transports.contains_key(&Role::Builder) {
        return;
    }
    let Some(builder) = state.routes.get(&Role::Builder) else {
        return;
    };
    let mut strong = builder.clone();
    strong.model = policy.strong_model.clone();
    strong.effort = Some(policy.strong_effort.clone());
    let strong_family = runner.model_family(&strong);
    state.route_overrides.insert(Role::Builder, strong);
    for checker in [Role::Tester, Role::CompletionReviewer] {
        if let Some(route) = state.routes.get(&checker)
            && runner.model_family(route) == strong_family
        {
            // A bound checker stays where it was put, so the builder stays too.
            if state.role_transports.contains_key(&checker) {
                state.route_overrides.clear();
                return;
            }
            let mut moved = route.clone();
            moved.model = policy.checker_model.clone();
            state.route_overrides.insert(checker, moved);
        }
    }
}

/// Records one attempt as running, checkpoints, launches it and books its usage. Returns the
/// attempt's index, directory, sequence number and outcome.
async fn launch_attempt<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    plan: &StagePlan,
    purpose: &AttemptPurpose,
    attempt_no: u32,
    resume_session: Option<SessionId>,
) -> Result<(usize, String, u32, AttemptOutcome), DriverError> {
    let seq = run.state.next_seq();
    let dir = format!("{seq:03}-{}-{attempt_no}", plan.role);
    let route = run.state.route_for(plan.role, plan.milestone);
    let record = AttemptRecord {
        seq,
        role: plan.role,
        report_kind: plan.kind,
        attempt: attempt_no,
        dir: dir.clone(),
        route,
        purpose: purpose.clone(),
        session: resume_session.clone(),
        status: AttemptStatus::Running,
        started_at: Utc::now(),
        finished_at: None,
        usage: Usage::default(),
        milestone: plan.milestone,
        commit: None,
    };
    let sandbox = plan.role.sandbox();
    let evidence = runner_evidence_style(&run.state, plan.role);
    let full_prompt = match purpose {
        AttemptPurpose::ReportRepair { .. } => resume_session.is_none(),
        AttemptPurpose::ShellCommandCorrection { .. } => false,
        _ => true,
    };
    // The completion reviewer is shown the work against the base tree (read from git).
    let (changes, compare_failed) = if full_prompt && prompt::shows_changes(plan.role) {
        let started = std::time::Instant::now();
        let compared = runner.compare_base(&run.state).await;
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "compared with the base tree"
        );
        match compared {
            Ok(changes) => (changes, None),
            Err(pause) => (None, Some(pause.reason)),
        }
    } else {
        (None, None)
    };
    let stage_prompt = || {
        let mut text = prompt::stage_prompt(&run.state, plan, sandbox, evidence, changes.as_ref());
        if let Some(reason) = &compare_failed {
            text.push_str(&format!(
                "\n# Changes (base tree → now)\n\nNot shown: {reason}. Read the work tree itself.\n"
            ));
        }
        text
    };
    let prompt_text = match purpose {
        AttemptPurpose::ReportRepair { of_seq, problems } => {
            if resume_session.is_some() {
                prompt::repair_prompt(problems, None)
            } else {
                // A repair on a fresh session needs the whole context again, its rejected report
                // included: the session that wrote it is not there to show it.
                let rejected = rejected_report(run, *of_seq);
                format!(
                    "{}\n\n{}",
                    stage_prompt(),
                    prompt::repair_prompt(problems, rejected.as_ref())
                )
            }
        }
        AttemptPurpose::ShellCommandCorrection { .. } => {
            let command = run.state.last_shell_command.clone().unwrap_or_default();
            prompt::shell_command_correction(&command)
        }
        _ => stage_prompt(),
    };
    tracing::debug!(role = %plan.role, bytes = prompt_text.len(), "prompt written");
    run.state.attempts.push(record.clone());
    run.checkpoint()?;
    run.activity("attempt started", Some(&dir))?;
    let ctx = AttemptContext {
        plan: plan.clone(),
        record,
        stage_dir: run.dir.join("stages").join(&dir),
        prompt: prompt_text,
        resume_session,
        limits: budget::stage_limits(&run.state),
    };
    // Ctrl-C or SIGTERM ends the attempt (dropping it ends the stage's family) and pauses the
    // run with PAUSED_INTERRUPTED and its next step, so nothing is left `running`.
    let outcome = tokio::select! {
        outcome = runner.run_attempt(&run.state, ctx) => outcome,
        signal = interrupted() => AttemptOutcome {
            session: None,
            usage: Usage::default(),
            duration: Duration::ZERO,
            result: AttemptResult::Stopped {
                code: PauseCode::PausedInterrupted,
                reason: format!(
                    "autocode received {signal} while attempt {dir} was running; its processes were stopped"
                ),
                retryable_transport: false,
                resume_after: None,
            },
        },
    };
    let index = run.state.attempts.len() - 1;
    {
        let attempt = &mut run.state.attempts[index];
        attempt.session = outcome.session.clone().or(attempt.session.clone());
        attempt.usage = outcome.usage;
        attempt.finished_at = Some(Utc::now());
    }
    run.state.usage.accumulate(&outcome.usage);
    run.state.active_ms += outcome.duration.as_millis() as u64;
    Ok((index, dir, seq, outcome))
}

/// A stuck milestone (the same failure again, or the builder's retries used up) is shown to
/// the resolver before the run pauses: one read-only attempt whose diagnosis joins the pause
/// reason and the milestone's findings. The pause stands either way; a resolver that fails
/// only says so.
async fn consult_resolver<R: StageRunner, I: Interaction>(
    run: &mut RunHandle,
    runner: &mut R,
    ui: &mut I,
    milestone: Option<usize>,
    mut pause: PauseDecision,
) -> Result<PauseDecision, DriverError> {
    if !matches!(
        pause.code,
        PauseCode::PausedRepeatedFailure | PauseCode::PausedBuilderRetryLimit
    ) || !run.state.routes.contains_key(&Role::Resolver)
        || budget::check_before_stage(&run.state).is_some()
    {
        return Ok(pause);
    }
    let plan = StagePlan {
        role: Role::Resolver,
        kind: ReportKind::Resolution,
        milestone,
        purpose: AttemptPurpose::Fresh,
    };
    let (index, dir, _, outcome) =
        launch_attempt(run, runner, &plan, &AttemptPurpose::Fresh, 1, None).await?;
    match outcome.result {
        AttemptResult::Report(report) => {
            run.state.attempts[index].status = AttemptStatus::Accepted;
            let diagnosis = report["diagnosis"].as_str().unwrap_or_default().to_owned();
            let changes: Vec<String> = report["recommended_changes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect();
            pause.reason = format!(
                "{}; the resolver's diagnosis: {diagnosis}{}",
                pause.reason,
                if changes.is_empty() {
                    String::new()
                } else {
                    format!("; it recommends: {}", changes.join("; "))
                }
            );
            if let Some(m) = milestone {
                run.state.open_findings.push(super::state::Finding {
                    id: format!("resolver-{}", run.state.attempts[index].seq),
                    milestone: m,
                    text: diagnosis,
                    source: "resolver".into(),
                });
            }
            ui.note(&attempt_line(
                &run.state.attempts[index],
                "diagnosed",
                outcome.duration,
            ));
        }
        AttemptResult::Rejected { problems, .. } => {
            let why = problems.join("; ");
            run.state.attempts[index].status = AttemptStatus::Rejected {
                reason: why.clone(),
            };
            pause.reason = format!(
                "{}; the resolver gave no usable diagnosis ({why})",
                pause.reason
            );
        }
        AttemptResult::Stopped { code, reason, .. } => {
            run.state.attempts[index].status = AttemptStatus::Rejected {
                reason: format!("{code}: {reason}"),
            };
            pause.reason = format!("{}; the resolver could not run ({code})", pause.reason);
        }
    }
    run.checkpoint()?;
    run.activity("resolver consulted", Some(&dir))?;
    Ok(pause)
}

fn runner_evidence_style(state: &RunState, role: Role) -> prompt::EvidenceStyle {
    if state.report_file_roles.contains(&role) {
        prompt::EvidenceStyle::CaptureReceipts
    } else {
        prompt::EvidenceStyle::Events
    }
}

fn attempt_line(attempt: &AttemptRecord, outcome: &str, duration: Duration) -> String {
    super::progress::stage_line(
        &attempt.dir,
        &format!("{}/{}", attempt.route.provider, attempt.route.model),
        duration.as_secs_f64(),
        attempt.usage.total_tokens(),
        outcome,
    )
}

/// Moves the run on with an accepted report. `Ok(Err(pause))` pauses.
async fn apply_report<R: StageRunner>(
    run: &mut RunHandle,
    runner: &mut R,
    plan: &StagePlan,
    report: &Value,
) -> Result<Result<(), PauseDecision>, DriverError> {
    let state = &mut run.state;
    let result = match plan.kind {
        ReportKind::Requirements => {
            flow::apply_requirements(state, report);
            Ok(())
        }
        ReportKind::Plan => {
            flow::apply_plan(state, report);
            Ok(())
        }
        ReportKind::PlanReview => flow::apply_plan_review(state, report),
        ReportKind::Build => flow::apply_build(state, plan.milestone.unwrap_or_default(), report),
        ReportKind::Test => {
            let milestone = plan.milestone.unwrap_or_default();
            let results = match verify_test_report(runner, &run.state, milestone, report).await {
                Ok(results) => results,
                Err(pause) => return Ok(Err(pause)),
            };
            flow::apply_test(&mut run.state, milestone, results)
        }
        ReportKind::Completion => {
            flow::apply_completion(state, plan.milestone.unwrap_or_default(), report)
        }
        // The resolver is consulted by the driver, never scheduled by the flow.
        ReportKind::Resolution => Ok(()),
    };
    Ok(result)
}

/// The report of attempt `seq` that the run's checks rejected after its schema and evidence held
/// (its stage directory keeps it); `None` when the report itself was unusable.
fn rejected_report(run: &RunHandle, seq: u32) -> Option<Value> {
    let attempt = run.state.attempts.iter().find(|a| a.seq == seq)?;
    let path = run
        .dir
        .join("stages")
        .join(&attempt.dir)
        .join("report.json");
    super::integrity::read_record(&path).ok()
}
