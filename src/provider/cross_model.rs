//! The cross-model check: verifier roles whose model is on the same family as what they check.
//!
//! This is information, not a verdict: loading reports the pairs; a run's preflight
//! (`crate::run::preflight`) moves the verifiers to another provider or refuses to start, and a
//! resume pauses `PAUSED_CROSS_MODEL`, unless the user waived independence. The pairs are exactly
//! [`Role::VERIFIER_PAIRS`], in that order.

use std::collections::BTreeMap;

use serde::Serialize;

use super::config::RouteSpec;
use super::family::{Family, family_of};
use crate::role::Role;

/// A verifier and the role it checks, both on `family`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SameFamilyPair {
    pub verifier: Role,
    pub verifier_model: String,
    pub checked: Role,
    pub checked_model: String,
    pub family: Family,
}

/// The verifier pairs of `routes` that share a model family (inferred from the model names).
/// Roles without a route are skipped.
pub fn same_family_pairs(routes: &BTreeMap<Role, RouteSpec>) -> Vec<SameFamilyPair> {
    same_family_pairs_with(routes, |_, route| family_of(&route.model))
}

/// [`same_family_pairs`] with each role's family from `family` (a direct route's declared one).
pub fn same_family_pairs_with(
    routes: &BTreeMap<Role, RouteSpec>,
    family: impl Fn(Role, &RouteSpec) -> Family,
) -> Vec<SameFamilyPair> {
    Role::VERIFIER_PAIRS
        .iter()
        .filter_map(|(verifier, checked)| {
            let verifier_route = routes.get(verifier)?;
            let checked_route = routes.get(checked)?;
            let verifier_family = family(*verifier, verifier_route);
            (verifier_family == family(*checked, checked_route)).then(|| SameFamilyPair {
                verifier: *verifier,
                verifier_model: verifier_route.model.clone(),
                checked: *checked,
                checked_model: checked_route.model.clone(),
                family: verifier_family,
            })
        })
        .collect()
}

impl std::fmt::Display for SameFamilyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}) checks {} ({}) on the same model family `{}`",
            self.verifier,
            self.verifier_model,
            self.checked,
            self.checked_model,
            self.family.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(pairs: &[(Role, &str)]) -> BTreeMap<Role, RouteSpec> {
        pairs
            .iter()
            .map(|(role, model)| (*role, RouteSpec::new(model, None)))
            .collect()
    }

    #[test]
    fn pairs_table() {
        use Role::*;
        type Case<'a> = (Vec<(Role, &'a str)>, Vec<(Role, Role, &'a str)>);
        let cases: Vec<Case> = vec![
            // independent everywhere
            (
                vec![
                    (Planner, "zhipuai-coding-plan/glm-5.3"),
                    (PlanReviewer, "openai/gpt-6-sol"),
                    (Builder, "zhipuai-coding-plan/glm-5.3"),
                    (Tester, "openai/gpt-6-sol"),
                    (CompletionReviewer, "openai/gpt-6-sol"),
                ],
                vec![],
            ),
            // all gpt: every pair reported, in VERIFIER_PAIRS order
            (
                vec![
                    (Planner, "gpt-6-luna"),
                    (PlanReviewer, "gpt-6-sol"),
                    (Builder, "gpt-6-terra"),
                    (Tester, "gpt-6-sol"),
                    (CompletionReviewer, "openai/gpt-6-sol"),
                ],
                vec![
                    (PlanReviewer, Planner, "openai"),
                    (Tester, Builder, "openai"),
                    (CompletionReviewer, Builder, "openai"),
                ],
            ),
            // one login, several vendors: qwen builder, deepseek tester is fine
            (
                vec![
                    (Builder, "alibaba-token-plan/qwen3.8-max"),
                    (Tester, "alibaba-token-plan/deepseek-v4"),
                    (CompletionReviewer, "alibaba-token-plan/qwen3.7-plus"),
                ],
                vec![(CompletionReviewer, Builder, "qwen")],
            ),
            // a missing route is not a pair
            (vec![(Tester, "claude-opus-5-5")], vec![]),
        ];
        for (input, want) in cases {
            let got: Vec<_> = same_family_pairs(&routes(&input))
                .into_iter()
                .map(|p| (p.verifier, p.checked, p.family.as_str().to_owned()))
                .collect();
            let want: Vec<_> = want
                .into_iter()
                .map(|(v, c, f)| (v, c, f.to_owned()))
                .collect();
            assert_eq!(got, want, "{input:?}");
        }
    }

    #[test]
    fn pairs_carry_both_models() {
        let pairs = same_family_pairs(&routes(&[
            (Role::Builder, "claude-haiku-4-5-20251001"),
            (Role::Tester, "claude-sonnet-5-5"),
        ]));
        let json = serde_json::to_value(&pairs).unwrap();
        assert_eq!(
            json,
            serde_json::json!([{
                "verifier": "tester",
                "verifier_model": "claude-sonnet-5-5",
                "checked": "builder",
                "checked_model": "claude-haiku-4-5-20251001",
                "family": "anthropic"
            }])
        );
    }
}
