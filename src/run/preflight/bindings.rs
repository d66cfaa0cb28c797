//! A tool per role: `--role-transport ROLE=PROVIDER` and `--ROLE-provider PROVIDER` put single
//! roles on another registered provider. This module owns parsing those names (a clear error for
//! an unknown role) and [`bind_routes`], the one function that turns the bindings into per-role
//! routes (the role's model flag on that provider, else the provider's own route for the role).
//! For a role that runs on Codex, a name that is no registered provider but a `model_providers`
//! entry of the user's Codex `config.toml` keeps the role on Codex and routes it through that
//! model provider (`-c model_provider=NAME`, as the predecessor's `--sol-provider` did); its
//! model flag is then required.
//! A bound route is explicit: the automatic cross-model move never touches it (`super`), and a
//! resume with other bindings is refused ([`changed_binding`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{PreflightError, RouteChoice, provider_check};
use crate::ids::ProviderName;
use crate::provider::Registry;
use crate::provider::registry::Env;
use crate::role::{Role, RoleKey};
use crate::transport::Route;

/// The roles a person bound to a provider.
pub type RoleBindings = BTreeMap<Role, ProviderName>;

/// A role or binding name that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    #[error(
        "unknown role `{0}` (roles: requirements, planner, plan_reviewer, builder, tester, completion_reviewer, resolver; code names: glm, terra, sol, completion, astra)"
    )]
    UnknownRole(String),
    #[error("`{0}` is not ROLE=PROVIDER (e.g. --role-transport tester=claude)")]
    NotRoleEqualsProvider(String),
    #[error("`{0}` is not a provider name: {1}")]
    BadProvider(String, String),
    #[error("role {role} is bound twice: to {first} and to {second}")]
    Twice {
        role: Role,
        first: ProviderName,
        second: ProviderName,
    },
}

/// A role by its string (`plan_reviewer`, `plan-reviewer`) or its code name (`sol`, `terra`).
pub fn parse_role(name: &str) -> Result<Role, BindingError> {
    let key = name.trim().replace('-', "_");
    if let Some(role) = Role::ALL.into_iter().find(|r| r.as_str() == key) {
        return Ok(role);
    }
    if key == "completion" {
        return Ok(Role::CompletionReviewer);
    }
    match RoleKey::parse(&key) {
        Some(RoleKey::Glm) => Ok(Role::Planner),
        Some(k) => Role::ALL
            .into_iter()
            .find(|r| RoleKey::for_role(*r) == k)
            .ok_or_else(|| BindingError::UnknownRole(name.to_owned())),
        None => Err(BindingError::UnknownRole(name.to_owned())),
    }
}

/// A provider name as a binding takes it.
pub fn parse_provider(name: &str) -> Result<ProviderName, BindingError> {
    ProviderName::new(name.trim())
        .map_err(|e| BindingError::BadProvider(name.to_owned(), e.to_string()))
}

/// One `--role-transport ROLE=PROVIDER` value.
pub fn parse_binding(text: &str) -> Result<(Role, ProviderName), BindingError> {
    let (role, provider) = text
        .split_once('=')
        .filter(|(r, p)| !r.trim().is_empty() && !p.trim().is_empty())
        .ok_or_else(|| BindingError::NotRoleEqualsProvider(text.to_owned()))?;
    Ok((parse_role(role)?, parse_provider(provider)?))
}

/// The bindings of the command line as one map; a role bound to two providers is an error.
pub fn collect(
    pairs: impl IntoIterator<Item = (Role, ProviderName)>,
) -> Result<RoleBindings, BindingError> {
    let mut out = RoleBindings::new();
    for (role, provider) in pairs {
        match out.get(&role) {
            Some(first) if *first != provider => {
                return Err(BindingError::Twice {
                    role,
                    first: first.clone(),
                    second: provider,
                });
            }
            _ => {
                out.insert(role, provider);
            }
        }
    }
    Ok(out)
}

/// The bindings as `ROLE=PROVIDER, ...` (for messages), `none` when empty.
pub fn describe(bindings: &RoleBindings) -> String {
    if bindings.is_empty() {
        return "none".to_owned();
    }
    bindings
        .iter()
        .map(|(role, provider)| format!("{role}={provider}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Puts every bound role of `choice` on its provider: the role's model flag, else that
/// provider's route for the role (its effort, unless an effort flag names one). Unknown
/// providers, a provider without a route for the role, and `--single-model` are errors.
pub fn bind_routes(
    registry: &Registry,
    env: &Env,
    routes: &mut BTreeMap<Role, Route>,
    choice: &RouteChoice,
) -> Result<(), PreflightError> {
    if choice.providers.is_empty() {
        return Ok(());
    }
    if choice.single_model.is_some() {
        return Err(PreflightError::Routes(format!(
            "--single-model puts every role on one model; it cannot combine with role bindings ({})",
            describe(&choice.providers)
        )));
    }
    for (role, name) in &choice.providers {
        let provider = match registry.resolve(name) {
            Ok(provider) => provider,
            Err(e) => {
                let on_codex = routes
                    .get(role)
                    .is_some_and(|r| r.provider.as_str() == CODEX);
                let codex = on_codex.then(|| CodexModelProviders::read(env));
                match codex {
                    Some(codex) if codex.names.iter().any(|n| n == name.as_str()) => {
                        route_through_codex_model_provider(routes, choice, *role, name, &codex)?;
                        continue;
                    }
                    Some(codex) => {
                        return Err(PreflightError::Provider(format!(
                            "--role-transport {role}={name}: {e}, and {} (`autocode providers list` shows the registered providers)",
                            codex.describe_missing(name)
                        )));
                    }
                    None => {
                        return Err(PreflightError::Provider(format!(
                            "--role-transport {role}={name}: {e} (`autocode providers list` shows the registered providers)"
                        )));
                    }
                }
            }
        };
        let spec = provider.config.route(*role);
        let Some(model) = choice
            .models
            .get(role)
            .cloned()
            .or_else(|| spec.map(|s| s.model.clone()))
        else {
            return Err(PreflightError::Routes(format!(
                "--role-transport {role}={name}: provider {name} has no route for {role}; name its model with {} MODEL (`autocode models --provider {name}` lists them)",
                provider_check::role_flag(*role)
            )));
        };
        let effort = choice
            .efforts
            .get(role)
            .cloned()
            .or_else(|| choice.effort.clone())
            .or_else(|| spec.and_then(|s| s.effort.clone()));
        routes.insert(
            *role,
            Route {
                provider: provider.name.clone(),
                model,
                effort,
                codex_model_provider: None,
            },
        );
    }
    Ok(())
}

/// The built-in Codex provider's name.
const CODEX: &str = "codex";

/// The `model_providers` entries of the user's Codex configuration
/// (`$CODEX_HOME/config.toml`, default `~/.codex/config.toml`).
#[derive(Debug, Default)]
struct CodexModelProviders {
    /// The file read (`None`: neither `CODEX_HOME` nor `HOME` is set).
    path: Option<PathBuf>,
    /// Its `[model_providers.NAME]` names.
    names: Vec<String>,
    /// Why the file gave no names, when it could not be read or parsed.
    problem: Option<String>,
}

impl CodexModelProviders {
    fn read(env: &Env) -> Self {
        let var = |key: &str| {
            env.get(std::ffi::OsStr::new(key))
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let Some(dir) = var("CODEX_HOME").or_else(|| var("HOME").map(|h| h.join(".codex"))) else {
            return Self::default();
        };
        let path = dir.join("config.toml");
        let (names, problem) = match std::fs::read_to_string(&path) {
            Ok(text) => match text.parse::<toml::Table>() {
                Ok(table) => (
                    table
                        .get("model_providers")
                        .and_then(toml::Value::as_table)
                        .map(|t| t.keys().cloned().collect())
                        .unwrap_or_default(),
                    None,
                ),
                Err(e) => (
                    Vec::new(),
                    Some(format!("it does not parse: {}", e.message())),
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                (Vec::new(), Some("it does not exist".to_owned()))
            }
            Err(e) => (Vec::new(), Some(format!("it cannot be read: {e}"))),
        };
        Self {
            path: Some(path),
            names,
            problem,
        }
    }

    /// Why `name` is not one of them, for the refusal.
    fn describe_missing(&self, name: &ProviderName) -> String {
        let Some(path) = &self.path else {
            return format!(
                "no Codex config.toml to name a model provider {name} (neither CODEX_HOME nor HOME is set)"
            );
        };
        let path = path.display();
        match (&self.problem, self.names.is_empty()) {
            (Some(problem), _) => {
                format!("Codex's {path} cannot name a model provider {name}: {problem}")
            }
            (None, true) => format!("Codex's {path} defines no [model_providers.*]"),
            (None, false) => format!(
                "it is not a model provider of Codex's {path} ({})",
                self.names.join(", ")
            ),
        }
    }
}

/// Keeps `role` on Codex, routed through the Codex model provider `name`; the role's model flag
/// names the model (the default Codex model is the login's, not that provider's).
fn route_through_codex_model_provider(
    routes: &mut BTreeMap<Role, Route>,
    choice: &RouteChoice,
    role: Role,
    name: &ProviderName,
    codex: &CodexModelProviders,
) -> Result<(), PreflightError> {
    let Some(model) = choice.models.get(&role).cloned() else {
        return Err(PreflightError::Routes(format!(
            "--role-transport {role}={name}: {name} is a model provider of Codex's {}; name the model it serves with {} MODEL",
            codex
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            provider_check::role_flag(role)
        )));
    };
    let Some(route) = routes.get_mut(&role) else {
        return Ok(());
    };
    route.model = model;
    route.codex_model_provider = Some(name.to_string());
    Ok(())
}

/// At resume: bindings given that differ from the run's saved ones, as the refusal's text
/// (`None`: none given, or the same).
pub fn changed_binding(saved: &RoleBindings, given: &RoleBindings) -> Option<String> {
    if given.is_empty() || given == saved {
        return None;
    }
    Some(format!(
        "the run's role bindings are fixed when it starts: it runs with {}, this resume asked for {}; a changed binding is a transport change and nothing was changed. Resume without --role-transport / --ROLE-provider to keep the saved bindings, or start a new run with the new ones",
        describe(saved),
        describe(given)
    ))
}

#[cfg(test)]
mod tests;
