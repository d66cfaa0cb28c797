//! `autocode connections list|check|login|setup`: the sign-in state of each provider, from its
//! `[connection]` table (and, for `autocode`, its direct endpoints: `cli::direct`). The status command makes no model request: exit 0 = credentials present,
//! 1 = sign-in required, anything else = the check failed. Its output is never printed. The login
//! command runs attached to the terminal.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::context::Context;
use super::output;
use crate::error::{EdgeError, exit};
use crate::provider::{self, ConnectionStatus, ProviderKind};
use crate::supervise::Exit;

#[derive(Debug, Subcommand)]
pub enum ConnectionsCommand {
    /// Every provider and how its sign-in is checked.
    List(ListArgs),
    /// Run a provider's status command (no model traffic).
    Check(ProviderArg),
    /// Run a provider's login command on this terminal.
    Login(ProviderArg),
    /// Create or change a direct endpoint of `--provider autocode` (launches no model).
    Setup(super::direct::SetupArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProviderArg {
    /// The provider whose sign-in to check or start (see `autocode providers list`).
    #[arg(long)]
    pub provider: String,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
    /// `--provider autocode` only: also run the readiness preflight of every configured model
    /// (real model requests: the server, the model, its context, a tool call, a long prompt).
    #[arg(long)]
    pub live: bool,
}

#[derive(Debug, Serialize)]
struct ConnectionRow {
    name: String,
    kind: ProviderKind,
    login_command: Option<Vec<String>>,
    status_command: Option<Vec<String>>,
    /// `autocode` only: its direct endpoints (no key; `key` says whether one is stored).
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoints: Option<Vec<serde_json::Value>>,
    /// `autocode` only: why its endpoints could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoints_error: Option<String>,
}

#[derive(Debug, Serialize)]
struct CheckOutput {
    provider: String,
    #[serde(flatten)]
    status: ConnectionStatus,
}

pub fn run(command: ConnectionsCommand) -> Result<ExitCode, EdgeError> {
    let ctx = Context::from_process()?;
    match command {
        ConnectionsCommand::Setup(args) => super::direct::setup(&ctx, args),
        ConnectionsCommand::Check(args) if args.provider == crate::direct::PROVIDER_NAME => {
            super::direct::check(&ctx, args.json, args.live)
        }
        ConnectionsCommand::List(args) => {
            let rows: Vec<ConnectionRow> = ctx
                .registry
                .list()
                .into_iter()
                .filter_map(|l| {
                    let resolved = ctx.registry.resolve_name(&l.name).ok()?;
                    let conn = resolved.config.connection.clone().unwrap_or_default();
                    let (endpoints, endpoints_error) = if l.name == crate::direct::PROVIDER_NAME {
                        match super::direct::endpoint_rows(&ctx) {
                            Ok(rows) => (Some(rows), None),
                            Err(e) => (None, Some(e.error.to_string())),
                        }
                    } else {
                        (None, None)
                    };
                    Some(ConnectionRow {
                        name: l.name,
                        kind: l.kind,
                        login_command: conn.login_command,
                        status_command: conn.status_command,
                        endpoints,
                        endpoints_error,
                    })
                })
                .collect();
            if args.json {
                output::print_json(&rows)?;
            } else {
                let mut text: Vec<String> = Vec::new();
                for r in &rows {
                    text.push(format!(
                        "{:<16} status: {:<28} login: {}",
                        r.name,
                        r.status_command
                            .as_ref()
                            .map(|c| c.join(" "))
                            .unwrap_or_else(|| "unchecked".into()),
                        r.login_command
                            .as_ref()
                            .map(|c| c.join(" "))
                            .unwrap_or_else(|| "none configured".into())
                    ));
                    if let Some(e) = &r.endpoints_error {
                        text.push(format!("  endpoints unreadable: {e}"));
                    }
                    match r.endpoints.as_deref() {
                        Some([]) => {
                            text.push("  no direct endpoint: autocode connections setup".to_owned())
                        }
                        Some(endpoints) => text.extend(
                            endpoints
                                .iter()
                                .map(|e| format!("  {}", super::direct::endpoint_line(e))),
                        ),
                        None => {}
                    }
                }
                output::print_stdout(&text.join("\n"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ConnectionsCommand::Check(args) => {
            let resolved = ctx.resolve(Some(&args.provider))?;
            let probe = ctx.probe_context(Some(&resolved));
            let status = super::runtime()?
                .block_on(provider::connection_status(&resolved.config, &probe))
                .map_err(EdgeError::internal)?;
            let ok = matches!(
                status,
                ConnectionStatus::Present | ConnectionStatus::Unchecked
            );
            let out = CheckOutput {
                provider: resolved.name.to_string(),
                status,
            };
            if args.json {
                output::print_json(&out)?;
            } else {
                let text = match status {
                    ConnectionStatus::Present => "credentials present".to_owned(),
                    ConnectionStatus::SignInRequired => format!(
                        "sign-in required: autocode connections login --provider {}",
                        resolved.name
                    ),
                    ConnectionStatus::CheckFailed { exit } => format!(
                        "the status check failed ({})",
                        match exit {
                            Exit::Code(code) => format!("exit {code}"),
                            Exit::Signal(signal) => format!("killed by signal {signal}"),
                            Exit::TimedOut => "timed out".to_owned(),
                        }
                    ),
                    ConnectionStatus::Unchecked => {
                        "unchecked: the provider has no [connection] status_command".to_owned()
                    }
                };
                output::print_stdout(&format!("{}: {text}", resolved.name))?;
            }
            Ok(ExitCode::from(if ok { exit::OK } else { exit::FAILED }))
        }
        ConnectionsCommand::Login(args) => {
            let resolved = ctx.resolve(Some(&args.provider))?;
            let mut probe = ctx.probe_context(Some(&resolved));
            // An interactive login may take as long as the person needs.
            probe.timeout = std::time::Duration::from_secs(24 * 3600);
            let exit = super::runtime()?
                .block_on(provider::probe::run_login(&resolved.config, &probe))
                .map_err(|e| {
                    EdgeError::usage(e).hint(
                        "add login_command to the provider's [connection] table, or sign in with the tool itself",
                    )
                })?;
            Ok(match exit {
                Exit::Code(0) => ExitCode::SUCCESS,
                _ => ExitCode::from(exit::FAILED),
            })
        }
    }
}
