//! The provider registry: built-in, bundled and user provider configurations, their validation,
//! placeholder expansion, model families, the cross-model check and the probes.
//!
//! Owns: the provider TOML format ([`config`]), command templates ([`template`]), model families
//! ([`family`]), verifier pairs on one family ([`cross_model`]), lookup and listing
//! ([`registry`]) and version/models/auth/connection probes ([`probe`]).
//! Invariants: a configuration handed out has been validated; files inside a project or
//! workspace are never loaded (the registry only reads the explicit paths it is given); the
//! names `opencode`, `claude` and `codex` always mean the built-ins. Design: `docs/providers-registry.md`.

pub mod builtin;
pub mod config;
pub mod cross_model;
pub mod family;
#[cfg(test)]
mod fixture_tests;
pub mod location;
pub mod probe;
pub mod registry;
pub mod template;

pub use config::{
    AuthConfig, AuthRoute, Billing, BuilderRetry, ConfigError, ConfigErrorDetail, ConfigProblem,
    ConfigWarning, ConfineConfig, ConnectionConfig, Expanded, LoadedConfig, LoadsConfig,
    ModelListing, OutputMode, PromptMode, ProviderConfig, RouteSpec, SandboxAdapter,
    WritableSyntax, check_writable, expand_writable, load_config,
};
pub use cross_model::{SameFamilyPair, same_family_pairs, same_family_pairs_with};
pub use family::{Family, declared_family, family_of};
pub use probe::{
    AuthReport, ConnectionStatus, ModelsReport, ProbeContext, ProbeError, check_auth,
    connection_status, evaluate_auth, probe_models, probe_version, resolve_on_path,
};
pub use registry::{
    ConfigPaths, ConfigSource, DefaultProvider, DefaultSource, IgnoredConfig, IgnoredReason,
    LoadStatus, ProviderKind, ProviderListing, Registry, RegistryError, ResolvedProvider,
};
pub use template::{ExpandError, Placeholder, TemplateValues, expand};
