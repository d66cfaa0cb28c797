//! `autocode demo [--provider codex|claude|opencode|autocode]`: the whole pipeline offline, on a
//! bundled task, through a real CLI against the scripted model (see `crate::demo`), or on
//! autocode's own runtime (`--provider autocode`, and whenever no agent CLI is installed).

use super::output::say;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::context::Context;
use super::output;
use super::run::TerminalUi;
use crate::demo::{self, DEMO_OBJECTIVE};
use crate::error::{EdgeError, exit};
use crate::run::api::{self, StartOptions};
use crate::run::driver::DriveOutcome;
use crate::transport::BuiltinTransport;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DemoCli {
    Codex,
    Claude,
    Opencode,
    /// autocode's own runtime (`src/direct/`): needs no agent CLI.
    Autocode,
}

/// The protocol the direct runtime speaks to the scripted model in the demo.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DemoProtocol {
    ChatCompletions,
    Responses,
    AnthropicMessages,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Which CLI to drive (default: the first found of codex, claude, opencode; autocode's own
    /// runtime when none is installed).
    #[arg(long)]
    pub provider: Option<DemoCli>,
    /// The protocol of the direct runtime (`--provider autocode`).
    #[arg(long, value_enum, default_value = "chat-completions")]
    pub protocol: DemoProtocol,
    /// Print the run summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Drive exactly this CLI executable (needs --provider; default: the one on PATH, as a run).
    #[arg(long, value_name = "PATH", requires = "provider")]
    pub executable: Option<std::path::PathBuf>,
    /// Look for the CLI in this directory before PATH (the pinned ones:
    /// `tests/clis/node_modules/.bin`).
    #[arg(long, value_name = "DIR", conflicts_with = "executable")]
    pub clis_dir: Option<std::path::PathBuf>,
    /// Run without the agent's room, on a host that cannot build it (recorded; see `autocode
    /// run --unconfined`).
    #[arg(long)]
    pub unconfined: bool,
}

pub fn run(args: DemoArgs) -> Result<ExitCode, EdgeError> {
    let ctx = Context::from_process()?;
    let preferred = match args.provider {
        Some(DemoCli::Codex) => Some(BuiltinTransport::Codex),
        Some(DemoCli::Claude) => Some(BuiltinTransport::Claude),
        Some(DemoCli::Opencode) => Some(BuiltinTransport::Opencode),
        Some(DemoCli::Autocode) => {
            return super::direct::demo(&ctx, args.protocol, args.json, args.unconfined);
        }
        None => None,
    };
    let search = demo::CliSearch {
        executable: args.executable.clone(),
        dir: args.clis_dir.clone(),
    };
    let cli = match demo::find_cli(preferred, &ctx.path_var(), &search) {
        Ok(cli) => cli,
        Err(demo::FindCliError::NotFound(..)) if preferred.is_none() => {
            say!("autocode demo: no agent CLI is installed; using autocode's own runtime");
            return super::direct::demo(&ctx, args.protocol, args.json, args.unconfined);
        }
        Err(e) => {
            return Err(EdgeError::usage(e).hint(
                "install the pinned CLIs with `npm ci --prefix tests/clis` and pass `--clis-dir tests/clis/node_modules/.bin`, or name one with `--executable PATH`",
            ));
        }
    };
    let root = tempfile::Builder::new()
        .prefix("autocode-demo-")
        .tempdir()
        .map_err(EdgeError::internal)?
        .keep();
    let workspace = root.join("demo workspace");
    let home = root.join("home");
    say!(
        "autocode demo: {} ({}) against the scripted model; workspace {}",
        cli.transport.as_str(),
        cli.executable.display(),
        workspace.display()
    );
    let runtime = super::runtime()?;
    let outcome = runtime.block_on(async {
        let server = demo::start_server().await.map_err(EdgeError::internal)?;
        let overrides = demo::isolated_cli_env(cli.transport, &server, &home, demo::DEMO_CLI)
            .map_err(EdgeError::internal)?;
        let env = demo::run_env(&ctx.env, &overrides, &cli);
        // Asked as the run's preflight asks it (the provider's version command, the agents'
        // environment), so the run is answered in process instead of starting the CLI again.
        let version = match ctx.registry.resolve_name(cli.transport.as_str()) {
            Ok(provider) => {
                let probe =
                    crate::run::preflight::provider_check::probe_context(&env, Some(&provider));
                crate::provider::probe_version(&provider.config, &probe)
                    .await
                    .ok()
            }
            Err(_) => None,
        };
        say!(
            "autocode demo: {} {}",
            cli.executable.display(),
            version.unwrap_or_else(|| "(version unknown)".into())
        );
        seed_workspace(&workspace, &ctx).await?;
        let models = demo::demo_routes(|model| demo::model_id(cli.transport, model));
        let opts = StartOptions {
            objective: DEMO_OBJECTIVE.into(),
            workspace: workspace.clone(),
            provider: Some(cli.transport.as_str().into()),
            models,
            yes: true,
            scripted_local: true,
            unconfined: args.unconfined,
            ..StartOptions::default()
        };
        let mut ui = TerminalUi::with_progress(super::progress::Progress::detect(false, args.json));
        let result = api::start(&ctx.registry, &env, opts, &mut ui).await;
        server.shutdown().await;
        result.map_err(|e| match e {
            e @ api::RunError::RoomUnavailable { .. } => EdgeError::usage(e),
            e => EdgeError::internal(e),
        })
    })?;
    // The stage table was printed as the stages finished; here come the proofs behind it.
    let state = crate::run::load(&outcome.run_dir).map_err(EdgeError::internal)?;
    for criterion in &state.verification.verified {
        say!(
            "  criterion {} (milestone {}): {}",
            criterion.criterion_id,
            criterion.milestone + 1,
            criterion.how
        );
    }
    for attempt in &state.attempts {
        let dir = outcome.run_dir.join("stages").join(&attempt.dir);
        if let Ok(text) = std::fs::read_to_string(dir.join("evidence.json"))
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
        {
            for check in value["checks"].as_array().into_iter().flatten() {
                say!(
                    "  evidence {}: `{}` exit {} -> {}",
                    attempt.dir,
                    check["check"]["command"].as_str().unwrap_or_default(),
                    check["check"]["exit_code"],
                    crate::report::evidence::describe_match(check)
                );
            }
        }
        if let Ok(text) = std::fs::read_to_string(dir.join("supervision.json"))
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
        {
            say!(
                "  receipt  {}: verified {} · {} session(s) · {} killed",
                attempt.dir,
                value["verified"],
                value["sessions"].as_array().map_or(0, Vec::len),
                value["killed"].as_array().map_or(0, Vec::len)
            );
        }
    }
    say!("run directory: {}", outcome.run_dir.display());
    say!(
        "the demo's files stay for you to inspect; remove them with: rm -rf {}",
        shell_quote(&root.display().to_string())
    );
    // What was produced and what to do next, as a real run ends.
    match &outcome.outcome {
        DriveOutcome::Complete => {
            say!(
                "COMPLETE: run {} ({} stages, {} tokens)",
                outcome.run_id,
                outcome.stages,
                outcome.usage.total_tokens()
            );
            super::apply::say_result(&outcome);
            if let Some(result) = &outcome.result {
                say!(
                    "produced: {} commit(s) on {} in {}; see them with: git -C {} log -p {}",
                    result.commits,
                    result.branch,
                    workspace.display(),
                    shell_quote(&workspace.display().to_string()),
                    result.branch
                );
            }
            say!(
                "next: in a git repository of yours, `autocode doctor` checks the setup and `autocode run \"<what you want done>\"` starts a run"
            );
        }
        DriveOutcome::Paused { pause } => {
            say!("paused {}: {}", pause.code, pause.reason);
            say!(
                "next: {} (run directory {}; `autocode explain {}` says more)",
                pause.next_step,
                outcome.run_dir.display(),
                pause.code
            );
        }
    }
    if args.json {
        output::print_json(&outcome)?;
    }
    Ok(ExitCode::from(match outcome.outcome {
        DriveOutcome::Complete => exit::OK,
        DriveOutcome::Paused { .. } => exit::PAUSED,
    }))
}

pub(super) async fn seed_workspace(workspace: &Path, ctx: &Context) -> Result<(), EdgeError> {
    std::fs::create_dir_all(workspace).map_err(EdgeError::internal)?;
    std::fs::write(
        workspace.join("README.md"),
        "# autocode demo\n\nThe agents are asked to create hello.txt.\n",
    )
    .map_err(EdgeError::internal)?;
    let mut env: BTreeMap<String, String> = ctx
        .env
        .iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
        .collect();
    for (k, v) in [
        ("GIT_AUTHOR_NAME", "autocode demo"),
        ("GIT_AUTHOR_EMAIL", "demo@autocode.invalid"),
        ("GIT_COMMITTER_NAME", "autocode demo"),
        ("GIT_COMMITTER_EMAIL", "demo@autocode.invalid"),
    ] {
        env.insert(k.into(), v.into());
    }
    let git = |args: &'static [&'static str]| {
        let env = env.clone();
        async move { crate::run::workspace::git(workspace, args, &env).await }
    };
    git(&["init", "-q", "-b", "main"])
        .await
        .map_err(EdgeError::internal)?;
    git(&["add", "README.md"])
        .await
        .map_err(EdgeError::internal)?;
    git(&["commit", "-q", "-m", "demo seed"])
        .await
        .map_err(EdgeError::internal)?;
    Ok(())
}

/// `text` as one POSIX shell word (for a command a person may paste).
pub(super) fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@".contains(c))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
