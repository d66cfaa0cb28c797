//! `autocode run "OBJECTIVE"` (also `autocode "OBJECTIVE"`), `resume`, `status`, `clean` and
//! `capture`: the run engine on the command line. Exit 0 complete, 3 paused (the code and the
//! command that continues it on stderr, and in `--json`), 2 usage, 1 internal.

use crate::term_text::{LINE_MAX, abridge};
use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;

use super::context::Context;
use super::output;
use super::progress::Progress;
use crate::error::{EdgeError, exit};
use crate::ids::RunId;
use crate::report::evidence::{CAPTURE_RECEIPT_FORMAT, CaptureReceipt, sha256_hex};
use crate::role::Role;
use crate::run::api::{self, ResumeOptions, RunError, RunSummary, StartOptions};
use crate::run::driver::{DriveOutcome, Interaction};
use crate::run::progress::ProgressSink;
use crate::run::state::{Budgets, PlanRevision, Question};

#[derive(Debug, Args, Clone, Default)]
pub struct BudgetArgs {
    /// Stop (pause) when the run's known cost reaches this many US dollars.
    #[arg(long)]
    pub max_usd: Option<f64>,
    /// Stop when the run has spent this many active minutes in stages.
    #[arg(long)]
    pub max_minutes: Option<u64>,
    /// Stop a stage that runs longer than this.
    #[arg(long)]
    pub max_stage_minutes: Option<u64>,
    /// Stop a stage that prints nothing for this long.
    #[arg(long)]
    pub max_idle_minutes: Option<u64>,
    /// Stop when the run has used this many tokens (input, cache and output).
    #[arg(long)]
    pub max_tokens: Option<u64>,
}

impl BudgetArgs {
    fn budgets(&self) -> Budgets {
        Budgets {
            max_usd: self.max_usd,
            max_minutes: self.max_minutes,
            max_stage_minutes: self.max_stage_minutes,
            max_idle_minutes: self.max_idle_minutes,
            max_tokens: self.max_tokens,
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What you want done, as you would tell a colleague.
    #[arg(required_unless_present = "objective_file")]
    pub objective: Option<String>,
    /// Read the objective from FILE (`-` for stdin), for objectives longer than a command line.
    #[arg(long, value_name = "FILE", conflicts_with = "objective")]
    pub objective_file: Option<PathBuf>,
    /// The project to work on (default: the current directory).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// The provider (default: AUTOCODE_PROVIDER, then default_provider in config.toml, then opencode).
    #[arg(long, visible_alias = "engine")]
    pub provider: Option<String>,
    /// The model for the requirements gatherer (default: the provider's route for the role).
    #[arg(long)]
    pub requirements_model: Option<String>,
    /// The model for the planner (default: the provider's route for the role).
    #[arg(long, visible_alias = "glm-model")]
    pub planner_model: Option<String>,
    /// The model for the plan reviewer (default: the provider's route for the role).
    #[arg(long)]
    pub plan_reviewer_model: Option<String>,
    /// The model for the builder (default: the provider's route for the role).
    #[arg(long, visible_alias = "terra-model")]
    pub builder_model: Option<String>,
    /// The model for the tester (default: the provider's route for the role).
    #[arg(long, visible_alias = "sol-model")]
    pub tester_model: Option<String>,
    /// The model for the completion reviewer (default: the provider's route for the role).
    #[arg(long)]
    pub completion_model: Option<String>,
    /// The model for the resolver (consulted when a milestone is stuck) (default: the provider's route for the role).
    #[arg(long, visible_alias = "astra-model")]
    pub resolver_model: Option<String>,
    /// The reasoning effort for the requirements gatherer (the provider's own levels, e.g. low, medium, high).
    #[arg(long)]
    pub requirements_reasoning_effort: Option<String>,
    /// The reasoning effort for the planner (the provider's own levels, e.g. low, medium, high).
    #[arg(long, visible_alias = "glm-reasoning-effort")]
    pub planner_reasoning_effort: Option<String>,
    /// The reasoning effort for the plan reviewer (the provider's own levels, e.g. low, medium, high).
    #[arg(long)]
    pub plan_reviewer_reasoning_effort: Option<String>,
    /// The reasoning effort for the builder (the provider's own levels, e.g. low, medium, high).
    #[arg(long, visible_alias = "terra-reasoning-effort")]
    pub builder_reasoning_effort: Option<String>,
    /// The reasoning effort for the tester (the provider's own levels, e.g. low, medium, high).
    #[arg(long, visible_alias = "sol-reasoning-effort")]
    pub tester_reasoning_effort: Option<String>,
    /// The reasoning effort for the completion reviewer (the provider's own levels, e.g. low, medium, high).
    #[arg(long)]
    pub completion_reasoning_effort: Option<String>,
    /// The reasoning effort for the resolver (consulted when a milestone is stuck) (the provider's own levels, e.g. low, medium, high).
    #[arg(long, visible_alias = "astra-reasoning-effort")]
    pub resolver_reasoning_effort: Option<String>,
    /// The effort of every role without its own.
    #[arg(long)]
    pub reasoning_effort: Option<String>,
    /// Every role on this one model, in separate sessions: verifier independence is waived
    /// (recorded).
    #[arg(long)]
    pub single_model: Option<String>,
    /// The bulk roles (requirements, planner, builder) on the saved local endpoint's model
    /// (`autocode local setup`; name one as ENDPOINT/MODEL when several are saved), the
    /// verifiers on the provider, or another installed, signed-in one of another family.
    #[arg(long, value_name = "ENDPOINT/MODEL", num_args = 0..=1, default_missing_value = "")]
    pub local: Option<String>,
    /// Keep the provider's fixed routes: do not move the verifiers to another installed,
    /// signed-in provider when the chosen one cannot give them an independent model family.
    #[arg(long)]
    pub no_auto_select: bool,
    /// Run the readiness canaries of local direct endpoints again instead of reusing a cached
    /// pass (docs/direct.md, "Readiness preflight").
    #[arg(long)]
    pub recheck: bool,
    /// Accept the proposed defaults of open questions and approve the reviewed plan (recorded).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Work in the workspace itself instead of a git worktree on its own branch.
    #[arg(long)]
    pub in_place: bool,
    /// Run the agents without their room (the kernel-enforced write limits): only for hosts
    /// that cannot build it (`autocode doctor` says). Recorded in run.json, every stage and
    /// `status`; a resume keeps it.
    #[arg(long)]
    pub unconfined: bool,
    /// Allow Claude Code against a loopback endpoint you run (scripted or local model).
    #[arg(long, hide = true)]
    pub scripted_local_endpoint: bool,
    #[command(flatten)]
    pub roles: super::role_args::RoleTransportArgs,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
    /// Print only the outcome (no stage lines, no live progress).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print the `autocode-exec/1` JSON lines on stdout and ask nothing (docs/headless.md).
    #[arg(long, conflicts_with_all = ["json", "quiet"])]
    pub jsonl: bool,
    /// Ask open questions and the plan approval on this terminal (the default when stdin and
    /// stderr are terminals).
    #[arg(long, conflicts_with = "no_chat")]
    pub chat: bool,
    /// Never ask on the terminal: questions and approvals become pauses.
    #[arg(long)]
    pub no_chat: bool,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run (default: the most recent run in the workspace).
    pub run: Option<RunId>,
    /// The project the run belongs to (default: the current directory).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Approve this exact plan revision (`r<N>:<sha256>`, shown at the pause).
    #[arg(long)]
    pub approve_plan: Option<String>,
    /// Answer an open question (repeat per question).
    #[arg(long, value_parser = parse_answer)]
    pub answer: Vec<(String, String)>,
    /// Set an attempt aside (its directory name, e.g. 004-builder-1) and run the stage again.
    #[arg(long)]
    pub abandon_stage: Option<String>,
    /// Accept that the CLI, its version or its configuration changed.
    #[arg(long)]
    pub accept_transport_change: bool,
    /// Accept a criterion that waits for a person (AWAITING_HUMAN_REVIEW; repeat per criterion).
    /// The time and the text you were shown are recorded.
    #[arg(long, value_name = "CRITERION")]
    pub accept: Vec<String>,
    /// Reject a criterion that waits for a person: its milestone goes back to the builder.
    #[arg(long, value_name = "CRITERION", requires = "because")]
    pub reject: Option<String>,
    /// Why the criterion is rejected (handed to the builder as a finding).
    #[arg(long, value_name = "TEXT", requires = "reject")]
    pub because: Option<String>,
    /// Accept the builder's changes to existing tests (AWAITING_TEST_CHANGE_REVIEW).
    #[arg(long)]
    pub accept_test_changes: bool,
    /// For a pause with a known reset time (rate limit, budget), sleep until then.
    #[arg(long)]
    pub wait: bool,
    /// Accept the proposed defaults of open questions and approve the reviewed plan (recorded).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Internal (tests, demo): the routes talk to autocode's local scripted model.
    #[arg(long, hide = true)]
    pub scripted_local_endpoint: bool,
    #[command(flatten)]
    pub roles: super::role_args::RoleTransportArgs,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
    /// Print only the outcome (no stage lines, no live progress).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print the `autocode-exec/1` JSON lines on stdout and ask nothing (docs/headless.md).
    #[arg(long, conflicts_with_all = ["json", "quiet"])]
    pub jsonl: bool,
    /// Ask open questions and the plan approval on this terminal (the default when stdin and
    /// stderr are terminals).
    #[arg(long, conflicts_with = "no_chat")]
    pub chat: bool,
    /// Never ask on the terminal: questions and approvals become pauses.
    #[arg(long)]
    pub no_chat: bool,
}

/// The longest objective autocode reads from a file or stdin.
const OBJECTIVE_FILE_CAP: u64 = 1 << 20;

/// The objective from argv, or read (bounded, regular files and stdin only) from a file.
fn objective_text(argv: Option<String>, file: Option<&Path>) -> Result<String, EdgeError> {
    let text = match (argv, file) {
        (Some(text), _) => text,
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .lock()
                .take(OBJECTIVE_FILE_CAP + 1)
                .read_to_string(&mut text)
                .map_err(|e| {
                    EdgeError::usage(format!("cannot read the objective from stdin: {e}"))
                })?;
            if text.len() as u64 > OBJECTIVE_FILE_CAP {
                return Err(EdgeError::usage(format!(
                    "the objective on stdin is longer than {OBJECTIVE_FILE_CAP} bytes"
                )));
            }
            text
        }
        (None, Some(path)) => crate::bounded_read::read_capped(path, OBJECTIVE_FILE_CAP)
            .map_err(|e| EdgeError::usage(format!("cannot read the objective: {e}")))
            .and_then(|bytes| {
                String::from_utf8(bytes)
                    .map_err(|_| EdgeError::usage(format!("{} is not UTF-8 text", path.display())))
            })?,
        (None, None) => {
            return Err(EdgeError::usage(
                "no objective: give it as an argument or with --objective-file",
            ));
        }
    };
    if text.trim().is_empty() {
        return Err(EdgeError::usage("the objective is empty"));
    }
    Ok(text.trim_end().to_owned())
}

fn parse_answer(text: &str) -> Result<(String, String), String> {
    let (id, answer) = text
        .split_once('=')
        .ok_or_else(|| format!("expected ID=TEXT, got {text:?}"))?;
    Ok((id.trim().to_owned(), answer.to_owned()))
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The run (default: the most recent run in the workspace).
    pub run: Option<RunId>,
    /// The project the run belongs to (default: the current directory).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Where to write the receipt (under .autocode/evidence/).
    #[arg(long)]
    pub output: PathBuf,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Questions and approvals on a terminal; none when stdin is not one. Notes and live progress
/// go through [`Progress`] (`cli/progress.rs`).
pub struct TerminalUi {
    interactive: bool,
    progress: Arc<Progress>,
    /// The run, once it exists (for the notification of a failure).
    opened: Option<(PathBuf, RunId)>,
}

impl TerminalUi {
    /// `--chat` / `--no-chat`: `Some(false)` never asks; otherwise questions are asked when
    /// stdin and stderr are terminals (off a terminal nothing changes).
    pub fn with_chat(mut self, chat: Option<bool>) -> Self {
        if chat == Some(false) {
            self.interactive = false;
        } else if chat == Some(true) && !self.interactive {
            output::say!(
                "--chat: stdin or stderr is not a terminal; questions and approvals become pauses"
            );
        }
        self
    }

    pub fn with_progress(progress: Arc<Progress>) -> Self {
        Self {
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            progress,
            opened: None,
        }
    }

    fn ask(&self, prompt: &str) -> Option<String> {
        self.progress.suspend(|| {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{}", crate::term_text::terminal_safe(prompt));
            let _ = err.flush();
            drop(err);
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).ok()?;
            Some(line.trim().to_owned())
        })
    }
}

/// Where a person finds the whole of an abridged question or plan line.
const FULL_TEXT: &str = "`autocode status --json`";

impl Interaction for TerminalUi {
    fn answer_questions(&mut self, questions: &[Question]) -> Option<Vec<(String, String)>> {
        if !self.interactive {
            return None;
        }
        let progress = self.progress.clone();
        super::chat::answer_questions(
            questions,
            FULL_TEXT,
            |prompt| self.ask(prompt),
            |line| progress.suspend(|| output::say!("{line}")),
        )
    }

    fn reviews_brief(&self) -> bool {
        self.interactive
    }

    fn review_brief(
        &mut self,
        state: &crate::run::state::RunState,
        token: &str,
    ) -> crate::run::brief_review::BriefDecision {
        let brief = match (&state.brief, self.interactive) {
            (Some(brief), true) => brief,
            _ => return crate::run::brief_review::BriefDecision::Pause,
        };
        let progress = self.progress.clone();
        super::chat::review_brief(
            brief,
            &state.answers,
            token,
            FULL_TEXT,
            |prompt| self.ask(prompt),
            |line| progress.suspend(|| output::say!("{line}")),
        )
    }

    fn approve_plan(&mut self, plan: &PlanRevision) -> bool {
        if !self.interactive {
            return false;
        }
        self.progress.suspend(|| {
            output::say!(
                "plan revision {}:\n{}",
                plan.revision,
                abridge(
                    &serde_json::to_string_pretty(&plan.plan).unwrap_or_default(),
                    LINE_MAX,
                    FULL_TEXT
                )
            )
        });
        matches!(
            self.ask(&format!("approve {}? [y/N, /pause] ", plan.token()))
                .as_deref(),
            Some("y" | "Y" | "yes")
        )
    }

    fn note(&mut self, line: &str) {
        self.progress.note(line);
    }

    fn progress(&self) -> Option<Arc<dyn ProgressSink>> {
        Some(self.progress.clone())
    }

    fn run_opened(&mut self, dir: &Path, state: &crate::run::state::RunState) {
        self.opened = Some((dir.to_path_buf(), state.run_id.clone()));
    }
}

/// Shows how the engine ended, then sends its notification (`cli::notify`).
fn conclude(
    ctx: &Context,
    workspace: &Path,
    ui: &TerminalUi,
    outcome: Result<RunSummary, RunError>,
    json: bool,
) -> Result<ExitCode, EdgeError> {
    use super::notify::{Ended, after_run};
    match outcome {
        Ok(summary) => {
            let code = finish(summary.clone(), json)?;
            after_run(ctx, workspace, Ended::Summary(&summary));
            Ok(code)
        }
        Err(e) => {
            let error = run_error(e);
            if let Some((dir, run_id)) = &ui.opened {
                let text = error.render();
                // The error is shown first (as main would), then the notification is sent.
                output::say!("{text}");
                after_run(
                    ctx,
                    workspace,
                    Ended::Failed {
                        run_id,
                        run_dir: dir,
                        error: &text,
                    },
                );
                return Ok(error.exit_code());
            }
            Err(error)
        }
    }
}

fn finish(summary: RunSummary, json: bool) -> Result<ExitCode, EdgeError> {
    if json {
        output::print_json(&summary)?;
    }
    match &summary.outcome {
        DriveOutcome::Complete => {
            output::say!(
                "COMPLETE: run {} ({} stages, {} tokens)",
                summary.run_id,
                summary.stages,
                summary.usage.total_tokens()
            );
            super::apply::say_result(&summary);
            Ok(ExitCode::from(exit::OK))
        }
        DriveOutcome::Paused { pause } => {
            let full = format!("autocode status {} --json", summary.run_id);
            output::say!(
                "paused {}: {}",
                pause.code,
                abridge(&pause.reason, LINE_MAX, &full)
            );
            output::say!("next: {}", abridge(&pause.next_step, LINE_MAX, &full));
            output::say!(
                "(autocode explain {} · run directory {})",
                pause.code,
                summary.run_dir.display()
            );
            Ok(ExitCode::from(exit::PAUSED))
        }
    }
}

pub(super) fn run_error(e: RunError) -> EdgeError {
    match e {
        RunError::Find(find) => find_error(find),
        RunError::Key(key) => EdgeError::usage(RunError::Key(key)).hint(KEY_HINT),
        RunError::Usage(_) | RunError::RoomUnavailable { .. } | RunError::Preflight(_) => {
            EdgeError::usage(e)
        }
        RunError::Isolation(ref isolation) if isolation.hint().is_some() => {
            let hint = isolation.hint().unwrap_or_default();
            EdgeError::usage(e).hint(hint)
        }
        other => EdgeError::internal(other),
    }
}

const KEY_HINT: &str = "the run-state key lives in $XDG_STATE_HOME/autocode/ (default ~/.local/state/autocode/), mode 0600 in a 0700 directory, outside any workspace";

/// A run that cannot be found or is refused: a usage error, with what to do about it.
pub(super) fn find_error(e: crate::run::FindRunError) -> EdgeError {
    let hint = e.hint();
    let error = EdgeError::usage(e);
    match hint {
        Some(hint) => error.hint(hint),
        None => error,
    }
}

pub fn run(args: RunArgs) -> Result<ExitCode, EdgeError> {
    let (jsonl, workspace) = (args.jsonl, args.workspace.clone());
    match start_options(args) {
        Ok((ctx, opts, _)) if jsonl => super::exec::start(&ctx, opts),
        Ok((ctx, opts, args)) => {
            let mut ui = TerminalUi::with_progress(Progress::detect(args.quiet, args.json))
                .with_chat(args.chat);
            let outcome =
                super::runtime()?.block_on(api::start(&ctx.registry, &ctx.env, opts, &mut ui));
            conclude(&ctx, &workspace, &ui, outcome, args.json)
        }
        Err(e) if jsonl => Ok(super::exec::refused(&workspace, e)),
        Err(e) => Err(e),
    }
}

/// What `run` was asked, as the engine takes it (and the flags of how to show it).
fn start_options(args: RunArgs) -> Result<(Context, StartOptions, OutputFlags), EdgeError> {
    let ctx = Context::from_process()?;
    let mut models = BTreeMap::new();
    let mut efforts = BTreeMap::new();
    for (role, model, effort) in [
        (
            Role::Requirements,
            &args.requirements_model,
            &args.requirements_reasoning_effort,
        ),
        (
            Role::Planner,
            &args.planner_model,
            &args.planner_reasoning_effort,
        ),
        (
            Role::PlanReviewer,
            &args.plan_reviewer_model,
            &args.plan_reviewer_reasoning_effort,
        ),
        (
            Role::Builder,
            &args.builder_model,
            &args.builder_reasoning_effort,
        ),
        (
            Role::Tester,
            &args.tester_model,
            &args.tester_reasoning_effort,
        ),
        (
            Role::CompletionReviewer,
            &args.completion_model,
            &args.completion_reasoning_effort,
        ),
        (
            Role::Resolver,
            &args.resolver_model,
            &args.resolver_reasoning_effort,
        ),
    ] {
        if let Some(m) = model {
            models.insert(role, m.clone());
        }
        if let Some(e) = effort {
            efforts.insert(role, e.clone());
        }
    }
    if let Some(pick) = &args.local {
        let provider = local_provider(&ctx, args.provider.as_deref())?;
        let local = local_models(&ctx, pick, &provider)?;
        output::say!("{}", local.describe(&provider));
        for (role, model) in local.models {
            models.entry(role).or_insert(model);
        }
    }
    let opts = StartOptions {
        objective: objective_text(args.objective, args.objective_file.as_deref())?,
        workspace: args.workspace,
        provider: args.provider,
        models,
        efforts,
        effort: args.reasoning_effort,
        single_model: args.single_model,
        yes: args.yes,
        in_place: args.in_place,
        budgets: args.budgets.budgets(),
        scripted_local: args.scripted_local_endpoint,
        unconfined: args.unconfined,
        no_auto_select: args.no_auto_select,
        recheck: args.recheck,
        role_transports: args.roles.bindings()?,
    };
    let flags = OutputFlags {
        json: args.json,
        quiet: args.quiet,
        chat: chat_choice(args.chat, args.no_chat),
    };
    Ok((ctx, opts, flags))
}

/// The provider a `--local` run's verifiers start on: `--provider`, else the default.
fn local_provider(ctx: &Context, given: Option<&str>) -> Result<String, EdgeError> {
    match given {
        Some(name) => Ok(name.to_owned()),
        None => ctx
            .registry
            .default_provider(&ctx.env)
            .map(|d| d.name.as_str().to_owned())
            .map_err(EdgeError::usage),
    }
}

/// `--local [ENDPOINT/MODEL]`: the bulk roles' model flags (`local::routes`).
fn local_models(
    ctx: &Context,
    pick: &str,
    provider: &str,
) -> Result<crate::local::routes::LocalRoutes, EdgeError> {
    let env = |key: &str| {
        ctx.env
            .get(std::ffi::OsStr::new(key))
            .map(|v| v.to_string_lossy().into_owned())
    };
    let connections = crate::direct::connections::dir_from_env(env)
        .and_then(|dir| crate::direct::connections::Connections::load(&dir))
        .map_err(EdgeError::usage)?;
    let pick = (!pick.is_empty()).then_some(pick);
    crate::local::routes::local_routes(&connections, pick, provider == crate::direct::PROVIDER_NAME)
        .map_err(EdgeError::usage)
}

/// How a run's outcome is shown (`--json`, `--quiet`), and whether it may ask (`--chat`).
struct OutputFlags {
    json: bool,
    quiet: bool,
    chat: Option<bool>,
}

/// `--chat` / `--no-chat` as a choice (`None`: by the terminal).
fn chat_choice(chat: bool, no_chat: bool) -> Option<bool> {
    match (chat, no_chat) {
        (_, true) => Some(false),
        (true, false) => Some(true),
        (false, false) => None,
    }
}

pub fn resume(args: ResumeArgs) -> Result<ExitCode, EdgeError> {
    let ctx = match Context::from_process() {
        Ok(ctx) => ctx,
        Err(e) if args.jsonl => return Ok(super::exec::refused(&args.workspace, e)),
        Err(e) => return Err(e),
    };
    let opts = ResumeOptions {
        workspace: args.workspace.clone(),
        run: args.run,
        approve_plan: args.approve_plan,
        answers: args.answer,
        abandon_stage: args.abandon_stage,
        accept_transport_change: args.accept_transport_change,
        decisions: crate::run::review::Decisions {
            accept: args.accept,
            reject: args.reject.zip(args.because),
            accept_test_changes: args.accept_test_changes,
        },
        wait: args.wait,
        yes: args.yes,
        budgets: args.budgets.budgets(),
        scripted_local: args.scripted_local_endpoint,
        role_transports: match args.roles.bindings() {
            Ok(bindings) => bindings,
            Err(e) if args.jsonl => return Ok(super::exec::refused(&args.workspace, e)),
            Err(e) => return Err(e),
        },
    };
    if args.jsonl {
        return super::exec::resume(&ctx, opts);
    }
    let mut ui = TerminalUi::with_progress(Progress::detect(args.quiet, args.json))
        .with_chat(chat_choice(args.chat, args.no_chat));
    let outcome = super::runtime()?.block_on(api::resume(&ctx.registry, &ctx.env, opts, &mut ui));
    conclude(&ctx, &args.workspace, &ui, outcome, args.json)
}

pub fn status(args: StatusArgs) -> Result<ExitCode, EdgeError> {
    let workspace = std::fs::canonicalize(&args.workspace)
        .map_err(|e| EdgeError::usage(format!("workspace {}: {e}", args.workspace.display())))?;
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    // The only process `status` may start is git, to check that no run is tracked: not outside
    // a repository, nor in a plain one (its index is read in place). Then no keeper and no
    // runtime threads.
    let runtime = if crate::run::trust::tracking_needs_git(&workspace, &env) {
        crate::supervise::init_before_threads();
        super::runtime()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(EdgeError::internal)?
    };
    let found = runtime
        .block_on(crate::run::find_run(&workspace, args.run.as_ref(), &env))
        .map_err(find_error)?;
    let mut state = found.state;
    // An attempt still `running` while nobody holds the run's lock was cut off (autocode was
    // killed, or the machine stopped): show it as interrupted, with the step that continues it.
    if let Some(cut_off) = crate::run::cut_off_pause(&state)
        && crate::store::RunLock::acquire(&found.dir.join("lock")).is_ok()
    {
        state.pause = Some(cut_off);
    }
    if args.json {
        output::print_json(&state)?;
        // Exit 3 always has its code on stderr too (docs/exit-codes.md).
        if let Some(pause) = &state.pause {
            output::say!("paused {}; next: {}", pause.code, pause.next_step);
        }
    } else {
        let full = format!("autocode status {} --json", state.run_id);
        let text = crate::run::render_status(&state);
        output::print_stdout(&abridge(text.trim_end(), LINE_MAX, &full))?;
    }
    Ok(ExitCode::from(match (&state.pause, state.completed_at) {
        (Some(_), _) => exit::PAUSED,
        _ => exit::OK,
    }))
}

/// `autocode capture --output .autocode/evidence/NAME.json -- CMD ARGS…`: runs a check inside the
/// agent's own process family and writes a receipt bound to the attempt by
/// `AUTOCODE_CAPTURE_CONTEXT`. Its output is passed through; its exit code is passed on.
pub fn capture(args: CaptureArgs) -> Result<ExitCode, EdgeError> {
    let context = std::env::var("AUTOCODE_CAPTURE_CONTEXT").map_err(|_| {
        EdgeError::usage(
            "AUTOCODE_CAPTURE_CONTEXT is not set: capture runs inside an autocode stage",
        )
    })?;
    let cwd = std::env::current_dir().map_err(EdgeError::internal)?;
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| EdgeError::usage("no command given"))?;
    let program = std::ffi::OsString::from(program);
    let rest: Vec<std::ffi::OsString> = rest.iter().map(Into::into).collect();
    let out = super::runtime()?
        .block_on(crate::supervise::run_in_current_family(
            &program,
            &rest,
            &cwd,
            8 << 20,
        ))
        .map_err(EdgeError::internal)?;
    let mut output_text = String::from_utf8_lossy(&out.stdout).into_owned();
    output_text.push_str(&String::from_utf8_lossy(&out.stderr));
    let exit_code = match out.exit {
        crate::supervise::Exit::Code(c) => Some(c),
        _ => None,
    };
    let receipt = CaptureReceipt {
        format_version: CAPTURE_RECEIPT_FORMAT,
        command: args.command.clone(),
        exit_code,
        output_sha256: sha256_hex(output_text.as_bytes()),
        output: output_text,
        context,
    };
    crate::store::write_json(&args.output, &receipt).map_err(EdgeError::internal)?;
    let _ = std::io::stdout().write_all(&out.stdout);
    let _ = std::io::stderr().write_all(&out.stderr);
    Ok(ExitCode::from(exit_code.unwrap_or(1).clamp(0, 255) as u8))
}
