//! `autocode`'s own agent runtime ("direct connections"): the reserved built-in provider
//! `autocode` talks to OpenAI Chat Completions, OpenAI Responses and Anthropic Messages endpoints
//! itself, and runs the model's tool calls itself, under the process boundary and the stage's
//! room.
//!
//! Sub-modules: [`connections`] (named endpoints, keys, the transport identity), [`http`] (the
//! HTTP client: HTTPS except loopback, no redirects, bounded reads, typed failures),
//! [`protocol`] (the three wire formats), [`preflight`] (an endpoint model's readiness checks), [`readiness`] (which endpoints a run checks, and the cache of passed canaries), [`tools`] (what a role is offered and how each call
//! runs), [`runtime`] (one stage's loop and its bounds), [`scripted`] (an endpoint on the scripted model server). The stage attempt that uses them, and the
//! mapping of failures to pause codes, is `run::runner::direct` (same artifacts and judgement as
//! a CLI's attempt). This module depends on `events`, `report` and `supervise` only. Design: `docs/direct.md`.

pub mod connections;
pub mod http;
pub mod preflight;
pub mod protocol;
pub mod readiness;
pub mod runtime;
pub mod scripted;
pub mod tools;

/// The reserved provider name.
pub const PROVIDER_NAME: &str = "autocode";

/// The prefix that routes one role to autocode's own runtime in a run on another provider
/// (`--tester-model autocode:ENDPOINT/MODEL`).
pub const ROUTE_PREFIX: &str = "autocode:";

/// A role's provider and model from its model flag: `autocode:ENDPOINT/MODEL` is the direct
/// runtime's `ENDPOINT/MODEL`; anything else stays on `provider`.
pub fn route_override(
    provider: &crate::ids::ProviderName,
    model: String,
) -> (crate::ids::ProviderName, String) {
    match model.strip_prefix(ROUTE_PREFIX) {
        Some(rest) if provider.as_str() != PROVIDER_NAME && !rest.is_empty() => {
            match crate::ids::ProviderName::new(PROVIDER_NAME) {
                Ok(direct) => (direct, rest.to_owned()),
                Err(_) => (provider.clone(), model),
            }
        }
        _ => (provider.clone(), model),
    }
}
