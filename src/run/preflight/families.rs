//! The model family of a route, for the cross-model (independence) rule: a route on autocode's
//! own runtime (`ENDPOINT/MODEL`, or `autocode:ENDPOINT/MODEL` on another provider) has the
//! family its endpoint declares (`connections setup --model ID=FAMILY`); every other route, and
//! a direct route whose model is not configured, has the family inferred from the model's name
//! (`crate::provider::family_of`).

use std::collections::BTreeMap;

use crate::direct::connections::{self, Connections};
use crate::provider::{Family, RouteSpec, declared_family, family_of};
use crate::role::Role;
use crate::transport::Route;

/// The direct connections' declared families (none when they do not load: inference only).
#[derive(Debug, Clone, Default)]
pub struct Families {
    connections: Option<Connections>,
}

impl Families {
    /// The declared families of the direct connections an environment names
    /// (`$XDG_CONFIG_HOME`, else `$HOME/.config`).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Families {
        Families {
            connections: connections::dir_from_env(get)
                .and_then(|dir| Connections::load(&dir))
                .ok(),
        }
    }

    /// The family of `route`.
    pub fn of(&self, route: &Route) -> Family {
        if route.provider.as_str() == crate::direct::PROVIDER_NAME
            && let Some(resolved) = self
                .connections
                .as_ref()
                .and_then(|c| c.resolve(&route.model).ok())
        {
            return declared_family(&resolved.model.family);
        }
        family_of(&route.model)
    }

    /// The verifier pairs of `routes` on one family.
    pub fn same_family_pairs(
        &self,
        routes: &BTreeMap<Role, Route>,
    ) -> Vec<crate::provider::SameFamilyPair> {
        let specs: BTreeMap<Role, RouteSpec> = routes
            .iter()
            .map(|(role, r)| (*role, RouteSpec::new(&r.model, r.effort.as_deref())))
            .collect();
        crate::provider::same_family_pairs_with(&specs, |role, _| match routes.get(&role) {
            Some(route) => self.of(route),
            None => Family::Other("unknown".into()),
        })
    }
}

/// The families of an [`Env`](crate::provider::registry::Env).
pub fn from_os_env(env: &crate::provider::registry::Env) -> Families {
    Families::from_env(|name| {
        env.get(&std::ffi::OsString::from(name))
            .and_then(|v| v.to_str().map(str::to_owned))
    })
}
