//! `autocode conformance`: qualifies one CLI version against autocode's contract by running a
//! small probe through the real [`CliRunner`] and assessing what it did.
//!
//! The probe (one [`StageRunner::run_attempt`] per step, on a throwaway run state): a git
//! workspace at a random path containing spaces; a builder copies the nonce from `input.txt` to
//! `output.txt` and runs a probe command exiting 0 and one exiting 7; a fresh tester session
//! checks without writing; that session is resumed for one more turn and must keep its id. The
//! runner judges receipt, stop, schema and evidence; [`assess`] adds identity and nonce, one
//! session, usage sanity, only `output.txt` changed, HEAD unchanged, and resume continuity.
//!
//! Invariants: the user's configuration is never touched (scripted probes get a throwaway home);
//! a fault variant passes only when the assessment names one of its expected problems.

pub mod assess;
pub mod fault;
pub mod matrix;
pub mod script;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;
use serde::Serialize;
use serde_json::Value;

use crate::events::{self, NormalizedEvent, TransportKind};
use crate::ids::{RunId, SessionId};
use crate::pause::PauseCode;
use crate::provider::{OutputMode, ResolvedProvider};
use crate::report::ReportKind;
use crate::role::Role;
use crate::run::budget::StageLimits;
use crate::run::driver::{AttemptContext, AttemptResult, StageRunner};
use crate::run::flow::StagePlan;
use crate::run::runner::CliRunner;
use crate::run::state::{
    AttemptPurpose, AttemptRecord, AttemptStatus, Phase, Route, RunState, Usage,
};
use crate::supervise::Receipt;
pub use assess::{Judged, ProbeStep, Problem, StepFacts, StreamFacts};
pub use fault::{Fault, ProblemKind};
pub use script::ProbeIdentity;

/// How the probe reaches the CLI: everything but the workspace and the identity.
#[derive(Debug, Clone)]
pub struct ProbeSetup {
    pub provider: ResolvedProvider,
    /// autocode's environment for this probe (the CLI's throwaway home already applied).
    pub env: BTreeMap<String, String>,
    /// The builder's model and the checker's, in the tool's spelling.
    pub builder_model: String,
    pub checker_model: String,
    /// Claude Code may talk to the loopback scripted server.
    pub scripted_local: bool,
    /// Where the probe's workspace is created.
    pub root: PathBuf,
    pub stage_timeout: Duration,
}

/// One step's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    pub step: ProbeStep,
    pub stage_dir: PathBuf,
    pub session: Option<String>,
    pub seconds: f64,
    pub problems: Vec<Problem>,
}

/// The probe's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeResult {
    pub probe_id: String,
    pub workspace: PathBuf,
    pub steps: Vec<StepResult>,
    /// Why a step was left out (a tool without sessions has no resume step).
    pub notes: Vec<String>,
}

impl ProbeResult {
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.steps.iter().flat_map(|s| s.problems.iter())
    }

    pub fn passed(&self) -> bool {
        self.problems().next().is_none()
    }
}

/// A variant's verdict: the clean probe passes, a fault is caught by its expected problem.
#[derive(Debug, Clone, Serialize)]
pub struct VariantResult {
    /// `clean` or the fault's name.
    pub variant: String,
    pub passed: bool,
    pub expected: Vec<ProblemKind>,
    pub named: Vec<ProblemKind>,
    pub probe: ProbeResult,
}

/// Judges a probe run under `fault` (`None`: the clean probe).
pub fn judge_variant(fault: Option<Fault>, probe: ProbeResult) -> VariantResult {
    let mut named: Vec<ProblemKind> = probe.problems().map(|p| p.kind).collect();
    named.sort();
    named.dedup();
    let expected = fault.map(|f| f.expected().to_vec()).unwrap_or_default();
    let passed = match fault {
        None => probe.passed(),
        Some(f) if f.must_pass() => probe.passed(),
        Some(_) => named.iter().any(|k| expected.contains(k)),
    };
    VariantResult {
        variant: fault.map_or("clean", Fault::as_str).to_owned(),
        passed,
        expected,
        named,
        probe,
    }
}

/// Errors that keep the probe from running at all.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot prepare the probe workspace {path}: {reason}")]
    Workspace { path: PathBuf, reason: String },
}

fn git_env(env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env = env.clone();
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "autocode conformance"),
        ("GIT_AUTHOR_EMAIL", "conformance@autocode.invalid"),
        ("GIT_COMMITTER_NAME", "autocode conformance"),
        ("GIT_COMMITTER_EMAIL", "conformance@autocode.invalid"),
    ] {
        env.insert(k.into(), v.into());
    }
    env
}

async fn git(dir: &Path, args: &[&str], env: &BTreeMap<String, String>) -> Result<String, String> {
    crate::run::workspace::git(dir, args, env)
        .await
        .map(|s| s.trim().to_owned())
        .map_err(|e| e.to_string())
}

/// Creates the probe workspace: a git repository at a random path with spaces, holding
/// `input.txt` (the nonce) and a README, committed.
pub async fn prepare_workspace(
    root: &Path,
    identity: &ProbeIdentity,
    env: &BTreeMap<String, String>,
) -> Result<(PathBuf, String), ProbeError> {
    let path = root.join(format!("probe workspace {}", script::random_hex(4)));
    let fail = |reason: String| ProbeError::Workspace {
        path: path.clone(),
        reason,
    };
    std::fs::create_dir_all(&path).map_err(|e| fail(e.to_string()))?;
    std::fs::write(path.join("input.txt"), format!("{}\n", identity.nonce))
        .map_err(|e| fail(e.to_string()))?;
    std::fs::write(
        path.join("README.md"),
        "# autocode conformance probe\n\nCopy the nonce in input.txt to output.txt.\n",
    )
    .map_err(|e| fail(e.to_string()))?;
    let env = git_env(env);
    git(&path, &["init", "-q", "-b", "main"], &env)
        .await
        .map_err(fail)?;
    git(&path, &["add", "input.txt", "README.md"], &env)
        .await
        .map_err(fail)?;
    git(
        &path,
        &["commit", "-q", "-m", "conformance probe seed"],
        &env,
    )
    .await
    .map_err(fail)?;
    let head = git(&path, &["rev-parse", "HEAD"], &env)
        .await
        .map_err(fail)?;
    let path = std::fs::canonicalize(&path).map_err(|e| fail(e.to_string()))?;
    Ok((path, head))
}

fn run_state(setup: &ProbeSetup, workspace: &Path, identity: &ProbeIdentity) -> RunState {
    let route = |model: &str| Route {
        provider: setup.provider.name.clone(),
        model: model.to_owned(),
        effort: None,
        codex_model_provider: None,
    };
    let routes = Role::ALL
        .into_iter()
        .map(|role| {
            let model = match role {
                Role::Tester | Role::PlanReviewer | Role::CompletionReviewer => {
                    &setup.checker_model
                }
                _ => &setup.builder_model,
            };
            (role, route(model))
        })
        .collect();
    let run_id = RunId::new(format!("conformance-{}", identity.probe_id))
        .or_else(|_| RunId::new("conformance"))
        .unwrap_or_else(|_| crate::run::api::new_run_id());
    let mut state = RunState::new(
        run_id,
        format!("autocode conformance {}", identity.probe_id),
        workspace.to_owned(),
        setup.provider.name.clone(),
        routes,
    );
    state.accept_defaults = true;
    state.phase = Phase::Build { milestone: 0 };
    if setup.provider.config.output == OutputMode::ReportFile {
        state.report_file_roles = Role::ALL.to_vec();
    }
    state
}

fn transport_kind(provider: &ResolvedProvider) -> Option<TransportKind> {
    match provider.config.output {
        OutputMode::OpencodeEvents => Some(TransportKind::Opencode),
        OutputMode::CodexEvents => Some(TransportKind::Codex),
        OutputMode::ClaudeEvents => Some(TransportKind::Claude),
        OutputMode::Acp => Some(TransportKind::Acp),
        OutputMode::ReportFile => None,
        OutputMode::DirectRuntime => None,
    }
}

fn evidence_text(report_file: bool) -> &'static str {
    if report_file {
        "Run every command through `autocode capture --output .autocode/evidence/NAME.json -- COMMAND ARGS...` and cite each with its exact command text (the receipt's argv joined with spaces), its exit code and the receipt path as evidence_ref."
    } else {
        "Cite each command you ran with its exact command text, its real exit code and evidence_ref \"event:?\" (autocode matches it to your command event)."
    }
}

fn schema_text(kind: ReportKind) -> String {
    serde_json::to_string_pretty(&kind.cli_schema()).unwrap_or_default()
}

/// The prompt of each step. The nonce is not in it: the agent must read `input.txt`.
pub fn step_prompt(step: ProbeStep, identity: &ProbeIdentity, report_file: bool) -> String {
    let evidence = evidence_text(report_file);
    match step {
        ProbeStep::Build => format!(
            "{mark}\nYou are the builder of autocode conformance probe {id}.\n\
             In the workspace, run exactly these shell commands, one by one:\n\
             1. `{copy}` (copies the nonce)\n2. `{ok}` (exits 0)\n3. `{fail}` (exits 7; that is expected)\n\
             Change no other file; do not commit. {evidence}\n\
             Then answer with only the JSON build report: status \"done\", summary exactly \
             \"conformance probe {id} nonce <the content of input.txt>\", files_changed [\"output.txt\"], \
             the three checks, blockers []. The schema:\n{schema}\n",
            mark = script::BUILD_MARK,
            id = identity.probe_id,
            copy = script::COPY_COMMAND,
            ok = script::OK_COMMAND,
            fail = script::FAIL_COMMAND,
            schema = schema_text(ReportKind::Build),
        ),
        ProbeStep::Check | ProbeStep::Resume => format!(
            "{mark}\nYou are the tester of autocode conformance probe {id}. Do not change any file.\n\
             Read the nonce in input.txt, run `grep -qx <nonce> output.txt` and report. {evidence}\n\
             Answer with only the JSON test report: milestone_id \"probe\", summary exactly \
             \"conformance probe {id} nonce <the nonce>\", one criterion \"nonce\" with verdict PASS \
             when the grep exited 0 (else FAIL), its check, notes \"\". The schema:\n{schema}\n",
            mark = if step == ProbeStep::Check {
                script::CHECK_MARK
            } else {
                script::RESUME_MARK
            },
            id = identity.probe_id,
            schema = schema_text(ReportKind::Test),
        ),
    }
}

struct Probe<'a> {
    setup: &'a ProbeSetup,
    state: RunState,
    runner: CliRunner,
    identity: ProbeIdentity,
    head: String,
    kind: Option<TransportKind>,
    fault: Option<Fault>,
}

impl Probe<'_> {
    async fn step(
        &mut self,
        step: ProbeStep,
        seq: u32,
        resume: Option<SessionId>,
        expected_session: Option<String>,
        foreign_sessions: Vec<String>,
    ) -> StepResult {
        let (role, report_kind) = match step {
            ProbeStep::Build => (Role::Builder, ReportKind::Build),
            _ => (Role::Tester, ReportKind::Test),
        };
        let dir = format!("{seq:03}-{}-1", step.as_str());
        let record = AttemptRecord {
            seq,
            role,
            report_kind,
            attempt: 1,
            dir: dir.clone(),
            route: self.state.route_for(role, Some(0)),
            purpose: AttemptPurpose::Fresh,
            session: None,
            status: AttemptStatus::Running,
            started_at: Utc::now(),
            finished_at: None,
            usage: Usage::default(),
            milestone: Some(0),
            commit: None,
        };
        let stage_dir = self.state.run_dir().join("stages").join(&dir);
        let report_file = self.kind.is_none();
        let ctx = AttemptContext {
            plan: StagePlan {
                role,
                kind: report_kind,
                milestone: Some(0),
                purpose: AttemptPurpose::Fresh,
            },
            record,
            stage_dir: stage_dir.clone(),
            prompt: step_prompt(step, &self.identity, report_file),
            resume_session: resume,
            limits: StageLimits {
                timeout: Some(self.setup.stage_timeout),
                idle: None,
                tokens_left: None,
                timeout_code: PauseCode::PausedStageTimeout,
            },
        };
        let genv = git_env(&self.setup.env);
        let before = if step == ProbeStep::Build {
            snapshot(&self.state.work_tree, &genv).await
        } else {
            None
        };
        let started = Instant::now();
        let outcome = self.runner.run_attempt(&self.state, ctx).await;
        let seconds = started.elapsed().as_secs_f64();
        let changed_files = match (&before, step) {
            (Some(before), ProbeStep::Build) => {
                match snapshot(&self.state.work_tree, &genv).await {
                    Some(after) => crate::snapshot::diff(before, &after)
                        .into_iter()
                        .map(|c| c.path)
                        .collect(),
                    None => vec![],
                }
            }
            _ => vec![],
        };
        let head_now = git(&self.state.work_tree, &["rev-parse", "HEAD"], &genv)
            .await
            .unwrap_or_default();
        let judged = match outcome.result {
            AttemptResult::Report(v) => Judged::Report(v),
            AttemptResult::Rejected {
                problems,
                shell_command,
            } => Judged::Rejected {
                problems,
                shell_command: shell_command.is_some(),
            },
            AttemptResult::Stopped { code, reason, .. } => Judged::Stopped { code, reason },
        };
        let mut stream = self.kind.and_then(|k| stream_facts(k, &stage_dir));
        // What the run counts when the stream carries none: the usage autocode recorded for
        // the attempt (Claude Code's adapter sends none over ACP; its transcript has it).
        if let Some(s) = stream.as_mut()
            && s.usage.input_tokens.is_none()
            && s.usage.output_tokens.is_none()
        {
            s.usage = outcome.usage;
        }
        if self.fault == Some(Fault::MissingUsage) && step == ProbeStep::Build {
            // Perturbation: the harness withholds the usage it observed (a CLI without usage).
            if let Some(s) = stream.as_mut() {
                s.usage = events::Usage::default();
            }
        }
        let receipt: Option<Receipt> =
            crate::store::read_json(&stage_dir.join("supervision.json")).ok();
        let facts = StepFacts {
            step,
            judged,
            evidence_problems: evidence_problems(&stage_dir),
            stream,
            receipt_verified: receipt.map(|r| r.verified),
            changed_files,
            head_moved: head_now != self.head,
            output_txt: crate::bounded_read::read_to_string(
                &self.state.work_tree.join("output.txt"),
                crate::bounded_read::REPORT_CAP,
            )
            .ok()
            .map(|s| s.trim().to_owned()),
            expected_session,
            foreign_sessions,
            session: outcome.session.as_ref().map(|s| s.to_string()),
        };
        StepResult {
            step,
            stage_dir,
            session: facts.session.clone(),
            seconds,
            problems: assess::assess_step(&facts, &self.identity),
        }
    }
}

async fn snapshot(
    work_tree: &Path,
    env: &BTreeMap<String, String>,
) -> Option<crate::snapshot::Snapshot> {
    let files = crate::snapshot::list_files(work_tree, env).await.ok()?;
    let mut cache = crate::snapshot::StatCache::default();
    crate::snapshot::take(work_tree, &files, &mut cache).ok()
}

fn stream_facts(kind: TransportKind, stage_dir: &Path) -> Option<StreamFacts> {
    let file = crate::bounded_read::open_regular(&stage_dir.join("stdout.log")).ok()?;
    let report_file = crate::bounded_read::read(
        &stage_dir.join("report.raw.json"),
        crate::bounded_read::REPORT_CAP,
    )
    .ok();
    let normalized =
        events::normalize_stream(kind, std::io::BufReader::new(file), report_file.as_deref())
            .ok()?;
    let tail =
        crate::bounded_read::read_tail(&stage_dir.join("stderr.log"), 8192).unwrap_or_default();
    let tail = &tail[..];
    let stop = events::stop::stop_with_log_tail(&normalized.summary, tail);
    Some(StreamFacts {
        session_id: normalized.summary.session_id.clone(),
        conflicting_session_id: normalized.summary.conflicting_session_id.clone(),
        stop: stop.class,
        provider_errors: normalized
            .events
            .iter()
            .filter(|e| matches!(e, NormalizedEvent::ProviderError { .. }))
            .count(),
        structured_output_rejections: normalized
            .events
            .iter()
            .filter(|e| {
                matches!(e, NormalizedEvent::ToolUse { tool, status, .. }
                    if tool == "StructuredOutput" && *status != events::ToolStatus::Completed)
            })
            .count(),
        usage: normalized.summary.usage,
    })
}

fn evidence_problems(stage_dir: &Path) -> Vec<String> {
    let Ok(value) = crate::store::read_json::<Value>(&stage_dir.join("evidence.json")) else {
        return vec![];
    };
    value["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["problem"]["problem"].as_str().map(str::to_owned))
        .collect()
}

/// Runs the probe once: build, check, resume (the resume is left out for a tool that keeps no
/// sessions). Stops after the first step with a problem: later steps depend on it.
pub async fn run_probe(
    setup: &ProbeSetup,
    identity: &ProbeIdentity,
    fault: Option<Fault>,
) -> Result<ProbeResult, ProbeError> {
    let (workspace, head) = prepare_workspace(&setup.root, identity, &setup.env).await?;
    let state = run_state(setup, &workspace, identity);
    let mut runner = CliRunner::new(setup.env.clone(), vec![setup.provider.clone()]);
    runner.scripted_local = setup.scripted_local;
    let mut probe = Probe {
        setup,
        state,
        runner,
        identity: identity.clone(),
        head,
        kind: transport_kind(&setup.provider),
        fault,
    };
    probe.state.transport_identities = probe.runner.identities(&workspace).await;
    let mut result = ProbeResult {
        probe_id: identity.probe_id.clone(),
        workspace,
        steps: vec![],
        notes: vec![],
    };
    let build = probe.step(ProbeStep::Build, 1, None, None, vec![]).await;
    let build_session = build.session.clone();
    let ok = build.problems.is_empty();
    result.steps.push(build);
    if !ok {
        return Ok(result);
    }
    let check = probe
        .step(
            ProbeStep::Check,
            2,
            None,
            None,
            build_session.into_iter().collect(),
        )
        .await;
    let check_session = check.session.clone();
    let ok = check.problems.is_empty();
    result.steps.push(check);
    if !ok {
        return Ok(result);
    }
    if !probe.runner.keeps_sessions(&probe.state, Role::Tester) {
        result
            .notes
            .push("resume: the tool keeps no sessions (no `resume` in its TOML)".into());
        return Ok(result);
    }
    let Some(session) = check_session else {
        // assess already named the missing session for the check step.
        return Ok(result);
    };
    // Perturbation: the harness "forgets" the resume flag, as a CLI that ignores it would.
    let resume_with = if fault == Some(Fault::WrongSessionOnResume) {
        None
    } else {
        SessionId::new(session.clone()).ok()
    };
    let resume = probe
        .step(ProbeStep::Resume, 3, resume_with, Some(session), vec![])
        .await;
    result.steps.push(resume);
    Ok(result)
}
