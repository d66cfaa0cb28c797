//! `autocode scenario list|run|stats|check`: the reliability scorecard (`docs/reliability.md`).
//!
//! `run` and `stats` exit 1 when any result is a FALSE_COMPLETE (the CI gate); `check` exits 1
//! when a case's oracle cannot fail on its seed or rejects the scripted result.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::output;
use super::scenario_jobs;
use crate::error::EdgeError;
use crate::scenario::catalog::{self, Profile, Shard};
use crate::scenario::runner::{self, HarnessConfig};
use crate::scenario::selfcheck;
use crate::scenario::stats;

#[derive(Debug, Subcommand)]
pub enum ScenarioCommand {
    /// List the catalog's cases and the scripted profiles each has a script for.
    List(ListArgs),
    /// Run cases on profiles and write one result folder per run.
    Run(RunArgs),
    /// Merge result folders into the scorecard.
    Stats(StatsArgs),
    /// Check the catalog: oracles fail on the seed and pass the scripted result. No agent runs.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CatalogArg {
    /// The catalog folder.
    #[arg(long, default_value = "scenarios")]
    pub catalog: PathBuf,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub catalog: CatalogArg,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Case names (or --all).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Run every case of the catalog.
    #[arg(long)]
    pub all: bool,
    /// scripted-opencode, scripted-codex, scripted-claude, scripted-direct (autocode's own
    /// runtime, the protocol rotating by case; scripted-direct-chat-completions,
    /// -responses, -anthropic-messages pin one), scripted-acp-opencode, scripted-acp-claude
    /// (the pinned ACP agents, playing their native CLI's script), or a live profile (a
    /// provider name); repeatable.
    #[arg(long = "profile", default_value = "scripted-codex")]
    pub profiles: Vec<String>,
    /// Run each (case, profile) job this many times.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// The folder the results are written to (one JSON file per job).
    #[arg(long, default_value = "scenario-results")]
    pub out: PathBuf,
    /// Run only this shard of the jobs, I/N with I counted from 1.
    #[arg(long)]
    pub shard: Option<String>,
    /// Leave out the cases carrying this tag (repeatable): `--exclude-tag gate-only` runs the
    /// cases whose outcome can depend on the CLI.
    #[arg(long = "exclude-tag", value_name = "TAG")]
    pub exclude_tags: Vec<String>,
    /// Run only the cases carrying this tag (repeatable: any of them): `--tag every-cli` runs
    /// the cases whose outcome turns on a CLI's own conduct.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Run this many jobs at a time, each in a process of its own.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// Run only this repetition (counted from 1) of each job (what `--jobs` gives each child).
    #[arg(long, hide = true, value_parser = clap::value_parser!(u32).range(1..))]
    pub repetition: Option<u32>,
    /// Where the pinned CLIs live.
    #[arg(long, default_value = "tests/clis/node_modules/.bin")]
    pub cli_bin: PathBuf,
    /// Live profiles call real models and spend money.
    #[arg(long = "i-authorize-live-model-spend")]
    pub authorize_live: bool,
    #[command(flatten)]
    pub catalog: CatalogArg,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Out folders to merge (repeatable).
    #[arg(long = "out", required = true)]
    pub outs: Vec<PathBuf>,
    /// Print the merged scorecard as JSON on stdout.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Also write JUnit XML here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Print the scorecard as a markdown table on stdout.
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Case names (default: all).
    pub names: Vec<String>,
    /// The profile whose script gives the scripted result.
    #[arg(long, default_value = "scripted-codex")]
    pub profile: String,
    #[command(flatten)]
    pub catalog: CatalogArg,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: ScenarioCommand) -> Result<ExitCode, EdgeError> {
    match command {
        ScenarioCommand::List(args) => list(args),
        ScenarioCommand::Run(args) => run_cases(args),
        ScenarioCommand::Stats(args) => stats_command(args),
        ScenarioCommand::Check(args) => check(args),
    }
}

fn load(catalog: &CatalogArg) -> Result<Vec<catalog::Scenario>, EdgeError> {
    catalog::load_catalog(&catalog.catalog).map_err(|e| {
        EdgeError::usage(e).hint("run from the repository root, or pass --catalog DIR")
    })
}

#[derive(Serialize)]
struct Listed<'a> {
    name: &'a str,
    title: &'a str,
    expect: catalog::ExpectedOutcome,
    honest_stops: Vec<String>,
    /// The scripted profiles the case runs on (`scripted-direct` stands for every protocol).
    profiles: Vec<String>,
    /// Each scripted profile's script file (a derived one names the file it plays).
    scripts: BTreeMap<String, PathBuf>,
    /// Scripted profiles the case does not apply to, with the reason.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    not_applicable: BTreeMap<String, &'a str>,
}

fn list(args: ListArgs) -> Result<ExitCode, EdgeError> {
    let cases = load(&args.catalog)?;
    let listed: Vec<Listed> = cases
        .iter()
        .map(|s| Listed {
            name: &s.name,
            title: &s.spec.title,
            expect: s.spec.expect.outcome,
            honest_stops: s
                .spec
                .expect
                .honest_stops
                .iter()
                .map(|c| c.to_string())
                .collect(),
            profiles: s.scripts.keys().map(|p| p.to_string()).collect(),
            scripts: s
                .scripts
                .iter()
                .map(|(p, script)| (p.to_string(), script.path.clone()))
                .collect(),
            not_applicable: s
                .spec
                .not_applicable
                .iter()
                .map(|(p, reason)| (p.to_string(), reason.as_str()))
                .collect(),
        })
        .collect();
    if args.json {
        output::print_json(&listed)?;
    } else {
        let mut lines = Vec::new();
        for (l, case) in listed.iter().zip(&cases) {
            let profiles: Vec<String> = case
                .scripts
                .iter()
                .map(|(p, script)| match &script.derived_from {
                    Some(from) => format!("{p}(={from})"),
                    None => p.to_string(),
                })
                .collect();
            lines.push(format!(
                "{:<30} {:<55} {}",
                l.name,
                l.title,
                profiles.join(",")
            ));
            for (profile, reason) in &l.not_applicable {
                lines.push(format!("{:<30} {profile} not applicable: {reason}", ""));
            }
        }
        output::print_stdout(&lines.join("\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn run_cases(args: RunArgs) -> Result<ExitCode, EdgeError> {
    let cases = load(&args.catalog)?;
    let selected =
        catalog::select(&cases, &args.names, &args.catalog.catalog).map_err(EdgeError::usage)?;
    let (selected, left_out) = catalog::without_tags(selected, &args.exclude_tags);
    if !left_out.is_empty() {
        output::say!(
            "left out by tag ({}): {}",
            args.exclude_tags.join(", "),
            left_out.join(", ")
        );
    }
    let selected = if args.tags.is_empty() {
        selected
    } else {
        let (selected, left_out) = catalog::with_tags(selected, &args.tags);
        if selected.is_empty() {
            return Err(EdgeError::usage(format!(
                "no selected case carries the tag {}",
                args.tags.join(" or ")
            )));
        }
        output::say!(
            "left out, not tagged {}: {} case(s)",
            args.tags.join(" or "),
            left_out.len()
        );
        selected
    };
    let profiles: Vec<Profile> = args
        .profiles
        .iter()
        .map(|p| p.parse::<Profile>().map_err(EdgeError::usage))
        .collect::<Result<_, _>>()?;
    if profiles.contains(&Profile::ScriptedFake) {
        return Err(EdgeError::usage(
            "the scripted-fake profile is not implemented by this harness yet",
        ));
    }
    if profiles.iter().any(|p| !p.is_scripted()) && !args.authorize_live {
        return Err(EdgeError::usage("live profiles call real models")
            .hint("pass --i-authorize-live-model-spend to allow it"));
    }
    let shard = args
        .shard
        .as_deref()
        .map(str::parse::<Shard>)
        .transpose()
        .map_err(EdgeError::usage)?;
    let (mut jobs, unsupported) = catalog::plan_jobs(&selected, &profiles, args.repeat, shard);
    if let Some(repetition) = args.repetition {
        jobs.retain(|job| job.repeat + 1 == repetition);
    }
    for (case, profile, reason) in &unsupported {
        output::say!("skipped: {case} on {profile}: {reason}");
    }
    if args.jobs > 1 && jobs.len() > 1 {
        let out = scenario_jobs::absolute(&args.out);
        let cli_bin = scenario_jobs::absolute(&args.cli_bin);
        let catalog_dir = scenario_jobs::absolute(&args.catalog.catalog);
        let child = scenario_jobs::ChildArgs {
            out: &out,
            cli_bin: &cli_bin,
            catalog: &catalog_dir,
            authorize_live: args.authorize_live,
        };
        output::say!("{} jobs, {} at a time", jobs.len(), args.jobs);
        let results = scenario_jobs::run_in_children(&jobs, args.jobs as usize, &child)
            .map_err(|e| EdgeError::internal(format!("cannot run the jobs in processes: {e}")))?;
        return finish(&results, args.json);
    }
    let cli_bin = std::fs::canonicalize(&args.cli_bin).unwrap_or(args.cli_bin.clone());
    let config = HarnessConfig {
        out: args.out.clone(),
        cli_bin_dir: cli_bin,
        authorize_live: args.authorize_live,
        env: std::env::vars().collect(),
    };
    let runtime = super::runtime()?;
    let mut results = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let protocol = job
            .profile
            .direct_protocol(&job.scenario.name, job.repeat)
            .map(|p| format!(", {}", p.as_str()))
            .unwrap_or_default();
        output::say!(
            "running {} on {}{protocol} (#{})",
            job.scenario.name,
            job.profile,
            job.repeat + 1
        );
        let result = runtime.block_on(runner::run_job(job, &config));
        output::say!(
            "  {} in {:.1}s ({} stages)",
            result.verdict,
            result.timings.wall_ms as f64 / 1000.0,
            result.stages
        );
        results.push(result);
    }
    finish(&results, args.json)
}

/// Prints the scorecard of `results` and gives the exit code of the gate.
fn finish(
    results: &[crate::scenario::result::ScenarioResult],
    json: bool,
) -> Result<ExitCode, EdgeError> {
    let merged = stats::merge(results);
    if json {
        output::print_json(&merged)?;
    } else if !results.is_empty() {
        output::print_stdout(stats::render_text(&merged).trim_end())?;
    }
    Ok(gate(results))
}

/// The exit code of a scorecard ([`stats::fails_the_gate`]).
fn gate(results: &[crate::scenario::result::ScenarioResult]) -> ExitCode {
    if stats::fails_the_gate(results) {
        ExitCode::from(crate::error::exit::FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

fn stats_command(args: StatsArgs) -> Result<ExitCode, EdgeError> {
    let found = stats::collect(&args.outs).map_err(EdgeError::usage)?;
    let results: Vec<_> = found.into_iter().map(|(_, r)| r).collect();
    let merged = stats::merge(&results);
    if let Some(path) = &args.junit {
        crate::store::write_atomic(path, stats::render_junit(&results).as_bytes())
            .map_err(EdgeError::internal)?;
    }
    if args.json {
        output::print_json(&merged)?;
    } else if args.markdown {
        output::print_stdout(stats::render_markdown(&merged).trim_end())?;
    } else {
        output::print_stdout(stats::render_text(&merged).trim_end())?;
    }
    Ok(gate(&results))
}

fn check(args: CheckArgs) -> Result<ExitCode, EdgeError> {
    let cases = load(&args.catalog)?;
    let selected =
        catalog::select(&cases, &args.names, &args.catalog.catalog).map_err(EdgeError::usage)?;
    let profile: Profile = args.profile.parse().map_err(EdgeError::usage)?;
    let runtime = super::runtime()?;
    let mut reports = Vec::new();
    for scenario in selected {
        let report = runtime.block_on(selfcheck::self_check(scenario, &profile));
        if !args.json {
            if report.problems.is_empty() {
                output::say!("ok      {}", report.case);
            } else {
                output::say!("PROBLEM {}", report.case);
                for p in &report.problems {
                    output::say!("  - {p}");
                }
            }
        }
        reports.push(report);
    }
    if args.json {
        output::print_json(&reports)?;
    }
    Ok(if reports.iter().all(|r| r.problems.is_empty()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::error::exit::FAILED)
    })
}
