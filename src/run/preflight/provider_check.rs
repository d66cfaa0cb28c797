//! The checks of one provider a run's routes use: its executable, its version against the
//! provider matrix, its sign-in state and whether it offers the routes' models. Every probe
//! starts its process through the boundary (`crate::provider::probe`, `crate::supervise`) in the
//! agents' filtered environment, so a probe sees exactly what a stage would.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::Problem;
use crate::agent_env::{self, AgentEnvironment};
use crate::conformance::matrix::{self, ConformanceStatus};
use crate::provider::probe::{ModelsSource, clean_text};
use crate::provider::registry::Env;
use crate::provider::{
    self, AuthReport, ConnectionStatus, ModelListing, ProbeContext, ResolvedProvider,
};
use crate::role::Role;
use crate::supervise::{self, Exit, LaunchSpec, StdinSource, StdioMode};
use crate::transport::claude_auth;

/// How long one version, models, auth or status probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// The environment the agents (and the probes) of `provider` see.
pub fn agent_env(env: &Env, provider: Option<&ResolvedProvider>) -> AgentEnvironment {
    let forbid: Vec<String> = provider
        .and_then(|p| p.config.auth.as_ref())
        .map(|a| a.forbid_env.clone())
        .unwrap_or_default();
    let pass = env
        .get(&OsString::from(agent_env::PASS_ENV_VAR))
        .map(|v| v.to_string_lossy().into_owned());
    agent_env::agent_environment_os(
        env.iter().map(|(k, v)| (k.clone(), v.clone())),
        &forbid,
        pass.as_deref(),
    )
}

/// A probe context in the agents' environment of `provider`, from a neutral directory (tools
/// such as OpenCode read project config from their cwd).
pub fn probe_context(env: &Env, provider: Option<&ResolvedProvider>) -> ProbeContext {
    ProbeContext {
        env: agent_env(env, provider)
            .kept
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        cwd: std::env::temp_dir(),
        timeout: PROBE_TIMEOUT,
        version_cache: ProbeContext::user_version_cache(),
    }
}

/// The sign-in state of a provider.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SignIn {
    /// Signed in, as `how` says.
    SignedIn { how: String },
    /// Not checked (the note says why).
    Unchecked { note: String },
    /// Signed out, or the check itself failed (the provider's problems say what to do).
    Failed { reason: String },
}

/// Whether the provider offers the models its routes name.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ModelsCheck {
    /// Every model is in the provider's listing.
    Offered { source: ModelsSource },
    /// Models outside the provider's own static list (a warning: the list is its config's
    /// claim, not the tool's answer).
    NotListed { models: Vec<String> },
    /// Models the tool's own listing does not offer.
    Missing {
        models: Vec<String>,
        offered: Vec<String>,
    },
    /// The listing command failed.
    ListingFailed { reason: String },
    /// Not checked (the note says why).
    Skipped { note: String },
}

/// Claude Code's own checks: the login `claude auth status --json` reports and the workspace's
/// `.claude/settings.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ClaudeChecks {
    /// The login `claude auth status --json` reports, or why it was refused.
    pub login: Result<claude_auth::ClaudeLogin, String>,
    /// The workspace's `.claude/settings.json`, refused when it redirects credentials.
    pub project_settings: Result<(), String>,
}

/// Everything checked about one provider.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderCheck {
    pub provider: String,
    pub program: Option<String>,
    pub executable: Option<PathBuf>,
    pub version: Option<String>,
    /// What the provider matrix says about this version (`untested` when it is not listed).
    pub conformance: ConformanceStatus,
    pub sign_in: SignIn,
    /// The provider's `[auth]` check, when it has one.
    pub auth: Option<AuthReport>,
    /// Claude Code's login and project-settings checks (the `claude` provider only).
    pub claude: Option<ClaudeChecks>,
    pub models: ModelsCheck,
    /// autocode's own runtime: the readiness of each local endpoint model its routes use
    /// (`direct_ready`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readiness: Vec<crate::direct::readiness::ModelReadiness>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
}

impl ProviderCheck {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What a check needs besides the provider.
pub struct CheckInput<'a> {
    pub env: &'a Env,
    /// The models the run's routes put on this provider (each once).
    pub models: &'a [String],
    /// The roles on this provider and their models (the fixes name the roles' flags).
    pub roles: &'a [(Role, String)],
    /// Routes talk to a loopback scripted/local endpoint: no sign-in or model listing applies.
    pub scripted_local: bool,
    pub workspace: &'a Path,
    /// Whether the direct runtime's readiness canaries may come from the cache.
    pub canaries: crate::direct::readiness::CanaryMode,
}

fn path_var(env: &Env) -> OsString {
    env.get(&OsString::from("PATH"))
        .cloned()
        .unwrap_or_default()
}

/// The login hint for `provider`: its `[connection]` login command, else `autocode connections`.
fn login_hint(p: &ResolvedProvider) -> String {
    match p
        .config
        .connection
        .as_ref()
        .and_then(|c| c.login_command.as_ref())
    {
        Some(argv) => format!(
            "sign in with `{}` (or `autocode connections login --provider {}`), then try again",
            argv.join(" "),
            p.name
        ),
        None => format!(
            "sign in to {} as its own documentation says, then try again",
            p.name
        ),
    }
}

/// Whether `provider`'s program is on the PATH (no process is started).
pub fn installed(env: &Env, p: &ResolvedProvider) -> bool {
    match p.config.program() {
        Some(program) => provider::resolve_on_path(&program, &path_var(env)).is_some(),
        None => true,
    }
}

/// Runs every check of one provider.
pub async fn check_provider(p: &ResolvedProvider, input: &CheckInput<'_>) -> ProviderCheck {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let probe = probe_context(input.env, Some(p));
    let program = p.config.program();
    let executable = program
        .as_deref()
        .and_then(|prog| provider::resolve_on_path(prog, &path_var(input.env)));
    let mut check = ProviderCheck {
        provider: p.name.to_string(),
        program: program.clone(),
        executable: executable.clone(),
        version: None,
        conformance: ConformanceStatus::Untested,
        sign_in: SignIn::Unchecked {
            note: "not checked".into(),
        },
        auth: None,
        claude: None,
        models: ModelsCheck::Skipped {
            note: "not checked".into(),
        },
        readiness: Vec::new(),
        problems: Vec::new(),
        warnings: Vec::new(),
    };
    if p.config.output == crate::provider::OutputMode::DirectRuntime {
        if let Some(connections) = direct_runtime(input, &mut check)
            && check.problems.is_empty()
        {
            let (readiness, problems) =
                super::direct_ready::check(input.env, &connections, input.roles, input.canaries)
                    .await;
            check.readiness = readiness;
            check.problems.extend(problems);
        }
        return check;
    }
    if let (Some(program), None) = (&program, &executable) {
        problems.push(Problem::new(
            format!("`{program}` is not installed (not on PATH)"),
            format!(
                "install {program} for the {} provider, or choose another provider with --provider (`autocode providers list`)",
                p.name
            ),
        ));
        check.sign_in = SignIn::Unchecked {
            note: "not installed".into(),
        };
        check.models = ModelsCheck::Skipped {
            note: "not installed".into(),
        };
        check.problems = problems;
        return check;
    }
    // Version, and what the provider matrix says about it.
    if p.config.version_command.is_some() {
        match provider::probe_version(&p.config, &probe).await {
            Ok(v) => check.version = Some(v),
            Err(e) => problems.push(Problem::new(
                format!("version: {e}"),
                format!(
                    "check that `{}` runs on this machine",
                    program.as_deref().unwrap_or("the tool")
                ),
            )),
        }
    } else {
        warnings.push(format!(
            "{} has no version_command: its version is not checked",
            p.name
        ));
    }
    check.conformance = matrix::embedded_status(p.name.as_str(), check.version.as_deref());
    match &check.conformance {
        ConformanceStatus::Pass { .. } => {}
        ConformanceStatus::Untested if check.version.is_none() => {}
        ConformanceStatus::Untested => warnings.push(format!(
            "{} {}: {}",
            p.name,
            check.version.as_deref().unwrap_or("(version unknown)"),
            check.conformance.line()
        )),
        ConformanceStatus::Fail { .. } => warnings.push(format!(
            "{} {}: the provider matrix records a conformance {}",
            p.name,
            check.version.as_deref().unwrap_or("(version unknown)"),
            check.conformance.line()
        )),
    }
    sign_in(p, input, &probe, &executable, &mut check, &mut problems).await;
    check.models = models(p, input, &probe, &mut problems, &mut warnings).await;
    check.problems = problems;
    check.warnings = warnings;
    check
}

/// autocode's own runtime: no program to find; every route's model must name a configured
/// endpoint and model (`autocode connections setup`), whose key (if it needs one) is stored.
/// Returns the connections when they load (the caller then checks local endpoints' readiness).
fn direct_runtime(
    input: &CheckInput<'_>,
    check: &mut ProviderCheck,
) -> Option<crate::direct::connections::Connections> {
    check.program = None;
    check.executable = None;
    check.sign_in = SignIn::Unchecked {
        note: "autocode's own runtime: local endpoints are checked for readiness below; `autocode connections check --provider autocode --live` checks every endpoint".into(),
    };
    check.models = ModelsCheck::Skipped {
        note: "the routes name configured direct endpoints".into(),
    };
    let get = |name: &str| {
        input
            .env
            .get(&OsString::from(name))
            .and_then(|value| value.to_str().map(str::to_owned))
    };
    let connections = crate::direct::connections::dir_from_env(get)
        .and_then(|dir| crate::direct::connections::Connections::load(&dir));
    let connections = match connections {
        Ok(connections) => connections,
        Err(e) => {
            check.problems.push(Problem::new(
                format!("direct connections: {e}"),
                "set one up with `autocode connections setup --name NAME --kind KIND --base-url URL --model ID=FAMILY`".to_owned(),
            ));
            return None;
        }
    };
    // One problem per endpoint without its key, naming every role that uses it.
    let mut keyless: Vec<(String, String, Vec<String>)> = Vec::new();
    for (role, model) in input.roles {
        match connections.resolve(model) {
            Ok(resolved) => {
                if let Some((what, fix)) = connections.key_problem(&resolved.endpoint) {
                    match keyless.iter_mut().find(|(w, _, _)| *w == what) {
                        Some((_, _, roles)) => roles.push(role.to_string()),
                        None => keyless.push((what, fix, vec![role.to_string()])),
                    }
                }
            }
            Err(e) => check.problems.push(Problem::new(
                format!("the {role}'s route {model}: {e}"),
                format!(
                    "name a configured ENDPOINT/MODEL with {} (`autocode models --provider autocode`)",
                    role_flag(*role)
                ),
            )),
        }
    }
    for (what, fix, roles) in keyless {
        check.problems.push(Problem::new(
            format!("{what} (the {}'s endpoint)", roles.join(", ")),
            fix,
        ));
    }
    Some(connections)
}

async fn sign_in(
    p: &ResolvedProvider,
    input: &CheckInput<'_>,
    probe: &ProbeContext,
    executable: &Option<PathBuf>,
    check: &mut ProviderCheck,
    problems: &mut Vec<Problem>,
) {
    if input.scripted_local {
        check.sign_in = SignIn::Unchecked {
            note: "the routes talk to a scripted/local endpoint".into(),
        };
        return;
    }
    let mut signed_in: Vec<String> = Vec::new();
    let mut failed: Option<String> = None;
    if p.name.as_str() == "claude" {
        let login = match executable {
            Some(path) => claude_login(path, probe).await,
            None => Err((
                "claude is not installed".to_owned(),
                "install Claude Code".to_owned(),
            )),
        };
        let env: BTreeMap<String, String> = probe
            .env
            .iter()
            .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
            .collect();
        let login = login.and_then(|login| {
            claude_auth::check_agent_env(&env, false)
                .map(|_| login)
                .map_err(|e| (e.to_string(), e.next_step().to_owned()))
        });
        let (login, fix) = match login {
            Ok(login) => (Ok(login), String::new()),
            Err((reason, fix)) => (Err(reason), fix.replace("then resume", "then try again")),
        };
        let project_settings =
            claude_auth::check_workspace_settings(input.workspace).map_err(|e| e.to_string());
        match &login {
            Ok(login) => signed_in.push(format!("claude login {:?}", login.auth_method)),
            Err(e) => {
                problems.push(Problem::new(format!("claude login: {e}"), fix));
                failed = Some(e.clone());
            }
        }
        if let Err(e) = &project_settings {
            problems.push(Problem::new(
                format!("claude project settings: {e}"),
                "fix or remove that entry of the workspace's .claude/settings.json",
            ));
        }
        check.claude = Some(ClaudeChecks {
            login,
            project_settings,
        });
    } else if p
        .config
        .connection
        .as_ref()
        .is_some_and(|c| c.status_command.is_some())
    {
        let command = p
            .config
            .connection
            .as_ref()
            .and_then(|c| c.status_command.as_ref())
            .map(|argv| argv.join(" "))
            .unwrap_or_default();
        match provider::connection_status(&p.config, probe).await {
            Ok(ConnectionStatus::Present) => signed_in.push(format!("`{command}` exit 0")),
            Ok(ConnectionStatus::Unchecked) => {}
            Ok(ConnectionStatus::SignInRequired) => {
                let reason = format!("{} is not signed in (`{command}` exit 1)", p.name);
                problems.push(Problem::new(reason.clone(), login_hint(p)));
                failed = Some(reason);
            }
            Ok(ConnectionStatus::CheckFailed { exit }) => {
                let reason = format!(
                    "{}'s sign-in check `{command}` failed ({exit:?}): its sign-in state is unknown",
                    p.name
                );
                problems.push(Problem::new(reason.clone(), login_hint(p)));
                failed = Some(reason);
            }
            Err(e) => {
                let reason = format!("{}'s sign-in check `{command}`: {e}", p.name);
                problems.push(Problem::new(reason.clone(), login_hint(p)));
                failed = Some(reason);
            }
        }
    }
    if p.config.auth.is_some() {
        match provider::check_auth(&p.config, input.models, probe).await {
            Ok(report) => {
                if report.ok {
                    signed_in.push("[auth] check".into());
                } else {
                    let reason = "the [auth] check failed (see auth)".to_owned();
                    problems.push(Problem::new(
                        reason.clone(),
                        format!(
                            "`autocode doctor --provider {} --json` shows each route; {}",
                            p.name,
                            login_hint(p)
                        ),
                    ));
                    failed.get_or_insert(reason);
                }
                check.auth = Some(report);
            }
            Err(e) => {
                let reason = format!("auth: {e}");
                problems.push(Problem::new(reason.clone(), login_hint(p)));
                failed.get_or_insert(reason);
            }
        }
    }
    check.sign_in = match (failed, signed_in.is_empty()) {
        (Some(reason), _) => SignIn::Failed { reason },
        (None, false) => SignIn::SignedIn {
            how: signed_in.join(", "),
        },
        (None, true) => SignIn::Unchecked {
            note: format!(
                "{} declares no sign-in check ([connection] status_command or [auth])",
                p.name
            ),
        },
    };
}

async fn models(
    p: &ResolvedProvider,
    input: &CheckInput<'_>,
    probe: &ProbeContext,
    problems: &mut Vec<Problem>,
    warnings: &mut Vec<String>,
) -> ModelsCheck {
    if input.scripted_local {
        return ModelsCheck::Skipped {
            note: "the routes talk to a scripted/local endpoint".into(),
        };
    }
    let missing = |offered: &[String]| -> Vec<String> {
        let mut out: Vec<String> = input
            .models
            .iter()
            .filter(|m| !offered.contains(m))
            .cloned()
            .collect();
        out.dedup();
        out
    };
    match p.config.model_listing() {
        ModelListing::None => {
            let note = format!("{} cannot list its models: they are not checked", p.name);
            warnings.push(note.clone());
            ModelsCheck::Skipped { note }
        }
        ModelListing::Static(list) => {
            let models = missing(list);
            if models.is_empty() {
                ModelsCheck::Offered {
                    source: ModelsSource::Static,
                }
            } else {
                warnings.push(format!(
                    "{} is not in {}'s own model list ({})",
                    models.join(", "),
                    p.name,
                    list.join(", ")
                ));
                ModelsCheck::NotListed { models }
            }
        }
        ModelListing::Command(argv) => match provider::probe_models(&p.config, probe).await {
            Ok(report) => {
                let models = missing(&report.models);
                if models.is_empty() {
                    return ModelsCheck::Offered {
                        source: report.source,
                    };
                }
                let roles: Vec<&str> = input
                    .roles
                    .iter()
                    .filter(|(_, model)| models.contains(model))
                    .map(|(role, _)| role_flag(*role))
                    .collect();
                problems.push(Problem::new(
                    format!(
                        "{} does not offer {} (`{}` lists {})",
                        p.name,
                        models.join(", "),
                        argv.join(" "),
                        if report.models.is_empty() {
                            "nothing".to_owned()
                        } else {
                            report.models.join(", ")
                        }
                    ),
                    format!(
                        "pick an offered model with {} (`autocode models --provider {}`), or sign in to the model's vendor in {}",
                        roles.join(" / "),
                        p.name,
                        p.name
                    ),
                ));
                ModelsCheck::Missing {
                    models,
                    offered: report.models,
                }
            }
            Err(e) => {
                let reason = e.to_string();
                problems.push(Problem::new(
                    format!("{} cannot list its models: {reason}", p.name),
                    format!("run `{}` yourself; {}", argv.join(" "), login_hint(p)),
                ));
                ModelsCheck::ListingFailed { reason }
            }
        },
    }
}

/// The command-line flag that sets `role`'s model.
pub fn role_flag(role: Role) -> &'static str {
    match role {
        Role::Requirements => "--requirements-model",
        Role::Planner => "--planner-model",
        Role::PlanReviewer => "--plan-reviewer-model",
        Role::Builder => "--builder-model",
        Role::Tester => "--tester-model",
        Role::CompletionReviewer => "--completion-model",
        Role::Resolver => "--resolver-model",
    }
}

/// `claude auth status --json` in the agents' environment, through the boundary.
/// The login `claude auth status --json` reports, or why it is refused and what to do.
async fn claude_login(
    executable: &Path,
    probe: &ProbeContext,
) -> Result<claude_auth::ClaudeLogin, (String, String)> {
    const STATUS: &str =
        "run `claude auth status --json` yourself; update Claude Code if it prints no JSON";
    let spec = LaunchSpec {
        label: "claude auth status".into(),
        program: executable.as_os_str().to_owned(),
        args: ["auth", "status", "--json"].map(OsString::from).to_vec(),
        env: probe.env.clone(),
        cwd: probe.cwd.clone(),
        stdin: StdinSource::Null,
        stdio: StdioMode::Captured { limit: 1 << 20 },
        timeout: Some(probe.timeout),
        room: None,
    };
    let finished = supervise::run(spec)
        .await
        .map_err(|e| (e.to_string(), STATUS.to_owned()))?;
    if finished.exit == Exit::TimedOut {
        return Err((
            "`claude auth status --json` timed out".into(),
            STATUS.to_owned(),
        ));
    }
    let text = clean_text(&finished.stdout);
    claude_auth::check_auth_status(&text).map_err(|e| (e.to_string(), e.next_step().to_owned()))
}
