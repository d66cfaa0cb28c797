//! The role-binding flags of `run`, `exec` and `resume`: `--role-transport ROLE=PROVIDER` and
//! `--ROLE-provider PROVIDER`, gathered into one map (`run::preflight::bindings` owns their
//! meaning).

use clap::Args;

use crate::error::EdgeError;
use crate::ids::ProviderName;
use crate::role::Role;
use crate::run::preflight::bindings;

/// `--role-transport ROLE=PROVIDER` and `--ROLE-provider PROVIDER` (run, exec and resume).
#[derive(Debug, Args)]
pub struct RoleTransportArgs {
    /// Put ROLE on another registered provider (repeatable); its model flag (`--tester-model`
    /// ...) selects that provider's model, else its route for the role. For a role on Codex, a
    /// `model_providers` entry of Codex's config.toml routes it there (model flag required).
    /// Fixed for the run.
    #[arg(long, value_name = "ROLE=PROVIDER", value_parser = bindings::parse_binding)]
    pub role_transport: Vec<(Role, ProviderName)>,
    /// The requirements gatherer on this provider (`--role-transport requirements=PROVIDER`).
    #[arg(long, value_name = "PROVIDER", value_parser = bindings::parse_provider)]
    pub requirements_provider: Option<ProviderName>,
    /// The planner on this provider (`--role-transport planner=PROVIDER`).
    #[arg(long, value_name = "PROVIDER", value_parser = bindings::parse_provider, visible_alias = "glm-provider")]
    pub planner_provider: Option<ProviderName>,
    /// The plan reviewer on this provider (`--role-transport plan_reviewer=PROVIDER`).
    #[arg(long, value_name = "PROVIDER", value_parser = bindings::parse_provider)]
    pub plan_reviewer_provider: Option<ProviderName>,
    /// The builder on this provider (`--role-transport builder=PROVIDER`).
    #[arg(long, value_name = "PROVIDER", value_parser = bindings::parse_provider, visible_alias = "terra-provider")]
    pub builder_provider: Option<ProviderName>,
    /// The tester on this provider (`--role-transport tester=PROVIDER`).
    #[arg(long, value_name = "PROVIDER", value_parser = bindings::parse_provider, visible_alias = "sol-provider")]
    pub tester_provider: Option<ProviderName>,
    /// The completion reviewer on this provider (`--role-transport completion=PROVIDER`).
    #[arg(long, value_name = "PROVIDER", value_parser = bindings::parse_provider)]
    pub completion_provider: Option<ProviderName>,
    /// The resolver on this provider (`--role-transport resolver=PROVIDER`).
    #[arg(long, value_name = "PROVIDER", value_parser = bindings::parse_provider, visible_alias = "astra-provider")]
    pub resolver_provider: Option<ProviderName>,
}

impl RoleTransportArgs {
    /// Every binding as one map (a role bound to two providers is a usage error).
    pub(super) fn bindings(&self) -> Result<bindings::RoleBindings, EdgeError> {
        let flags = [
            (Role::Requirements, &self.requirements_provider),
            (Role::Planner, &self.planner_provider),
            (Role::PlanReviewer, &self.plan_reviewer_provider),
            (Role::Builder, &self.builder_provider),
            (Role::Tester, &self.tester_provider),
            (Role::CompletionReviewer, &self.completion_provider),
            (Role::Resolver, &self.resolver_provider),
        ]
        .into_iter()
        .filter_map(|(role, p)| p.clone().map(|p| (role, p)));
        bindings::collect(self.role_transport.iter().cloned().chain(flags))
            .map_err(EdgeError::usage)
    }
}
