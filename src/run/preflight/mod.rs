//! Preflight: everything a run needs checked before anything is created.
//!
//! [`preflight`] resolves the provider and every role's route (provider defaults, then the
//! role flags, then `--single-model`), moves the verifying roles to another installed,
//! signed-in provider when the chosen one cannot give them an independent model family
//! (automatic routes, unless `--no-auto-select`), and checks every provider the routes use
//! ([`provider_check`]: executable, version against the provider matrix, sign-in, models
//! offered) and the cross-model rule. `autocode run` refuses to start (exit 2, no run
//! directory, worktree or branch) when it finds a problem; `autocode doctor` prints the same
//! result. One function, two callers: what `doctor` calls ready is what a run starts with.
//! Design: `docs/run-lifecycle.md` ("Preflight and automatic routes").

pub mod bindings;
pub mod direct_ready;
pub mod families;
pub mod provider_check;
pub mod resume;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::provider::registry::Env;
use crate::provider::{self, DefaultSource, LoadStatus, Registry, ResolvedProvider};
use crate::role::Role;
use crate::transport::Route;
pub use families::Families;
pub use provider_check::{CheckInput, ClaudeChecks, ModelsCheck, ProviderCheck, SignIn};

/// Something that stops a run from starting, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub what: String,
    pub fix: String,
}

impl Problem {
    pub fn new(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            fix: fix.into(),
        }
    }
}

/// The roles' model choices from the command line.
#[derive(Debug, Clone, Default)]
pub struct RouteChoice {
    /// Per-role model overrides (`--builder-model` ...): they always win.
    pub models: BTreeMap<Role, String>,
    /// Per-role effort overrides.
    pub efforts: BTreeMap<Role, String>,
    /// `--reasoning-effort` for every role without its own.
    pub effort: Option<String>,
    /// `--single-model`: every role on one model, independence knowingly waived.
    pub single_model: Option<String>,
    /// `--role-transport ROLE=PROVIDER`: roles on another registered provider (explicit: never
    /// moved by the automatic cross-model move).
    pub providers: bindings::RoleBindings,
}

/// What to check.
#[derive(Debug, Clone)]
pub struct Request {
    /// `None`: the default provider.
    pub provider: Option<String>,
    pub choice: RouteChoice,
    /// Move the verifying roles to another provider when that is what independence needs.
    pub auto_select: bool,
    /// The routes talk to a loopback scripted/local endpoint (tests, demo).
    pub scripted_local: bool,
    pub workspace: PathBuf,
    /// Whether the direct runtime's readiness canaries may come from the cache.
    pub canaries: crate::direct::readiness::CanaryMode,
}

/// Whether the verifiers run on another model family than what they check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Independence {
    Independent,
    /// `--single-model`: knowingly waived (recorded in the run).
    Waived,
    /// The pairs on one family.
    Violated {
        pairs: Vec<String>,
    },
}

/// The verifying roles moved to another provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AutoRoutes {
    pub provider: String,
    pub roles: Vec<Role>,
    pub reason: String,
}

/// The preflight's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Preflight {
    pub ok: bool,
    /// The chosen provider (the run's own).
    pub provider: String,
    pub routes: BTreeMap<Role, Route>,
    pub auto_routes: Option<AutoRoutes>,
    pub independence: Independence,
    /// One entry per provider the routes use, the chosen one first.
    pub checks: Vec<ProviderCheck>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
    /// Every provider the routes use, resolved (the chosen one first).
    #[serde(skip)]
    pub resolved: Vec<ResolvedProvider>,
}

impl Preflight {
    /// The check of the chosen provider.
    pub fn main_check(&self) -> Option<&ProviderCheck> {
        self.checks.first()
    }

    /// The routes, one line per role, for people.
    pub fn routes_text(&self) -> String {
        let width = Role::ALL
            .iter()
            .map(|r| r.as_str().len())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (role, route) in &self.routes {
            out.push_str(&format!(
                "  {:width$}  {}/{}{}{}\n",
                role.as_str(),
                route.provider,
                route.model,
                route
                    .effort
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
                route
                    .codex_model_provider
                    .as_deref()
                    .map(|p| format!(" through Codex model provider {p}"))
                    .unwrap_or_default()
            ));
        }
        out
    }

    /// Every problem with its fix, for an error message.
    pub fn problems_text(&self) -> String {
        self.problems
            .iter()
            .map(|p| format!("- {}\n  fix: {}", p.what, p.fix))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Preflight cannot even resolve what to check.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("{0}")]
    Provider(String),
    #[error("{0}")]
    Routes(String),
}

/// The routes of `provider` with the command line's choices applied.
pub fn resolve_routes(
    provider: &ResolvedProvider,
    choice: &RouteChoice,
) -> Result<BTreeMap<Role, Route>, PreflightError> {
    let defaults = provider.config.resolved_routes();
    let mut routes = BTreeMap::new();
    let mut missing = Vec::new();
    for role in Role::ALL {
        let spec = defaults.get(&role);
        let Some(model) = choice
            .single_model
            .clone()
            .or_else(|| choice.models.get(&role).cloned())
            .or_else(|| spec.map(|s| s.model.clone()))
        else {
            missing.push(role);
            continue;
        };
        let effort = choice
            .efforts
            .get(&role)
            .cloned()
            .or_else(|| choice.effort.clone())
            .or_else(|| spec.and_then(|s| s.effort.clone()));
        // `autocode:ENDPOINT/MODEL` puts one role on autocode's own runtime (src/direct/).
        let (route_provider, model) = crate::direct::route_override(&provider.name, model);
        routes.insert(
            role,
            Route {
                provider: route_provider,
                model,
                effort,
                codex_model_provider: None,
            },
        );
    }
    if !missing.is_empty() {
        return Err(PreflightError::Routes(missing_models(
            provider, choice, &missing,
        )));
    }
    Ok(routes)
}

/// Every role without a model at once, and the one command line that names them all: the
/// doing roles on one model (`DOER`), the verifiers on another family (`CHECKER`), keeping the
/// flags already given.
fn missing_models(provider: &ResolvedProvider, choice: &RouteChoice, missing: &[Role]) -> String {
    let verifiers: Vec<Role> = Role::VERIFIER_PAIRS.iter().map(|(v, _)| *v).collect();
    let flags: Vec<String> = Role::ALL
        .into_iter()
        .map(|role| {
            let model = choice.models.get(&role).cloned().unwrap_or_else(|| {
                if verifiers.contains(&role) {
                    "CHECKER"
                } else {
                    "DOER"
                }
                .to_owned()
            });
            format!("{} {model}", provider_check::role_flag(role))
        })
        .collect();
    let roles: Vec<String> = missing.iter().map(ToString::to_string).collect();
    let models_hint = if provider.name.as_str() == crate::direct::PROVIDER_NAME {
        " (ENDPOINT/MODEL: `autocode models --provider autocode` lists them; CHECKER of another family than DOER)"
    } else {
        " (CHECKER of another family than DOER)"
    };
    format!(
        "provider {} has no model for {} role{}: {}; set them all in one command: autocode --provider {} {} \"OBJECTIVE\"{models_hint}, or --single-model MODEL to put every role on one model, knowingly waiving independence",
        provider.name,
        missing.len(),
        if missing.len() == 1 { "" } else { "s" },
        roles.join(", "),
        provider.name,
        flags.join(" "),
    )
}

/// The verifier pairs of `routes` on one model family, as text (empty: independent). A direct
/// route's family is its endpoint's declared one ([`families`]).
pub fn cross_model_violations(routes: &BTreeMap<Role, Route>, families: &Families) -> Vec<String> {
    violating_pairs(routes, families)
        .into_iter()
        .map(|pair| pair.to_string())
        .collect()
}

fn violating_pairs(
    routes: &BTreeMap<Role, Route>,
    families: &Families,
) -> Vec<provider::SameFamilyPair> {
    families.same_family_pairs(routes)
}

/// The routes with `verifiers` moved to `candidate`'s defaults (their own effort flags and
/// `--reasoning-effort` still apply).
fn moved_routes(
    routes: &BTreeMap<Role, Route>,
    candidate: &ResolvedProvider,
    verifiers: &[Role],
    choice: &RouteChoice,
) -> Option<BTreeMap<Role, Route>> {
    let mut out = routes.clone();
    for role in verifiers {
        let spec = candidate.config.route(*role)?;
        out.insert(
            *role,
            Route {
                provider: candidate.name.clone(),
                model: spec.model.clone(),
                effort: choice
                    .efforts
                    .get(role)
                    .cloned()
                    .or_else(|| choice.effort.clone())
                    .or_else(|| spec.effort.clone()),
                codex_model_provider: None,
            },
        );
    }
    Some(out)
}

/// The verifiers that may move: on the checked role's family and not named by a model flag or
/// bound to a provider (`--role-transport`).
fn movable_verifiers(pairs: &[provider::SameFamilyPair], choice: &RouteChoice) -> Vec<Role> {
    pairs
        .iter()
        .map(|p| p.verifier)
        .filter(|r| !choice.models.contains_key(r) && !choice.providers.contains_key(r))
        .collect::<BTreeSet<Role>>()
        .into_iter()
        .collect()
}

/// The models and roles `routes` put on `provider`.
fn usage_of(routes: &BTreeMap<Role, Route>, provider: &str) -> (Vec<String>, Vec<(Role, String)>) {
    let mut models: Vec<String> = Vec::new();
    let mut roles = Vec::new();
    for (role, route) in routes {
        if route.provider.as_str() == provider {
            roles.push((*role, route.model.clone()));
            if !models.contains(&route.model) {
                models.push(route.model.clone());
            }
        }
    }
    (models, roles)
}

async fn check(
    p: &ResolvedProvider,
    routes: &BTreeMap<Role, Route>,
    env: &Env,
    req: &Request,
) -> ProviderCheck {
    let (models, roles) = usage_of(routes, p.name.as_str());
    provider_check::check_provider(
        p,
        &CheckInput {
            env,
            models: &models,
            roles: &roles,
            scripted_local: req.scripted_local,
            workspace: &req.workspace,
            canaries: req.canaries,
        },
    )
    .await
}

/// Resolves the routes and checks everything a run needs, starting nothing but probes.
pub async fn preflight(
    registry: &Registry,
    env: &Env,
    req: &Request,
) -> Result<Preflight, PreflightError> {
    let (name, default_source) = match &req.provider {
        Some(name) => (name.clone(), None),
        None => {
            let default = registry
                .default_provider(env)
                .map_err(|e| PreflightError::Provider(e.to_string()))?;
            (default.name.to_string(), Some(default.source))
        }
    };
    let chosen = registry
        .resolve_name(&name)
        .map_err(|e| PreflightError::Provider(e.to_string()))?;
    let mut routes = resolve_routes(&chosen, &req.choice)?;
    bindings::bind_routes(registry, env, &mut routes, &req.choice)?;
    let families = families::from_os_env(env);
    let mut warnings = Vec::new();
    let mut auto_routes = None;
    let mut resolved = vec![chosen.clone()];
    let mut candidate_checks = Vec::new();
    let waived = req.choice.single_model.is_some();
    let pairs = if waived {
        Vec::new()
    } else {
        violating_pairs(&routes, &families)
    };
    let movable = movable_verifiers(&pairs, &req.choice);
    let mut tried: Vec<String> = Vec::new();
    // Only when moving can make every pair independent (a flag's own choice stays).
    let all_movable = pairs.iter().all(|p| movable.contains(&p.verifier));
    if !pairs.is_empty() && req.auto_select && all_movable {
        for listing in registry.list() {
            if listing.name == chosen.name.as_str()
                || !matches!(listing.status, LoadStatus::Ok { .. })
            {
                continue;
            }
            let Ok(candidate) = registry.resolve_name(&listing.name) else {
                continue;
            };
            let Some(moved) = moved_routes(&routes, &candidate, &movable, &req.choice) else {
                continue;
            };
            if !violating_pairs(&moved, &families).is_empty() {
                continue;
            }
            if !provider_check::installed(env, &candidate) {
                tried.push(format!("{} (not installed)", candidate.name));
                continue;
            }
            let candidate_check = check(&candidate, &moved, env, req).await;
            if !candidate_check.ok() {
                let why = candidate_check
                    .problems
                    .first()
                    .map(|p| p.what.clone())
                    .unwrap_or_default();
                tried.push(format!("{} ({why})", candidate.name));
                continue;
            }
            auto_routes = Some(AutoRoutes {
                provider: candidate.name.to_string(),
                roles: movable.clone(),
                reason: format!(
                    "{}'s own routes put {} on the family of what they check",
                    chosen.name,
                    movable
                        .iter()
                        .map(|r| r.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
            routes = moved;
            candidate_checks.push(candidate_check);
            resolved.push(candidate);
            break;
        }
    }
    let independence = if waived {
        Independence::Waived
    } else {
        let remaining = cross_model_violations(&routes, &families);
        if remaining.is_empty() {
            Independence::Independent
        } else {
            Independence::Violated { pairs: remaining }
        }
    };
    let mut checks = vec![check(&chosen, &routes, env, req).await];
    checks.extend(candidate_checks);
    // A provider only some roles are routed to (`autocode:ENDPOINT/MODEL`) is checked too.
    for route in routes.values() {
        if resolved.iter().any(|p| p.name == route.provider) {
            continue;
        }
        let Ok(other) = registry.resolve(&route.provider) else {
            continue;
        };
        checks.push(check(&other, &routes, env, req).await);
        resolved.push(other);
    }
    let mut problems: Vec<Problem> = Vec::new();
    if let Some(source) = &default_source
        && checks[0].executable.is_none()
        && checks[0].program.is_some()
    {
        let how = match source {
            DefaultSource::Env => "AUTOCODE_PROVIDER names it",
            DefaultSource::ConfigFile { .. } => "default_provider in config.toml names it",
            DefaultSource::Fallback => "no other default is set",
        };
        warnings.push(format!(
            "{} is the default provider ({how}); choose another with --provider NAME, AUTOCODE_PROVIDER or default_provider in {}",
            chosen.name,
            registry.paths().user_config_file.display()
        ));
    }
    for c in &checks {
        problems.extend(c.problems.iter().cloned());
        warnings.extend(c.warnings.iter().cloned());
    }
    if let Independence::Violated { pairs } = &independence {
        problems.push(independence_problem(&chosen, pairs, req, &movable, &tried));
    }
    Ok(Preflight {
        ok: problems.is_empty(),
        provider: chosen.name.to_string(),
        routes,
        auto_routes,
        independence,
        checks,
        problems,
        warnings,
        resolved,
    })
}

fn independence_problem(
    chosen: &ResolvedProvider,
    pairs: &[String],
    req: &Request,
    movable: &[Role],
    tried: &[String],
) -> Problem {
    let what = format!("verifier independence cannot be met: {}", pairs.join("; "));
    let explicit: Vec<&str> = Role::VERIFIER_PAIRS
        .iter()
        .map(|(v, _)| *v)
        .filter(|v| req.choice.models.contains_key(v) && !movable.contains(v))
        .map(provider_check::role_flag)
        .collect();
    let bound: Vec<String> = Role::VERIFIER_PAIRS
        .iter()
        .flat_map(|(v, c)| [*v, *c])
        .filter_map(|r| req.choice.providers.get(&r).map(|p| format!("{r}={p}")))
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    let mut fix = Vec::new();
    if !bound.is_empty() {
        fix.push(format!(
            "your --role-transport {} is explicit and never moved: bind the verifier to a provider of another family, or name another family's model with its model flag (--plan-reviewer-model, --tester-model, --completion-model)",
            bound.join(" ")
        ));
    } else if !explicit.is_empty() {
        fix.push(format!(
            "your {} puts a verifier on the family it checks: pick a model of another family",
            explicit.join(" / ")
        ));
    } else if !req.auto_select {
        fix.push(
            "drop --no-auto-select to let autocode put the verifiers on another installed, signed-in provider"
                .to_owned(),
        );
    } else if tried.is_empty() {
        fix.push(format!(
            "only one model family is available: add a second provider (install and sign in to another CLI such as `claude` or `codex` that offers another family, or register a tool in ~/.config/autocode/providers/, see docs/providers-registry.md; `autocode providers list` shows what is known), or name the verifiers' models yourself on another family of {} (--plan-reviewer-model, --tester-model, --completion-model)",
            chosen.name
        ));
    } else {
        fix.push(format!(
            "no other provider could take the verifiers: {}; fix one of them (`autocode doctor --provider NAME`), or name the verifiers' models yourself (--plan-reviewer-model, --tester-model, --completion-model)",
            tried.join("; ")
        ));
    }
    fix.push(
        "or pass --single-model MODEL to run every role on one model, knowingly waiving independence (recorded in the run)"
            .to_owned(),
    );
    Problem::new(what, fix.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ConfigPaths;

    fn registry() -> (tempfile::TempDir, Registry) {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::new(ConfigPaths::under(dir.path()));
        (dir, registry)
    }

    #[test]
    fn flags_win_over_defaults_and_single_model_over_flags() {
        let (_dir, registry) = registry();
        let codex = registry.resolve_name("codex").unwrap();
        let mut choice = RouteChoice::default();
        choice.models.insert(Role::Tester, "claude-opus-5-5".into());
        choice.effort = Some("high".into());
        let routes = resolve_routes(&codex, &choice).unwrap();
        assert_eq!(routes[&Role::Tester].model, "claude-opus-5-5");
        assert_eq!(routes[&Role::Builder].model, "gpt-6-terra");
        assert!(routes.values().all(|r| r.effort.as_deref() == Some("high")));
        choice.single_model = Some("one".into());
        let routes = resolve_routes(&codex, &choice).unwrap();
        assert!(routes.values().all(|r| r.model == "one"));
    }

    #[test]
    fn every_missing_role_model_is_named_at_once_with_one_command_for_all() {
        let (_dir, registry) = registry();
        let direct = registry.resolve_name(crate::direct::PROVIDER_NAME).unwrap();
        let mut choice = RouteChoice::default();
        choice.models.insert(Role::Builder, "local/qwen".into());
        let Err(PreflightError::Routes(message)) = resolve_routes(&direct, &choice) else {
            panic!("the built-in runtime has no default models");
        };
        assert!(message.contains("no model for 6 roles"), "{message}");
        for role in Role::ALL.into_iter().filter(|r| *r != Role::Builder) {
            assert!(message.contains(&role.to_string()), "{role}: {message}");
        }
        // The one command: every role's flag, the given one kept, verifiers on CHECKER.
        let command = message
            .split_once("one command: ")
            .and_then(|(_, rest)| rest.split_once(" \"OBJECTIVE\""))
            .map(|(command, _)| command)
            .unwrap();
        assert!(command.contains("--builder-model local/qwen"), "{command}");
        assert!(command.contains("--tester-model CHECKER"), "{command}");
        assert!(command.contains("--completion-model CHECKER"), "{command}");
        assert!(command.contains("--planner-model DOER"), "{command}");
        let words: Vec<&str> = command.split(' ').skip(1).collect();
        let parsed = <crate::cli::Cli as clap::Parser>::try_parse_from(
            std::iter::once("autocode")
                .chain(["run"])
                .chain(words)
                .chain(["OBJECTIVE"]),
        );
        assert!(parsed.is_ok(), "{command}: {parsed:?}");
    }

    #[test]
    fn moving_the_verifiers_of_codex_to_claude_makes_them_independent() {
        let (_dir, registry) = registry();
        let codex = registry.resolve_name("codex").unwrap();
        let claude = registry.resolve_name("claude").unwrap();
        let routes = resolve_routes(&codex, &RouteChoice::default()).unwrap();
        let pairs = violating_pairs(&routes, &Families::default());
        assert_eq!(pairs.len(), 3);
        let verifiers: Vec<Role> = pairs.iter().map(|p| p.verifier).collect();
        let moved = moved_routes(&routes, &claude, &verifiers, &RouteChoice::default()).unwrap();
        assert!(cross_model_violations(&moved, &Families::default()).is_empty());
        assert_eq!(moved[&Role::Tester].provider.as_str(), "claude");
        assert_eq!(moved[&Role::Builder].provider.as_str(), "codex");
        let (models, roles) = usage_of(&moved, "claude");
        let roles: Vec<Role> = roles.into_iter().map(|(role, _)| role).collect();
        assert_eq!(
            roles,
            [Role::PlanReviewer, Role::Tester, Role::CompletionReviewer]
        );
        assert!(models.iter().all(|m| m.starts_with("claude-")));
    }
}
