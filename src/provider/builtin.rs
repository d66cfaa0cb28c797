//! The built-in providers (`opencode`, `codex`, `claude`) as data, and the bundled TOML files.
//!
//! Built-in command templates are descriptive: the built-in transports own their exact argv (the
//! claude transport inlines the schema, codex resumes with its `exec resume` subcommand). The
//! data here is what `providers show` prints, what fingerprints hash, and where role defaults
//! come from. Invariant (tested): every built-in passes `validate_config` as `Origin::Builtin`
//! and every bundled file loads with zero warnings.

use std::collections::BTreeMap;

use super::config::{
    BuilderRetry, ConfineConfig, ConnectionConfig, OutputMode, PromptMode, ProviderConfig,
    RouteSpec,
};
use crate::ids::ProviderName;
use crate::role::RoleKey;

/// The built-in provider names, in listing order. These names are reserved: a user file with
/// one of them is never read.
pub const BUILTIN_NAMES: [&str; 4] = ["opencode", "codex", "claude", "autocode"];

/// The bundled provider files: (name, TOML text), compiled in.
pub const BUNDLED: [(&str, &str); 3] = [
    (
        "codex_receipts",
        include_str!("../../providers/codex_receipts.toml"),
    ),
    ("gocode", include_str!("../../providers/gocode.toml")),
    ("kilocode", include_str!("../../providers/kilocode.toml")),
];

/// The text of the bundled file `providers/NAME.toml`.
pub fn bundled_text(name: &str) -> Option<&'static str> {
    BUNDLED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// The source label of a bundled file (`bundled:providers/NAME.toml`).
pub fn bundled_label(name: &str) -> String {
    format!("bundled:providers/{name}.toml")
}

fn argv(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

fn roles(entries: &[(RoleKey, &str, &str)]) -> BTreeMap<RoleKey, RouteSpec> {
    entries
        .iter()
        .map(|(key, model, effort)| (*key, RouteSpec::new(model, Some(effort))))
        .collect()
}

/// What OpenCode 1.18.33 writes outside the workspace (measured: the fixtures'
/// `home_tree_after.txt`): its XDG data, state, cache and config directories (the config one gets
/// the plugin install) and the npm cache the plugin install uses.
pub const OPENCODE_WRITABLE: [&str; 5] = [
    "${XDG_DATA_HOME:-~/.local/share}/opencode/",
    "${XDG_STATE_HOME:-~/.local/state}/opencode/",
    "${XDG_CACHE_HOME:-~/.cache}/opencode/",
    "${XDG_CONFIG_HOME:-~/.config}/opencode/",
    "${npm_config_cache:-~/.npm}/",
];
/// What Codex 0.169.0 writes outside the workspace (measured): everything under `CODEX_HOME`.
pub const CODEX_WRITABLE: [&str; 1] = ["${CODEX_HOME:-~/.codex}/"];
/// What Claude Code 2.1.328 writes outside the workspace (measured): `~/.claude/` (sessions,
/// backups, plugins) and `~/.claude.json`; older versions keep a `~/.claude.json.backup` beside
/// it (granted when it exists).
pub const CLAUDE_WRITABLE: [&str; 3] = [
    "${CLAUDE_CONFIG_DIR:-~/.claude}/",
    "~/.claude.json",
    "~/.claude.json.backup",
];

/// The sign-in files each built-in CLI refreshes in place (its OAuth tokens), written through
/// from the role's private layer to the user's HOME (`docs/run-lifecycle.md`, "The room").
pub const OPENCODE_WRITE_THROUGH: [&str; 1] =
    ["${XDG_DATA_HOME:-~/.local/share}/opencode/auth.json"];
pub const CODEX_WRITE_THROUGH: [&str; 1] = ["${CODEX_HOME:-~/.codex}/auth.json"];
pub const CLAUDE_WRITE_THROUGH: [&str; 1] = ["${CLAUDE_CONFIG_DIR:-~/.claude}/.credentials.json"];

fn confine(writable: &[&str], write_through: &[&str]) -> ConfineConfig {
    ConfineConfig {
        writable: argv(writable),
        write_through: argv(write_through),
        allow_connect: Vec::new(),
    }
}

const GLM: &str = "zhipuai-coding-plan/glm-5.3";
const SOL: &str = "openai/gpt-6-sol";
const SONNET: &str = "claude-sonnet-5-5";
const OPUS: &str = "claude-opus-5-5";
const HAIKU: &str = "claude-haiku-4-5-20251001";

fn opencode() -> Option<ProviderConfig> {
    Some(ProviderConfig {
        name: ProviderName::new("opencode").ok()?,
        command: argv(&[
            "opencode",
            "run",
            "--format",
            "json",
            "--model",
            "{model}",
            "--variant",
            "{effort}",
        ]),
        prompt: PromptMode::Stdin,
        output: OutputMode::OpencodeEvents,
        resume: Some(argv(&["--session", "{session}"])),
        models_command: Some(argv(&["opencode", "models"])),
        models: None,
        version_command: Some(argv(&["opencode", "--version"])),
        sandbox_adapter: None,
        roles: roles(&[
            (RoleKey::Requirements, GLM, "medium"),
            (RoleKey::Glm, GLM, "medium"),
            (RoleKey::Terra, GLM, "medium"),
            (RoleKey::PlanReviewer, SOL, "high"),
            (RoleKey::Sol, SOL, "high"),
            (RoleKey::Completion, SOL, "medium"),
            (RoleKey::Astra, "openai/gpt-6-astra", "high"),
        ]),
        auth: None,
        builder_retry: None,
        connection: Some(ConnectionConfig {
            login_command: Some(argv(&["opencode", "auth", "login"])),
            status_command: None,
        }),
        confine: Some(confine(&OPENCODE_WRITABLE, &OPENCODE_WRITE_THROUGH)),
        loads: None,
    })
}

fn codex() -> Option<ProviderConfig> {
    Some(ProviderConfig {
        name: ProviderName::new("codex").ok()?,
        command: argv(&[
            "codex",
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-C",
            "{workspace}",
            "--sandbox",
            "{sandbox}",
            "--model",
            "{model}",
            "-c",
            "model_reasoning_effort=\"{effort}\"",
            "--output-schema",
            "{schema}",
            "-o",
            "{report}",
            "-",
        ]),
        prompt: PromptMode::Stdin,
        output: OutputMode::CodexEvents,
        resume: Some(argv(&["codex", "exec", "resume", "{session}", "-"])),
        models_command: None,
        models: Some(argv(&[
            "gpt-6-astra",
            "gpt-6-terra",
            "gpt-6-sol",
            "gpt-6-luna",
        ])),
        version_command: Some(argv(&["codex", "--version"])),
        sandbox_adapter: None,
        roles: roles(&[
            (RoleKey::Astra, "gpt-6-astra", "medium"),
            (RoleKey::Terra, "gpt-6-terra", "medium"),
            (RoleKey::Sol, "gpt-6-sol", "medium"),
            (RoleKey::Completion, "gpt-6-sol", "medium"),
            (RoleKey::Glm, "gpt-6-luna", "medium"),
            (RoleKey::PlanReviewer, "gpt-6-sol", "medium"),
        ]),
        auth: None,
        builder_retry: None,
        connection: Some(ConnectionConfig {
            login_command: Some(argv(&["codex", "login"])),
            status_command: Some(argv(&["codex", "login", "status"])),
        }),
        confine: Some(confine(&CODEX_WRITABLE, &CODEX_WRITE_THROUGH)),
        loads: None,
    })
}

fn claude() -> Option<ProviderConfig> {
    Some(ProviderConfig {
        name: ProviderName::new("claude").ok()?,
        command: argv(&[
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "{model}",
        ]),
        prompt: PromptMode::Stdin,
        output: OutputMode::ClaudeEvents,
        resume: Some(argv(&["--resume", "{session}"])),
        models_command: None,
        models: None,
        version_command: Some(argv(&["claude", "--version"])),
        sandbox_adapter: None,
        roles: roles(&[
            (RoleKey::Requirements, SONNET, "medium"),
            (RoleKey::Glm, SONNET, "medium"),
            (RoleKey::Sol, SONNET, "medium"),
            (RoleKey::PlanReviewer, OPUS, "medium"),
            (RoleKey::Astra, OPUS, "medium"),
            (RoleKey::Completion, OPUS, "medium"),
            (RoleKey::Terra, HAIKU, "medium"),
        ]),
        auth: None,
        builder_retry: Some(BuilderRetry {
            strong_model: SONNET.to_owned(),
            checker_model: OPUS.to_owned(),
            strong_effort: "xhigh".to_owned(),
        }),
        connection: Some(ConnectionConfig {
            login_command: Some(argv(&["claude", "auth", "login"])),
            status_command: Some(argv(&["claude", "auth", "status"])),
        }),
        confine: Some(confine(&CLAUDE_WRITABLE, &CLAUDE_WRITE_THROUGH)),
        loads: None,
    })
}

/// autocode's own runtime (`src/direct/`): no program is launched for a stage; the command is
/// descriptive. Its models are the direct connections' (`ENDPOINT/MODEL`), so it has no role
/// defaults: routes come from `--<role>-model` or `--single-model`.
fn autocode_direct() -> Option<ProviderConfig> {
    Some(ProviderConfig {
        name: ProviderName::new(crate::direct::PROVIDER_NAME).ok()?,
        command: argv(&["autocode", "direct", "--model", "{model}"]),
        prompt: PromptMode::Stdin,
        output: OutputMode::DirectRuntime,
        resume: None,
        models_command: None,
        models: None,
        version_command: None,
        sandbox_adapter: None,
        roles: BTreeMap::new(),
        auth: None,
        builder_retry: None,
        connection: None,
        confine: None,
        loads: None,
    })
}

/// The built-in provider `name`, if it is one.
pub fn builtin(name: &str) -> Option<ProviderConfig> {
    match name {
        "opencode" => opencode(),
        "codex" => codex(),
        "claude" => claude(),
        "autocode" => autocode_direct(),
        _ => None,
    }
}

pub fn is_builtin(name: &str) -> bool {
    BUILTIN_NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::config::{Origin, load_config, validate_config};
    use crate::provider::family::Family;
    use crate::role::Role;
    use std::path::Path;

    #[test]
    fn builtins_are_valid() {
        for n in BUILTIN_NAMES {
            let config = builtin(n).unwrap();
            assert_eq!(config.name.as_str(), n);
            validate_config(&config, Origin::Builtin).unwrap();
            // Their own output modes would be refused in a file.
            if config.output.builtin_only() {
                assert!(validate_config(&config, Origin::File).is_err());
            }
        }
        assert!(builtin("kilocode").is_none());
    }

    #[test]
    fn builtin_defaults() {
        let oc = builtin("opencode").unwrap();
        assert_eq!(oc.route(Role::Planner).unwrap().model, GLM);
        assert_eq!(oc.route(Role::Requirements).unwrap().model, GLM);
        assert_eq!(
            oc.route(Role::Builder).unwrap().effort.as_deref(),
            Some("medium")
        );
        assert_eq!(
            oc.route(Role::PlanReviewer).unwrap(),
            &RouteSpec::new(SOL, Some("high"))
        );
        assert_eq!(
            oc.route(Role::Tester).unwrap(),
            &RouteSpec::new(SOL, Some("high"))
        );
        assert_eq!(
            oc.route(Role::CompletionReviewer)
                .unwrap()
                .effort
                .as_deref(),
            Some("medium")
        );
        assert_eq!(
            oc.route(Role::Resolver).unwrap().model,
            "openai/gpt-6-astra"
        );
        assert!(oc.same_family_pairs().is_empty());

        let cl = builtin("claude").unwrap();
        assert_eq!(cl.route(Role::Builder).unwrap().model, HAIKU);
        assert_eq!(cl.route(Role::Requirements).unwrap().model, SONNET);
        assert_eq!(cl.route(Role::Resolver).unwrap().model, OPUS);
        assert!(cl.auth.is_none());
        assert!(
            cl.roles
                .values()
                .all(|r| r.effort.as_deref() == Some("medium"))
        );
        let pairs = cl.same_family_pairs();
        assert_eq!(pairs.len(), 3);
        assert!(pairs.iter().all(|p| p.family == Family::Anthropic));

        let cx = builtin("codex").unwrap();
        assert_eq!(cx.route(Role::Builder).unwrap().model, "gpt-6-terra");
        assert_eq!(cx.route(Role::Resolver).unwrap().model, "gpt-6-astra");
        assert_eq!(cx.models.as_ref().map(Vec::len), Some(4));
    }

    #[test]
    fn bundled_files_load_with_zero_warnings() {
        for (n, text) in BUNDLED {
            let label = bundled_label(n);
            let loaded =
                load_config(Path::new(&label), text).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert!(loaded.warnings.is_empty(), "{n}: {:?}", loaded.warnings);
            assert_eq!(loaded.config.name.as_str(), n);
        }
        // The reference examples knowingly put gpt models on both sides.
        let gocode =
            load_config(Path::new("gocode.toml"), bundled_text("gocode").unwrap()).unwrap();
        assert_eq!(gocode.same_family_pairs.len(), 3);
        let kilo = load_config(
            Path::new("kilocode.toml"),
            bundled_text("kilocode").unwrap(),
        )
        .unwrap();
        assert_eq!(kilo.config.auth.as_ref().map(|a| a.routes.len()), Some(5));
        let pairs: Vec<_> = kilo.same_family_pairs.iter().map(|p| p.verifier).collect();
        assert_eq!(pairs, [Role::Tester, Role::CompletionReviewer]);
    }
}
