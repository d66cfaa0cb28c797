//! `autocode`'s own agent runtime ("direct connections"): the reserved built-in provider
//! `autocode` talks to OpenAI Chat Completions, OpenAI Responses and Anthropic Messages endpoints
//! itself, and runs the model's tool calls itself, under the process boundary and the stage's
//! room.
//!
//! Sub-modules: [`connections`] (named endpoints, keys, the transport identity), [`http`] (the
//! HTTP client: HTTPS except loopback, no redirects, bounded reads, typed failures),
//! [`protocol`] (the three wire formats), [`preflight`] (an endpoint model's readiness), [`tools`] (what a role is offered and how each call
//! runs), [`runtime`] (one stage's loop and its bounds), [`scripted`] (an endpoint on the scripted model server). The stage attempt that uses them, and the
//! mapping of failures to pause codes, is `run::runner::direct` (same artifacts and judgement as
//! a CLI's attempt). This module depends on `events`, `report` and `supervise` only. Design: `docs/direct.md`.

pub mod connections;
pub mod http;
pub mod preflight;
pub mod protocol;
pub mod runtime;
pub mod scripted;
pub mod tools;

/// The reserved provider name.
pub const PROVIDER_NAME: &str = "autocode";
