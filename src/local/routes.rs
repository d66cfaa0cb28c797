//! `autocode run --local`: the bulk roles (requirements, planner, builder) on the saved local
//! endpoint's model through autocode's own runtime, the verifiers left to the run's provider —
//! whose routes the cross-model rule then checks, moving them to another installed, signed-in
//! provider when they share the local model's family (`run::preflight`). One function
//! ([`local_routes`]) computes the per-role model choices; the run command merges them under
//! the model flags it was given.

use std::collections::BTreeMap;

use crate::direct::connections::{Connections, Endpoint, EndpointModel};
use crate::direct::readiness::is_local;
use crate::role::Role;

/// The roles `--local` puts on the local model.
pub const BULK_ROLES: [Role; 3] = [Role::Requirements, Role::Planner, Role::Builder];

/// The per-role choices of `--local`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalRoutes {
    pub endpoint: String,
    pub model: String,
    pub family: String,
    /// Each bulk role's model flag value (`autocode:ENDPOINT/MODEL`, or `ENDPOINT/MODEL` when
    /// the run's provider is autocode itself).
    pub models: BTreeMap<Role, String>,
}

impl LocalRoutes {
    /// The line printed before the run starts.
    pub fn describe(&self, verifier_provider: &str) -> String {
        format!(
            "--local: requirements, planner and builder on {}/{} (family {}, autocode's own runtime); plan reviewer, tester and completion reviewer on {verifier_provider}, moved to another installed, signed-in provider if its family is {} too",
            self.endpoint, self.model, self.family, self.family
        )
    }
}

/// Why `--local` cannot choose.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalRouteError {
    #[error("no local endpoint is saved; set one up with: autocode local setup")]
    NoLocalEndpoint,
    #[error(
        "{count} local endpoint models are saved ({choices}); name one: --local ENDPOINT/MODEL"
    )]
    Ambiguous { count: usize, choices: String },
    #[error("`{0}` is not a saved local endpoint model (saved: {1})")]
    Unknown(String, String),
}

/// The bulk roles on the local model `pick` (`ENDPOINT/MODEL`), or on the only saved local
/// endpoint model; `direct_provider`: the run's provider is autocode itself (no
/// `autocode:` prefix then).
pub fn local_routes(
    connections: &Connections,
    pick: Option<&str>,
    direct_provider: bool,
) -> Result<LocalRoutes, LocalRouteError> {
    let local: Vec<(&Endpoint, &EndpointModel)> = connections
        .file
        .endpoints
        .iter()
        .filter(|e| is_local(e))
        .flat_map(|e| e.models.iter().map(move |m| (e, m)))
        .collect();
    let names: Vec<String> = local
        .iter()
        .map(|(e, m)| format!("{}/{}", e.name, m.id))
        .collect();
    let (endpoint, model) = match pick {
        Some(pick) => *local
            .iter()
            .find(|(e, m)| format!("{}/{}", e.name, m.id) == pick || m.id == pick)
            .ok_or_else(|| LocalRouteError::Unknown(pick.to_owned(), names.join(", ")))?,
        None => match local.as_slice() {
            [] => return Err(LocalRouteError::NoLocalEndpoint),
            [one] => *one,
            many => {
                return Err(LocalRouteError::Ambiguous {
                    count: many.len(),
                    choices: names.join(", "),
                });
            }
        },
    };
    let route = format!("{}/{}", endpoint.name, model.id);
    let flag = if direct_provider {
        route
    } else {
        format!("{}{route}", crate::direct::ROUTE_PREFIX)
    };
    Ok(LocalRoutes {
        endpoint: endpoint.name.clone(),
        model: model.id.clone(),
        family: model.family.clone(),
        models: BULK_ROLES.into_iter().map(|r| (r, flag.clone())).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direct::connections::{EndpointKind, EndpointsFile};
    use crate::direct::protocol::Protocol;

    fn endpoint(name: &str, kind: EndpointKind, url: &str, models: &[&str]) -> Endpoint {
        Endpoint {
            name: name.into(),
            kind,
            base_url: url.into(),
            protocol: Protocol::ChatCompletions,
            token_field: kind.default_token_field(),
            stream: true,
            max_output_tokens: None,
            models: models
                .iter()
                .map(|id| EndpointModel {
                    id: (*id).into(),
                    family: "qwen".into(),
                })
                .collect(),
        }
    }

    fn connections(endpoints: Vec<Endpoint>) -> Connections {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Connections::load(dir.path()).unwrap();
        c.file = EndpointsFile { endpoints };
        c
    }

    #[test]
    fn the_bulk_roles_go_to_the_only_local_model_and_the_verifiers_stay() {
        let c = connections(vec![
            endpoint(
                "cloud",
                EndpointKind::Openai,
                "https://api.openai.com/v1",
                &["gpt"],
            ),
            endpoint(
                "llama",
                EndpointKind::LlamaCpp,
                "http://127.0.0.1:8080/v1",
                &["qwen-1.5b"],
            ),
        ]);
        let routes = local_routes(&c, None, false).unwrap();
        assert_eq!(routes.family, "qwen");
        assert_eq!(
            routes.models.keys().copied().collect::<Vec<_>>(),
            BULK_ROLES.to_vec()
        );
        assert!(
            routes
                .models
                .values()
                .all(|m| m == "autocode:llama/qwen-1.5b")
        );
        for verifier in [Role::PlanReviewer, Role::Tester, Role::CompletionReviewer] {
            assert!(!routes.models.contains_key(&verifier));
        }
        let direct = local_routes(&c, None, true).unwrap();
        assert_eq!(direct.models[&Role::Builder], "llama/qwen-1.5b");
        assert!(routes.describe("claude").contains("family is qwen too"));
    }

    #[test]
    fn no_or_several_local_models_are_named_not_guessed() {
        let cloud = endpoint(
            "cloud",
            EndpointKind::Openai,
            "https://api.openai.com/v1",
            &["gpt"],
        );
        assert_eq!(
            local_routes(&connections(vec![cloud.clone()]), None, false),
            Err(LocalRouteError::NoLocalEndpoint)
        );
        let two = connections(vec![endpoint(
            "ollama",
            EndpointKind::Ollama,
            "http://127.0.0.1:11434/v1",
            &["a", "b"],
        )]);
        let err = local_routes(&two, None, false).unwrap_err();
        assert!(err.to_string().contains("ollama/a, ollama/b"), "{err}");
        assert_eq!(
            local_routes(&two, Some("ollama/b"), false).unwrap().model,
            "b"
        );
        assert!(matches!(
            local_routes(&two, Some("gpt"), false),
            Err(LocalRouteError::Unknown(..))
        ));
    }
}
