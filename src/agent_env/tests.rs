//! The environment policy's table: every shape with its expected outcome.

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
    ("GITHUB_TOKEN", "", &[], None, None),
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
    ("MAX_TOKENS", "", &[], None, None),
    ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "32000", &[], None, None),
    (
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        "lots",
        &[],
        None,
        Some(CredentialName),
    ),
    ("OUTPUT_TOKENS", "32000", &[], None, None),
    ("OUTPUT_TOKENS", "many", &[], None, Some(CredentialName)),
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
    // ---- Widened (the 91-shape survey): more credential words, compounds, camelCase. ----
    ("SMTP_PASS", "x", &[], None, Some(CredentialName)),
    ("PASS", "x", &[], None, Some(CredentialName)),
    ("DB_PWD", "x", &[], None, Some(CredentialName)),
    ("MYSQL_PWD", "x", &[], None, Some(CredentialName)),
    ("PGPASSWORD", "x", &[], None, Some(CredentialName)),
    ("GPG_PASSPHRASE", "x", &[], None, Some(CredentialName)),
    ("GITHUB_PAT", "x", &[], None, Some(CredentialName)),
    (
        "GOOGLE_APPLICATION_CREDENTIALS",
        "/k.json",
        &[],
        None,
        Some(CredentialName),
    ),
    ("AWS_CREDENTIAL", "x", &[], None, Some(CredentialName)),
    ("SESSION_COOKIE", "x", &[], None, Some(CredentialName)),
    ("OPENAI_APIKEY", "x", &[], None, Some(CredentialName)),
    ("ApiKey", "x", &[], None, Some(CredentialName)),
    ("accessToken", "x", &[], None, Some(CredentialName)),
    ("clientSecret", "x", &[], None, Some(CredentialName)),
    ("dbPassword", "x", &[], None, Some(CredentialName)),
    ("OpenAIKey", "x", &[], None, Some(CredentialName)),
    ("GHTOKEN", "x", &[], None, Some(CredentialName)),
    ("NPM_AUTHTOKEN", "x", &[], None, Some(CredentialName)),
    ("AWS_SECRETKEY", "x", &[], None, Some(CredentialName)),
    ("SSH_PRIVATEKEY", "x", &[], None, Some(CredentialName)),
    (
        "NPM_CONFIG_//registry.npmjs.org/:_authToken",
        "x",
        &[],
        None,
        Some(CredentialName),
    ),
    ("npm_config__auth", "x", &[], None, Some(CredentialName)),
    (
        "AUTOCODE_ADMIN_PASS",
        "x",
        &[],
        None,
        Some(ControllerSecret),
    ),
    // Passwords files: the name says where a secret is; withheld like the secret (pass it with
    // AUTOCODE_PASS_ENV when a tool needs it).
    ("PASSWD_FILE", "/etc/x", &[], None, Some(CredentialName)),
    ("PASSWD_FILE", "/etc/x", &[], Some("PASSWD_FILE"), None),
    // PWD is the working directory; the launcher sets it per launch.
    ("PWD", "/home/u/src", &[], None, None),
    ("OLDPWD", "/home/u", &[], None, None),
    // Harmless names stay.
    ("PRIMARY_KEY_COLUMN", "id", &[], None, None),
    ("SORT_KEY", "name", &[], None, None),
    ("sortKey", "name", &[], None, None),
    ("CACHE_KEY_PREFIX", "v1", &[], None, None),
    ("COMPASS_HOME", "/opt/compass", &[], None, None),
    ("BYPASS_CACHE", "1", &[], None, None),
    ("PATHS", "/a:/b", &[], None, None),
    ("HOME", "/home/u", &[], None, None),
    ("LANG", "C.UTF-8", &[], None, None),
    ("EDITOR", "vim", &[], None, None),
    ("PASSENGER_ROOT", "/opt/p", &[], None, None),
    ("KEYCHAIN_PATH", "/x", &[], None, None),
    ("HTTP_PROXY", "http://proxy.corp:8080", &[], None, None),
    ("ALL_PROXY", "socks5://proxy:1080", &[], None, None),
    ("no_proxy", "*.local,169.254.169.254", &[], None, None),
    ("DEBUG_URL", "http://localhost:9229/json", &[], None, None),
    (
        "COMMIT_SHA",
        "0123456789abcdef0123456789abcdef01234567",
        &[],
        None,
        None,
    ),
    ("TASK", "ask-the-user", &[], None, None),
    ("LIB", "sklearn-skeleton", &[], None, None),
    // URL user-info passwords, whatever they hold.
    (
        "DB",
        "postgres://u:pa/ss@h/db",
        &[],
        None,
        Some(UrlWithPassword),
    ),
    (
        "DB",
        "postgres://u:p@ss@h/db",
        &[],
        None,
        Some(UrlWithPassword),
    ),
    (
        "DB",
        "mysql://u:pa#ss@h/db",
        &[],
        None,
        Some(UrlWithPassword),
    ),
    (
        "CACHE",
        "redis://:s3cret@cache:6379/0",
        &[],
        None,
        Some(UrlWithPassword),
    ),
    (
        "HTTPS_PROXY",
        "http://u:p%40ss@proxy:3128",
        &[],
        None,
        Some(UrlWithPassword),
    ),
    ("DB", "postgres://u@h/db", &[], None, None),
    ("DOCS", "https://host:8443/a/b@c", &[], None, None),
    // Credential values under any name.
    (
        "X",
        "sk-proj-abcdefghijklmnopqrstuvwx",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "HEADER",
        "Bearer sk-ant-api03-abcdefghijklmnopqrst",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "STRIPE",
        "sk_live_abcdefghij1234",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "STRIPE_R",
        "rk_live_abcdefghij1234",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "GH",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "GH2",
        "gho_abcdefghijklmnopqrstuvwxyz0123456789",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "GH3",
        "github_pat_11ABCDEFG0abcdefghijklmnop",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "GL",
        "glpat-abcdefghijklmnopqrst",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "SLACK_BOT",
        "xoxb-1234567890-abcdefghij",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "SLACK_USER",
        "xoxp-1234567890-abcdefghij",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "AWS_ID",
        "AKIAIOSFODNN7EXAMPLE",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "AWS_TMP_ID",
        "ASIAIOSFODNN7EXAMPLE",
        &[],
        None,
        Some(CredentialValue),
    ),
    ("NOT_AN_ID", "AKIAIOSFODNN7EXAMPLEXX", &[], None, None),
    (
        "PEM",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "PEM2",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        &[],
        None,
        Some(CredentialValue),
    ),
    ("CERT", "-----BEGIN CERTIFICATE-----\nMIIC", &[], None, None),
    (
        "ID",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc_DEF-123",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "CONN",
        "Server=db;Database=x;User Id=u;Password=hunter2;",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "CONN2",
        "host=db user=u pwd=hunter2",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "STORAGE",
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "SAS",
        "BlobEndpoint=x;SharedAccessSignature=sv=2020&sig=abc",
        &[],
        None,
        Some(CredentialValue),
    ),
    ("CONN3", "Server=db;Password=;", &[], None, None),
    (
        "NOTIFY",
        "https://hooks.slack.com/services/T000/B000/XXXX",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "ALERTS",
        "https://discord.com/api/webhooks/123/abc",
        &[],
        None,
        Some(CredentialValue),
    ),
    ("SLACK_HOME", "https://slack.com/intl/en", &[], None, None),
    (
        "GIT_CONFIG_PARAMETERS",
        "'http.extraHeader=Authorization: Bearer abc'",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "GIT_CONFIG_VALUE_0",
        "AUTHORIZATION: basic eC1hY2Nlc3M=",
        &[],
        None,
        Some(CredentialValue),
    ),
    (
        "GIT_CONFIG_PARAMETERS",
        "'core.autocrlf=false'",
        &[],
        None,
        None,
    ),
    (
        "CURL_HEADERS",
        "X-Api-Key: abc",
        &[],
        None,
        Some(CredentialValue),
    ),
    // AUTOCODE_PASS_ENV lets value-shaped credentials through, by exact name.
    (
        "TOOL_CONF",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        &[],
        Some("TOOL_CONF"),
        None,
    ),
    ("DB", "postgres://u:pa/ss@h/db", &[], Some("DB"), None),
];

#[test]
fn policy_table() {
    assert!(CASES.len() >= 100, "{} cases", CASES.len());
    let failures: Vec<String> = CASES
        .iter()
        .filter_map(|(name, value, forbid, pass, expected)| {
            let got = one(name, value, forbid, *pass);
            (got != *expected).then(|| {
                format!("{name}={value:?} forbid={forbid:?} pass={pass:?}: got {got:?}, expected {expected:?}")
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
        CredentialValue,
        NotUtf8,
    ] {
        assert_eq!(
            serde_json::to_value(reason).unwrap(),
            serde_json::Value::String(reason.as_str().into())
        );
    }
}

#[test]
fn names_and_values_that_are_not_utf8_are_withheld_by_escaped_name() {
    use std::os::unix::ffi::OsStringExt;
    let env = agent_environment_os(
        [
            (
                OsString::from_vec(b"BAD\xffNAME".to_vec()),
                OsString::from("v"),
            ),
            (
                OsString::from("BAD_VALUE"),
                OsString::from_vec(b"s\xfeecret".to_vec()),
            ),
            (OsString::from("HOME"), OsString::from("/root")),
        ],
        &[],
        Some("BAD_VALUE"),
    );
    assert_eq!(env.kept.keys().collect::<Vec<_>>(), ["HOME"]);
    assert_eq!(env.withheld_names(), ["BAD\\xffNAME", "BAD_VALUE"]);
    assert_eq!(env.withheld_reason("BAD_VALUE"), Some(NotUtf8));
    assert_eq!(env.withheld_reason("BAD\\xffNAME"), Some(NotUtf8));
    let json = serde_json::to_string(&env.withheld).unwrap();
    assert!(json.contains("\"not_utf8\""), "{json}");
}

#[test]
fn camel_case_and_separators_split_into_words() {
    assert_eq!(name_words("accessToken"), ["ACCESS", "TOKEN"]);
    assert_eq!(name_words("OpenAIKey"), ["OPEN", "AI", "KEY"]);
    assert_eq!(name_words("S3Key"), ["S3", "KEY"]);
    assert_eq!(name_words("GITHUB_TOKEN"), ["GITHUB", "TOKEN"]);
    assert_eq!(
        name_words("npm_config__authToken"),
        ["NPM", "CONFIG", "AUTH", "TOKEN"]
    );
    assert_eq!(name_words("PATH"), ["PATH"]);
}

#[test]
fn a_directory_repeated_on_path_is_kept_at_its_first_place() {
    let env = agent_environment(
        [(
            "PATH".to_owned(),
            "/a/bin:/usr/bin:/a/bin::/bin:/usr/bin:".to_owned(),
        )],
        &[],
        None,
    );
    assert_eq!(env.kept["PATH"], "/a/bin:/usr/bin::/bin");
    assert_eq!(without_repeated_dirs("/usr/bin"), "/usr/bin");
    assert_eq!(without_repeated_dirs(""), "");
}
