//! The readiness of the direct routes a run uses (`crate::direct::readiness`): for every
//! distinct endpoint model the routes put on autocode's own runtime, on a local endpoint, the
//! cheap checks every time and the canaries unless a pass is cached. Each failed check is a
//! [`Problem`] naming the roles, the check and what to change, so a run refuses to start (exit 2,
//! nothing created), `doctor` prints it, and a resume pauses on it.

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::Problem;
use crate::direct::connections::Connections;
use crate::direct::http::{self, Client};
use crate::direct::readiness::{self, CanaryCache, CanaryMode, ModelReadiness};
use crate::provider::registry::Env;
use crate::role::Role;

/// The readiness cache of `env`'s state directory (`None`: no state directory; the canaries
/// then run every time).
pub fn cache_of(env: &Env) -> Option<CanaryCache> {
    crate::run::integrity::key_dir_from(|name| env.get(&OsString::from(name)).cloned())
        .ok()
        .map(|dir| CanaryCache::in_dir(&dir))
}

/// The readiness of every local endpoint model `roles` use, with the problems of those that
/// are not ready. Routes that do not resolve are left to the configuration check.
pub async fn check(
    env: &Env,
    connections: &Connections,
    roles: &[(Role, String)],
    mode: CanaryMode,
) -> (Vec<ModelReadiness>, Vec<Problem>) {
    // (endpoint, model) -> the roles on it, in route order.
    let mut wanted: BTreeMap<(String, String), Vec<Role>> = BTreeMap::new();
    for (role, route_model) in roles {
        if let Ok(resolved) = connections.resolve(route_model)
            && readiness::is_local(&resolved.endpoint)
        {
            wanted
                .entry((resolved.endpoint.name.clone(), resolved.model.id.clone()))
                .or_default()
                .push(*role);
        }
    }
    let cache = cache_of(env);
    let mut results = Vec::new();
    let mut problems = Vec::new();
    for ((name, model), roles) in wanted {
        let Some(endpoint) = connections.endpoint(&name).cloned() else {
            continue;
        };
        let roles_text = roles
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let client = connections
            .auth(&endpoint)
            .map_err(|e| e.to_string())
            .and_then(|auth| Client::new(&endpoint.base_url, auth).map_err(|e| e.to_string()))
            // One total deadline for the model's whole check (`doctor`, a run's start).
            .map(|client| {
                client.with_deadline(http::check_deadline(
                    env.get(&OsString::from(http::CHECK_DEADLINE_ENV))
                        .and_then(|v| v.to_str()),
                ))
            });
        let client = match client {
            Ok(client) => client,
            Err(e) => {
                problems.push(Problem::new(
                    format!("the {roles_text}'s endpoint {name}: {e}"),
                    format!("fix the endpoint with `autocode connections setup --name {name} …`"),
                ));
                continue;
            }
        };
        let cache = cache.clone();
        let checked = tokio::task::spawn_blocking(move || {
            readiness::check_model(&client, &endpoint, &model, cache.as_ref(), mode)
        })
        .await;
        let checked = match checked {
            Ok(checked) => checked,
            Err(e) => {
                problems.push(Problem::new(
                    format!("the readiness check of {name} did not finish: {e}"),
                    "run `autocode connections check --provider autocode --live` to see it",
                ));
                continue;
            }
        };
        for failed in checked.checks.iter().filter(|c| !c.ok) {
            problems.push(Problem::new(
                format!(
                    "the {roles_text}'s local model {}/{} is not ready: {} check failed: {}",
                    checked.endpoint, checked.model, failed.name, failed.detail
                ),
                failed
                    .fix
                    .clone()
                    .unwrap_or_else(|| "see `autocode doctor --provider autocode`".into()),
            ));
        }
        results.push(checked);
    }
    (results, problems)
}

/// The problems of the local endpoint models `routes` put on autocode's own runtime (a resume
/// re-checks them before it launches anything; canaries from the cache when they passed).
pub async fn check_routes(
    env: &Env,
    routes: &BTreeMap<Role, crate::transport::Route>,
) -> Vec<Problem> {
    let roles: Vec<(Role, String)> = routes
        .iter()
        .filter(|(_, r)| r.provider.as_str() == crate::direct::PROVIDER_NAME)
        .map(|(role, r)| (*role, r.model.clone()))
        .collect();
    if roles.is_empty() {
        return Vec::new();
    }
    let get = |name: &str| {
        env.get(&OsString::from(name))
            .and_then(|v| v.to_str().map(str::to_owned))
    };
    let Ok(connections) =
        crate::direct::connections::dir_from_env(get).and_then(|dir| Connections::load(&dir))
    else {
        // Unloadable connections change the transport identity, which is checked first.
        return Vec::new();
    };
    check(env, &connections, &roles, CanaryMode::Cached).await.1
}
