//! `autocode doctor [--provider NAME] [--workspace DIR]`: is this machine ready to run a
//! provider? Executable and version, the provider's `[auth]` check (or Claude Code's login and
//! billing-route checks), forbidden and withheld variables, config files autocode ignores, and
//! the process boundary. Exit 0 when everything passed, 1 when a check failed.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::context::{Context, PROBE_TIMEOUT};
use super::output;
use crate::agent_env::WithheldReason;
use crate::error::{EdgeError, exit};
use crate::provider::{
    self, AuthReport, ConfigSource, DefaultProvider, IgnoredConfig, ProviderKind, ResolvedProvider,
};
use crate::supervise::{self, Exit, LaunchSpec, StdinSource, StdioMode};
use crate::transport::claude_auth;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The provider to check (default: the default provider).
    #[arg(long)]
    pub provider: Option<String>,
    /// The project to look at for ignored config files (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct ProviderSummary {
    pub name: String,
    pub kind: ProviderKind,
    pub source: ConfigSource,
    pub fingerprint: String,
}

#[derive(Debug, Serialize)]
pub struct ClaudeChecks {
    /// The login `claude auth status --json` reports, or why it was refused.
    pub login: Result<claude_auth::ClaudeLogin, String>,
    /// The workspace's `.claude/settings.json`, refused when it redirects credentials.
    pub project_settings: Result<(), String>,
}

#[derive(Debug, Serialize)]
pub struct WithheldName {
    pub name: String,
    pub reason: WithheldReason,
}

#[derive(Debug, Serialize)]
pub struct DoctorReport {
    pub ok: bool,
    pub problems: Vec<String>,
    pub provider: ProviderSummary,
    pub default_provider: Option<DefaultProvider>,
    pub program: Option<String>,
    pub executable: Option<PathBuf>,
    pub version: Option<String>,
    /// What the provider matrix says about this version (`untested` when it is not listed).
    pub conformance: crate::conformance::matrix::ConformanceStatus,
    pub auth: Option<AuthReport>,
    pub claude: Option<ClaudeChecks>,
    /// Variables agents will not see (names only).
    pub withheld_env: Vec<WithheldName>,
    pub ignored_configs: Vec<IgnoredConfig>,
    pub boundary: supervise::Probe,
    pub room: RoomCheck,
}

/// The agent's room on this host for this provider.
#[derive(Debug, Serialize)]
pub struct RoomCheck {
    /// What the host lacks to enforce it (empty: rooms are enforced).
    pub room_missing: Vec<String>,
    /// The provider's effective `[confine] writable` set.
    pub writable: Vec<crate::run::confine::WritableEntry>,
    /// autocode's state-key directory, unreadable from every room.
    pub unreadable: Option<PathBuf>,
}

pub fn run(args: DoctorArgs) -> Result<ExitCode, EdgeError> {
    let ctx = Context::from_process()?;
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(EdgeError::internal)?,
    };
    let resolved = ctx.resolve(args.provider.as_deref())?;
    let report = super::runtime()?.block_on(diagnose(&ctx, &resolved, &workspace));
    if args.json {
        output::print_json(&report)?;
    } else {
        output::print_stdout(&render(&report))?;
    }
    Ok(ExitCode::from(if report.ok {
        exit::OK
    } else {
        exit::FAILED
    }))
}

pub async fn diagnose(
    ctx: &Context,
    resolved: &ResolvedProvider,
    workspace: &std::path::Path,
) -> DoctorReport {
    let mut problems = Vec::new();
    let probe = ctx.probe_context(Some(resolved));
    let agent_env = ctx.agent_env(Some(resolved));
    let program = resolved.config.program();
    let executable = program
        .as_deref()
        .and_then(|p| provider::resolve_on_path(p, &ctx.path_var()));
    let mut version = None;
    match (&program, &executable) {
        (Some(program), None) => {
            problems.push(format!("`{program}` is not installed (not on PATH)"))
        }
        (_, Some(_)) => match provider::probe_version(&resolved.config, &probe).await {
            Ok(v) => version = Some(v),
            Err(e) => problems.push(format!("version: {e}")),
        },
        (None, None) => {}
    }
    let auth = match &resolved.config.auth {
        Some(_) if executable.is_some() => {
            let models: Vec<String> = resolved
                .config
                .resolved_routes()
                .values()
                .map(|r| r.model.clone())
                .collect();
            match provider::check_auth(&resolved.config, &models, &probe).await {
                Ok(report) => {
                    if !report.ok {
                        problems.push("the [auth] check failed (see auth)".into());
                    }
                    Some(report)
                }
                Err(e) => {
                    problems.push(format!("auth: {e}"));
                    None
                }
            }
        }
        _ => None,
    };
    let claude = if resolved.name.as_str() == "claude" {
        let login = match &executable {
            Some(path) => claude_login(path, &probe).await,
            None => Err("claude is not installed".to_owned()),
        };
        let project_settings =
            claude_auth::check_workspace_settings(workspace).map_err(|e| e.to_string());
        if let Err(e) = &login {
            problems.push(format!("claude login: {e}"));
        }
        if let Err(e) = &project_settings {
            problems.push(format!("claude project settings: {e}"));
        }
        Some(ClaudeChecks {
            login,
            project_settings,
        })
    } else {
        None
    };
    let boundary = supervise::probe();
    for missing in boundary.missing() {
        problems.push(format!("process boundary: {missing}"));
    }
    let own_env: std::collections::BTreeMap<String, String> = ctx
        .env
        .iter()
        .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
        .collect();
    let room = RoomCheck {
        room_missing: crate::run::confine::room_missing(&own_env),
        writable: super::providers::effective_writable(ctx, resolved),
        unreadable: crate::run::confine::state_key_dir(&agent_env.kept),
    };
    for missing in &room.room_missing {
        problems.push(format!(
            "agent's room: missing {missing} (runs refuse to start unless --unconfined)"
        ));
    }
    let ignored_configs = ctx.registry.ignored_configs(Some(workspace));
    DoctorReport {
        ok: problems.is_empty(),
        problems,
        provider: ProviderSummary {
            name: resolved.name.to_string(),
            kind: resolved.kind,
            source: resolved.source.clone(),
            fingerprint: resolved.fingerprint.clone(),
        },
        default_provider: ctx.registry.default_provider(&ctx.env).ok(),
        program,
        executable,
        conformance: crate::conformance::matrix::embedded_status(
            resolved.name.as_str(),
            version.as_deref(),
        ),
        version,
        auth,
        claude,
        withheld_env: agent_env
            .withheld
            .iter()
            .map(|w| WithheldName {
                name: w.name.clone(),
                reason: w.reason,
            })
            .collect(),
        ignored_configs,
        boundary,
        room,
    }
}

/// `claude auth status --json` in the agents' environment, through the boundary.
async fn claude_login(
    executable: &std::path::Path,
    probe: &provider::ProbeContext,
) -> Result<claude_auth::ClaudeLogin, String> {
    let spec = LaunchSpec {
        label: "claude auth status".into(),
        program: executable.as_os_str().to_owned(),
        args: ["auth", "status", "--json"].map(OsString::from).to_vec(),
        env: probe.env.clone(),
        cwd: probe.cwd.clone(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 1 << 20 },
        timeout: Some(PROBE_TIMEOUT),
        room: None,
    };
    let finished = supervise::run(spec).await.map_err(|e| e.to_string())?;
    if finished.exit == Exit::TimedOut {
        return Err("`claude auth status --json` timed out".into());
    }
    let text = provider::probe::clean_text(&finished.stdout);
    claude_auth::check_auth_status(&text).map_err(|e| format!("{e}; {}", e.next_step()))
}

fn render(r: &DoctorReport) -> String {
    let mark = |ok: bool| if ok { "ok  " } else { "FAIL" };
    let mut out = format!("provider {} ({})\n", r.provider.name, r.provider.source);
    match (&r.executable, &r.program) {
        (Some(path), _) => out.push_str(&format!(
            "{} executable {} {}\n",
            mark(true),
            path.display(),
            r.version.as_deref().unwrap_or("(version unknown)")
        )),
        (None, Some(program)) => {
            out.push_str(&format!("{} {program}: not installed\n", mark(false)))
        }
        (None, None) => {}
    }
    out.push_str(&format!("     conformance: {}\n", r.conformance.line()));
    if let Some(auth) = &r.auth {
        out.push_str(&format!("{} auth check\n", mark(auth.ok)));
        for name in &auth.forbidden_env {
            out.push_str(&format!("     forbidden variable set: {name}\n"));
        }
    }
    if let Some(claude) = &r.claude {
        match &claude.login {
            Ok(login) => out.push_str(&format!(
                "{} claude login {:?}\n",
                mark(true),
                login.auth_method
            )),
            Err(e) => out.push_str(&format!("{} claude login: {e}\n", mark(false))),
        }
        if let Err(e) = &claude.project_settings {
            out.push_str(&format!("{} {e}\n", mark(false)));
        }
    }
    let missing = r.boundary.missing();
    out.push_str(&format!(
        "{} process boundary: {}{}\n",
        mark(missing.is_empty()),
        r.boundary.summary(),
        if missing.is_empty() {
            String::new()
        } else {
            format!(": missing {}", missing.join(", "))
        }
    ));
    out.push_str(&format!(
        "{} agent's room: {}\n",
        mark(r.room.room_missing.is_empty()),
        if r.room.room_missing.is_empty() {
            r.boundary.room_summary()
        } else {
            format!(
                "unavailable, missing {} (runs refuse to start unless --unconfined)",
                r.room.room_missing.join(", ")
            )
        }
    ));
    for line in super::providers::render_writable(&r.room.writable).lines() {
        out.push_str(&format!("     {line}\n"));
    }
    if let Some(dir) = &r.room.unreadable {
        out.push_str(&format!("     unreadable in the room: {}\n", dir.display()));
    }
    if !r.withheld_env.is_empty() {
        let names: Vec<&str> = r.withheld_env.iter().map(|w| w.name.as_str()).collect();
        out.push_str(&format!(
            "     withheld from agents: {}\n",
            names.join(", ")
        ));
    }
    for ignored in &r.ignored_configs {
        out.push_str(&format!(
            "     ignored: {} ({})\n",
            ignored.path.display(),
            ignored.message
        ));
    }
    for p in &r.problems {
        out.push_str(&format!("problem: {p}\n"));
    }
    out.push_str(if r.ok { "ready" } else { "not ready" });
    out
}
