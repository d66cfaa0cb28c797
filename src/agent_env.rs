//! The environment policy: which of the runner's variables an agent process sees.
//!
//! [`agent_environment`] is a pure function over the runner's variables; the side effect
//! (building the child's environment) is a thin step after it. It owns these rules, applied to
//! each variable in this order:
//!
//! 1. **Controller secret** (always withheld, even when named in `AUTOCODE_PASS_ENV`): a name
//!    that starts with `AUTOCODE_` and holds a credential word (see 3). This is the one list of
//!    autocode's own private tokens: [`is_controller_secret`] decides it, so a new controller
//!    token cannot be forgotten in some second list.
//! 2. **Forbidden by provider**: the provider's `forbid_env` names (compared without regard to
//!    case) are withheld, also when named in `AUTOCODE_PASS_ENV`: the provider says their mere
//!    presence picks the wrong billing route.
//! 3. **Credential name**: the name, split into words on every character that is not a letter or
//!    digit and compared without regard to case, holds one of the words TOKEN, TOKENS, SECRET,
//!    SECRETS, PASSWORD, PASSWORDS, PASSWD, KEY, KEYS or AUTH (`GITHUB_TOKEN`,
//!    `AWS_SECRET_ACCESS_KEY`, `SSH_AUTH_SOCK`, `OPENAI_API_KEY`, `github_token`). Whole words
//!    only: `KEYBOARD_LAYOUT`, `MONKEY` and `GIT_AUTHOR_NAME` are not credentials. A token
//!    *count* is not a credential: a TOKEN/TOKENS word followed by MAX, LIMIT, COUNT or BUDGET,
//!    or preceded (anywhere earlier in the name) by MAX, whose value is a whole number (ASCII
//!    digits only) is kept (`OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX=100000`,
//!    `CLAUDE_CODE_MAX_OUTPUT_TOKENS=64000`); the same name holding anything else
//!    (`MAX_TOKENS=abc`, or empty) is withheld.
//! 4. **URL with password**: a value holding a URL whose user-info carries a non-empty password
//!    (`https://user:pw@host`, `postgres://u:p@db/x`) is withheld; for proxy variables
//!    (`*_PROXY`, any case) a scheme-less `user:pw@host:port` counts too. Proxy variables without
//!    credentials are ordinary variables and are kept.
//!
//! `AUTOCODE_PASS_ENV` (comma-separated names, matched exactly) lets variables withheld by rules
//! 3 and 4 through, never those withheld by rules 1 and 2. Everything else is kept, including
//! empty values and ordinary `AUTOCODE_*` settings.
//!
//! Invariants: the withheld list holds names and reasons only, never values, sorted by name and
//! without duplicates; `Debug` of an [`AgentEnvironment`] prints names only, so logging one
//! cannot leak a value. Withholding is not a sandbox: an agent with a shell can still read
//! credential files.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The variable whose value names the credential-like variables an operator lets through.
pub const PASS_ENV_VAR: &str = "AUTOCODE_PASS_ENV";

/// Name words that mark a credential.
const CREDENTIAL_WORDS: [&str; 10] = [
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "KEY",
    "KEYS",
    "AUTH",
];

/// Words that, right after a TOKEN word, make the name a token count.
const COUNT_WORDS_AFTER: [&str; 4] = ["MAX", "LIMIT", "COUNT", "BUDGET"];

/// Why a variable was withheld. The serialized strings are API (stage records).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WithheldReason {
    /// The name holds a credential word (TOKEN, SECRET, PASSWORD, KEY, AUTH...).
    CredentialName,
    /// The value holds a URL with an embedded password.
    UrlWithPassword,
    /// The provider's `forbid_env` names it.
    ForbiddenByProvider,
    /// One of autocode's own controller secrets; never passed, whatever `AUTOCODE_PASS_ENV` says.
    ControllerSecret,
}

impl WithheldReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WithheldReason::CredentialName => "credential_name",
            WithheldReason::UrlWithPassword => "url_with_password",
            WithheldReason::ForbiddenByProvider => "forbidden_by_provider",
            WithheldReason::ControllerSecret => "controller_secret",
        }
    }
}

impl fmt::Display for WithheldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One withheld variable: its name and why, never its value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WithheldVar {
    pub name: String,
    pub reason: WithheldReason,
}

/// The outcome of the policy: the variables an agent sees and the names it does not.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentEnvironment {
    /// The variables the agent process gets.
    pub kept: BTreeMap<String, String>,
    /// The withheld names with their reasons, sorted by name.
    pub withheld: Vec<WithheldVar>,
}

impl AgentEnvironment {
    /// The value of a kept variable.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.kept.get(name).map(String::as_str)
    }

    /// The withheld names, sorted.
    pub fn withheld_names(&self) -> Vec<&str> {
        self.withheld.iter().map(|w| w.name.as_str()).collect()
    }

    /// Why `name` was withheld, if it was.
    pub fn withheld_reason(&self, name: &str) -> Option<WithheldReason> {
        self.withheld
            .iter()
            .find(|w| w.name == name)
            .map(|w| w.reason)
    }
}

impl fmt::Debug for AgentEnvironment {
    // Names only: values never reach a log through `{:?}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentEnvironment")
            .field("kept", &self.kept.keys().collect::<Vec<_>>())
            .field("withheld", &self.withheld)
            .finish()
    }
}

/// Applies the policy (see the module doc) to the runner's variables.
///
/// `forbid_env` is the provider's list of names that must not reach it; `pass_env` is the value
/// of `AUTOCODE_PASS_ENV` (comma-separated names), if set.
pub fn agent_environment(
    runner_env: impl IntoIterator<Item = (String, String)>,
    forbid_env: &[String],
    pass_env: Option<&str>,
) -> AgentEnvironment {
    let passed: Vec<&str> = pass_env
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut kept = BTreeMap::new();
    let mut withheld = BTreeMap::new();
    for (name, value) in runner_env {
        // A later duplicate replaces an earlier one, as in a real environment block.
        kept.remove(&name);
        withheld.remove(&name);
        match classify(&name, &value, forbid_env, &passed) {
            None => {
                kept.insert(name, value);
            }
            Some(reason) => {
                withheld.insert(name, reason);
            }
        }
    }
    AgentEnvironment {
        kept,
        withheld: withheld
            .into_iter()
            .map(|(name, reason)| WithheldVar { name, reason })
            .collect(),
    }
}

fn classify(
    name: &str,
    value: &str,
    forbid_env: &[String],
    passed: &[&str],
) -> Option<WithheldReason> {
    if is_controller_secret(name) {
        return Some(WithheldReason::ControllerSecret);
    }
    if forbid_env.iter().any(|f| f.eq_ignore_ascii_case(name)) {
        return Some(WithheldReason::ForbiddenByProvider);
    }
    let reason = if is_credential_like(name, value) {
        Some(WithheldReason::CredentialName)
    } else if value_has_url_password(name, value) {
        Some(WithheldReason::UrlWithPassword)
    } else {
        None
    };
    match reason {
        Some(_) if passed.contains(&name) => None,
        other => other,
    }
}

/// Whether `name` is one of autocode's own controller secrets: an `AUTOCODE_*` name (any case)
/// holding a credential word. These are never passed to an agent.
pub fn is_controller_secret(name: &str) -> bool {
    let words = name_words(name);
    words.first().is_some_and(|w| w == "AUTOCODE")
        && words.iter().any(|w| CREDENTIAL_WORDS.contains(&w.as_str()))
}

/// Whether the name marks a credential (rule 3 of the module doc), given its value (a token
/// count is not a credential only while it holds a whole number).
pub fn is_credential_like(name: &str, value: &str) -> bool {
    let words = name_words(name);
    let whole_number = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    words.iter().enumerate().any(|(i, word)| {
        if !CREDENTIAL_WORDS.contains(&word.as_str()) {
            return false;
        }
        let is_token = word == "TOKEN" || word == "TOKENS";
        let next = words.get(i + 1).map(String::as_str);
        let max_before = words
            .get(..i)
            .is_some_and(|before| before.iter().any(|w| w == "MAX"));
        let counts_tokens =
            is_token && (next.is_some_and(|n| COUNT_WORDS_AFTER.contains(&n)) || max_before);
        !(counts_tokens && whole_number)
    })
}

fn name_words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_uppercase)
        .collect()
}

fn is_proxy_name(name: &str) -> bool {
    name.to_ascii_uppercase().ends_with("_PROXY")
}

/// Whether the value holds a URL with an embedded, non-empty password.
pub fn value_has_url_password(name: &str, value: &str) -> bool {
    let mut rest = value;
    let mut saw_scheme = false;
    while let Some(at) = rest.find("://") {
        saw_scheme = true;
        let after = &rest[at + 3..];
        if authority_has_password(after) {
            return true;
        }
        rest = after;
    }
    // Proxy settings are often written without a scheme: `user:pw@proxy:8080`.
    !saw_scheme
        && is_proxy_name(name)
        && value
            .split([',', ' '])
            .any(|entry| authority_has_password(entry.trim()))
}

/// `text` starts with a URL authority (`user:pw@host:port/...`).
fn authority_has_password(text: &str) -> bool {
    let end = text
        .find(|c: char| matches!(c, '/' | '?' | '#' | ',' | ';') || c.is_whitespace())
        .unwrap_or(text.len());
    let authority = &text[..end];
    let Some(at) = authority.rfind('@') else {
        return false;
    };
    let user_info = &authority[..at];
    user_info
        .split_once(':')
        .is_some_and(|(_, password)| !password.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use WithheldReason::*;

    fn one(name: &str, value: &str, forbid: &[&str], pass: Option<&str>) -> Option<WithheldReason> {
        let forbid: Vec<String> = forbid.iter().map(|s| s.to_string()).collect();
        let env = agent_environment([(name.to_string(), value.to_string())], &forbid, pass);
        let reason = env.withheld_reason(name);
        // Exactly one of kept / withheld, and the value is never in the withheld list.
        assert_eq!(env.kept.contains_key(name), reason.is_none(), "{name}");
        reason
    }

    /// (name, value, forbid_env, AUTOCODE_PASS_ENV, expected reason or None = kept)
    type Case = (
        &'static str,
        &'static str,
        &'static [&'static str],
        Option<&'static str>,
        Option<WithheldReason>,
    );

    const CASES: &[Case] = &[
        // Credential words.
        ("GITHUB_TOKEN", "ghp_x", &[], None, Some(CredentialName)),
        (
            "AWS_SECRET_ACCESS_KEY",
            "x",
            &[],
            None,
            Some(CredentialName),
        ),
        (
            "SSH_AUTH_SOCK",
            "/tmp/ssh.sock",
            &[],
            None,
            Some(CredentialName),
        ),
        ("OPENAI_API_KEY", "sk-x", &[], None, Some(CredentialName)),
        ("DB_PASSWORD", "hunter2", &[], None, Some(CredentialName)),
        ("MYSQL_PASSWD", "x", &[], None, Some(CredentialName)),
        ("SECRET", "x", &[], None, Some(CredentialName)),
        ("API_KEYS", "a,b", &[], None, Some(CredentialName)),
        ("CLIENT_SECRETS", "x", &[], None, Some(CredentialName)),
        ("github_token", "x", &[], None, Some(CredentialName)),
        ("Npm-Auth", "x", &[], None, Some(CredentialName)),
        ("GITHUB_TOKEN", "", &[], None, Some(CredentialName)),
        ("ANTHROPIC_AUTH_TOKEN", "x", &[], None, Some(CredentialName)),
        // Words, not substrings.
        ("KEYBOARD_LAYOUT", "us", &[], None, None),
        ("MONKEY", "banana", &[], None, None),
        ("GIT_AUTHOR_NAME", "Ada", &[], None, None),
        ("TOKENIZER_PATH", "/x", &[], None, None),
        ("PATH", "/usr/bin", &[], None, None),
        ("EMPTY_VALUE", "", &[], None, None),
        // Token counts.
        (
            "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX",
            "100000",
            &[],
            None,
            None,
        ),
        ("MAX_TOKENS", "4096", &[], None, None),
        ("MAX_TOKENS", "abc", &[], None, Some(CredentialName)),
        ("MAX_TOKENS", "", &[], None, Some(CredentialName)),
        ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "32000", &[], None, None),
        (
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            "lots",
            &[],
            None,
            Some(CredentialName),
        ),
        ("OUTPUT_TOKENS", "32000", &[], None, Some(CredentialName)),
        ("TOKEN_LIMIT", "10", &[], None, None),
        ("TOKEN_COUNT", "-3", &[], None, Some(CredentialName)),
        ("TOKEN_BUDGET", "1e6", &[], None, Some(CredentialName)),
        ("TOKEN_BUDGET", "1000000", &[], None, None),
        ("max_token", "12", &[], None, None),
        ("TOKEN_MIN", "12", &[], None, Some(CredentialName)),
        ("API_KEY_TOKEN_MAX", "12", &[], None, Some(CredentialName)),
        // URLs with passwords.
        (
            "DATABASE_URL",
            "postgres://u:p@db:5432/x",
            &[],
            None,
            Some(UrlWithPassword),
        ),
        (
            "REPO",
            "https://user:pw@host/repo.git",
            &[],
            None,
            Some(UrlWithPassword),
        ),
        (
            "HTTPS_PROXY",
            "http://u:p@proxy:3128",
            &[],
            None,
            Some(UrlWithPassword),
        ),
        (
            "http_proxy",
            "u:p@proxy:3128",
            &[],
            None,
            Some(UrlWithPassword),
        ),
        (
            "MIRRORS",
            "https://a.example https://u:p@b.example",
            &[],
            None,
            Some(UrlWithPassword),
        ),
        ("REPO", "https://user@host/repo.git", &[], None, None),
        ("REPO", "https://user:@host/repo.git", &[], None, None),
        ("DOCS", "https://host/a:b@c", &[], None, None),
        ("LISTEN", "http://[::1]:8080", &[], None, None),
        ("NOTE", "mail me at a:b@c", &[], None, None),
        // Proxies without credentials.
        ("HTTP_PROXY", "http://proxy:3128", &[], None, None),
        ("https_proxy", "proxy.local:3128", &[], None, None),
        ("NO_PROXY", "localhost,127.0.0.1,.corp", &[], None, None),
        // AUTOCODE settings and controller secrets.
        ("AUTOCODE_PROVIDER", "kilocode", &[], None, None),
        ("AUTOCODE_PASS_ENV", "ZHIPU_API_KEY", &[], None, None),
        (
            "AUTOCODE_CONTROL_TOKEN",
            "x",
            &[],
            None,
            Some(ControllerSecret),
        ),
        ("autocode_ui_secret", "x", &[], None, Some(ControllerSecret)),
        (
            "AUTOCODE_CONTROL_TOKEN",
            "x",
            &[],
            Some("AUTOCODE_CONTROL_TOKEN"),
            Some(ControllerSecret),
        ),
        (
            "AUTOCODE_MAX_TOKENS",
            "100",
            &[],
            None,
            Some(ControllerSecret),
        ),
        // Provider forbid lists.
        (
            "OPENAI_BASE_URL",
            "https://api.example",
            &["OPENAI_BASE_URL"],
            None,
            Some(ForbiddenByProvider),
        ),
        (
            "openai_base_url",
            "https://api.example",
            &["OPENAI_BASE_URL"],
            None,
            Some(ForbiddenByProvider),
        ),
        (
            "OPENAI_API_KEY",
            "sk",
            &["OPENAI_API_KEY"],
            Some("OPENAI_API_KEY"),
            Some(ForbiddenByProvider),
        ),
        (
            "OPENAI_BASE_URL",
            "https://api.example",
            &["CODEX_API_KEY"],
            None,
            None,
        ),
        // AUTOCODE_PASS_ENV lets credential-like variables through.
        (
            "ZHIPU_API_KEY",
            "z",
            &[],
            Some("ZHIPU_API_KEY,DATABASE_URL"),
            None,
        ),
        (
            "DATABASE_URL",
            "postgres://u:p@db/x",
            &[],
            Some(" ZHIPU_API_KEY , DATABASE_URL "),
            None,
        ),
        (
            "ZHIPU_API_KEY",
            "z",
            &[],
            Some("zhipu_api_key"),
            Some(CredentialName),
        ),
        ("ZHIPU_API_KEY", "z", &[], Some(""), Some(CredentialName)),
        (
            "CLAUDE_CODE_OAUTH_TOKEN",
            "t",
            &[],
            Some("CLAUDE_CODE_OAUTH_TOKEN"),
            None,
        ),
    ];

    #[test]
    fn policy_table() {
        assert!(CASES.len() >= 40);
        for (name, value, forbid, pass, expected) in CASES {
            assert_eq!(
                one(name, value, forbid, *pass),
                *expected,
                "{name}={value:?} forbid={forbid:?} pass={pass:?}"
            );
        }
    }

    #[test]
    fn withheld_names_are_sorted_and_carry_no_values() {
        let env = agent_environment(
            [
                ("Z_TOKEN".to_string(), "zz-secret-value".to_string()),
                ("A_KEY".to_string(), "aa-secret-value".to_string()),
                ("HOME".to_string(), "/root".to_string()),
            ],
            &[],
            None,
        );
        assert_eq!(env.withheld_names(), ["A_KEY", "Z_TOKEN"]);
        assert_eq!(env.kept.keys().collect::<Vec<_>>(), ["HOME"]);
        let json = serde_json::to_string(&env.withheld).unwrap();
        assert!(!json.contains("secret-value"), "{json}");
        let debug = format!("{env:?}");
        assert!(
            !debug.contains("secret-value") && !debug.contains("/root"),
            "{debug}"
        );
        assert!(json.contains("\"credential_name\""));
    }

    #[test]
    fn a_later_duplicate_replaces_an_earlier_one() {
        let env = agent_environment(
            [
                ("MAX_TOKENS".to_string(), "abc".to_string()),
                ("MAX_TOKENS".to_string(), "12".to_string()),
            ],
            &[],
            None,
        );
        assert_eq!(env.get("MAX_TOKENS"), Some("12"));
        assert!(env.withheld.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn every_name_lands_in_exactly_one_place(
            vars in proptest::collection::vec(("[A-Za-z_]{1,12}", ".{0,24}"), 0..16),
            pass in proptest::option::of("[A-Za-z_,]{0,20}"),
        ) {
            let env = agent_environment(vars.clone(), &["Z_FORBIDDEN".into()], pass.as_deref());
            let names: std::collections::BTreeSet<&String> = vars.iter().map(|(k, _)| k).collect();
            let withheld = env.withheld_names();
            proptest::prop_assert!(withheld.windows(2).all(|w| w[0] < w[1]), "sorted, unique");
            for name in &names {
                let kept = env.kept.contains_key(*name);
                let held = withheld.contains(&name.as_str());
                proptest::prop_assert!(kept != held, "{name}: kept={kept} withheld={held}");
            }
            proptest::prop_assert_eq!(env.kept.len() + withheld.len(), names.len());
        }
    }

    #[test]
    fn reason_strings_are_stable() {
        for reason in [
            CredentialName,
            UrlWithPassword,
            ForbiddenByProvider,
            ControllerSecret,
        ] {
            assert_eq!(
                serde_json::to_value(reason).unwrap(),
                serde_json::Value::String(reason.as_str().into())
            );
        }
    }
}
