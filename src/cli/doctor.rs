//! `autocode doctor [--provider NAME] [--workspace DIR] [--ROLE-model M | --single-model M]
//! [--recheck]`: is this machine ready to run a
//! provider? The run's own preflight (`crate::run::preflight`, the same function `autocode run`
//! calls before creating anything): the routes, automatic ones included, and for every provider
//! they use its executable and version, its sign-in (`[connection]` status, `[auth]`, or Claude
//! Code's login and billing-route checks) and its models; verifier independence. Then forbidden
//! and withheld variables, config files autocode ignores, the process boundary and the room.
//! For autocode's own runtime, the readiness of every local endpoint model its routes use
//! (`--recheck` runs the canaries again instead of reusing a cached pass).
//! Exit 0 when everything passed, 1 when a check failed.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::context::Context;
use super::output;
use crate::agent_env::WithheldReason;
use crate::conformance::matrix::ConformanceStatus;
use crate::error::{EdgeError, exit};
use crate::provider::{
    AuthReport, ConfigSource, DefaultProvider, IgnoredConfig, ProviderKind, ResolvedProvider,
};
use crate::role::Role;
use crate::run::preflight::{self, ClaudeChecks, Independence, ModelsCheck, Preflight, SignIn};
use crate::supervise;

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
    /// The requirements gatherer's model, as for a run (e.g. `ENDPOINT/MODEL` on `--provider
    /// autocode`, or `autocode:ENDPOINT/MODEL` on another provider).
    #[arg(long)]
    pub requirements_model: Option<String>,
    /// The planner's model, as for a run.
    #[arg(long)]
    pub planner_model: Option<String>,
    /// The plan reviewer's model, as for a run.
    #[arg(long)]
    pub plan_reviewer_model: Option<String>,
    /// The builder's model, as for a run.
    #[arg(long)]
    pub builder_model: Option<String>,
    /// The tester's model, as for a run.
    #[arg(long)]
    pub tester_model: Option<String>,
    /// The completion reviewer's model, as for a run.
    #[arg(long)]
    pub completion_model: Option<String>,
    /// The resolver's model, as for a run.
    #[arg(long)]
    pub resolver_model: Option<String>,
    /// Every role on this one model, as for a run (independence waived).
    #[arg(long)]
    pub single_model: Option<String>,
    /// Run the readiness canaries of local direct endpoints again instead of reusing a cached
    /// pass (a pass is cached for 24 hours).
    #[arg(long)]
    pub recheck: bool,
}

#[derive(Debug, Serialize)]
pub struct ProviderSummary {
    pub name: String,
    pub kind: ProviderKind,
    pub source: ConfigSource,
    pub fingerprint: String,
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
    /// The run's preflight with a run's defaults: routes (automatic ones included), every
    /// route's provider checked, verifier independence. `None` when it could not resolve.
    pub preflight: Option<Preflight>,
    /// Variables agents will not see (names only).
    pub withheld_env: Vec<WithheldName>,
    pub ignored_configs: Vec<IgnoredConfig>,
    pub boundary: supervise::Probe,
    pub room: RoomCheck,
    /// An ACP tool (`output = "acp"`): how its commands count as evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acp_evidence: Option<&'static str>,
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
    /// What the host lacks to keep an `--in-place` builder's `.git` and `.autocode/` read-only
    /// (`None`: it can; worktree runs do not need it).
    pub in_place_holes_missing: Option<String>,
    /// Why a person's edits during a builder stage cannot be told apart from the builder's
    /// (`None`: they can: a fanotify mark on the work tree's mount).
    pub foreign_edit_watch_missing: Option<String>,
}

/// Whether this host can keep an in-place builder's `.git` and `.autocode/` read-only.
fn in_place_holes_missing() -> Option<String> {
    supervise::probe().read_only_holes_missing()
}

pub fn run(args: DoctorArgs) -> Result<ExitCode, EdgeError> {
    let ctx = Context::from_process()?;
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(EdgeError::internal)?,
    };
    let resolved = ctx.resolve(args.provider.as_deref())?;
    let canaries = if args.recheck {
        crate::direct::readiness::CanaryMode::Fresh
    } else {
        crate::direct::readiness::CanaryMode::Cached
    };
    let mut choice = preflight::RouteChoice {
        single_model: args.single_model.clone(),
        ..preflight::RouteChoice::default()
    };
    for (role, model) in [
        (Role::Requirements, &args.requirements_model),
        (Role::Planner, &args.planner_model),
        (Role::PlanReviewer, &args.plan_reviewer_model),
        (Role::Builder, &args.builder_model),
        (Role::Tester, &args.tester_model),
        (Role::CompletionReviewer, &args.completion_model),
        (Role::Resolver, &args.resolver_model),
    ] {
        if let Some(model) = model {
            choice.models.insert(role, model.clone());
        }
    }
    let report =
        super::runtime()?.block_on(diagnose(&ctx, &resolved, &workspace, &choice, canaries));
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
    choice: &preflight::RouteChoice,
    canaries: crate::direct::readiness::CanaryMode,
) -> DoctorReport {
    // The very checks a run's start makes, with a run's defaults (automatic routes included)
    // and the model flags given.
    let preflight = preflight::preflight(
        &ctx.registry,
        &ctx.env,
        &preflight::Request {
            provider: Some(resolved.name.to_string()),
            choice: choice.clone(),
            auto_select: true,
            scripted_local: false,
            workspace: workspace.to_owned(),
            canaries,
        },
    )
    .await;
    let mut problems = Vec::new();
    let preflight = match preflight {
        Ok(checked) => {
            problems.extend(checked.problems.iter().map(|p| p.what.clone()));
            Some(checked)
        }
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    let direct = resolved.name.as_str() == crate::direct::PROVIDER_NAME;
    if direct {
        // What `connections check --provider autocode` says, said here too.
        let connections = crate::direct::connections::dir_from_env(|k| {
            ctx.env
                .get(std::ffi::OsStr::new(k))
                .and_then(|v| v.to_str())
                .map(str::to_owned)
        })
        .and_then(|dir| crate::direct::connections::Connections::load(&dir));
        match connections {
            Ok(connections) => {
                for (what, fix) in connections.setup_problems() {
                    // The routes' own check may have said it already (with the roles).
                    if !problems.iter().any(|p| p.starts_with(&what)) {
                        problems.push(format!("{what}: {fix}"));
                    }
                }
            }
            Err(e) => problems.push(format!("direct connections: {e}")),
        }
    }
    let main = preflight.as_ref().and_then(|p| p.main_check()).cloned();
    let agent_env = ctx.agent_env(Some(resolved));
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
        in_place_holes_missing: in_place_holes_missing(),
        foreign_edit_watch_missing: crate::run::runner::foreign_edit_watch_missing(workspace),
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
        // The built-in runtime has no program to install.
        program: main
            .as_ref()
            .and_then(|m| m.program.clone())
            .or_else(|| resolved.config.program())
            .filter(|_| !direct),
        executable: main.as_ref().and_then(|m| m.executable.clone()),
        conformance: main
            .as_ref()
            .map(|m| m.conformance.clone())
            .unwrap_or(ConformanceStatus::Untested),
        version: main.as_ref().and_then(|m| m.version.clone()),
        auth: main.as_ref().and_then(|m| m.auth.clone()),
        claude: main.as_ref().and_then(|m| m.claude.clone()),
        preflight,
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
        acp_evidence: (resolved.config.output == crate::provider::OutputMode::Acp)
            .then_some(crate::acp::EVIDENCE_NOTE),
    }
}

/// The routes and the providers beyond the chosen one (its own lines come first).
fn render_preflight(pf: &Preflight, out: &mut String) {
    let mark = |ok: bool| if ok { "ok  " } else { "FAIL" };
    if let Some(main) = pf.main_check() {
        out.push_str(&format!(
            "{} sign-in: {}\n     models: {}\n",
            mark(!matches!(main.sign_in, SignIn::Failed { .. })),
            sign_in_text(&main.sign_in),
            models_text(&main.models)
        ));
    }
    for check in pf.checks.iter().skip(1) {
        let roles: Vec<&str> = pf
            .routes
            .iter()
            .filter(|(_, r)| r.provider.as_str() == check.provider)
            .map(|(role, _)| role.as_str())
            .collect();
        out.push_str(&format!(
            "{} provider {} for the {}: {} {}; sign-in: {}; models: {}\n",
            mark(check.ok()),
            check.provider,
            roles.join(", "),
            match (&check.executable, &check.program) {
                (Some(path), _) => path.display().to_string(),
                (None, Some(_)) => "not installed".into(),
                (None, None) => "built in".into(),
            },
            check.version.as_deref().unwrap_or("(version unknown)"),
            sign_in_text(&check.sign_in),
            models_text(&check.models)
        ));
    }
    // autocode's own runtime: each local endpoint model's readiness (`direct::readiness`).
    for readiness in pf.checks.iter().flat_map(|c| &c.readiness) {
        for c in &readiness.checks {
            out.push_str(&format!(
                "{} {}/{} {}: {}\n",
                mark(c.ok),
                readiness.endpoint,
                readiness.model,
                c.name,
                c.detail
            ));
        }
    }
    let independent = !matches!(pf.independence, Independence::Violated { .. });
    out.push_str(&format!(
        "{} verifier independence: {}\n",
        mark(independent),
        match (&pf.independence, &pf.auto_routes) {
            (Independence::Violated { .. }, _) => "cannot be met (see problems)".to_owned(),
            (Independence::Waived, _) => "waived".to_owned(),
            (Independence::Independent, Some(auto)) => format!(
                "automatic routes put the verifiers on {} ({})",
                auto.provider, auto.reason
            ),
            (Independence::Independent, None) => "the provider's own routes".to_owned(),
        }
    ));
    out.push_str("     routes:\n");
    for line in pf.routes_text().lines() {
        out.push_str(&format!("     {line}\n"));
    }
    for w in &pf.warnings {
        out.push_str(&format!("     warning: {w}\n"));
    }
}

fn sign_in_text(s: &SignIn) -> String {
    match s {
        SignIn::SignedIn { how } => format!("signed in ({how})"),
        SignIn::Unchecked { note } => format!("not checked ({note})"),
        SignIn::Failed { reason } => reason.clone(),
    }
}

fn models_text(m: &ModelsCheck) -> String {
    match m {
        ModelsCheck::Offered { .. } => "offered".into(),
        ModelsCheck::NotListed { models } => {
            format!("not in its own list: {}", models.join(", "))
        }
        ModelsCheck::Missing { models, .. } => format!("NOT offered: {}", models.join(", ")),
        ModelsCheck::ListingFailed { reason } => format!("listing failed: {reason}"),
        ModelsCheck::Skipped { note } => format!("not checked ({note})"),
    }
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
        (None, None) if r.provider.name == crate::direct::PROVIDER_NAME => out.push_str(&format!(
            "{} built in: autocode's own runtime (nothing to install; endpoints: autocode connections list)\n",
            mark(true)
        )),
        (None, None) => {}
    }
    out.push_str(&format!("     conformance: {}\n", r.conformance.line()));
    if let Some(note) = r.acp_evidence {
        out.push_str(&format!("     evidence: {note}\n"));
    }
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
    if let Some(pf) = &r.preflight {
        render_preflight(pf, &mut out);
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
    match &r.room.in_place_holes_missing {
        None => out.push_str(
            "     --in-place runs: .git and .autocode/ stay read-only (a private mount namespace)\n",
        ),
        Some(missing) => out.push_str(&format!(
            "     --in-place runs: unavailable, missing {missing} (they refuse to start unless --unconfined; worktree runs are unaffected)\n"
        )),
    }
    match &r.room.foreign_edit_watch_missing {
        None => out.push_str(
            "     a person's edits during a builder stage: told apart from the builder's (a fanotify mark on the work tree's mount)\n",
        ),
        Some(why) => out.push_str(&format!(
            "     a person's edits during a builder stage: not told apart ({why}); a builder stage's changes are then all taken as the builder's\n"
        )),
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
        if let Some(fix) = r
            .preflight
            .as_ref()
            .and_then(|pf| pf.problems.iter().find(|q| &q.what == p))
        {
            out.push_str(&format!("  fix: {}\n", fix.fix));
        }
    }
    out.push_str(if r.ok { "ready" } else { "not ready" });
    out
}
