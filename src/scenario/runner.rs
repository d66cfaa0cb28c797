//! Runs one case on one profile, end to end: a fresh git repository from `seed/`, the scripted
//! model and the CLI's isolated configuration (scripted profiles), the run engine in-process
//! (`crate::run::api::start`, then `resume --wait` for the pause codes the case names), the
//! oracle on a copy of the result tree, the verdict and `result.json`.
//!
//! Invariants: the engine runs in this process (a child autocode would sit inside our own
//! process boundary and be refused); every process starts through `crate::supervise`; the agents
//! never see the oracle (it is copied to a scratch folder only after the run); a harness failure
//! is an `ERROR` result with its message, never a panic and never a missing `result.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::Utc;

use super::catalog::{Job, Profile, Scenario};
use super::oracle::{self, OracleCheckResult};
use super::result::{self, RESULT_FORMAT, ScenarioResult, Timings};
use super::setup::{
    changed_paths, copy_tree, fingerprint, home_fingerprint, scripted_env, seed_repository, to_os,
    write_cli_config, write_login_profile,
};
use super::verdict::{self, OracleSummary, RunEnding};
use crate::provider::{ConfigPaths, Registry};
use crate::run::api::{self, ResumeOptions, RunSummary, StartOptions};
use crate::run::driver::{DriveOutcome, Interaction};
use crate::run::state::{PlanRevision, Question};
use crate::scripted_model::{RunningServer, Script, ScriptedServer, ServerConfig};

/// The model name every scripted profile uses (the scripts' `models`).
pub const SCRIPTED_MODEL: &str = "mock-model";

/// The model as the profile's runtime names it (OpenCode wants PROVIDER/MODEL, autocode's own
/// runtime ENDPOINT/MODEL; Claude Code's ACP adapter offers only its own aliases, and `default`
/// is the one the scripted model's base URL serves).
pub fn scripted_model_name(profile: &Profile) -> String {
    match profile {
        Profile::ScriptedOpencode => format!("mock/{SCRIPTED_MODEL}"),
        Profile::ScriptedAcp(agent) => agent.scripted_model(SCRIPTED_MODEL),
        Profile::ScriptedDirect(_) => super::direct_setup::model_route(),
        _ => SCRIPTED_MODEL.to_owned(),
    }
}

/// What the harness needs beyond the job.
#[derive(Debug, Clone)]
pub struct HarnessConfig {
    /// The out folder; results go to `<out>/<case>/<profile>/<NNN>/`.
    pub out: PathBuf,
    /// Where the pinned CLIs live (`tests/clis/node_modules/.bin`).
    pub cli_bin_dir: PathBuf,
    /// `--i-authorize-live-model-spend`.
    pub authorize_live: bool,
    /// The harness's own environment (PATH, toolchain homes; live profiles use all of it).
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
enum HarnessError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let context = context.into();
    move |source| HarnessError::Io { context, source }
}

/// Accepts defaults and approves the plan (the harness's `--yes`), and keeps the notes.
#[derive(Default)]
struct HarnessUi {
    notes: Vec<String>,
}

impl Interaction for HarnessUi {
    fn answer_questions(&mut self, _questions: &[Question]) -> Option<Vec<(String, String)>> {
        None
    }
    fn approve_plan(&mut self, _plan: &PlanRevision) -> bool {
        true
    }
    fn note(&mut self, line: &str) {
        self.notes.push(line.to_owned());
    }
}

/// What the run part of a job produced.
struct RunPart {
    ending: RunEnding,
    summary: Option<RunSummary>,
    resumes: u32,
    notes: Vec<String>,
}

fn ending_of(outcome: &DriveOutcome) -> RunEnding {
    match outcome {
        DriveOutcome::Complete => RunEnding::Complete,
        DriveOutcome::Paused { pause } => RunEnding::Paused {
            code: pause.code,
            reason: pause.reason.clone(),
        },
    }
}

/// Starts the run and resumes it (`--wait`) for the case's resume codes.
async fn drive_case(
    scenario: &Scenario,
    profile: &Profile,
    ws: &Path,
    env: &BTreeMap<String, String>,
) -> RunPart {
    let os_env = to_os(env);
    let paths = match ConfigPaths::from_env(&os_env) {
        Ok(paths) => paths,
        Err(e) => {
            return RunPart {
                ending: RunEnding::HarnessError {
                    message: e.to_string(),
                },
                summary: None,
                resumes: 0,
                notes: vec![],
            };
        }
    };
    let registry = Registry::new(paths);
    let scripted = profile.is_scripted();
    let mut ui = HarnessUi::default();
    let opts = StartOptions {
        objective: scenario.brief.clone(),
        workspace: ws.to_owned(),
        provider: Some(profile.provider().to_owned()),
        // Every scripted role answers from one mock model: independence is knowingly waived.
        single_model: scripted.then(|| scripted_model_name(profile)),
        yes: true,
        scripted_local: scripted,
        in_place: scenario.spec.run.in_place,
        ..StartOptions::default()
    };
    let mut summary = match api::start(&registry, &os_env, opts, &mut ui).await {
        Ok(summary) => summary,
        Err(e) => {
            return RunPart {
                ending: RunEnding::HarnessError {
                    message: format!("autocode run failed: {e}"),
                },
                summary: None,
                resumes: 0,
                notes: ui.notes,
            };
        }
    };
    let mut resumes = 0;
    let settings = &scenario.spec.run;
    while let DriveOutcome::Paused { pause } = &summary.outcome {
        if !settings.resume_wait_on.contains(&pause.code) || resumes >= settings.max_resumes {
            break;
        }
        resumes += 1;
        let opts = ResumeOptions {
            workspace: ws.to_owned(),
            run: Some(summary.run_id.clone()),
            wait: true,
            yes: true,
            scripted_local: scripted,
            ..ResumeOptions::default()
        };
        match api::resume(&registry, &os_env, opts, &mut ui).await {
            Ok(next) => summary = next,
            Err(e) => {
                return RunPart {
                    ending: RunEnding::HarnessError {
                        message: format!("autocode resume failed: {e}"),
                    },
                    summary: Some(summary),
                    resumes,
                    notes: ui.notes,
                };
            }
        }
    }
    // The run state on disk must be autocode's own and agree with what the run returned.
    let ending = match crate::run::trust::verify_run(ws, &summary.run_dir, env).await {
        Ok(state)
            if state.completed_at.is_some()
                != matches!(summary.outcome, DriveOutcome::Complete) =>
        {
            RunEnding::HarnessError {
                message: format!(
                    "run {}: the verified run state does not match how the run ended",
                    summary.run_id
                ),
            }
        }
        Ok(_) => ending_of(&summary.outcome),
        Err(e) => RunEnding::HarnessError {
            message: format!("{e} ({})", e.hint()),
        },
    };
    RunPart {
        ending,
        summary: Some(summary),
        resumes,
        notes: ui.notes,
    }
}

/// The result of a job that ended in a harness error (`message` says what went wrong).
pub fn error_result(
    job: &Job<'_>,
    message: String,
    started_at: chrono::DateTime<Utc>,
    wall: Instant,
) -> ScenarioResult {
    ScenarioResult {
        format_version: RESULT_FORMAT,
        case: job.scenario.name.clone(),
        profile: job.profile.to_string(),
        protocol: job.profile.direct_protocol(&job.scenario.name, job.repeat),
        repeat: job.repeat,
        verdict: verdict::Verdict::Error,
        ending: RunEnding::HarnessError { message },
        run_id: None,
        stages: 0,
        resumes: 0,
        tokens: 0,
        cost_usd: None,
        oracle: vec![],
        timings: Timings {
            wall_ms: wall.elapsed().as_millis() as u64,
            ..Timings::default()
        },
        started_at,
    }
}

/// Runs one job and writes its result folder; returns the result (also on harness failure).
pub async fn run_job(job: &Job<'_>, config: &HarnessConfig) -> ScenarioResult {
    let wall = Instant::now();
    let started_at = Utc::now();
    let dir = result::result_dir(
        &config.out,
        &job.scenario.name,
        job.profile.as_str(),
        job.repeat,
    );
    let result = match run_job_inner(job, config, &dir, wall, started_at).await {
        Ok(result) => result,
        Err(e) => error_result(job, e.to_string(), started_at, wall),
    };
    if let Err(e) = result::write(&dir, &result) {
        tracing::error!("cannot write the result of {}: {e}", job.scenario.name);
    }
    result
}

async fn run_job_inner(
    job: &Job<'_>,
    config: &HarnessConfig,
    dir: &Path,
    wall: Instant,
    started_at: chrono::DateTime<Utc>,
) -> Result<ScenarioResult, HarnessError> {
    let scenario = job.scenario;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io(format!("cannot clear {}", dir.display())))?;
    }
    std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let scratch = tempfile::Builder::new()
        .prefix("autocode-scenario-")
        .tempdir()
        .map_err(io("cannot create a scratch folder"))?;
    // Canonical, so the paths autocode records match the ones the harness reads.
    let scratch_root =
        std::fs::canonicalize(scratch.path()).map_err(io("cannot resolve the scratch folder"))?;
    let ws = scratch_root.join("workspace");
    let home = scratch_root.join("home");
    std::fs::create_dir_all(&home).map_err(io("cannot create the throwaway HOME"))?;

    // Setup: the seed repository, the scripted model and the CLI's configuration.
    let mut server = None;
    let env = if job.profile.is_scripted() {
        let script_path = scenario.script_path(&job.profile).ok_or_else(|| {
            HarnessError::Setup(format!(
                "case {} has no script for {}",
                scenario.name, job.profile
            ))
        })?;
        let script = Script::load(script_path).map_err(|e| HarnessError::Setup(e.to_string()))?;
        let mut server_config = ServerConfig::new(script);
        server_config.log_file = Some(dir.join("model-requests.jsonl"));
        let running = ScriptedServer::start(server_config)
            .await
            .map_err(|e| HarnessError::Setup(format!("scripted model: {e}")))?;
        let mut env = scripted_env(&config.env, &home, &config.cli_bin_dir);
        write_login_profile(&home, &env).map_err(io("cannot write the throwaway ~/.profile"))?;
        if let Profile::ScriptedDirect(_) = job.profile {
            super::direct_setup::configure(
                &job.profile,
                &scenario.name,
                job.repeat,
                &env,
                &running,
            )
            .map_err(HarnessError::Setup)?;
        } else {
            env.extend(
                write_cli_config(&job.profile, &home, &running, &config.cli_bin_dir)
                    .map_err(HarnessError::Setup)?,
            );
        }
        server = Some(running);
        env
    } else {
        if !config.authorize_live {
            return Err(HarnessError::Setup(format!(
                "profile {} calls a live model: pass --i-authorize-live-model-spend",
                job.profile
            )));
        }
        config.env.clone()
    };
    seed_repository(&scenario.seed_dir(), &ws, &env)
        .await
        .map_err(HarnessError::Setup)?;
    let service = start_service(&scenario.spec.run.background_service, &scratch_root, &env)
        .await
        .map_err(HarnessError::Setup)?;
    let setup_ms = wall.elapsed().as_millis() as u64;
    let result = run_and_judge(job, dir, wall, started_at, setup_ms, &ws, &env, server).await;
    if let Some(service) = service {
        service.canceller().cancel();
        let _ = service.finish().await;
    }
    result
}

/// Starts the case's background service, if it has one (`[run] background_service`).
async fn start_service(
    argv: &[String],
    scratch_root: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Option<crate::supervise::Running>, String> {
    let Some((program, args)) = argv.split_first() else {
        return Ok(None);
    };
    let service_dir = scratch_root.join("service");
    std::fs::create_dir_all(&service_dir)
        .map_err(|e| format!("cannot create {}: {e}", service_dir.display()))?;
    let dir_text = service_dir.to_string_lossy().into_owned();
    let expand = |a: &String| std::ffi::OsString::from(a.replace("{service_dir}", &dir_text));
    let spec = crate::supervise::LaunchSpec {
        label: format!("background service {program}"),
        program: expand(program),
        args: args.iter().map(expand).collect(),
        env: to_os(env),
        cwd: service_dir.clone(),
        stdin: crate::supervise::StdinSource::Null,
        stdio: crate::supervise::StdioMode::Captured { limit: 1 << 16 },
        timeout: None,
        room: None,
    };
    crate::supervise::spawn(spec, crate::supervise::LaunchOptions::default())
        .await
        .map(Some)
        .map_err(|e| format!("background service {program}: {e}"))
}

/// The run, the evidence kept with it, the oracle and the verdict.
#[allow(clippy::too_many_arguments)]
async fn run_and_judge(
    job: &Job<'_>,
    dir: &Path,
    wall: Instant,
    started_at: chrono::DateTime<Utc>,
    setup_ms: u64,
    ws: &Path,
    env: &BTreeMap<String, String>,
    mut server: Option<RunningServer>,
) -> Result<ScenarioResult, HarnessError> {
    let scenario = job.scenario;
    let (ws, env) = (ws.to_owned(), env.clone());

    // The user's HOME must come out of the run as it went in (the agents' writes land in their
    // private layers), but for autocode's own state, cache and configuration.
    let home_before = job
        .profile
        .is_scripted()
        .then(|| {
            env.get("HOME")
                .map(|home| (PathBuf::from(home), home_fingerprint(Path::new(home))))
        })
        .flatten();
    // The run, bounded by the case's wall-clock limit.
    let run_started = Instant::now();
    let limit = Duration::from_secs(scenario.spec.run.timeout_seconds);
    let part =
        match tokio::time::timeout(limit, drive_case(scenario, &job.profile, &ws, &env)).await {
            Ok(part) => part,
            Err(_) => RunPart {
                ending: RunEnding::HarnessError {
                    message: format!("the run did not end within {} s", limit.as_secs()),
                },
                summary: None,
                resumes: 0,
                notes: vec![],
            },
        };
    let run_ms = run_started.elapsed().as_millis() as u64;
    if let Some(server) = server.take() {
        server.shutdown().await;
    }
    let notes = part.notes.join("\n");
    crate::store::write_atomic(&dir.join("notes.log"), notes.as_bytes())
        .map_err(|e| HarnessError::Setup(e.to_string()))?;

    // The evidence kept with the result: the run directory and the result tree.
    let work_tree = part
        .summary
        .as_ref()
        .map(|s| s.work_tree.clone())
        .unwrap_or_else(|| ws.clone());
    if let Some(summary) = &part.summary {
        copy_tree(&summary.run_dir, &dir.join("run"))
            .map_err(io("cannot copy the run directory"))?;
    }
    let quiet_before = scenario
        .spec
        .run
        .check_quiescent
        .then(|| fingerprint(&work_tree));

    // The oracle, on a copy of the result tree.
    let oracle_started = Instant::now();
    let oracle_dir = dir.join("oracle");
    let mut oracle_results: Vec<OracleCheckResult> = Vec::new();
    let mut oracle_summary = OracleSummary::Unavailable;
    match oracle::run_oracle(
        &work_tree,
        &scenario.oracle_dir(),
        &scenario.spec.oracle.checks,
        Duration::from_secs(scenario.spec.oracle.timeout_seconds),
        Some((&oracle_dir, dir)),
    )
    .await
    {
        Ok(results) => {
            oracle_results = results;
            oracle_summary = oracle::summarize(&oracle_results);
        }
        Err(e) => {
            crate::store::write_atomic(&oracle_dir.join("error.txt"), e.to_string().as_bytes())
                .map_err(|e| HarnessError::Setup(e.to_string()))?;
        }
    }
    if let Some(before) = quiet_before {
        let changed = changed_paths(&before, &fingerprint(&work_tree));
        let passed = changed.is_empty();
        oracle_results.push(OracleCheckResult {
            name: "the work tree stays still after the run".into(),
            command: "(harness) fingerprint the work tree before and after the oracle".into(),
            expected_exit: 0,
            exit: None,
            timed_out: false,
            passed,
            problems: if passed {
                vec![]
            } else {
                vec![format!(
                    "changed after the run ended: {}",
                    changed.join(", ")
                )]
            },
            duration_ms: 0,
            output_file: None,
        });
        if !passed && oracle_summary == OracleSummary::Passed {
            oracle_summary = OracleSummary::Failed;
        }
    }
    if let Some((home, before)) = home_before {
        let changed = changed_paths(&before, &home_fingerprint(&home));
        let passed = changed.is_empty();
        oracle_results.push(OracleCheckResult {
            name: "the user's HOME is as it was".into(),
            command: "(harness) fingerprint HOME before and after the run".into(),
            expected_exit: 0,
            exit: None,
            timed_out: false,
            passed,
            problems: if passed {
                vec![]
            } else {
                vec![format!("changed by the run: {}", changed.join(", "))]
            },
            duration_ms: 0,
            output_file: None,
        });
        if !passed && oracle_summary == OracleSummary::Passed {
            oracle_summary = OracleSummary::Failed;
        }
    }
    let oracle_ms = oracle_started.elapsed().as_millis() as u64;

    let verdict = verdict::verdict(&scenario.spec.expect, &part.ending, oracle_summary);
    let summary = part.summary.as_ref();
    // The run's verification root lives in the cache, outside the scratch folder that goes
    // now: it goes too (its evidence was copied above).
    if let Some(summary) = summary {
        let _ = crate::run::vtree::remove_verification_trees(&ws, summary.run_id.as_str());
        let run_dir = crate::run::runs_dir(&ws).join(summary.run_id.as_str());
        let _ = crate::run::layers::remove_run_layers(&run_dir);
    }
    Ok(ScenarioResult {
        format_version: RESULT_FORMAT,
        case: scenario.name.clone(),
        profile: job.profile.to_string(),
        protocol: job.profile.direct_protocol(&job.scenario.name, job.repeat),
        repeat: job.repeat,
        verdict,
        ending: part.ending,
        run_id: summary.map(|s| s.run_id.to_string()),
        stages: summary.map(|s| s.stages as u32).unwrap_or(0),
        resumes: part.resumes,
        tokens: summary.map(|s| s.usage.total_tokens()).unwrap_or(0),
        cost_usd: summary.and_then(|s| s.usage.cost_usd),
        oracle: oracle_results,
        timings: Timings {
            setup_ms,
            run_ms,
            oracle_ms,
            wall_ms: wall.elapsed().as_millis() as u64,
        },
        started_at,
    })
}
