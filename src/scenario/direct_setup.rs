//! A `scripted-direct*` job's setup: the job's scripted model becomes the one direct endpoint
//! (`scripted`) of the job's throwaway home, speaking the job's protocol, the way `autocode demo
//! --provider autocode` sets it up (`crate::direct::scripted`). Every role then runs on
//! autocode's own runtime (`--provider autocode`) with the route `scripted/mock-model`.
//!
//! Invariant: the endpoint's files go under the job's `XDG_CONFIG_HOME`, never the harness's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::profile::Profile;
use super::runner::SCRIPTED_MODEL;
use crate::direct::protocol::Protocol;
use crate::direct::scripted::{self, SCRIPTED_ENDPOINT};
use crate::scripted_model::RunningServer;

/// The model family the scripted endpoint declares (one model plays every role; the harness
/// waives independence with `--single-model`, as on the CLI profiles).
pub const SCRIPTED_FAMILY: &str = "mock";

/// The route every role of a direct job uses.
pub fn model_route() -> String {
    format!("{SCRIPTED_ENDPOINT}/{SCRIPTED_MODEL}")
}

/// Writes the scripted endpoint for job `(case, repeat)` of `profile` into the direct
/// connections under the job environment's `XDG_CONFIG_HOME`; returns the protocol it speaks.
pub fn configure(
    profile: &Profile,
    case: &str,
    repeat: u32,
    env: &BTreeMap<String, String>,
    server: &RunningServer,
) -> Result<Protocol, String> {
    let protocol = profile
        .direct_protocol(case, repeat)
        .ok_or_else(|| format!("profile {profile} does not run autocode's own runtime"))?;
    let config_home = env
        .get("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .ok_or("the job environment has no absolute XDG_CONFIG_HOME")?;
    scripted::configure(
        server,
        &config_home,
        protocol,
        &[(SCRIPTED_MODEL, SCRIPTED_FAMILY)],
    )
    .map_err(|e| format!("{}: {e}", config_home.display()))?;
    Ok(protocol)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::direct::connections::{Connections, dir_under};
    use crate::scenario::profile::DirectWire;
    use crate::scripted_model::{Script, ScriptSyntax, ScriptedServer, ServerConfig};

    #[tokio::test]
    async fn the_endpoint_lands_in_the_job_home_speaking_the_job_protocol() {
        let script = Script::parse(
            r#"{"conversation": [{"name": "c", "step": [{"kind": "text", "text": "hi"}]}]}"#,
            ScriptSyntax::Json,
            Path::new("s.json"),
        )
        .unwrap();
        let server = ScriptedServer::start(ServerConfig::new(script))
            .await
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        let config_home = home.path().join(".config");
        let env: BTreeMap<String, String> = [(
            "XDG_CONFIG_HOME".to_owned(),
            config_home.display().to_string(),
        )]
        .into_iter()
        .collect();
        let profile = Profile::ScriptedDirect(DirectWire::AnthropicMessages);
        let protocol = configure(&profile, "case", 0, &env, &server).unwrap();
        assert_eq!(protocol, Protocol::AnthropicMessages);
        let connections = Connections::load(&dir_under(&config_home)).unwrap();
        let endpoint = connections.endpoint(SCRIPTED_ENDPOINT).unwrap();
        assert_eq!(endpoint.protocol, Protocol::AnthropicMessages);
        assert_eq!(endpoint.models[0].id, SCRIPTED_MODEL);
        assert!(endpoint.base_url.starts_with(&server.base_url()));
        assert_eq!(model_route(), "scripted/mock-model");
        // Not a direct profile, or no home to write into: a clear error, nothing written.
        assert!(configure(&Profile::ScriptedCodex, "case", 0, &env, &server).is_err());
        assert!(configure(&profile, "case", 0, &BTreeMap::new(), &server).is_err());
        server.shutdown().await;
    }
}
