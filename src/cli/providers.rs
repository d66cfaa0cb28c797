//! `autocode providers list|show` and `autocode models`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::context::Context;
use super::output;
use crate::error::EdgeError;
use crate::provider::{
    self, ConfigSource, Expanded, LoadStatus, ProviderKind, ProviderListing, ResolvedProvider,
};
use crate::run::confine::WritableEntry;

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// Every provider: built-ins, bundled configs and your own, with executable and version.
    List(JsonArg),
    /// The resolved configuration of one provider.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct JsonArg {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The provider name (e.g. opencode, codex, claude, kilocode).
    pub name: String,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ModelsArgs {
    /// The provider (default: AUTOCODE_PROVIDER, then default_provider in config.toml, then opencode).
    #[arg(long, conflicts_with = "catalogue")]
    pub provider: Option<String>,
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
    /// autocode's model catalogue instead (built in, with ~/.config/autocode/models.toml merged
    /// over it): family, context window, output cap, tool calls, price, local facts.
    #[arg(long)]
    pub catalogue: bool,
}

/// One row of `providers list`.
#[derive(Debug, Serialize)]
pub struct ProviderRow {
    pub name: String,
    pub kind: ProviderKind,
    pub source: ConfigSource,
    /// The executable the provider runs, resolved on PATH; `null` when not installed.
    pub executable: Option<PathBuf>,
    pub program: Option<String>,
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_error: Option<String>,
    pub fingerprint: Option<String>,
    pub shadows_bundled: bool,
    #[serde(flatten)]
    pub status: LoadStatus,
}

pub async fn rows(ctx: &Context) -> Vec<ProviderRow> {
    let listings: Vec<ProviderListing> = ctx.registry.list();
    let mut tasks = tokio::task::JoinSet::new();
    for (index, listing) in listings.iter().enumerate() {
        let resolved = ctx.registry.resolve_name(&listing.name).ok();
        let probe = ctx.probe_context(resolved.as_ref());
        let path_var = ctx.path_var();
        tasks.spawn(async move {
            let Some(resolved) = resolved else {
                return (index, None, None, Ok(None));
            };
            let program = resolved.config.program();
            let executable = program
                .as_deref()
                .and_then(|p| provider::resolve_on_path(p, &path_var));
            let version = if executable.is_some() {
                provider::probe_version(&resolved.config, &probe)
                    .await
                    .map(Some)
            } else {
                Ok(None)
            };
            (index, program, executable, version)
        });
    }
    let mut probed = vec![(None, None, Ok(None)); listings.len()];
    while let Some(joined) = tasks.join_next().await {
        if let Ok((index, program, executable, version)) = joined {
            probed[index] = (program, executable, version);
        }
    }
    listings
        .into_iter()
        .zip(probed)
        .map(|(listing, (program, executable, version))| {
            let (version, version_error) = match version {
                Ok(v) => (v, None),
                Err(e) => (None, Some(e.to_string())),
            };
            ProviderRow {
                name: listing.name,
                kind: listing.kind,
                source: listing.source,
                executable,
                program,
                version,
                version_error,
                fingerprint: listing.fingerprint,
                shadows_bundled: listing.shadows_bundled,
                status: listing.status,
            }
        })
        .collect()
}

pub fn run(command: ProvidersCommand) -> Result<ExitCode, EdgeError> {
    let ctx = Context::from_process()?;
    match command {
        ProvidersCommand::List(args) => {
            let rows = super::runtime()?.block_on(rows(&ctx));
            if args.json {
                output::print_json(&rows)?;
            } else {
                output::print_stdout(&render_rows(&rows))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ProvidersCommand::Show(args) => {
            let resolved = ctx.resolve(Some(&args.name))?;
            let writable = effective_writable(&ctx, &resolved);
            if args.json {
                let (places, origin) = crate::run::loaded_config::judged_project_places(
                    &resolved.name,
                    &resolved.config,
                );
                output::print_json(&ShowOutput {
                    provider: &resolved,
                    effective_writable: &writable,
                    judged_project_config: JudgedProjectConfig { places, origin },
                })?;
            } else {
                let mut text = render_show(&resolved);
                text.push('\n');
                text.push_str(&render_writable(&writable));
                output::print_stdout(text.trim_end())?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `providers show --json`: the provider and its effective writable set.
#[derive(Serialize)]
struct ShowOutput<'a> {
    #[serde(flatten)]
    provider: &'a ResolvedProvider,
    effective_writable: &'a [WritableEntry],
    judged_project_config: JudgedProjectConfig,
}

/// The project places a judge is checked against, and where the list comes from.
#[derive(Serialize)]
struct JudgedProjectConfig {
    places: Vec<String>,
    origin: String,
}

/// The provider's `[confine] writable` set, expanded against the agents' environment as a
/// stage would see it.
pub fn effective_writable(ctx: &Context, provider: &ResolvedProvider) -> Vec<WritableEntry> {
    let env = ctx.agent_env(Some(provider)).kept;
    let (writable, _) = crate::acp::pinned::confine_templates(&provider.config);
    crate::run::confine::provider_writable(&writable, &env)
}

/// The effective writable set, one entry a line (`providers show`, `doctor`).
pub fn render_writable(entries: &[WritableEntry]) -> String {
    if entries.is_empty() {
        return "writable in the room: nothing of its own (worktree, stage TMPDIR and outbox only)\n"
            .to_owned();
    }
    let mut out =
        String::from("writable in the room (besides the worktree, stage TMPDIR and outbox):\n");
    for entry in entries {
        let what = match &entry.expanded {
            Expanded::Path { path, create_dir } => format!(
                "{}{}",
                path.display(),
                if *create_dir {
                    " (created if missing)"
                } else {
                    ""
                }
            ),
            Expanded::Unset { variable } => format!("nothing: {variable} is unset"),
        };
        out.push_str(&format!("  {:<44} {what}\n", entry.template));
    }
    out
}

fn render_rows(rows: &[ProviderRow]) -> String {
    let mut out = format!(
        "{:<16} {:<8} {:<12} {:<16} {}\n",
        "NAME", "KIND", "FINGERPRINT", "VERSION", "EXECUTABLE / SOURCE"
    );
    for row in rows {
        let kind = serde_json::to_value(row.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let fingerprint = row
            .fingerprint
            .as_deref()
            .map(|f| f.get(..12).unwrap_or(f))
            .unwrap_or("-");
        let version = row.version.as_deref().unwrap_or("-");
        let executable = match (&row.executable, &row.program) {
            (Some(path), _) => path.display().to_string(),
            (None, Some(program)) => format!("{program}: not installed"),
            (None, None) => "-".into(),
        };
        out.push_str(&format!(
            "{:<16} {:<8} {:<12} {:<16} {}\n",
            row.name, kind, fingerprint, version, executable
        ));
        out.push_str(&format!(
            "{:<16} {:<8} {:<12} {:<16} {}\n",
            "", "", "", "", row.source
        ));
        if let LoadStatus::Error { message, .. } = &row.status {
            out.push_str(&format!("  error: {message}\n"));
        }
        if let LoadStatus::Ok { warnings, .. } = &row.status {
            for w in warnings {
                out.push_str(&format!("  warning: {w}\n"));
            }
        }
    }
    out.trim_end().to_owned()
}

fn render_show(p: &ResolvedProvider) -> String {
    let c = &p.config;
    let kind = serde_json::to_value(p.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut out = format!(
        "{} ({kind}, {})\nfingerprint: {}\ncommand: {}\nprompt: {}  output: {}\n",
        p.name,
        p.source,
        p.fingerprint,
        c.command.join(" "),
        serde_json::to_value(c.prompt)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        c.output.as_str()
    );
    if c.output == crate::provider::OutputMode::Acp {
        out.push_str(&format!("evidence: {}\n", crate::acp::EVIDENCE_NOTE));
    }
    let (places, origin) = crate::run::loaded_config::judged_project_places(&p.name, c);
    out.push_str(&format!(
        "project configuration a judge will not start on once a stage changed it ({origin}): {}\n",
        if places.is_empty() {
            "none".to_owned()
        } else {
            places.join(", ")
        }
    ));
    if let Some(resume) = &c.resume {
        out.push_str(&format!("resume: {}\n", resume.join(" ")));
    }
    if let Some(v) = &c.version_command {
        out.push_str(&format!("version_command: {}\n", v.join(" ")));
    }
    match (&c.models_command, &c.models) {
        (Some(cmd), _) => out.push_str(&format!("models_command: {}\n", cmd.join(" "))),
        (None, Some(list)) => out.push_str(&format!("models: {}\n", list.join(", "))),
        _ => {}
    }
    out.push_str("roles:\n");
    for (role, spec) in c.resolved_routes() {
        out.push_str(&format!(
            "  {:<20} {} {}\n",
            role.as_str(),
            spec.model,
            spec.effort.as_deref().unwrap_or("(default effort)")
        ));
    }
    for pair in &p.same_family_pairs {
        out.push_str(&format!("  note: {pair}\n"));
    }
    if let Some(auth) = &c.auth {
        out.push_str(&format!("auth: {}\n", auth.command.join(" ")));
        for route in &auth.routes {
            out.push_str(&format!(
                "  {} ({}): every match of {} must be {:?}\n",
                route.models,
                route.display_name(),
                route.pattern,
                route.expect
            ));
        }
        if !auth.forbid_env.is_empty() {
            out.push_str(&format!("  forbid_env: {}\n", auth.forbid_env.join(", ")));
        }
    }
    if let Some(retry) = &c.builder_retry {
        out.push_str(&format!(
            "builder_retry: strong {} at {}, checker {}\n",
            retry.strong_model, retry.strong_effort, retry.checker_model
        ));
    }
    if let Some(conn) = &c.connection {
        if let Some(login) = &conn.login_command {
            out.push_str(&format!("connection login: {}\n", login.join(" ")));
        }
        if let Some(status) = &conn.status_command {
            out.push_str(&format!("connection status: {}\n", status.join(" ")));
        }
    }
    for w in &p.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    for w in shell_script_warnings(c) {
        out.push_str(&format!("warning: {w}\n"));
    }
    out.trim_end().to_owned()
}

/// One warning per template that substitutes values into a `sh -c` script string.
fn shell_script_warnings(c: &provider::ProviderConfig) -> Vec<String> {
    let templates = [
        ("command", Some(&c.command)),
        ("resume", c.resume.as_ref()),
        ("version_command", c.version_command.as_ref()),
        ("models_command", c.models_command.as_ref()),
    ];
    templates
        .into_iter()
        .filter_map(|(name, template)| {
            let found = provider::template::shell_script_placeholders(template?);
            (!found.is_empty()).then(|| {
                let names: Vec<String> = found.iter().map(ToString::to_string).collect();
                format!(
                    "{name} substitutes {} into a shell script (`sh -c \"…\"`); autocode quotes each value for the shell, but passing them as separate arguments needs no shell at all",
                    names.join(", ")
                )
            })
        })
        .collect()
}

#[derive(Serialize)]
struct ModelsOutput {
    provider: String,
    #[serde(flatten)]
    report: provider::ModelsReport,
}

pub fn models(args: ModelsArgs) -> Result<ExitCode, EdgeError> {
    let ctx = Context::from_process()?;
    if args.catalogue {
        return super::local::models_catalogue(&ctx, args.json);
    }
    let resolved = ctx.resolve(args.provider.as_deref())?;
    if resolved.name.as_str() == crate::direct::PROVIDER_NAME {
        return super::direct::models(&ctx, args.json);
    }
    let probe = ctx.probe_context(Some(&resolved));
    let report = super::runtime()?
        .block_on(provider::probe_models(&resolved.config, &probe))
        .map_err(|e| {
            EdgeError::internal(e).hint(format!(
                "`autocode doctor --provider {}` checks the tool is installed and signed in",
                resolved.name
            ))
        })?;
    if args.json {
        output::print_json(&ModelsOutput {
            provider: resolved.name.to_string(),
            report,
        })?;
    } else {
        output::print_stdout(&report.models.join("\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}
