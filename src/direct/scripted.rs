//! Pointing the direct runtime at the scripted model server (the demo and the tests): one
//! endpoint named [`SCRIPTED_ENDPOINT`] on the server's loopback address, speaking the chosen
//! protocol, with the demo's two model families and a dummy key (stored like a real one).

use std::path::Path;

use super::connections::{
    Connections, ConnectionsError, Endpoint, EndpointKind, EndpointModel, dir_under,
};
use super::http::Secret;
use super::protocol::Protocol;
use crate::scripted_model::RunningServer;

/// The endpoint's name (route models are `scripted/MODEL`).
pub const SCRIPTED_ENDPOINT: &str = "scripted";

/// Writes the scripted endpoint into the direct connections under `config_home`
/// (`$XDG_CONFIG_HOME`), serving `models` as (id, family).
pub fn configure(
    server: &RunningServer,
    config_home: &Path,
    protocol: Protocol,
    models: &[(&str, &str)],
) -> Result<(), ConnectionsError> {
    let (kind, base_url) = match protocol {
        Protocol::AnthropicMessages => {
            (EndpointKind::Anthropic, format!("{}/v1", server.base_url()))
        }
        _ => (EndpointKind::OpenaiCompatible, server.openai_base_url()),
    };
    let mut connections = Connections::load(&dir_under(config_home))?;
    connections.save_endpoint(
        Endpoint {
            name: SCRIPTED_ENDPOINT.into(),
            kind,
            base_url,
            protocol,
            token_field: kind.default_token_field(),
            stream: true,
            max_output_tokens: None,
            models: models
                .iter()
                .map(|(id, family)| EndpointModel {
                    id: (*id).into(),
                    family: (*family).into(),
                })
                .collect(),
        },
        Some(Secret::new("scripted-model")),
    )
}
