//! What every command derives from autocode's own environment: the registry over the user's
//! config paths, the agents' filtered environment (probes see exactly what a stage would), and a
//! neutral directory for probes (tools such as OpenCode read project config from their cwd).

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::agent_env::AgentEnvironment;
use crate::error::EdgeError;
use crate::provider::registry::Env;
use crate::provider::{ConfigPaths, ProbeContext, Registry, ResolvedProvider};
use crate::run::preflight::provider_check;

/// How long a version, models, auth or status probe may take.
pub use crate::run::preflight::provider_check::PROBE_TIMEOUT;

pub struct Context {
    /// autocode's own environment, as it was given.
    pub env: Env,
    pub registry: Registry,
}

impl Context {
    pub fn from_process() -> Result<Self, EdgeError> {
        Self::new(std::env::vars_os().collect())
    }

    pub fn new(env: Env) -> Result<Self, EdgeError> {
        let paths = ConfigPaths::from_env(&env).map_err(EdgeError::usage)?;
        Ok(Self {
            env,
            registry: Registry::new(paths),
        })
    }

    /// The environment agents (and probes) of `provider` see.
    pub fn agent_env(&self, provider: Option<&ResolvedProvider>) -> AgentEnvironment {
        provider_check::agent_env(&self.env, provider)
    }

    /// A probe context with the agents' environment of `provider`.
    pub fn probe_context(&self, provider: Option<&ResolvedProvider>) -> ProbeContext {
        provider_check::probe_context(&self.env, provider)
    }

    /// The provider named on the command line, or the default one.
    pub fn resolve(&self, name: Option<&str>) -> Result<ResolvedProvider, EdgeError> {
        let name = match name {
            Some(name) => name.to_owned(),
            None => self
                .registry
                .default_provider(&self.env)
                .map_err(EdgeError::usage)?
                .name
                .to_string(),
        };
        self.registry.resolve_name(&name).map_err(|e| {
            EdgeError::usage(e)
                .hint("`autocode providers list` shows every provider and its source")
        })
    }

    pub fn path_var(&self) -> OsString {
        self.env
            .get(&OsString::from("PATH"))
            .cloned()
            .unwrap_or_default()
    }
}

pub fn to_os_env(map: &BTreeMap<String, String>) -> Env {
    map.iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}
