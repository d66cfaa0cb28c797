use super::*;
use crate::provider::ConfigPaths;
use crate::run::preflight::{Independence, Request, preflight, resolve_routes};

fn registry() -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new(ConfigPaths::under(dir.path()));
    (dir, registry)
}

fn name(s: &str) -> ProviderName {
    ProviderName::new(s).unwrap()
}

fn bound(pairs: &[(Role, &str)]) -> RouteChoice {
    RouteChoice {
        providers: pairs.iter().map(|(r, p)| (*r, name(p))).collect(),
        ..RouteChoice::default()
    }
}

#[test]
fn roles_parse_by_string_kebab_and_code_name() {
    for (text, role) in [
        ("tester", Role::Tester),
        ("sol", Role::Tester),
        ("terra", Role::Builder),
        ("glm", Role::Planner),
        ("astra", Role::Resolver),
        ("completion", Role::CompletionReviewer),
        ("completion_reviewer", Role::CompletionReviewer),
        ("plan-reviewer", Role::PlanReviewer),
        ("requirements", Role::Requirements),
    ] {
        assert_eq!(parse_role(text), Ok(role), "{text}");
    }
    assert_eq!(
        parse_role("reviewer"),
        Err(BindingError::UnknownRole("reviewer".into()))
    );
    assert_eq!(
        parse_binding("sol=claude"),
        Ok((Role::Tester, name("claude")))
    );
    for bad in ["tester", "tester=", "=claude", "tester:claude"] {
        assert_eq!(
            parse_binding(bad),
            Err(BindingError::NotRoleEqualsProvider(bad.into())),
            "{bad}"
        );
    }
    assert!(matches!(
        parse_binding("tester=no/such"),
        Err(BindingError::BadProvider(..))
    ));
}

#[test]
fn a_role_bound_twice_to_different_providers_is_an_error() {
    let same = collect([
        (Role::Tester, name("claude")),
        (Role::Tester, name("claude")),
    ]);
    assert_eq!(same.unwrap().len(), 1);
    let twice = collect([
        (Role::Tester, name("claude")),
        (Role::Tester, name("codex")),
    ]);
    assert!(matches!(
        twice,
        Err(BindingError::Twice {
            role: Role::Tester,
            ..
        })
    ));
}

#[test]
fn a_bound_role_takes_its_providers_route_or_its_model_flag() {
    let (_dir, registry) = registry();
    let codex = registry.resolve_name("codex").unwrap();
    let claude = registry.resolve_name("claude").unwrap();
    let mut choice = bound(&[(Role::Tester, "claude")]);
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    bind_routes(&registry, &Env::new(), &mut routes, &choice).unwrap();
    let claude_sol = claude.config.route(Role::Tester).unwrap();
    assert_eq!(routes[&Role::Tester].provider.as_str(), "claude");
    assert_eq!(routes[&Role::Tester].model, claude_sol.model);
    assert_eq!(routes[&Role::Tester].effort, claude_sol.effort);
    assert_eq!(routes[&Role::Builder].provider.as_str(), "codex");
    // The role's model flag selects the bound provider's model.
    choice.models.insert(Role::Tester, "claude-opus-5-5".into());
    choice.efforts.insert(Role::Tester, "low".into());
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    bind_routes(&registry, &Env::new(), &mut routes, &choice).unwrap();
    assert_eq!(routes[&Role::Tester].provider.as_str(), "claude");
    assert_eq!(routes[&Role::Tester].model, "claude-opus-5-5");
    assert_eq!(routes[&Role::Tester].effort.as_deref(), Some("low"));
}

#[test]
fn unknown_providers_and_single_model_are_clear_errors() {
    let (_dir, registry) = registry();
    let codex = registry.resolve_name("codex").unwrap();
    let choice = bound(&[(Role::Tester, "nosuchtool")]);
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    let Err(PreflightError::Provider(message)) =
        bind_routes(&registry, &Env::new(), &mut routes, &choice)
    else {
        panic!("an unknown provider is refused");
    };
    assert!(message.contains("tester=nosuchtool"), "{message}");
    let mut choice = bound(&[(Role::Tester, "claude")]);
    choice.single_model = Some("one".into());
    let Err(PreflightError::Routes(message)) =
        bind_routes(&registry, &Env::new(), &mut routes, &choice)
    else {
        panic!("--single-model with a binding is refused");
    };
    assert!(message.contains("tester=claude"), "{message}");
    // The direct runtime has no default routes: its model must be named.
    let choice = bound(&[(Role::Tester, crate::direct::PROVIDER_NAME)]);
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    let Err(PreflightError::Routes(message)) =
        bind_routes(&registry, &Env::new(), &mut routes, &choice)
    else {
        panic!("a provider without a route for the role needs the model flag");
    };
    assert!(message.contains("--tester-model"), "{message}");
}

fn request(choice: RouteChoice) -> Request {
    Request {
        provider: Some("codex".into()),
        choice,
        auto_select: true,
        scripted_local: false,
        workspace: std::env::temp_dir(),
        canaries: crate::direct::readiness::CanaryMode::Cached,
    }
}

#[test]
fn the_automatic_move_takes_no_bound_verifier() {
    let (_dir, registry) = registry();
    let codex = registry.resolve_name("codex").unwrap();
    let choice = bound(&[(Role::Tester, "codex")]);
    let routes = resolve_routes(&codex, &choice).unwrap();
    let pairs = crate::run::preflight::violating_pairs(&routes, &Default::default());
    assert_eq!(pairs.len(), 3, "{pairs:?}");
    assert_eq!(
        crate::run::preflight::movable_verifiers(&pairs, &choice),
        [Role::PlanReviewer, Role::CompletionReviewer]
    );
}

#[tokio::test]
async fn an_explicit_binding_is_never_moved_and_a_violation_names_it() {
    let (_dir, registry) = registry();
    // Nothing installed: the automatic move finds no candidate, the routes stay as resolved.
    let env = crate::provider::registry::Env::new();
    // The tester bound to codex itself: on the builder's family, and not movable.
    let checked = preflight(&registry, &env, &request(bound(&[(Role::Tester, "codex")])))
        .await
        .unwrap();
    assert_eq!(checked.routes[&Role::Tester].provider.as_str(), "codex");
    let Independence::Violated { pairs } = &checked.independence else {
        panic!("the bound tester checks the builder on its own family");
    };
    assert!(
        pairs
            .iter()
            .any(|p| p.starts_with("tester") && p.contains("openai")),
        "{pairs:?}"
    );
    let text = checked.problems_text();
    assert!(text.contains("--role-transport tester=codex"), "{text}");
    assert!(text.contains("never moved"), "{text}");
    // Bound to claude, the tester is independent of the codex builder and its provider is
    // checked by the preflight too.
    let checked = preflight(
        &registry,
        &env,
        &request(bound(&[(Role::Tester, "claude")])),
    )
    .await
    .unwrap();
    assert_eq!(checked.routes[&Role::Tester].provider.as_str(), "claude");
    assert!(
        checked.checks.iter().any(|c| c.provider == "claude"),
        "{:?}",
        checked.checks
    );
    let Independence::Violated { pairs } = &checked.independence else {
        panic!("the plan and completion reviewers stay on codex's family");
    };
    assert!(!pairs.iter().any(|p| p.starts_with("tester")), "{pairs:?}");
}

#[test]
fn a_changed_binding_at_resume_is_refused_and_the_same_one_is_not() {
    let saved: RoleBindings = [(Role::Tester, name("claude"))].into_iter().collect();
    assert_eq!(changed_binding(&saved, &RoleBindings::new()), None);
    assert_eq!(changed_binding(&saved, &saved.clone()), None);
    let other: RoleBindings = [(Role::Tester, name("codex"))].into_iter().collect();
    let text = changed_binding(&saved, &other).unwrap();
    assert!(
        text.contains("tester=claude") && text.contains("tester=codex"),
        "{text}"
    );
    let text = changed_binding(&RoleBindings::new(), &other).unwrap();
    assert!(text.contains("runs with none"), "{text}");
}

fn codex_home(config: &str) -> (tempfile::TempDir, Env) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    let env: Env = [("CODEX_HOME".into(), dir.path().as_os_str().to_owned())]
        .into_iter()
        .collect();
    (dir, env)
}

#[test]
fn a_codex_model_provider_keeps_the_role_on_codex_and_routes_it_there() {
    let (_dir, registry) = registry();
    let codex = registry.resolve_name("codex").unwrap();
    let (_home, env) = codex_home(
        "model = \"gpt-5\"\n[model_providers.other_provider]\nname = \"Other\"\nbase_url = \"http://127.0.0.1:1/v1\"\nwire_api = \"responses\"\n",
    );
    let mut choice = bound(&[(Role::Tester, "other_provider")]);
    choice.models.insert(Role::Tester, "audit-model".into());
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    bind_routes(&registry, &env, &mut routes, &choice).unwrap();
    let tester = &routes[&Role::Tester];
    assert_eq!(tester.provider.as_str(), "codex");
    assert_eq!(tester.model, "audit-model");
    assert_eq!(
        tester.codex_model_provider.as_deref(),
        Some("other_provider")
    );
    assert_eq!(routes[&Role::Builder].codex_model_provider, None);
    // Without the role's model flag the login's default model would be sent to that provider.
    let choice = bound(&[(Role::Tester, "other_provider")]);
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    let Err(PreflightError::Routes(message)) = bind_routes(&registry, &env, &mut routes, &choice)
    else {
        panic!("a Codex model provider needs the role's model flag");
    };
    assert!(message.contains("--tester-model"), "{message}");
}

#[test]
fn a_name_that_is_neither_a_provider_nor_a_codex_model_provider_says_what_codex_has() {
    let (_dir, registry) = registry();
    let codex = registry.resolve_name("codex").unwrap();
    let (_home, env) = codex_home("[model_providers.mine]\nname = \"Mine\"\n");
    let choice = bound(&[(Role::Tester, "theirs")]);
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    let Err(PreflightError::Provider(message)) = bind_routes(&registry, &env, &mut routes, &choice)
    else {
        panic!("an unknown name is refused");
    };
    assert!(message.contains("tester=theirs"), "{message}");
    assert!(message.contains("(mine)"), "{message}");
    // A broken Codex config is named, not read as empty.
    let (_home, env) = codex_home("[model_providers\n");
    let mut routes = resolve_routes(&codex, &choice).unwrap();
    let Err(PreflightError::Provider(message)) = bind_routes(&registry, &env, &mut routes, &choice)
    else {
        panic!("an unknown name is refused");
    };
    assert!(message.contains("does not parse"), "{message}");
    // A role that does not run on Codex never reads Codex's model providers.
    let claude = registry.resolve_name("claude").unwrap();
    let (_home, env) = codex_home("[model_providers.theirs]\nname = \"T\"\n");
    let mut routes = resolve_routes(&claude, &choice).unwrap();
    assert!(matches!(
        bind_routes(&registry, &env, &mut routes, &choice),
        Err(PreflightError::Provider(_))
    ));
}
