//! `autocode notify test`, and the notification a run's end sends (`crate::notify`): after the
//! outcome is recorded and shown, never changing it; each channel's outcome goes to the run's
//! activity log and, when it did not deliver, to stderr.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use super::context::Context;
use super::output;
use crate::error::{EdgeError, exit};
use crate::ids::RunId;
use crate::notify::{self, Notification, NotifyConfig, NotifyEvent, Outcome};
use crate::run::api::RunSummary;
use crate::run::driver::DriveOutcome;
use crate::term_text::{LINE_MAX, abridge};

#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// Send a test notification through every channel of `[notify]` in config.toml.
    Test(TestArgs),
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Print each channel's outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: NotifyCommand) -> Result<ExitCode, EdgeError> {
    let NotifyCommand::Test(args) = command;
    let ctx = Context::from_process()?;
    let config =
        NotifyConfig::load(&ctx.registry.paths().user_config_file).map_err(EdgeError::usage)?;
    if !config.any_channel() {
        return Err(EdgeError::usage(format!(
            "no notification channel is configured: add a [notify] table with command, webhook or desktop to {}",
            ctx.registry.paths().user_config_file.display()
        )));
    }
    let workspace = std::env::current_dir().map_err(EdgeError::internal)?;
    let note = Notification {
        event: NotifyEvent::Test,
        run_id: None,
        code: None,
        url: String::new(),
        summary: "a test notification from autocode notify test".into(),
        workspace,
    };
    let deliveries = super::runtime()?.block_on(notify::send(&config, &note, &env_map(&ctx)));
    for delivery in &deliveries {
        output::say!("{}", delivery.describe());
    }
    if args.json {
        output::print_json(&deliveries)?;
    }
    let delivered = deliveries
        .iter()
        .all(|d| matches!(d.outcome, Outcome::Delivered | Outcome::Skipped { .. }));
    Ok(ExitCode::from(if delivered {
        exit::OK
    } else {
        exit::FAILED
    }))
}

fn env_map(ctx: &Context) -> BTreeMap<String, String> {
    ctx.env
        .iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
        .collect()
}

/// What ended, for a notification.
pub(super) enum Ended<'a> {
    Summary(&'a RunSummary),
    /// The run was created, then the engine failed.
    Failed {
        run_id: &'a RunId,
        run_dir: &'a Path,
        error: &'a str,
    },
}

/// Sends the notification of a run's end, if `[notify]` wants it; records each channel's
/// outcome in the run's activity log. A configuration that cannot be read is said on stderr.
pub(super) fn after_run(ctx: &Context, workspace: &Path, ended: Ended<'_>) {
    let config = match NotifyConfig::load(&ctx.registry.paths().user_config_file) {
        Ok(config) if config.any_channel() => config,
        Ok(_) => return,
        Err(e) => {
            output::say!("notifications are off: {e}");
            return;
        }
    };
    let (event, run_id, run_dir, code, summary) = match ended {
        Ended::Summary(summary) => match &summary.outcome {
            // Another autocode holds the run or the place: nothing of this run changed.
            DriveOutcome::Paused { pause }
                if pause.code == crate::pause::PauseCode::PausedRunBusy =>
            {
                return;
            }
            DriveOutcome::Paused { pause } => (
                NotifyEvent::of_pause(pause.code),
                &summary.run_id,
                summary.run_dir.as_path(),
                Some(pause.code),
                format!(
                    "paused {}: {} (next: {})",
                    pause.code, pause.reason, pause.next_step
                ),
            ),
            DriveOutcome::Complete => (
                NotifyEvent::Complete,
                &summary.run_id,
                summary.run_dir.as_path(),
                None,
                match &summary.result {
                    Some(result) => format!(
                        "complete: {} commits on {} (autocode apply {})",
                        result.commits, result.branch, summary.run_id
                    ),
                    None => format!(
                        "complete: run {} ({} stages)",
                        summary.run_id, summary.stages
                    ),
                },
            ),
        },
        Ended::Failed {
            run_id,
            run_dir,
            error,
        } => (
            NotifyEvent::Failed,
            run_id,
            run_dir,
            None,
            format!("failed: {error}"),
        ),
    };
    if !config.wants(event) {
        return;
    }
    let note = Notification {
        event,
        run_id: Some(run_id.clone()),
        code,
        workspace: std::fs::canonicalize(workspace).unwrap_or_else(|_| PathBuf::from(workspace)),
        summary: abridge(&summary, LINE_MAX * 4, &format!("autocode status {run_id}")).into_owned(),
        url: format!("file://{}", run_dir.display()),
    };
    let runtime = match super::runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            output::say!("cannot send the notification: {}", e.render());
            return;
        }
    };
    let deliveries = runtime.block_on(notify::send(&config, &note, &env_map(ctx)));
    // A webhook's blocking thread that outlives its bound is not waited for.
    runtime.shutdown_background();
    for delivery in &deliveries {
        if !matches!(delivery.outcome, Outcome::Delivered) {
            output::say!("notification {}", delivery.describe());
        }
    }
    notify::record(run_dir, event, &deliveries);
}
