//! Credential-shaped values (rules 4 and 5 of the environment policy): URLs whose user-info
//! carries a password, secret-shaped tokens, connection-string secrets, webhook URLs and HTTP
//! credential headers. Pure functions of the value (and, for proxies, the name).

use std::sync::LazyLock;

use regex::Regex;

/// Secret-shaped tokens, each at a token boundary, long enough not to be an ordinary word.
static SECRET_SHAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?:^|[^A-Za-z0-9_-])(?:",
        r"sk-[A-Za-z0-9_-]{20,}",
        r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",
        r"|gh[pousr]_[A-Za-z0-9]{20,}",
        r"|github_pat_[A-Za-z0-9_]{20,}",
        r"|glpat-[A-Za-z0-9_-]{20,}",
        r"|xox[abprs]-[A-Za-z0-9-]{10,}",
        r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?:[^A-Za-z0-9]|$)",
        r"|eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
        r")",
        r"|-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
    ))
    .expect("a valid pattern")
});

/// `password=`, `pwd=`, `AccountKey=`, `SharedAccessSignature=` with a non-empty value.
static CONNECTION_SECRET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:^|[^a-z0-9])(?:password|passwd|pwd|accountkey|sharedaccesssignature)\s*=\s*[^\s;&]",
    )
    .expect("a valid pattern")
});

/// Webhook URLs whose path is the secret.
static WEBHOOK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9]|(?:discord|discordapp)\.com/api/webhooks/[0-9]",
    )
    .expect("a valid pattern")
});

/// HTTP credential headers with a value.
static CREDENTIAL_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:^|[^a-z0-9-])(?:proxy-authorization|authorization|x-api-key|private-token|cookie)\s*:\s*\S",
    )
    .expect("a valid pattern")
});

/// Whether the value holds a credential by its shape (rule 5), whatever the variable's name.
pub fn value_has_credential(value: &str) -> bool {
    SECRET_SHAPES.is_match(value)
        || CONNECTION_SECRET.is_match(value)
        || WEBHOOK.is_match(value)
        || CREDENTIAL_HEADER.is_match(value)
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
