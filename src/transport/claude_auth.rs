//! Claude Code login and billing-route checks: pure functions with typed refusals.
//!
//! A Claude Code stage must bill a first-party Claude subscription. Four checks, each a pure
//! function over text the caller collected:
//! - [`check_auth_status`]: the JSON of `claude auth status --json` (run in the agents'
//!   environment) must say `loggedIn: true`, `apiProvider: "firstParty"` (or leave it out) and
//!   `authMethod` `claude.ai` or `oauth_token`. An API key, Bedrock, Vertex or anything else is
//!   refused. The account's email and organization are never read into the result.
//! - [`check_project_settings`]: the workspace's `.claude/settings.json` (which `claude -p`
//!   trusts, while `auth status` does not apply it) must not set `apiKeyHelper`,
//!   `awsAuthRefresh`, `awsCredentialExport`, `gcpAuthRefresh`, nor `env` entries for
//!   `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `ANTHROPIC_BASE_URL`, `CLAUDE_CODE_USE_*` or
//!   `CLAUDE_CODE_OAUTH_TOKEN`, and must be valid JSON.
//! - [`check_agent_env`]: the agents' environment must not route Claude Code elsewhere
//!   (`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN`, `ANTHROPIC_BASE_URL`, `CLAUDE_CODE_USE_*`).
//!   The one exception: a loopback `ANTHROPIC_BASE_URL` (127.0.0.0/8, `::1`, `localhost`) on a
//!   route the caller marks as a scripted/local endpoint is accepted and recorded as
//!   [`ClaudeBillingRoute::ScriptedLocal`]; there the dummy API key the scripted server needs is
//!   accepted too. `CLAUDE_CODE_OAUTH_TOKEN` (a subscription setup token, which reaches the
//!   agents only through `AUTOCODE_PASS_ENV`) is accepted.
//! - [`check_init_row`]: the first stream row (`system/init`) must report `apiKeySource:
//!   "none"` on a subscription route; a missing field is refused too (fail closed).
//!
//! Every refusal pauses the run with [`PAUSED_BILLING_ROUTE`] and carries a next step.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

/// The pause code every refusal maps to.
pub const PAUSED_BILLING_ROUTE: &str = "PAUSED_BILLING_ROUTE";

/// Top-level project settings keys that route Claude Code to a non-subscription credential.
pub const REFUSED_SETTINGS_KEYS: [&str; 4] = [
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "gcpAuthRefresh",
];

/// Exact `env` names refused in project settings.
pub const REFUSED_SETTINGS_ENV: [&str; 4] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// Prefix of the third-party backend switches (`CLAUDE_CODE_USE_BEDROCK`, `..._VERTEX`, ...).
pub const BACKEND_SWITCH_PREFIX: &str = "CLAUDE_CODE_USE_";

/// How a subscription login signs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaudeAuthMethod {
    /// `claude auth login` with a Claude subscription.
    ClaudeAi,
    /// A subscription setup token (`CLAUDE_CODE_OAUTH_TOKEN`).
    OauthToken,
}

/// An accepted login. Email and organization are deliberately absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaudeLogin {
    pub auth_method: ClaudeAuthMethod,
    pub subscription_type: Option<String>,
}

/// The billing route a Claude Code stage runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClaudeBillingRoute {
    /// The first-party subscription login.
    Subscription,
    /// A loopback scripted/local model endpoint the caller vouched for.
    ScriptedLocal { base_url: String },
}

/// Why a Claude Code route is refused. Every variant pauses with [`PAUSED_BILLING_ROUTE`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BillingRefusal {
    #[error("`claude auth status --json` output is not the expected JSON object: {error}")]
    StatusUnreadable { error: String },
    #[error("Claude Code is not logged in")]
    NotLoggedIn,
    #[error("Claude Code uses API provider {api_provider:?}, not the first-party Claude service")]
    NotFirstParty { api_provider: String },
    #[error("Claude Code signs in with {auth_method:?}, not a Claude subscription login")]
    NotSubscriptionLogin { auth_method: String },
    #[error("{path} is not valid JSON: {error}")]
    SettingsInvalidJson { path: String, error: String },
    #[error("{path} is not a JSON object")]
    SettingsNotObject { path: String },
    #[error("{path} sets {key:?}, which routes Claude Code to a non-subscription credential")]
    SettingsCredentialKey { path: String, key: String },
    #[error("{path} sets env {name:?}, which routes Claude Code away from the subscription")]
    SettingsEnv { path: String, name: String },
    #[error("{path}: `env` is not a JSON object")]
    SettingsEnvNotObject { path: String },
    #[error("{path} cannot be read: {error}")]
    SettingsUnreadable { path: String, error: String },
    #[error(
        "the agents' environment sets {name}, which routes Claude Code away from the subscription"
    )]
    AgentEnv { name: String },
    #[error(
        "the agents' environment sets ANTHROPIC_BASE_URL to a non-loopback endpoint, or to a \
         loopback one the route does not mark as scripted/local"
    )]
    BaseUrl,
    #[error("the stream's first row is not a system/init row")]
    NotInitRow,
    #[error("Claude Code's init row names no apiKeySource, so the billing route is unproven")]
    InitWithoutApiKeySource,
    #[error("Claude Code's init row reports API key source {source_name:?}")]
    InitApiKeySource { source_name: String },
}

impl BillingRefusal {
    /// The pause code (API string).
    pub fn pause_code(&self) -> &'static str {
        PAUSED_BILLING_ROUTE
    }

    /// What the operator does next.
    pub fn next_step(&self) -> &'static str {
        match self {
            BillingRefusal::StatusUnreadable { .. } => {
                "run `claude auth status --json` yourself; update Claude Code if it prints no JSON"
            }
            BillingRefusal::NotLoggedIn
            | BillingRefusal::NotFirstParty { .. }
            | BillingRefusal::NotSubscriptionLogin { .. } => {
                "run `claude auth login` with a Claude subscription, then resume"
            }
            BillingRefusal::SettingsInvalidJson { .. }
            | BillingRefusal::SettingsNotObject { .. }
            | BillingRefusal::SettingsEnvNotObject { .. }
            | BillingRefusal::SettingsUnreadable { .. } => {
                "fix the workspace's .claude/settings.json so it is a readable JSON object, then resume"
            }
            BillingRefusal::SettingsCredentialKey { .. } | BillingRefusal::SettingsEnv { .. } => {
                "remove that entry from the workspace's .claude/settings.json, then resume"
            }
            BillingRefusal::AgentEnv { .. } | BillingRefusal::BaseUrl => {
                "unset it in the shell that starts autocode (and drop it from AUTOCODE_PASS_ENV), then resume"
            }
            BillingRefusal::NotInitRow
            | BillingRefusal::InitWithoutApiKeySource
            | BillingRefusal::InitApiKeySource { .. } => {
                "remove the API key source Claude Code found (environment, apiKeyHelper, its own \
                 config), check `claude auth status --json`, then resume"
            }
        }
    }
}

/// Checks the JSON printed by `claude auth status --json`.
pub fn check_auth_status(json_text: &str) -> Result<ClaudeLogin, BillingRefusal> {
    let value: Value =
        serde_json::from_str(json_text.trim()).map_err(|e| BillingRefusal::StatusUnreadable {
            error: e.to_string(),
        })?;
    let Value::Object(status) = value else {
        return Err(BillingRefusal::StatusUnreadable {
            error: "it is not a JSON object".into(),
        });
    };
    match status.get("loggedIn") {
        Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => return Err(BillingRefusal::NotLoggedIn),
        _ => {
            return Err(BillingRefusal::StatusUnreadable {
                error: "`loggedIn` is missing or not a boolean".into(),
            });
        }
    }
    match status.get("apiProvider") {
        None => {}
        Some(Value::String(p)) if p == "firstParty" => {}
        Some(other) => {
            return Err(BillingRefusal::NotFirstParty {
                api_provider: value_text(other),
            });
        }
    }
    if let Some(source) = status.get("apiKeySource")
        && source.as_str() != Some("none")
    {
        return Err(BillingRefusal::NotSubscriptionLogin {
            auth_method: format!("api key source {}", value_text(source)),
        });
    }
    let auth_method = match status.get("authMethod").and_then(Value::as_str) {
        Some("claude.ai") => ClaudeAuthMethod::ClaudeAi,
        Some("oauth_token") => ClaudeAuthMethod::OauthToken,
        Some(other) => {
            return Err(BillingRefusal::NotSubscriptionLogin {
                auth_method: other.to_string(),
            });
        }
        None => {
            return Err(BillingRefusal::NotSubscriptionLogin {
                auth_method: status
                    .get("authMethod")
                    .map(value_text)
                    .unwrap_or_else(|| "(missing)".into()),
            });
        }
    };
    Ok(ClaudeLogin {
        auth_method,
        subscription_type: status
            .get("subscriptionType")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Checks the text of a project `.claude/settings.json`; `path` only labels refusals.
pub fn check_project_settings(path: &str, text: &str) -> Result<(), BillingRefusal> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| BillingRefusal::SettingsInvalidJson {
            path: path.to_owned(),
            error: e.to_string(),
        })?;
    let Value::Object(settings) = value else {
        return Err(BillingRefusal::SettingsNotObject {
            path: path.to_owned(),
        });
    };
    if let Some(key) = REFUSED_SETTINGS_KEYS
        .iter()
        .find(|k| settings.contains_key(**k))
    {
        return Err(BillingRefusal::SettingsCredentialKey {
            path: path.to_owned(),
            key: key.to_string(),
        });
    }
    match settings.get("env") {
        None => Ok(()),
        Some(Value::Object(env)) => {
            match env
                .keys()
                .find(|name| is_refused_settings_env(name.as_str()))
            {
                Some(name) => Err(BillingRefusal::SettingsEnv {
                    path: path.to_owned(),
                    name: name.clone(),
                }),
                None => Ok(()),
            }
        }
        Some(_) => Err(BillingRefusal::SettingsEnvNotObject {
            path: path.to_owned(),
        }),
    }
}

fn is_refused_settings_env(name: &str) -> bool {
    REFUSED_SETTINGS_ENV.contains(&name) || name.starts_with(BACKEND_SWITCH_PREFIX)
}

/// Reads and checks `<workspace>/.claude/settings.json`; a missing file passes.
pub fn check_workspace_settings(workspace: &Path) -> Result<(), BillingRefusal> {
    let path = workspace.join(".claude").join("settings.json");
    let label = path.display().to_string();
    match crate::bounded_read::read(&path, crate::bounded_read::CONFIG_CAP) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => check_project_settings(&label, &text),
            Err(e) => Err(BillingRefusal::SettingsInvalidJson {
                path: label,
                error: e.to_string(),
            }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(BillingRefusal::SettingsUnreadable {
            path: label,
            error: e.to_string(),
        }),
    }
}

/// Checks the agents' environment for variables that route Claude Code away from the
/// subscription. `scripted_local` is the caller's mark that this route is a scripted/local
/// endpoint (the only way a loopback `ANTHROPIC_BASE_URL` is accepted).
pub fn check_agent_env(
    env: &BTreeMap<String, String>,
    scripted_local: bool,
) -> Result<ClaudeBillingRoute, BillingRefusal> {
    if let Some(name) = env.keys().find(|n| n.starts_with(BACKEND_SWITCH_PREFIX)) {
        return Err(BillingRefusal::AgentEnv { name: name.clone() });
    }
    let route = match env.get("ANTHROPIC_BASE_URL") {
        None => ClaudeBillingRoute::Subscription,
        Some(url) if scripted_local && is_loopback_url(url) => ClaudeBillingRoute::ScriptedLocal {
            base_url: url.clone(),
        },
        Some(_) => return Err(BillingRefusal::BaseUrl),
    };
    if route == ClaudeBillingRoute::Subscription {
        for name in ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"] {
            if env.contains_key(name) {
                return Err(BillingRefusal::AgentEnv { name: name.into() });
            }
        }
    }
    Ok(route)
}

/// Whether a URL's host is loopback: 127.0.0.0/8, `::1` or `localhost`.
pub fn is_loopback_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        match bracketed.split_once(']') {
            Some((host, after)) if after.is_empty() || after.starts_with(':') => host,
            _ => return false,
        }
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// How many leading rows [`find_init_row`] looks at: the init row comes first, except that
/// `--bare` puts a `system/ui_invalidate` row before it.
pub const INIT_ROW_WINDOW: usize = 8;

/// The stream's `system/init` row among its first [`INIT_ROW_WINDOW`] rows.
pub fn find_init_row<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    lines.into_iter().take(INIT_ROW_WINDOW).find(|line| {
        serde_json::from_str::<Value>(line.trim()).is_ok_and(|row| {
            row.get("type").and_then(Value::as_str) == Some("system")
                && row.get("subtype").and_then(Value::as_str) == Some("init")
        })
    })
}

/// Checks the stream's init row (`{"type":"system","subtype":"init",...,"apiKeySource":...}`).
pub fn check_init_row(line: &str, route: &ClaudeBillingRoute) -> Result<(), BillingRefusal> {
    let row: Value = serde_json::from_str(line.trim()).map_err(|_| BillingRefusal::NotInitRow)?;
    if row.get("type").and_then(Value::as_str) != Some("system")
        || row.get("subtype").and_then(Value::as_str) != Some("init")
    {
        return Err(BillingRefusal::NotInitRow);
    }
    if matches!(route, ClaudeBillingRoute::ScriptedLocal { .. }) {
        return Ok(());
    }
    match row.get("apiKeySource").and_then(Value::as_str) {
        Some("none") => Ok(()),
        Some(other) => Err(BillingRefusal::InitApiKeySource {
            source_name: other.to_string(),
        }),
        None => Err(BillingRefusal::InitWithoutApiKeySource),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_status_table() {
        let ok = |text: &str| check_auth_status(text);
        assert_eq!(
            ok(
                r#"{"loggedIn":true,"authMethod":"claude.ai","apiProvider":"firstParty","email":"a@b","orgId":"o","subscriptionType":"max"}"#
            ),
            Ok(ClaudeLogin {
                auth_method: ClaudeAuthMethod::ClaudeAi,
                subscription_type: Some("max".into())
            })
        );
        assert_eq!(
            ok(r#"{"loggedIn":true,"authMethod":"oauth_token"}"#).map(|l| l.auth_method),
            Ok(ClaudeAuthMethod::OauthToken)
        );
        type RefusalCheck = fn(&BillingRefusal) -> bool;
        let cases: &[(&str, RefusalCheck)] = &[
            (r#"{"loggedIn":false}"#, |r| {
                *r == BillingRefusal::NotLoggedIn
            }),
            (
                r#"{"loggedIn":false,"authMethod":"none","apiProvider":"firstParty"}"#,
                |r| *r == BillingRefusal::NotLoggedIn,
            ),
            (
                r#"{"loggedIn":true,"authMethod":"api_key","apiKeySource":"ANTHROPIC_API_KEY"}"#,
                |r| matches!(r, BillingRefusal::NotSubscriptionLogin { .. }),
            ),
            (
                r#"{"loggedIn":true,"authMethod":"api_key"}"#,
                |r| matches!(r, BillingRefusal::NotSubscriptionLogin { auth_method } if auth_method == "api_key"),
            ),
            (
                r#"{"loggedIn":true,"authMethod":"third_party","apiProvider":"bedrock"}"#,
                |r| matches!(r, BillingRefusal::NotFirstParty { api_provider } if api_provider == "bedrock"),
            ),
            (
                r#"{"loggedIn":true,"authMethod":"claude.ai","apiProvider":"vertex"}"#,
                |r| matches!(r, BillingRefusal::NotFirstParty { .. }),
            ),
            (r#"{"loggedIn":true}"#, |r| {
                matches!(r, BillingRefusal::NotSubscriptionLogin { .. })
            }),
            (r#"{"loggedIn":"true","authMethod":"claude.ai"}"#, |r| {
                matches!(r, BillingRefusal::StatusUnreadable { .. })
            }),
            ("Logged in as a@b", |r| {
                matches!(r, BillingRefusal::StatusUnreadable { .. })
            }),
            ("[]", |r| {
                matches!(r, BillingRefusal::StatusUnreadable { .. })
            }),
            ("", |r| matches!(r, BillingRefusal::StatusUnreadable { .. })),
        ];
        for (text, expected) in cases {
            let refusal = ok(text).expect_err(text);
            assert!(expected(&refusal), "{text}: {refusal:?}");
            assert_eq!(refusal.pause_code(), "PAUSED_BILLING_ROUTE");
            assert!(!refusal.next_step().is_empty());
        }
    }

    #[test]
    fn accepted_login_never_carries_identity() {
        let login = check_auth_status(
            r#"{"loggedIn":true,"authMethod":"claude.ai","email":"private@example.invalid","orgName":"Org"}"#,
        )
        .unwrap();
        let json = serde_json::to_string(&login).unwrap();
        assert!(!json.contains("private@example.invalid") && !json.contains("Org"));
    }

    #[test]
    fn project_settings_table() {
        let p = "ws/.claude/settings.json";
        assert_eq!(check_project_settings(p, "{}"), Ok(()));
        assert_eq!(
            check_project_settings(
                p,
                r#"{"permissions":{"allow":["Bash(ls:*)"]},"env":{"FOO":"1"}}"#
            ),
            Ok(())
        );
        for key in REFUSED_SETTINGS_KEYS {
            let text = format!(r#"{{"{key}":"/bin/true"}}"#);
            assert!(matches!(
                check_project_settings(p, &text),
                Err(BillingRefusal::SettingsCredentialKey { key: k, .. }) if k == key
            ));
        }
        for name in [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_BASE_URL",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
            "CLAUDE_CODE_USE_FOUNDRY",
        ] {
            let text = format!(r#"{{"env":{{"{name}":"x"}}}}"#);
            assert!(matches!(
                check_project_settings(p, &text),
                Err(BillingRefusal::SettingsEnv { name: n, .. }) if n == name
            ));
        }
        assert!(matches!(
            check_project_settings(p, "{not json"),
            Err(BillingRefusal::SettingsInvalidJson { .. })
        ));
        assert!(matches!(
            check_project_settings(p, ""),
            Err(BillingRefusal::SettingsInvalidJson { .. })
        ));
        assert!(matches!(
            check_project_settings(p, "[1]"),
            Err(BillingRefusal::SettingsNotObject { .. })
        ));
        assert!(matches!(
            check_project_settings(p, r#"{"env":["ANTHROPIC_API_KEY"]}"#),
            Err(BillingRefusal::SettingsEnvNotObject { .. })
        ));
        let refusal = check_project_settings(p, r#"{"apiKeyHelper":"x"}"#).unwrap_err();
        assert!(refusal.to_string().contains(p));
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn agent_env_table() {
        assert_eq!(
            check_agent_env(&env(&[("HOME", "/root")]), false),
            Ok(ClaudeBillingRoute::Subscription)
        );
        assert_eq!(
            check_agent_env(&env(&[("CLAUDE_CODE_OAUTH_TOKEN", "t")]), false),
            Ok(ClaudeBillingRoute::Subscription)
        );
        let local = env(&[
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:18103"),
            ("ANTHROPIC_API_KEY", "dummy"),
        ]);
        assert_eq!(
            check_agent_env(&local, true),
            Ok(ClaudeBillingRoute::ScriptedLocal {
                base_url: "http://127.0.0.1:18103".into()
            })
        );
        assert_eq!(check_agent_env(&local, false), Err(BillingRefusal::BaseUrl));
        for url in [
            "https://api.example.com",
            "http://10.0.0.1:80",
            "http://127.0.0.1.evil.com",
        ] {
            assert_eq!(
                check_agent_env(&env(&[("ANTHROPIC_BASE_URL", url)]), true),
                Err(BillingRefusal::BaseUrl),
                "{url}"
            );
        }
        for name in [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
        ] {
            assert_eq!(
                check_agent_env(&env(&[(name, "1")]), false),
                Err(BillingRefusal::AgentEnv { name: name.into() })
            );
        }
        // A backend switch is refused even on a scripted route.
        let switched = env(&[
            ("ANTHROPIC_BASE_URL", "http://localhost:1"),
            ("CLAUDE_CODE_USE_VERTEX", "1"),
        ]);
        assert!(check_agent_env(&switched, true).is_err());
    }

    proptest::proptest! {
        #[test]
        fn checks_never_panic(text in ".{0,64}", json_like in "[{}\\[\\]\":,a-zA-Z_ 0-9]{0,64}") {
            let _ = check_auth_status(&text);
            let _ = check_auth_status(&json_like);
            let _ = check_project_settings("p", &text);
            let _ = check_project_settings("p", &json_like);
            let _ = check_init_row(&json_like, &ClaudeBillingRoute::Subscription);
            let _ = is_loopback_url(&text);
            let _ = is_loopback_url(&format!("http://{text}"));
        }
    }

    #[test]
    fn loopback_urls() {
        for url in [
            "http://127.0.0.1:18103",
            "http://127.1.2.3/v1",
            "https://localhost",
            "http://LOCALHOST:8080/x",
            "http://[::1]:9000",
            "http://[::1]",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "127.0.0.1:18103",
            "ftp://127.0.0.1",
            "http://128.0.0.1",
            "http://localhost.example.com",
            "http://u:p@127.0.0.1",
            "http://[::2]",
            "http://[::1]x",
            "http://0.0.0.0",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }

    #[test]
    fn init_rows() {
        let sub = ClaudeBillingRoute::Subscription;
        let local = ClaudeBillingRoute::ScriptedLocal {
            base_url: "http://127.0.0.1:1".into(),
        };
        let none = r#"{"type":"system","subtype":"init","apiKeySource":"none"}"#;
        let key = r#"{"type":"system","subtype":"init","apiKeySource":"ANTHROPIC_API_KEY"}"#;
        let missing = r#"{"type":"system","subtype":"init"}"#;
        assert_eq!(check_init_row(none, &sub), Ok(()));
        assert_eq!(
            check_init_row(key, &sub),
            Err(BillingRefusal::InitApiKeySource {
                source_name: "ANTHROPIC_API_KEY".into()
            })
        );
        assert_eq!(check_init_row(key, &local), Ok(()));
        assert_eq!(
            check_init_row(missing, &sub),
            Err(BillingRefusal::InitWithoutApiKeySource)
        );
        assert_eq!(
            check_init_row(r#"{"type":"assistant"}"#, &sub),
            Err(BillingRefusal::NotInitRow)
        );
        assert_eq!(
            check_init_row("garbage", &local),
            Err(BillingRefusal::NotInitRow)
        );
    }
}
