//! Probes of a provider's tool: version, models, login (auth routes) and connection status.
//!
//! Every process goes through [`crate::supervise::run`] with the environment the caller gives
//! (nothing is inherited), stdin from /dev/null, captured output and a timeout. Commands are
//! argv arrays run without a shell; the program is resolved on the given env's `PATH` by
//! [`resolve_on_path`]. The decisions are pure functions ([`evaluate_auth`],
//! [`parse_model_lines`], [`first_line`], [`classify_status`]) so they are table-tested without
//! processes. A connection status command's output is never returned.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::config::{AuthRoute, Billing, ModelListing, ProviderConfig};
use super::registry::Env;
use crate::supervise::{self, Exit, LaunchOptions, LaunchSpec, StdinSource, StdioMode};
use version_cache::ExecutableStamp;

mod version_cache;

/// Output kept per stream: listings are small; a runaway tool is cut here.
const CAPTURE_LIMIT: usize = 1 << 20;

/// How probes run: the complete environment, the working directory, the time limit.
#[derive(Debug, Clone)]
pub struct ProbeContext {
    /// Everything the probe sees (nothing is inherited). Pass the agents' filtered environment
    /// so a check sees what a stage will see; `forbid_env` is checked against it too.
    pub env: Env,
    /// Prefer a neutral directory: tools such as OpenCode read project config from their cwd.
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Where versions probed by earlier processes are kept ([`version_cache`]); `None` asks the
    /// tool every time in a new process (conformance measures the version it reports).
    pub version_cache: Option<PathBuf>,
}

impl ProbeContext {
    /// The user's version cache (`version-probes.json` in autocode's state directory).
    pub fn user_version_cache() -> Option<PathBuf> {
        version_cache::default_file()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProbeError {
    #[error("the provider has no {what}")]
    NotConfigured { what: &'static str },
    #[error("`{program}` is not on PATH")]
    NotOnPath { program: String },
    #[error("cannot run `{program}`: {message}")]
    Launch { program: String, message: String },
    #[error("`{command}` timed out after {seconds}s")]
    TimedOut { command: String, seconds: u64 },
    #[error("`{command}` failed ({exit}){detail}", exit = exit_text(*.exit), detail = tail_text(.stderr_tail))]
    Failed {
        command: String,
        exit: Exit,
        /// The last lines of stderr, ANSI stripped.
        stderr_tail: String,
    },
}

fn exit_text(exit: Exit) -> String {
    match exit {
        Exit::Code(code) => format!("exit {code}"),
        Exit::Signal(signal) => format!("signal {signal}"),
        Exit::TimedOut => "timed out".to_owned(),
    }
}

fn tail_text(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(": {tail}")
    }
}

/// The executable `name` resolves to on `path_var` (a `PATH` value). A name holding `/` is taken
/// as a path. Empty and relative `PATH` entries are skipped: they would depend on the cwd.
pub fn resolve_on_path(name: &str, path_var: &OsStr) -> Option<PathBuf> {
    fn executable(path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    if name.is_empty() {
        return None;
    }
    if name.contains('/') {
        let path = PathBuf::from(name);
        return executable(&path).then_some(path);
    }
    std::env::split_paths(path_var)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| executable(candidate))
}

/// Terminal escape codes removed, invalid UTF-8 replaced.
pub fn clean_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&strip_ansi_escapes::strip(bytes)).into_owned()
}

/// The first non-blank line, trimmed.
pub fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

/// One model id per line; blank lines dropped, lines trimmed.
pub fn parse_model_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn stderr_tail(bytes: &[u8]) -> String {
    let text = clean_text(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

async fn run_argv(
    label: &str,
    argv: &[String],
    ctx: &ProbeContext,
    stdin: StdinSource,
    stdio: StdioMode,
) -> Result<supervise::Finished, ProbeError> {
    run_argv_with(label, argv, ctx, stdin, stdio, LaunchOptions::default()).await
}

async fn run_argv_with(
    label: &str,
    argv: &[String],
    ctx: &ProbeContext,
    stdin: StdinSource,
    stdio: StdioMode,
    options: LaunchOptions,
) -> Result<supervise::Finished, ProbeError> {
    let (program, args) = argv.split_first().ok_or(ProbeError::NotConfigured {
        what: "command (it is empty)",
    })?;
    let path_var = ctx
        .env
        .get(&OsString::from("PATH"))
        .cloned()
        .unwrap_or_default();
    let resolved = resolve_on_path(program, &path_var).ok_or_else(|| ProbeError::NotOnPath {
        program: program.clone(),
    })?;
    let spec = LaunchSpec {
        label: label.to_owned(),
        program: resolved.into_os_string(),
        args: args.iter().map(OsString::from).collect(),
        env: ctx.env.clone(),
        cwd: ctx.cwd.clone(),
        stdin,
        stdio,
        timeout: Some(ctx.timeout),
        room: None,
    };
    let finished = supervise::run_with(spec, options)
        .await
        .map_err(|e| ProbeError::Launch {
            program: program.clone(),
            message: e.to_string(),
        })?;
    if finished.exit == Exit::TimedOut {
        return Err(ProbeError::TimedOut {
            command: argv.join(" "),
            seconds: ctx.timeout.as_secs(),
        });
    }
    Ok(finished)
}

async fn run_ok(label: &str, argv: &[String], ctx: &ProbeContext) -> Result<String, ProbeError> {
    run_ok_with(label, argv, ctx, LaunchOptions::default())
        .await
        .map(|(out, _)| out)
}

/// [`run_ok`] with launch options; also the family's exec ledger when one is kept.
async fn run_ok_with(
    label: &str,
    argv: &[String],
    ctx: &ProbeContext,
    options: LaunchOptions,
) -> Result<(String, Vec<supervise::LedgerEntry>), ProbeError> {
    let finished = run_argv_with(
        label,
        argv,
        ctx,
        StdinSource::Null,
        StdioMode::Captured {
            limit: CAPTURE_LIMIT,
        },
        options,
    )
    .await?;
    if finished.exit != Exit::Code(0) {
        return Err(ProbeError::Failed {
            command: argv.join(" "),
            exit: finished.exit,
            stderr_tail: stderr_tail(&finished.stderr),
        });
    }
    Ok((clean_text(&finished.stdout), finished.ledger))
}

/// The tool's version: the first line of `version_command`'s output.
///
/// A probe is a process start (for Codex and Claude Code a node start, about a tenth of a second
/// of CPU) and one run asks for the same version twice (its preflight and its identities), so a
/// version is answered once per process for one command, environment and working directory,
/// and reused only while the executable the command resolves to is the same file, unchanged
/// ([`ExecutableStamp`]: its canonical path, device, inode, size, mtime and ctime). The
/// directory of autocode's own binary, which the stages' `PATH` gains and the preflight's does
/// not, does not make another question unless the command resolves there. With
/// [`ProbeContext::version_cache`], an answer is also kept for later processes while every file
/// the probe executed is unchanged ([`version_cache`]). A failed probe is not kept.
pub async fn probe_version(
    config: &ProviderConfig,
    ctx: &ProbeContext,
) -> Result<String, ProbeError> {
    let argv = config
        .version_command
        .as_ref()
        .ok_or(ProbeError::NotConfigured {
            what: "version_command",
        })?;
    let key = VersionKey::of(argv, ctx);
    if let Some(key) = &key
        && let Some(version) = known_versions().get(key)
    {
        return Ok(version.clone());
    }
    let version = probe_version_across_processes(argv, ctx, key.as_ref()).await?;
    // Kept only when the executable is still the file the key names (not replaced meanwhile).
    if let Some(key) = key
        && VersionKey::of(argv, ctx).as_ref() == Some(&key)
    {
        known_versions().insert(key, version.clone());
    }
    Ok(version)
}

/// The version from the user's cache when it still holds, else from the tool (kept in the cache
/// when its ledger names every file it ran).
async fn probe_version_across_processes(
    argv: &[String],
    ctx: &ProbeContext,
    key: Option<&VersionKey>,
) -> Result<String, ProbeError> {
    // The cache file, the question's digest and its key, when this probe may use the cache.
    let cache = ctx.version_cache.as_deref().zip(key).map(|(file, key)| {
        let env = key.env.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()));
        (
            file,
            version_cache::question_digest(argv, env, &key.cwd),
            key,
        )
    });
    if let Some((file, question, key)) = &cache
        && let Some(version) = version_cache::lookup(file, question, &key.executable)
    {
        tracing::debug!(%version, cache = %file.display(), "version answered from the version cache");
        return Ok(version);
    }
    // The exec ledger names the files the probe runs (no ledger: nothing is kept).
    let ledger = cache
        .as_ref()
        .and_then(|_| tempfile::NamedTempFile::new().ok());
    let options = LaunchOptions {
        ledger_path: ledger.as_ref().map(|file| file.path().to_owned()),
        ..LaunchOptions::default()
    };
    let (out, execs) = run_ok_with("version probe", argv, ctx, options).await?;
    let version = first_line(&out).ok_or_else(|| ProbeError::Failed {
        command: argv.join(" "),
        exit: Exit::Code(0),
        stderr_tail: "it printed no version".to_owned(),
    })?;
    if let Some((file, question, key)) = cache
        && let Some(executed) = version_cache::executed(&execs)
        && VersionKey::of(argv, ctx).as_ref() == Some(key)
    {
        version_cache::remember(file, question, &version, key.executable.clone(), executed);
    }
    Ok(version)
}

/// What a version answer depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct VersionKey {
    argv: Vec<String>,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    executable: ExecutableStamp,
}

impl VersionKey {
    /// `None` when the program does not resolve (the probe then reports why).
    fn of(argv: &[String], ctx: &ProbeContext) -> Option<VersionKey> {
        let path_var = ctx.env.get(&OsString::from("PATH"))?;
        let resolved = resolve_on_path(argv.first()?, path_var)?;
        let own_dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf));
        let path_key: OsString = std::env::join_paths(
            std::env::split_paths(path_var).filter(|dir| Some(dir) != own_dir.as_ref()),
        )
        .ok()?;
        Some(VersionKey {
            argv: argv.to_vec(),
            env: ctx
                .env
                .iter()
                .map(|(k, v)| {
                    let v = if k == "PATH" { &path_key } else { v };
                    (k.clone(), v.clone())
                })
                .collect(),
            cwd: ctx.cwd.clone(),
            executable: ExecutableStamp::of(&resolved)?,
        })
    }
}

/// The versions this process has probed.
fn known_versions() -> std::sync::MutexGuard<'static, std::collections::HashMap<VersionKey, String>>
{
    static KNOWN: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<VersionKey, String>>,
    > = std::sync::OnceLock::new();
    KNOWN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where a model list came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelsSource {
    Command,
    Static,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelsReport {
    pub source: ModelsSource,
    pub models: Vec<String>,
}

/// The tool's models: `models_command`'s lines, or the static list.
pub async fn probe_models(
    config: &ProviderConfig,
    ctx: &ProbeContext,
) -> Result<ModelsReport, ProbeError> {
    match config.model_listing() {
        ModelListing::Static(models) => Ok(ModelsReport {
            source: ModelsSource::Static,
            models: models.to_vec(),
        }),
        ModelListing::Command(argv) => {
            let out = run_ok("models probe", argv, ctx).await?;
            Ok(ModelsReport {
                source: ModelsSource::Command,
                models: parse_model_lines(&out),
            })
        }
        ModelListing::None => Err(ProbeError::NotConfigured {
            what: "models_command or models list",
        }),
    }
}

/// The verdict on one auth route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RouteOutcome {
    /// Every match equals `expect`.
    Pass,
    /// The pattern matched nothing: the login is absent.
    NoMatch,
    /// Some match differs from `expect` (the login has the wrong mode).
    Mismatch { found: Vec<String> },
    /// The pattern does not compile (loading refuses this; kept total).
    BadPattern { message: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteCheck {
    /// The route's model prefix.
    pub models: String,
    pub name: String,
    pub billing: Option<Billing>,
    pub expect: String,
    /// The selected models this route serves.
    pub selected: Vec<String>,
    #[serde(flatten)]
    pub outcome: RouteOutcome,
}

/// The login check's verdict (`ok` false pauses with `PAUSED_BILLING_ROUTE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthReport {
    pub ok: bool,
    pub routes: Vec<RouteCheck>,
    /// Selected models no declared route serves (only when routes are declared).
    pub unrouted_models: Vec<String>,
    /// `forbid_env` names present in the environment (names only, never values).
    pub forbidden_env: Vec<String>,
    /// Why the listing command failed, when it did.
    pub listing_failed: Option<String>,
}

impl AuthReport {
    fn recompute_ok(&mut self) {
        self.ok = self.listing_failed.is_none()
            && self.forbidden_env.is_empty()
            && self.unrouted_models.is_empty()
            && self.routes.iter().all(|r| r.outcome == RouteOutcome::Pass);
    }
}

fn route_for<'a>(model: &str, routes: &'a [AuthRoute]) -> Option<(usize, &'a AuthRoute)> {
    routes
        .iter()
        .enumerate()
        .filter(|(_, r)| model.starts_with(&r.models))
        .max_by_key(|(i, r)| (r.models.len(), std::cmp::Reverse(*i)))
}

fn judge(listing: &str, route: &AuthRoute) -> RouteOutcome {
    let pattern = match regex::Regex::new(&route.pattern) {
        Ok(p) => p,
        Err(e) => {
            return RouteOutcome::BadPattern {
                message: e.to_string(),
            };
        }
    };
    // Each line on its own: `^`/`$` anchor at line ends with or without `(?m)`.
    let found: Vec<String> = listing
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .flat_map(|line| {
            pattern
                .captures_iter(line)
                .filter_map(|c| c.get(1).or_else(|| c.get(0)).map(|m| m.as_str().to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    if found.is_empty() {
        RouteOutcome::NoMatch
    } else if found.iter().all(|f| *f == route.expect) {
        RouteOutcome::Pass
    } else {
        RouteOutcome::Mismatch { found }
    }
}

/// Judges an auth listing for the selected `models`: each model goes to the route with the
/// longest matching prefix; every route that serves a selected model must match `expect` on
/// every match of its pattern (group 1, else the whole match), and at least once. ANSI codes
/// are stripped first. `forbidden_env` and `listing_failed` are left empty for the caller.
pub fn evaluate_auth(listing: &str, routes: &[AuthRoute], models: &[String]) -> AuthReport {
    let listing = clean_text(listing.as_bytes());
    let mut selected: Vec<Vec<String>> = vec![Vec::new(); routes.len()];
    let mut unrouted = Vec::new();
    for model in models {
        match route_for(model, routes) {
            Some((i, _)) => {
                if let Some(list) = selected.get_mut(i)
                    && !list.contains(model)
                {
                    list.push(model.clone());
                }
            }
            None if !routes.is_empty() && !unrouted.contains(model) => unrouted.push(model.clone()),
            None => {}
        }
    }
    let checks = routes
        .iter()
        .zip(selected)
        .filter(|(_, models)| !models.is_empty())
        .map(|(route, selected)| RouteCheck {
            models: route.models.clone(),
            name: route.display_name().to_owned(),
            billing: route.billing,
            expect: route.expect.clone(),
            selected,
            outcome: judge(&listing, route),
        })
        .collect();
    let mut report = AuthReport {
        ok: false,
        routes: checks,
        unrouted_models: unrouted,
        forbidden_env: Vec::new(),
        listing_failed: None,
    };
    report.recompute_ok();
    report
}

/// The `forbid` names set (even to an empty value) in `env`.
pub fn forbidden_env_present(forbid: &[String], env: &Env) -> Vec<String> {
    forbid
        .iter()
        .filter(|name| env.contains_key(&OsString::from(name.as_str())))
        .cloned()
        .collect()
}

/// Runs the `[auth]` check for the selected `models` in `ctx.env` (which is also the
/// environment `forbid_env` is checked against).
pub async fn check_auth(
    config: &ProviderConfig,
    models: &[String],
    ctx: &ProbeContext,
) -> Result<AuthReport, ProbeError> {
    let auth = config.auth.as_ref().ok_or(ProbeError::NotConfigured {
        what: "[auth] table",
    })?;
    let (listing, failed) = match run_ok("auth probe", &auth.command, ctx).await {
        Ok(listing) => (listing, None),
        Err(error @ (ProbeError::Failed { .. } | ProbeError::TimedOut { .. })) => {
            (String::new(), Some(error.to_string()))
        }
        Err(other) => return Err(other),
    };
    let mut report = evaluate_auth(&listing, &auth.routes, models);
    report.forbidden_env = forbidden_env_present(&auth.forbid_env, &ctx.env);
    report.listing_failed = failed;
    report.recompute_ok();
    Ok(report)
}

/// What a `[connection]` status command said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ConnectionStatus {
    /// Exit 0: credentials present.
    Present,
    /// Exit 1: sign-in required.
    SignInRequired,
    /// Any other ending: the check itself failed.
    CheckFailed { exit: Exit },
    /// No `status_command`: login is not checked.
    Unchecked,
}

/// The status command's exit, classified.
pub fn classify_status(exit: Exit) -> ConnectionStatus {
    match exit {
        Exit::Code(0) => ConnectionStatus::Present,
        Exit::Code(1) => ConnectionStatus::SignInRequired,
        other => ConnectionStatus::CheckFailed { exit: other },
    }
}

/// Runs `[connection].status_command`; its output is discarded.
pub async fn connection_status(
    config: &ProviderConfig,
    ctx: &ProbeContext,
) -> Result<ConnectionStatus, ProbeError> {
    let Some(argv) = config
        .connection
        .as_ref()
        .and_then(|c| c.status_command.as_ref())
    else {
        return Ok(ConnectionStatus::Unchecked);
    };
    let finished = match run_argv(
        "connection status",
        argv,
        ctx,
        StdinSource::Null,
        StdioMode::Captured { limit: 0 },
    )
    .await
    {
        Ok(finished) => finished,
        Err(ProbeError::TimedOut { .. }) => {
            return Ok(ConnectionStatus::CheckFailed {
                exit: Exit::TimedOut,
            });
        }
        Err(other) => return Err(other),
    };
    Ok(classify_status(finished.exit))
}

/// Runs `[connection].login_command` on the terminal (interactive) and returns how it ended.
pub async fn run_login(config: &ProviderConfig, ctx: &ProbeContext) -> Result<Exit, ProbeError> {
    let argv = config
        .connection
        .as_ref()
        .and_then(|c| c.login_command.as_ref())
        .ok_or(ProbeError::NotConfigured {
            what: "[connection] login_command",
        })?;
    let finished = run_argv(
        "connection login",
        argv,
        ctx,
        StdinSource::Inherit,
        StdioMode::Terminal,
    )
    .await?;
    Ok(finished.exit)
}

#[cfg(test)]
mod tests;
