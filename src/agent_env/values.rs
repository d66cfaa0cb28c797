//! Credential-shaped values (rules 4 and 5 of the environment policy): URLs whose user-info
//! carries a password, and the rule set of `secret_rules.toml` (secret-shaped tokens of ~50
//! providers, passwords inside netrc/YAML/JSON/INI/connection strings, `curl -u`, presigned and
//! SAS URLs, webhook URLs, HTTP credential headers), compiled once into one `RegexSet`; that file
//! also holds the allowlist of harmless names the name rule uses. Pure functions of the value
//! (and, for proxies, the name).

use std::sync::LazyLock;

use regex::RegexSet;
use serde::Deserialize;

/// The rule set as data: secret shapes and the harmless-name allowlist (see its header for its
/// source, licence and version).
const RULES_TOML: &str = include_str!("secret_rules.toml");

/// The rule file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    pub version: u32,
    pub allow: Allow,
    pub rule: Vec<Rule>,
}

/// Names and name words the name rule lets through.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allow {
    /// Exact names (compared upper-cased) never withheld for their name.
    pub names: Vec<String>,
    /// Words after KEY(S) that describe keys rather than hold one.
    pub key_descriptions: Vec<String>,
    /// Words before KEY(S) that make it public by design.
    pub public_key_words: Vec<String>,
    /// Words before TOKEN(S) that make a whole-number value a token count.
    pub token_count_words: Vec<String>,
}

/// One secret shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub id: String,
    pub regex: String,
}

/// The rules, parsed and compiled once.
pub struct Rules {
    pub file: RuleFile,
    set: RegexSet,
}

impl Rules {
    fn load() -> Rules {
        // The file is part of the binary and pinned by tests: a broken one is a build defect.
        let file: RuleFile = toml::from_str(RULES_TOML).expect("secret_rules.toml parses");
        let set = RegexSet::new(file.rule.iter().map(|r| r.regex.as_str()))
            .expect("secret_rules.toml's patterns compile");
        Rules { file, set }
    }

    /// The ids of the rules `value` matches.
    pub fn matching(&self, value: &str) -> Vec<&str> {
        self.set
            .matches(value)
            .into_iter()
            .map(|i| self.file.rule[i].id.as_str())
            .collect()
    }
}

/// The rule set of the environment policy.
pub static RULES: LazyLock<Rules> = LazyLock::new(Rules::load);

/// Whether the value holds a credential by its shape (rule 5), whatever the variable's name.
pub fn value_has_credential(value: &str) -> bool {
    !value.is_empty() && RULES.set.is_match(value)
}

fn is_proxy_name(name: &str) -> bool {
    name.to_ascii_uppercase().ends_with("_PROXY")
}

/// Whether the value holds a URL with an embedded, non-empty password (rule 4).
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

/// `text` starts with a URL authority (`user:pw@host:port/...`) whose user-info holds a
/// non-empty password. A password may hold `/`, `?`, `#` or `@`: when what precedes the first
/// of those is `something:not-a-port`, it is user-info, and the authority runs to the last `@`
/// of the URL (up to whitespace).
fn authority_has_password(text: &str) -> bool {
    let token_end = text
        .find(|c: char| c.is_whitespace() || matches!(c, ',' | ';'))
        .unwrap_or(text.len());
    let token = &text[..token_end];
    let head_end = token.find(['/', '?', '#']).unwrap_or(token.len());
    let head = &token[..head_end];
    let user_info = if let Some(at) = head.rfind('@') {
        &head[..at]
    } else if head_looks_like_user_info(head) {
        match token.rfind('@') {
            Some(at) => &token[..at],
            None => return false,
        }
    } else {
        return false;
    };
    user_info
        .split_once(':')
        .is_some_and(|(_, password)| !password.is_empty())
}

/// `user:pa` (a colon followed by something that is not a port) rather than `host:8080` or an
/// IPv6 literal.
fn head_looks_like_user_info(head: &str) -> bool {
    if head.starts_with('[') {
        return false;
    }
    head.split_once(':')
        .is_some_and(|(_, after)| !after.is_empty() && !after.bytes().all(|b| b.is_ascii_digit()))
}
