//! What `resume` re-checks before it launches anything: the providers a saved run's routes use,
//! verifier independence of those routes, and, when the transport identity changed, what
//! exactly changed (old and new), for the `PAUSED_TRANSPORT_CHANGED` message.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::ids::ProviderName;
use crate::run::state::RunState;
use crate::transport::identity::{self, ConfigDigest, IdentityChange, TransportIdentity};

/// Every provider the run's routes (and the stronger attempt's overrides) use, the run's own
/// first.
pub fn route_providers(state: &RunState) -> Vec<ProviderName> {
    let mut out = vec![state.provider.clone()];
    for route in state.routes.values().chain(state.route_overrides.values()) {
        if !out.contains(&route.provider) {
            out.push(route.provider.clone());
        }
    }
    out
}

/// Why the run's routes may not run: verifiers on the family they check while independence
/// was not waived. `None`: independent (or waived).
pub fn independence_violation(state: &RunState, families: &super::Families) -> Option<String> {
    if state.independence_waived {
        return None;
    }
    let pairs = super::cross_model_violations(&state.routes, families);
    (!pairs.is_empty()).then(|| {
        format!(
            "a verifier runs on the same model family as what it checks: {}; the routes of a run are fixed, so it cannot continue: start a new run (preflight puts the verifiers on another installed, signed-in provider, or explains --single-model)",
            pairs.join("; ")
        )
    })
}

fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

fn digest_text(d: Option<&ConfigDigest>) -> String {
    match d {
        None => "not recorded".into(),
        Some(ConfigDigest::Absent) => "absent".into(),
        Some(ConfigDigest::Sha256 { hex }) => format!("sha256 {}", short(hex)),
        Some(ConfigDigest::Unreadable { error }) => format!("unreadable ({error})"),
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "none".into())
}

/// One change, old → new, for people.
pub fn change_text(change: &IdentityChange) -> String {
    match change {
        IdentityChange::Transport { old, new } => format!("transport {old} -> {new}"),
        IdentityChange::Executable { old, new } => format!(
            "executable {} -> {}",
            opt(old.as_ref().map(|p| p.display())),
            opt(new.as_ref().map(|p| p.display()))
        ),
        IdentityChange::Version { old, new } => {
            format!("version {} -> {}", opt(old.as_ref()), opt(new.as_ref()))
        }
        IdentityChange::LaunchPolicy => {
            "autocode's launch policy for it (autocode itself was upgraded)".into()
        }
        IdentityChange::Config { label, old, new } => format!(
            "config {label}: {} -> {}",
            digest_text(old.as_ref()),
            digest_text(new.as_ref())
        ),
        IdentityChange::Env { name } => {
            format!("environment variable {name} (its value is not shown)")
        }
    }
}

/// What changed between the recorded identities and the current ones, one line per change,
/// each naming its provider.
pub fn transport_changes(
    old: &BTreeMap<String, Value>,
    new: &BTreeMap<String, Value>,
) -> Vec<String> {
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        let (Some(a), Some(b)) = (old.get(name), new.get(name)) else {
            out.push(if old.contains_key(name) {
                format!("{name}: recorded when the run started, no longer used")
            } else {
                format!("{name}: not recorded when the run started")
            });
            continue;
        };
        if a == b {
            continue;
        }
        let (fa, fb) = (
            a["provider_fingerprint"].as_str().unwrap_or_default(),
            b["provider_fingerprint"].as_str().unwrap_or_default(),
        );
        if fa != fb {
            out.push(format!(
                "{name}: provider configuration fingerprint {} -> {}",
                short(fa),
                short(fb)
            ));
        }
        let ta = serde_json::from_value::<TransportIdentity>(a["transport"].clone());
        let tb = serde_json::from_value::<TransportIdentity>(b["transport"].clone());
        match (ta, tb) {
            (Ok(ta), Ok(tb)) => {
                out.extend(
                    identity::compare(&ta, &tb)
                        .iter()
                        .map(|c| format!("{name}: {}", change_text(c))),
                );
            }
            _ if a["transport"] != b["transport"] => {
                out.push(format!("{name}: the recorded identity is not readable"));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ident(version: &str, config: &str) -> Value {
        json!({
            "provider_fingerprint": "ab".repeat(32),
            "transport": {
                "transport": "codex",
                "executable": "/usr/bin/codex",
                "version": version,
                "launch_policy": null,
                "configs": {"codex_config": {"state": "sha256", "hex": config}},
                "env": {"CODEX_HOME": null}
            }
        })
    }

    #[test]
    fn changes_name_old_and_new() {
        let old = BTreeMap::from([("codex".to_owned(), ident("0.169.0", &"11".repeat(32)))]);
        let new = BTreeMap::from([("codex".to_owned(), ident("0.170.1", &"22".repeat(32)))]);
        assert_eq!(
            transport_changes(&old, &new),
            [
                "codex: version 0.169.0 -> 0.170.1",
                "codex: config codex_config: sha256 111111111111 -> sha256 222222222222",
            ]
        );
        assert!(transport_changes(&old, &old).is_empty());
        let added = BTreeMap::from([
            ("codex".to_owned(), ident("0.169.0", &"11".repeat(32))),
            ("claude".to_owned(), json!({})),
        ]);
        assert_eq!(
            transport_changes(&old, &added),
            ["claude: not recorded when the run started"]
        );
    }
}
