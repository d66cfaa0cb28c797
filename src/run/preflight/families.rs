//! The model family of a route, for the cross-model (independence) rule: a route on autocode's
//! own runtime (`ENDPOINT/MODEL`, or `autocode:ENDPOINT/MODEL` on another provider) has the
//! family its endpoint declares (`connections setup --model ID=FAMILY`); every other route, and
//! a direct route whose model is not configured, has the family inferred from the model's name
//! (`crate::provider::family_of`), or, when no vendor word names it, the family the model
//! catalogue gives it (`crate::models`: built in, with the user's `models.toml` merged).

use std::collections::BTreeMap;

use crate::direct::connections::{self, Connections};
use crate::provider::{Family, RouteSpec, declared_family, family_of};
use crate::role::Role;
use crate::transport::Route;

/// The direct connections' declared families (none when they do not load: inference only) and
/// the model catalogue's (empty by default).
#[derive(Debug, Clone, Default)]
pub struct Families {
    connections: Option<Connections>,
    catalogue: crate::models::Catalogue,
}

impl Families {
    /// The declared families of the direct connections an environment names
    /// (`$XDG_CONFIG_HOME`, else `$HOME/.config`).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Families {
        let file = crate::models::user_file(&get);
        // A malformed user catalogue is reported by the commands that show it; here the
        // built-in one still names families.
        let catalogue = crate::models::Catalogue::load(file.as_deref()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "model catalogue: using the built-in one");
            crate::models::Catalogue::builtin()
        });
        Families {
            connections: connections::dir_from_env(get)
                .and_then(|dir| Connections::load(&dir))
                .ok(),
            catalogue,
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
        match family_of(&route.model) {
            // No vendor word names it: the catalogue may (`devstral-small` is Mistral's).
            Family::Other(guess) => self
                .catalogue
                .entry_for(&route.model)
                .map(|entry| declared_family(&entry.family))
                .unwrap_or(Family::Other(guess)),
            known => known,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn route(provider: &str, model: &str) -> Route {
        Route {
            provider: crate::ids::ProviderName::new(provider).unwrap(),
            model: model.into(),
            effort: None,
            codex_model_provider: None,
        }
    }

    #[test]
    fn the_catalogue_names_a_family_no_vendor_word_does() {
        let with = Families {
            connections: None,
            catalogue: crate::models::Catalogue::builtin(),
        };
        let without = Families::default();
        let devstral = route("opencode", "ollama/devstral-small-2505");
        assert_eq!(with.of(&devstral), Family::Other("mistral".into()));
        assert_eq!(without.of(&devstral), Family::Other("devstral".into()));
        // A vendor word still decides where there is one.
        let qwen = route("opencode", "ollama/qwen2.5-coder-7b");
        assert_eq!(with.of(&qwen), Family::Qwen);
        assert_eq!(with.of(&route("codex", "gpt-oss-20b")), Family::OpenAi);
    }

    #[test]
    fn a_users_catalogue_entry_gives_its_model_a_family() {
        let dir = tempfile::tempdir().unwrap();
        let autocode = dir.path().join("autocode");
        std::fs::create_dir_all(&autocode).unwrap();
        std::fs::write(
            autocode.join("models.toml"),
            "[[model]]\nid = \"acme-coder\"\nfamily = \"qwen\"\ncontext_window = 8\noutput_cap = 8\ntool_calls = true\n",
        )
        .unwrap();
        let config = dir.path().display().to_string();
        let families = Families::from_env(|k| (k == "XDG_CONFIG_HOME").then(|| config.clone()));
        assert_eq!(families.of(&route("opencode", "acme-coder")), Family::Qwen);
    }
}
