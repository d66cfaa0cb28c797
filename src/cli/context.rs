//! What every command derives from autocode's own environment: the registry over the user's
//! config paths, the agents' filtered environment (probes see exactly what a stage would), and a
//! neutral directory for probes (tools such as OpenCode read project config from their cwd).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use crate::agent_env::{self, AgentEnvironment};
use crate::error::EdgeError;
use crate::provider::registry::Env;
use crate::provider::{ConfigPaths, ProbeContext, Registry, ResolvedProvider};

/// How long a version, models, auth or status probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

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

    pub fn var(&self, name: &str) -> Option<String> {
        self.env
            .get(&OsString::from(name))
            .map(|v| v.to_string_lossy().into_owned())
    }

    /// The environment agents (and probes) of `provider` see.
    pub fn agent_env(&self, provider: Option<&ResolvedProvider>) -> AgentEnvironment {
        let forbid: Vec<String> = provider
            .and_then(|p| p.config.auth.as_ref())
            .map(|a| a.forbid_env.clone())
            .unwrap_or_default();
        let pass = self.var(agent_env::PASS_ENV_VAR);
        agent_env::agent_environment_os(
            self.env.iter().map(|(k, v)| (k.clone(), v.clone())),
            &forbid,
            pass.as_deref(),
        )
    }

    /// A probe context with the agents' environment of `provider`.
    pub fn probe_context(&self, provider: Option<&ResolvedProvider>) -> ProbeContext {
        let env = self.agent_env(provider);
        ProbeContext {
            env: to_os_env(&env.kept),
            cwd: std::env::temp_dir(),
            timeout: PROBE_TIMEOUT,
        }
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
