//! The command-line surface: argument parsing (clap derive), dispatch, and the edge between
//! typed module errors and exit codes.
//!
//! stdout is for data (`--json` everywhere), stderr for people; logs go through `tracing` to
//! stderr (`-v`, `-vv`; `RUST_LOG` overrides). `main` stays thin: each command lives in its own
//! file and returns `Result<ExitCode, EdgeError>`.

mod apply;
mod chat;
mod clean;
mod completions;
mod conformance;
mod connections;
mod context;
mod dashboard;
mod demo;
mod direct;
mod direct_setup;
#[cfg(test)]
mod doc_commands;
mod doctor;
mod events;
mod exec;
mod explain;
mod local;
mod mcp;
mod notify;
mod output;
mod progress;
mod providers;
mod role_args;
mod run;
mod runs;
mod scenario;
mod scenario_jobs;
mod scripted_model;
mod supervise;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::EdgeError;
use output::say;

/// autocode: hand an objective to a team of coding agents and get a result you can trust.
#[derive(Debug, Parser)]
#[command(name = "autocode", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Take an objective through the team of agents (also: `autocode "OBJECTIVE"`).
    Run(Box<run::RunArgs>),
    /// `run --jsonl`: the whole run headless, as `autocode-exec/1` JSON lines on stdout (exit 0
    /// complete, 1 failed, 2 refused, 3 paused; docs/headless.md).
    Exec(Box<run::RunArgs>),
    /// The whole pipeline offline: a bundled task through a real CLI against the scripted model.
    Demo(demo::DemoArgs),
    /// Continue a paused or interrupted run.
    Resume(Box<run::ResumeArgs>),
    /// A run's stages, routes, outcomes, usage and pause.
    Status(run::StatusArgs),
    /// The workspace's runs, newest first: id, phase or pause, age, objective.
    Runs(runs::RunsArgs),
    /// Take a completed run's result (its branch) into your current branch.
    Apply(apply::ApplyArgs),
    /// Remove a run's worktree and branch (never an unmerged result without --force).
    Clean(clean::CleanArgs),
    /// Run a check and write a receipt bound to the current stage (for report-file tools).
    Capture(run::CaptureArgs),
    /// List and inspect providers (built-ins, bundled and user TOML configs).
    #[command(subcommand)]
    Providers(providers::ProvidersCommand),
    /// Is this machine ready: executable, version, login, withheld variables, the boundary.
    Doctor(doctor::DoctorArgs),
    /// Qualify a CLI version: the probe and its fault variants against the scripted model
    /// (or a real account), recorded in the provider matrix.
    Conformance(conformance::ConformanceArgs),
    /// Normalize a captured CLI stream into autocode's events, or follow a run's events
    /// (`--follow RUN --jsonl`).
    Events(events::EventsArgs),
    /// Providers' sign-in state and login commands.
    #[command(subcommand)]
    Connections(connections::ConnectionsCommand),
    /// The models a provider offers (`--catalogue`: autocode's model catalogue).
    Models(providers::ModelsArgs),
    /// The MCP server on stdio through which other agents delegate to autocode
    /// (`mcp install --client claude|codex|opencode` registers it).
    Mcp(mcp::McpArgs),
    /// Notifications of runs that need a person, paused, completed or failed (`[notify]`).
    #[command(subcommand)]
    Notify(notify::NotifyCommand),
    /// Local models: which fit this machine.
    #[command(subcommand)]
    Local(local::LocalCommand),
    /// Run any command under the process-ownership boundary and print its receipt.
    Supervise(supervise::SuperviseArgs),
    /// Explain a pause code and print the command that continues it.
    Explain(explain::ExplainArgs),
    /// A local web view of the runs: live events, diffs, evidence and the decisions they wait for.
    Dashboard(dashboard::DashboardArgs),
    /// The scripted model server: real CLIs against a script, offline.
    #[command(subcommand)]
    ScriptedModel(scripted_model::ScriptedModelCommand),
    /// Scenarios: run the catalog, merge scorecards (does autocode's COMPLETE mean done?).
    #[command(subcommand)]
    Scenario(scenario::ScenarioCommand),
    /// A shell completion script on stdout (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// The man page (roff) on stdout: `autocode man > autocode.1`.
    Man(completions::ManArgs),
}

impl Command {
    fn starts_processes(&self) -> bool {
        !matches!(
            self,
            Command::Explain(_)
                // `status` forks the keeper itself, and only when it will start git.
                | Command::Status(_)
                | Command::Events(_)
                | Command::Capture(_)
                | Command::Completions(_)
                | Command::Man(_)
        )
    }
}

/// Parses the arguments, runs the command and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    output::ensure_standard_fds();
    let cli = Cli::parse_from(with_default_subcommand(std::env::args_os().collect()));
    // The keeper must be forked before any thread exists (the tokio runtime included), and only
    // commands that start processes need it.
    if cli.command.starts_processes() {
        crate::supervise::init_before_threads();
    }
    output::init_tracing(cli.verbose);
    let outcome = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Exec(mut args) => {
            args.jsonl = true;
            run::run(*args)
        }
        Command::Resume(args) => run::resume(*args),
        Command::Demo(args) => demo::run(args),
        Command::Status(args) => run::status(args),
        Command::Runs(args) => runs::run(args),
        Command::Apply(args) => apply::apply(args),
        Command::Clean(args) => clean::clean(args),
        Command::Capture(args) => run::capture(args),
        Command::Providers(command) => providers::run(command),
        Command::Models(args) => providers::models(args),
        Command::Notify(command) => notify::run(command),
        Command::Mcp(args) => mcp::run(args),
        Command::Local(command) => local::run(command),
        Command::Connections(command) => connections::run(command),
        Command::Doctor(args) => doctor::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Events(command) => events::run(command),
        Command::Supervise(args) => supervise::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Dashboard(args) => dashboard::run(args),
        Command::ScriptedModel(command) => scripted_model::run(command),
        Command::Scenario(command) => scenario::run(command),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
    };
    // A keeper forked above (or by `status`) is reaped before autocode leaves.
    crate::supervise::release_keeper();
    match outcome {
        Ok(code) => code,
        Err(error) => {
            say!("{}", error.render());
            error.exit_code()
        }
    }
}

/// `autocode "OBJECTIVE" …` means `autocode run "OBJECTIVE" …`: a first argument that is not a
/// flag and not a command name, and holds a space (objectives are sentences), is an objective. A
/// single unknown word stays an error, so a mistyped command never starts a run. A first
/// argument that is one of `run`'s flags also means `run`.
fn with_default_subcommand(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use clap::CommandFactory;
    let Some(first) = args.get(1).and_then(|a| a.to_str()) else {
        return args;
    };
    let known = Cli::command()
        .get_subcommands()
        .any(|c| c.get_name() == first || c.get_all_aliases().any(|a| a == first))
        || first == "help";
    let objective = !first.starts_with('-') && !known && first.trim().contains(char::is_whitespace);
    // `autocode --provider codex "OBJECTIVE"`: run's flags may come first. Only `-v` is global,
    // and help/version belong to autocode itself.
    let run_flag_first = first.starts_with('-')
        && !matches!(first, "-h" | "--help" | "-V" | "--version" | "--verbose")
        && !first.trim_start_matches('-').chars().all(|c| c == 'v');
    if objective || run_flag_first {
        args.insert(1, "run".into());
    }
    args
}

/// Builds the async runtime for commands that start processes or serve sockets.
fn runtime() -> Result<tokio::runtime::Runtime, EdgeError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(EdgeError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(args: &[&str]) -> Vec<String> {
        with_default_subcommand(args.iter().map(Into::into).collect())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn objectives_and_leading_run_flags_mean_run() {
        assert_eq!(
            expand(&["autocode", "add a flag"]),
            ["autocode", "run", "add a flag"]
        );
        assert_eq!(
            expand(&["autocode", "--provider", "codex", "add a flag"]),
            ["autocode", "run", "--provider", "codex", "add a flag"]
        );
        assert_eq!(expand(&["autocode", "status"]), ["autocode", "status"]);
        assert_eq!(expand(&["autocode", "--help"]), ["autocode", "--help"]);
        assert_eq!(expand(&["autocode", "-V"]), ["autocode", "-V"]);
        assert_eq!(
            expand(&["autocode", "-vv", "status"]),
            ["autocode", "-vv", "status"]
        );
        assert_eq!(expand(&["autocode", "stauts"]), ["autocode", "stauts"]);
        // Parsed as a run with its flag before the objective.
        let cli = Cli::try_parse_from(expand(&["autocode", "--provider", "codex", "add a flag"]));
        assert!(matches!(cli.map(|c| c.command), Ok(Command::Run(_))));
    }
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    use super::Cli;

    fn missing_help(command: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                out.push(format!("{path} {id}"));
            }
        }
        for sub in command.get_subcommands() {
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                out.push(format!("{path} {} (command)", sub.get_name()));
            }
            missing_help(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_flag_argument_and_command_has_help_text() {
        let mut missing = Vec::new();
        missing_help(&Cli::command(), "autocode", &mut missing);
        assert!(
            missing.is_empty(),
            "without help text:\n{}",
            missing.join("\n")
        );
    }
}
