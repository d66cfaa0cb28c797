//! The environment policy: which of the runner's variables an agent process sees.
//!
//! [`agent_environment`] is a pure function over the runner's variables; the side effect
//! (building the child's environment) is a thin step after it. It owns these rules, applied to
//! each variable in this order:
//!
//! 0. **Not UTF-8** ([`agent_environment_os`]): a name or value that is not UTF-8 is withheld
//!    and recorded under its escaped name (`\xNN` for each byte that is not printable ASCII),
//!    never its value. Nothing lets it through.
//! 1. **Controller secret** (always withheld, even when named in `AUTOCODE_PASS_ENV`): a name
//!    that starts with `AUTOCODE_` and holds a credential word (see 3), except
//!    `AUTOCODE_PASS_ENV` itself (a list of names). [`is_controller_secret`] decides it, so a new
//!    controller token cannot be forgotten in some second list.
//! 2. **Forbidden by provider**: the provider's `forbid_env` names (compared without regard to
//!    case) are withheld, also when named in `AUTOCODE_PASS_ENV`: the provider says their mere
//!    presence picks the wrong billing route.
//! 3. **Credential name**: the name is split into words on every character that is not a letter
//!    or digit and at camelCase boundaries (`accessToken` → ACCESS TOKEN, `OpenAIKey` → OPEN AI
//!    KEY), compared without regard to case. It is a credential when a word is one of TOKEN(S),
//!    SECRET(S), PASSWORD(S), PASSWD, PASS, PWD, PASSPHRASE, PAT, CREDENTIAL(S), COOKIE(S),
//!    APIKEY(S), KEY(S) or AUTH, or a compound ending in TOKEN(S), SECRET(S), PASSWORD(S),
//!    PASSWD, PASSPHRASE, CREDENTIAL(S), APIKEY(S), ACCESSKEY, SECRETKEY, PRIVATEKEY or AUTHKEY
//!    (`PGPASSWORD`, `GHTOKEN`, `OPENAI_APIKEY`). Whole words only: `KEYBOARD_LAYOUT`,
//!    `MONKEY`, `COMPASS_HOME`, `BYPASS_CACHE` and `GIT_AUTHOR_NAME` are not credentials. Two
//!    exceptions keep ordinary names working:
//!    - a KEY(S) word right after a word naming a data or input key (PRIMARY, FOREIGN, SORT,
//!      PARTITION, CLUSTERING, CACHE, UNIQUE, COMPOSITE, INDEX, HASH, RANGE, ROW, SHARD, LOOKUP,
//!      GROUP, ORDER, DEDUP, IDEMPOTENCY, SHORTCUT, HOT, LEADER, MODIFIER) is not a credential
//!      word (`PRIMARY_KEY_COLUMN`, `SORT_KEY`);
//!    - a token *count* is not a credential: a TOKEN/TOKENS word followed by MAX, LIMIT, COUNT
//!      or BUDGET, preceded (anywhere earlier in the name) by MAX, or right after a count word
//!      of the rule file (CONTEXT, PROMPT, OUTPUT, …), whose value is a whole number (ASCII
//!      digits only) is kept (`MAX_TOKENS=4096`, `CONTEXT_TOKENS=128000`); the same name holding
//!      anything else (`MAX_TOKENS=abc`) is withheld;
//!    - the allowlist of `secret_rules.toml`: exact harmless names (`PUBLIC_KEY`, `KEY_ID`), a
//!      KEY word followed by a word describing keys (`REDIS_KEY_PREFIX`) or preceded by a public
//!      one (`PUBLISHABLE_KEY`).
//!
//!    The abbreviations PW, PSWD, PSSWD, PWORD, CRED, CREDS and PASSCODE are credential words.
//!    The exact names `PWD` and `OLDPWD` are the working directory, not passwords: they are
//!    kept (every launch then sets `PWD` to the stage's directory and drops `OLDPWD`); `DB_PWD`
//!    and `MYSQL_PWD` are withheld.
//! 4. **URL with password**: a value holding a URL whose user-info carries a non-empty password
//!    is withheld, whatever characters the password holds (`https://user:pw@host`,
//!    `postgres://u:pa/ss@h/db`, `postgres://u:p@ss@h/db`); for proxy variables (`*_PROXY`, any
//!    case) a scheme-less `user:pw@host:port` counts too. Proxy variables without credentials
//!    are ordinary variables and are kept.
//! 5. **Credential value**, under any name: a value matching the rule set of
//!    `agent_env/secret_rules.toml` (data: provider token formats, passwords inside netrc, YAML,
//!    JSON, INI and connection strings, `curl -u`, presigned and SAS URLs, webhook URLs, HTTP
//!    credential headers). See [`values`].
//!
//! Rules 3 to 5 never apply to an empty value: it carries no secret and is kept.
//!
//! `AUTOCODE_PASS_ENV` (comma-separated names, matched exactly) lets variables withheld by rules
//! 3, 4 and 5 through, never those withheld by rules 0, 1 and 2. Everything else is kept,
//! including ordinary `AUTOCODE_*` settings.
//!
//! Invariants: the withheld list holds names and reasons only, never values, sorted by name and
//! without duplicates; `Debug` of an [`AgentEnvironment`] prints names only, so logging one
//! cannot leak a value. Withholding is not a sandbox: an agent with a shell can still read
//! credential files.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;

pub mod values;

pub use values::{value_has_credential, value_has_url_password};

/// The variable whose value names the credential-like variables an operator lets through.
pub const PASS_ENV_VAR: &str = "AUTOCODE_PASS_ENV";

/// Name words that mark a credential.
const CREDENTIAL_WORDS: [&str; 27] = [
    "PW",
    "PSWD",
    "PSSWD",
    "PWORD",
    "CRED",
    "CREDS",
    "PASSCODE",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASS",
    "PWD",
    "PASSPHRASE",
    "PAT",
    "CREDENTIAL",
    "CREDENTIALS",
    "COOKIE",
    "COOKIES",
    "APIKEY",
    "APIKEYS",
    "KEY",
    "KEYS",
    "AUTH",
];

/// Endings that make a compound word a credential word (`PGPASSWORD`, `GHTOKEN`).
const CREDENTIAL_ENDINGS: [&str; 18] = [
    "PSWD",
    "CREDS",
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWORDS",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "APIKEYS",
    "ACCESSKEY",
    "SECRETKEY",
    "PRIVATEKEY",
    "AUTHKEY",
];

/// Words that, right before KEY or KEYS, name a data or input key rather than a credential.
const DATA_KEY_WORDS: [&str; 22] = [
    "PRIMARY",
    "FOREIGN",
    "SORT",
    "PARTITION",
    "CLUSTERING",
    "CACHE",
    "UNIQUE",
    "COMPOSITE",
    "INDEX",
    "HASH",
    "RANGE",
    "ROW",
    "SHARD",
    "LOOKUP",
    "GROUP",
    "ORDER",
    "DEDUP",
    "IDEMPOTENCY",
    "SHORTCUT",
    "HOT",
    "LEADER",
    "MODIFIER",
];

/// Exact names that hold a credential word but are not credentials.
const NOT_CREDENTIALS: [&str; 3] = ["PWD", "OLDPWD", PASS_ENV_VAR];

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
    /// The value is shaped like a credential (an API token, a connection-string password, a
    /// webhook URL, an authorization header), whatever the name.
    CredentialValue,
    /// The name or the value is not UTF-8 (recorded under its escaped name, never passed).
    NotUtf8,
}

impl WithheldReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WithheldReason::CredentialName => "credential_name",
            WithheldReason::UrlWithPassword => "url_with_password",
            WithheldReason::ForbiddenByProvider => "forbidden_by_provider",
            WithheldReason::ControllerSecret => "controller_secret",
            WithheldReason::CredentialValue => "credential_value",
            WithheldReason::NotUtf8 => "not_utf8",
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

    /// Records variables dropped because their name or value is not UTF-8 (escaped names).
    pub fn withhold_not_utf8(&mut self, names: impl IntoIterator<Item = String>) {
        for name in names {
            self.kept.remove(&name);
            self.withheld.retain(|w| w.name != name);
            self.withheld.push(WithheldVar {
                name,
                reason: WithheldReason::NotUtf8,
            });
        }
        self.withheld.sort();
        self.withheld.dedup_by(|a, b| a.name == b.name);
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
    if let Some(path) = kept.get_mut("PATH") {
        *path = without_repeated_dirs(path);
    }
    AgentEnvironment {
        kept,
        withheld: withheld
            .into_iter()
            .map(|(name, reason)| WithheldVar { name, reason })
            .collect(),
    }
}

/// A search path with each directory kept at its first place only: a command resolves to the
/// same file, and a name found nowhere costs one failed `execve` per directory instead of one
/// per entry (each is a round trip through the process boundary). An empty entry (the current
/// directory) is a directory like any other.
pub fn without_repeated_dirs(path: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    path.split(':')
        .filter(|dir| seen.insert(*dir))
        .collect::<Vec<_>>()
        .join(":")
}

/// [`agent_environment`] over the raw environment: a name or value that is not UTF-8 is withheld
/// (rule 0) under its escaped name, never its value.
pub fn agent_environment_os(
    runner_env: impl IntoIterator<Item = (OsString, OsString)>,
    forbid_env: &[String],
    pass_env: Option<&str>,
) -> AgentEnvironment {
    let mut utf8 = Vec::new();
    let mut not_utf8 = Vec::new();
    for (name, value) in runner_env {
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => utf8.push((name, value)),
            (Ok(name), Err(_)) => not_utf8.push(name),
            (Err(name), _) => not_utf8.push(escaped_name(&name)),
        }
    }
    let mut env = agent_environment(utf8, forbid_env, pass_env);
    env.withhold_not_utf8(not_utf8);
    env
}

/// A name that is not UTF-8, printable: `\xNN` for every byte that is not printable ASCII.
pub fn escaped_name(name: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    name.as_bytes().escape_ascii().to_string()
}

/// The (escaped) names of variables in `env` whose name or value is not UTF-8.
pub fn not_utf8_names<'a>(
    env: impl IntoIterator<Item = (&'a OsString, &'a OsString)>,
) -> Vec<String> {
    env.into_iter()
        .filter_map(|(name, value)| match (name.to_str(), value.to_str()) {
            (Some(_), Some(_)) => None,
            (Some(name), None) => Some(name.to_owned()),
            (None, _) => Some(escaped_name(name)),
        })
        .collect()
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
    // An empty value carries no secret: rules 3 to 5 do not apply to it.
    if value.is_empty() {
        return None;
    }
    let reason = if is_credential_like(name, value) {
        Some(WithheldReason::CredentialName)
    } else if value_has_url_password(name, value) {
        Some(WithheldReason::UrlWithPassword)
    } else if value_has_credential(value) {
        Some(WithheldReason::CredentialValue)
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
    name != PASS_ENV_VAR
        && words.first().is_some_and(|w| w == "AUTOCODE")
        && (0..words.len()).any(|i| is_credential_word(&words, i))
}

/// Whether `words[i]` marks a credential (a credential word or ending, not a data key).
fn is_credential_word(words: &[String], i: usize) -> bool {
    let word = words[i].as_str();
    if word == "KEY" || word == "KEYS" {
        let allow = &values::RULES.file.allow;
        let before = i.checked_sub(1).map(|b| words[b].as_str());
        let after = words.get(i + 1).map(String::as_str);
        let data_key = before.is_some_and(|b| DATA_KEY_WORDS.contains(&b));
        let public = before.is_some_and(|b| allow.public_key_words.iter().any(|w| w == b));
        let described = after.is_some_and(|a| allow.key_descriptions.iter().any(|w| w == a));
        return !(data_key || public || described);
    }
    CREDENTIAL_WORDS.contains(&word)
        || CREDENTIAL_ENDINGS
            .iter()
            .any(|ending| word.ends_with(ending))
}

/// Whether the name marks a credential (rule 3 of the module doc), given its value (a token
/// count is not a credential only while it holds a whole number).
pub fn is_credential_like(name: &str, value: &str) -> bool {
    if NOT_CREDENTIALS.contains(&name)
        || values::RULES
            .file
            .allow
            .names
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(name))
    {
        return false;
    }
    let words = name_words(name);
    let whole_number = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    words.iter().enumerate().any(|(i, word)| {
        if !is_credential_word(&words, i) {
            return false;
        }
        let is_token = word == "TOKEN" || word == "TOKENS";
        let next = words.get(i + 1).map(String::as_str);
        let max_before = words
            .get(..i)
            .is_some_and(|before| before.iter().any(|w| w == "MAX"));
        let count_before = i.checked_sub(1).is_some_and(|b| {
            values::RULES
                .file
                .allow
                .token_count_words
                .iter()
                .any(|w| *w == words[b])
        });
        let counts_tokens = is_token
            && (next.is_some_and(|n| COUNT_WORDS_AFTER.contains(&n)) || max_before || count_before);
        !(counts_tokens && whole_number)
    })
}

/// The words of a name, upper-cased: split on every character that is not an ASCII letter or
/// digit, and at camelCase boundaries (`aB` → `a|B`, `ABc` → `A|Bc`, `3K` → `3|K`).
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let chars: Vec<char> = part.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, cur) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            let boundary = (cur.is_ascii_uppercase()
                && (prev.is_ascii_lowercase() || prev.is_ascii_digit()))
                || (cur.is_ascii_uppercase() && prev.is_ascii_uppercase() && next_lower);
            if boundary {
                words.push(chars[start..i].iter().collect::<String>());
                start = i;
            }
        }
        if start < chars.len() {
            words.push(chars[start..].iter().collect::<String>());
        }
    }
    words
        .into_iter()
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

#[cfg(test)]
mod shapes;
#[cfg(test)]
mod tests;
