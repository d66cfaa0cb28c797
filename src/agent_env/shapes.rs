//! The environment policy against 250+ shapes of variables, each with its expected outcome:
//! secret-shaped values under innocent names, structured secrets (netrc, YAML, JSON, `curl -u`,
//! presigned and SAS URLs), credential names and their abbreviations, and harmless variables that
//! must reach the agents (token counts, key prefixes, public keys, empty values).
//!
//! Values are built from templates (`{a34}`: 34 letters and digits, `{h32}`: hex, `{d9}`:
//! digits, `{U16}`: upper-case letters and digits), so no literal token sits in the source.

use super::WithheldReason::{self, *};
use super::agent_environment;

/// Expands `{aN}`, `{hN}`, `{dN}`, `{UN}` in `template`.
fn expand(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let spec = &rest[open + 1..close];
        let (kind, count) = spec.split_at(1.min(spec.len()));
        let Ok(n) = count.parse::<usize>() else {
            out.push_str(&rest[..=close]);
            rest = &rest[close + 1..];
            continue;
        };
        let alphabet: &[u8] = match kind {
            "a" => b"aZ3kQ9xW2mR7pL5tV8nB4cY6",
            "h" => b"0a1b2c3d4e5f6789",
            "d" => b"8275194630",
            "U" => b"Q7ZK2W9XR4PL5TV8NB3",
            _ => {
                out.push_str(&rest[..=close]);
                rest = &rest[close + 1..];
                continue;
            }
        };
        out.push_str(&rest[..open]);
        out.extend((0..n).map(|i| alphabet[(i * 7 + n) % alphabet.len()] as char));
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

const K: Option<WithheldReason> = None;
const N: Option<WithheldReason> = Some(CredentialName);
const V: Option<WithheldReason> = Some(CredentialValue);
const U: Option<WithheldReason> = Some(UrlWithPassword);

/// (name, value template, expected outcome)
const SHAPES: &[(&str, &str, Option<WithheldReason>)] = &[
    // --- Provider tokens under innocent names -------------------------------------------
    ("HF_HOME_X", "hf_{a34}", V),
    ("MODEL_REPO_ACCESS", "hf_{a34}", V),
    ("ORG", "api_org_{a34}", V),
    ("UPLOAD", "pypi-AgEIcHlwaS5vcmc{a60}", V),
    ("TWINE_CONF", "pypi-{a70}", V),
    ("MAPS", "AIza{a35}", V),
    ("GCP", "ya29.{a60}", V),
    ("GOOGLE_CLIENT", "GOCSPX-{a28}", V),
    ("SLACK_CFG", "xoxe-1-{a120}", V),
    ("SLACK_ROT", "xoxe.xoxp-1-{a100}", V),
    ("SLACK_B", "xoxb-{d11}-{d12}-{a24}", V),
    ("SLACK_P", "xoxp-{d11}-{d11}-{d12}-{h32}", V),
    ("SLACK_APP", "xapp-1-{U11}-{d13}-{h64}", V),
    ("MAIL", "SG.{a22}.{a43}", V),
    ("SHOP", "shpat_{h32}", V),
    ("SHOP2", "shpss_{h32}", V),
    ("SHOP3", "shpca_{h32}", V),
    ("DO", "dop_v1_{h64}", V),
    ("DO_OAUTH", "doo_v1_{h64}", V),
    ("DO_REFRESH", "dor_v1_{h64}", V),
    ("REGISTRY", "dckr_pat_{a27}", V),
    ("VAULT", "hvs.{a90}", V),
    ("VAULT_BATCH", "hvb.{a120}", V),
    ("VAULT_R", "hvr.{a40}", V),
    ("LLM", "gsk_{a52}", V),
    ("BOT", "{d10}:AA{a33}", V),
    ("BOT2", "{d9}:AA{a33}", V),
    ("GH", "ghp_{a36}", V),
    ("GH_O", "gho_{a36}", V),
    ("GH_U", "ghu_{a36}", V),
    ("GH_S", "ghs_{a36}", V),
    ("GH_R", "ghr_{a36}", V),
    ("GH_FINE", "github_pat_{a22}_{a59}", V),
    ("GL", "glpat-{a20}", V),
    ("GL_TRIGGER", "glptt-{h40}", V),
    ("GL_DEPLOY", "gldt-{a20}", V),
    ("GL_RUNNER", "glrt-{a20}", V),
    ("GL_RUNNER_OLD", "GR1348941{a20}", V),
    ("GL_CI", "glcbt-{a20}", V),
    ("GL_FEED", "glft-{a20}", V),
    ("ST", "sk_live_{a24}", V),
    ("ST_TEST", "sk_test_{a24}", V),
    ("ST_R", "rk_live_{a24}", V),
    ("ST_HOOK", "whsec_{a32}", V),
    ("OA", "sk-{a48}", V),
    ("OA_PROJ", "sk-proj-{a60}", V),
    ("ANT", "sk-ant-api03-{a93}AA", V),
    ("ANT_ADMIN", "sk-ant-admin01-{a93}AA", V),
    ("AWS_ID", "AKIA{U16}", V),
    ("AWS_STS", "ASIA{U16}", V),
    ("JWT", "eyJ{a20}.eyJ{a30}.{a43}", V),
    ("PEM", "-----BEGIN RSA PRIVATE KEY-----\nMII{a40}", V),
    ("PEM_EC", "-----BEGIN EC PRIVATE KEY-----", V),
    ("PEM_OPENSSH", "-----BEGIN OPENSSH PRIVATE KEY-----", V),
    ("PGP", "-----BEGIN PGP PRIVATE KEY BLOCK-----", V),
    ("NPMRC", "npm_{a36}", V),
    ("ATL", "ATATT3{a186}", V),
    ("DBX", "dapi{h32}", V),
    ("LIN", "lin_api_{a40}", V),
    ("NOTION", "secret_{a43}", V),
    ("NOTION_NEW", "ntn_{a46}", V),
    ("POSTMAN", "PMAK-{h24}-{h34}", V),
    ("PULUMI", "pul-{h40}", V),
    ("SENTRY_ORG", "sntrys_eyJ{a80}", V),
    ("SENTRY_USER", "sntryu_{h64}", V),
    ("GRAFANA_CLOUD", "glc_eyJ{a60}", V),
    ("GRAFANA_SA", "glsa_{a32}_{h8}", V),
    ("NEWRELIC", "NRAK-{U27}", V),
    ("AZ_APP_X", "abc8Q~{a34}", V),
    (
        "AGE",
        "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
        V,
    ),
    ("OP", "ops_eyJ{a250}", V),
    ("OP_ACCOUNT", "A3-{U6}-{U11}-{U5}-{U5}-{U5}", V),
    ("REPLICATE", "r8_{a37}", V),
    ("PPLX", "pplx-{a48}", V),
    ("XAI", "xai-{a80}", V),
    ("TS", "tskey-auth-{a10}-{a30}", V),
    ("DOPPLER", "dp.pt.{a43}", V),
    ("PSCALE", "pscale_tkn_{a43}", V),
    ("SUPA", "sbp_{h40}", V),
    ("FLY", "fo1_{a43}", V),
    ("MAILGUN", "key-{h32}", V),
    ("SQ", "sq0atp-{a22}", V),
    ("SQ_APP", "sq0csp-{a43}", V),
    ("SQ_PROD", "EAAA{a60}", V),
    ("TWILIO", "SK{h32}", V),
    ("DT", "dt0c01.{U24}.{U64}", V),
    ("CF_CONTENT", "CFPAT-{a43}", V),
    ("GEMS", "rubygems_{h48}", V),
    ("SHIPPO", "shippo_live_{h40}", V),
    ("DUFFEL", "duffel_test_{a43}", V),
    ("TYPEFORM", "tfp_{a59}", V),
    ("PREFECT", "pnu_{a36}", V),
    ("JFROG", "AKCp{a69}", V),
    ("JFROG_REF", "cmVmd{a59}", V),
    // A token inside a longer value (a command line, a config line) is found as well.
    ("RUN_ARGS", "--hf-token hf_{a34} --fast", V),
    ("TOOL_OPTS", "--key=gsk_{a52}", V),
    ("CFG", "[auth]\ntoken = \"dckr_pat_{a27}\"", V),
    ("DOCKER_ARGS", "-e TOKEN=ghp_{a36}", V),
    ("QUOTED", "'xoxb-{d11}-{d12}-{a24}'", V),
    // --- Structured secrets ---------------------------------------------------------------
    (
        "NETRC",
        "machine api.example.com login ada password hunter2",
        V,
    ),
    ("NETRC_ML", "machine h\n  login ada\n  password s3cr3t!", V),
    ("NETRC_DEFAULT", "default login ada password hunter2", V),
    ("YAML_CFG", "db:\n  user: ada\n  password: hunter2", V),
    ("YAML_INLINE", "{user: ada, password: hunter2}", V),
    ("JSON_CFG", "{\"user\":\"ada\",\"password\":\"hunter2\"}", V),
    ("JSON_SPACED", "{ \"api_key\" : \"abc123def\" }", V),
    ("JSON_CLIENT", "{\"client_secret\": \"x9y8z7\"}", V),
    ("INI", "[db]\npassword = hunter2", V),
    ("RUBY", ":password => 'hunter2'", V),
    ("TOML_CFG", "access_token = \"abc.def\"", V),
    ("CONN", "Server=db;User Id=sa;Password=hunter2;", V),
    ("CONN_LIBPQ", "host=db user=ada pwd=hunter2", V),
    (
        "AZ_CONN",
        "DefaultEndpointsProtocol=https;AccountName=a;AccountKey={a40}==",
        V,
    ),
    (
        "SB_CONN",
        "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessSignature=sr%3D{a20}",
        V,
    ),
    ("CURL_ARGS", "-u ada:hunter2", V),
    (
        "CURL_CMD",
        "curl -sS -u ada:hunter2 https://api.example.com",
        V,
    ),
    ("CURL_LONG", "curl --user ada:hunter2 https://x", V),
    ("CURL_EQ", "--user=ada:hunter2", V),
    ("CURL_PROXY", "--proxy-user ada:hunter2", V),
    (
        "S3_URL",
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKID%2F2024&X-Amz-Signature={h64}",
        V,
    ),
    (
        "GCS_URL",
        "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature={h64}",
        V,
    ),
    (
        "SAS_URL",
        "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&ss=b&se=2030-01-01&sig={a43}%3D",
        V,
    ),
    (
        "CF_SIGNED",
        "https://d1.cloudfront.net/f?Expires=1700000000&Signature={a60}&Key-Pair-Id=K2",
        V,
    ),
    ("STS_URL", "https://x/y?X-Amz-Security-Token={a80}", V),
    (
        "SLACK_HOOK",
        "https://hooks.slack.com/services/T000/B000/{a24}",
        V,
    ),
    (
        "DISCORD_HOOK",
        "https://discord.com/api/webhooks/{d18}/{a68}",
        V,
    ),
    (
        "TEAMS_HOOK",
        "https://outlook.office.com/webhook/{h8}-{h4}",
        V,
    ),
    (
        "GIT_CONFIG_PARAMETERS",
        "'http.extraHeader=Authorization: Bearer {a20}'",
        V,
    ),
    ("HEADERS", "X-Api-Key: {a20}", V),
    ("HEADERS2", "Cookie: session={a20}", V),
    ("HEADERS3", "Private-Token: {a20}", V),
    // --- URLs with a password --------------------------------------------------------------
    ("DATABASE_URL", "postgres://ada:hunter2@db:5432/app", U),
    ("REDIS_URL", "redis://:hunter2@cache:6379/0", U),
    ("AMQP_URL", "amqp://guest:guest@mq:5672/", U),
    (
        "MONGO",
        "mongodb+srv://ada:p%40ss@cluster0.example.net/db",
        U,
    ),
    (
        "PIP_INDEX_URL",
        "https://__token__:{a20}@pypi.example.com/simple",
        U,
    ),
    ("HTTPS_PROXY", "http://ada:hunter2@proxy:3128", U),
    ("http_proxy", "ada:hunter2@proxy:3128", U),
    (
        "REMOTE",
        "https://x-access-token:{a20}@github.com/o/r.git",
        U,
    ),
    ("FTP", "ftp://ada:pa/ss@files.example.com/", U),
    // --- Credential names --------------------------------------------------------------------
    ("DB_PW", "hunter2", N),
    ("PW", "hunter2", N),
    ("ADMIN_PW", "x", N),
    ("SMTP_PSWD", "x", N),
    ("MAIL_PSSWD", "x", N),
    ("DB_PWORD", "x", N),
    ("AWS_CREDS", "x", N),
    ("GCP_CRED", "x", N),
    ("DBCREDS", "x", N),
    ("VPN_PASSCODE", "123456", N),
    ("dbPw", "x", N),
    ("mailPswd", "x", N),
    ("GITHUB_TOKEN", "x", N),
    ("GH_TOKEN", "x", N),
    ("NPM_TOKEN", "x", N),
    ("NODE_AUTH_TOKEN", "x", N),
    ("CI_JOB_TOKEN", "x", N),
    ("HF_TOKEN", "x", N),
    ("HUGGING_FACE_HUB_TOKEN", "x", N),
    ("OPENAI_API_KEY", "x", N),
    ("ANTHROPIC_API_KEY", "x", N),
    ("GEMINI_API_KEY", "x", N),
    ("GROQ_API_KEY", "x", N),
    ("AWS_SECRET_ACCESS_KEY", "x", N),
    ("AWS_SESSION_TOKEN", "x", N),
    ("AZURE_CLIENT_SECRET", "x", N),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/home/a/key.json", N),
    ("DOCKER_PASSWORD", "x", N),
    ("PGPASSWORD", "x", N),
    ("MYSQL_PWD", "x", N),
    ("TWINE_PASSWORD", "x", N),
    ("VAULT_TOKEN", "x", N),
    ("SLACK_BOT_TOKEN", "x", N),
    ("TELEGRAM_BOT_TOKEN", "x", N),
    ("STRIPE_SECRET_KEY", "x", N),
    ("SENTRY_AUTH_TOKEN", "x", N),
    ("SSH_PRIVATE_KEY", "x", N),
    ("SIGNING_KEY", "x", N),
    ("ENCRYPTION_KEY", "x", N),
    ("JWT_SECRET", "x", N),
    ("SESSION_COOKIE", "x", N),
    ("COOKIE_SECRET", "x", N),
    ("BASIC_AUTH", "x", N),
    ("REFRESH_TOKEN", "x", N),
    ("accessToken", "x", N),
    ("apiKey", "x", N),
    ("MAX_TOKENS", "lots", N),
    ("CONTEXT_TOKENS", "abc", N),
    ("API_TOKEN", "12345678901234567890", N),
    // --- Harmless: kept ------------------------------------------------------------------------
    ("CONTEXT_TOKENS", "128000", K),
    ("PROMPT_TOKENS", "900", K),
    ("INPUT_TOKENS", "4096", K),
    ("COMPLETION_TOKENS", "256", K),
    ("REASONING_TOKENS", "1024", K),
    ("THINKING_TOKENS", "8000", K),
    ("MIN_TOKENS", "1", K),
    ("NUM_TOKENS", "64", K),
    ("MAX_NEW_TOKENS", "512", K),
    ("CHUNK_TOKENS", "800", K),
    ("REDIS_KEY_PREFIX", "app:", K),
    ("CACHE_KEY_PREFIX", "v2", K),
    ("KEY_PREFIX", "tenant-", K),
    ("S3_KEY_PREFIX", "logs/", K),
    ("KEY_SEPARATOR", ":", K),
    ("KEY_LENGTH", "32", K),
    ("KEY_SIZE", "4096", K),
    ("RSA_KEY_BITS", "4096", K),
    ("KEY_ALGORITHM", "ed25519", K),
    ("KEY_TYPE", "rsa", K),
    ("KEY_NAME", "deploy", K),
    ("KMS_KEY_ID", "alias/app", K),
    ("KEY_ID", "k1", K),
    ("SSH_KEY_FINGERPRINT", "SHA256:abc", K),
    ("PUBLIC_KEY", "ssh-ed25519 AAAAC3Nza ada@host", K),
    ("SSH_PUBLIC_KEY", "ssh-rsa AAAAB3 ada@host", K),
    ("JWT_PUBLIC_KEY", "-----BEGIN PUBLIC KEY-----", K),
    ("PUBKEY", "age1qyqszqgpqyqszqgpqyqszqgpqyqszqgp", K),
    ("STRIPE_PUBLISHABLE_KEY", "pk_live_{a24}", K),
    ("VERIFY_KEY", "ed25519:abc", K),
    ("PRIMARY_KEY_COLUMN", "id", K),
    ("SORT_KEY", "created", K),
    ("PARTITION_KEY", "tenant", K),
    ("TOKENIZERS_PARALLELISM", "false", K),
    ("TOKENIZER_PATH", "/models/tok.json", K),
    ("KEYBOARD_LAYOUT", "us", K),
    ("KEYMAP", "de", K),
    ("AUTH_METHOD", "oauth", K),
    ("AUTH_URL", "https://auth.example.com", K),
    ("TOKEN_URL", "https://auth.example.com/token", K),
    ("TOKEN_TYPE", "bearer", K),
    ("SECRET_NAME", "prod/db", K),
    ("PASSWORD_MIN_LENGTH", "12", K),
    ("CREDENTIALS_PROVIDER", "env", K),
    ("PASSENGER_ROOT", "/opt/passenger", K),
    ("COMPASS_HOME", "/opt/compass", K),
    ("BYPASS_CACHE", "1", K),
    ("PWD", "/home/ada/src", K),
    ("OLDPWD", "/home/ada", K),
    // Empty values pass whatever the name (the documented rule).
    ("GITHUB_TOKEN", "", K),
    ("DB_PASSWORD", "", K),
    ("PW", "", K),
    ("AWS_CREDS", "", K),
    ("MAX_TOKENS", "", K),
    ("ANY", "", K),
    // Ordinary values that look a little like secrets but are not.
    ("PATH", "/usr/local/bin:/usr/bin:/bin", K),
    ("HOME", "/home/ada", K),
    ("LANG", "en_US.UTF-8", K),
    ("EDITOR", "vim", K),
    ("TERM", "xterm-256color", K),
    ("SHELL", "/bin/bash", K),
    ("MODEL", "sk-short", K),
    ("HF_MODEL", "hf_model_name", K),
    ("HF_HUB_CACHE", "/cache/hf", K),
    ("PIP_INDEX_URL", "https://pypi.org/simple", K),
    ("DATABASE_URL", "postgres://ada@db:5432/app", K),
    ("DATABASE_URL2", "postgres://db:5432/app", K),
    ("HTTP_PROXY", "http://proxy:3128", K),
    ("NO_PROXY", "localhost,127.0.0.1,.internal", K),
    ("GIT_AUTHOR_NAME", "Ada Lovelace", K),
    ("GIT_AUTHOR_EMAIL", "ada@example.com", K),
    ("TZ", "Europe/Berlin", K),
    ("NODE_OPTIONS", "--max-old-space-size=4096", K),
    ("RUSTFLAGS", "-C target-cpu=native", K),
    ("CARGO_TERM_COLOR", "always", K),
    ("VERSION", "1.2.3-rc.1", K),
    ("COMMIT", "{h40}", K),
    ("UUID", "{h8}-{h4}-{h4}-{h4}-{h12}", K),
    ("BUILD_ID", "{d10}", K),
    ("DOCS", "password reset emails go out daily", K),
    ("NOTE", "use --user to pick the account", K),
    ("JSON_EMPTY", "{\"password\": \"\"}", K),
    ("YAML_PLACEHOLDER", "password: ${DB_PASSWORD}", K),
    ("TEMPLATE", "password=<set me>", K),
    ("MASKED", "password: ****", K),
    ("S3_PLAIN", "https://b.s3.amazonaws.com/k/object.txt", K),
    ("QUERY", "https://example.com/search?q=signature", K),
    ("GCLOUD_PROJECT", "my-project-123", K),
    ("AWS_REGION", "eu-west-1", K),
    ("AWS_PROFILE", "dev", K),
    ("KUBECONFIG", "/home/ada/.kube/config", K),
    ("RUNTIME_DIR", "/run/user/1000", K),
    ("TELEGRAM_CHAT_ID", "-{d12}", K),
    ("RATIO", "{d8}:{d8}", K),
    ("PORTS", "8080:80", K),
    ("LS_COLORS", "rs=0:di=01;34:ln=01;36", K),
    ("CFLAGS", "-O2 -g", K),
    ("DISPLAY", ":0", K),
    ("XDG_RUNTIME_DIR", "/run/user/1000", K),
    ("JAVA_HOME", "/usr/lib/jvm/java-21", K),
    ("GOPATH", "/home/ada/go", K),
    ("VIRTUAL_ENV", "/home/ada/.venv", K),
    ("PS1", "\\u@\\h:\\w$ ", K),
    ("HISTCONTROL", "ignoredups", K),
    ("CI", "true", K),
    ("GITHUB_ACTIONS", "true", K),
    ("RUNNER_OS", "Linux", K),
    ("AKIA_LIKE", "AKIAshort", K),
    ("SGML", "SG.short.text", K),
    ("DO_LIKE", "dop_v1_short", K),
    ("VAULT_ADDR", "https://vault.example.com:8200", K),
    ("HVS_NOTE", "hvs.short", K),
];

#[test]
fn every_shape_has_its_expected_outcome() {
    assert!(SHAPES.len() >= 250, "{} shapes", SHAPES.len());
    let failures: Vec<String> = SHAPES
        .iter()
        .filter_map(|(name, template, expected)| {
            let value = expand(template);
            let env = agent_environment([(name.to_string(), value.clone())], &[], None);
            let got = env.withheld_reason(name);
            assert_eq!(env.kept.contains_key(*name), got.is_none(), "{name}");
            (got != *expected).then(|| {
                let rules = super::values::RULES.matching(&value);
                format!("{name}={value:?}: got {got:?}, expected {expected:?} (rules {rules:?})")
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {}:\n{}",
        failures.len(),
        SHAPES.len(),
        failures.join("\n")
    );
}

#[test]
fn the_rule_file_loads_and_every_rule_matches_something_here() {
    let rules = &super::values::RULES;
    assert_eq!(rules.file.version, 1);
    let matched: std::collections::BTreeSet<&str> = SHAPES
        .iter()
        .flat_map(|(_, t, _)| rules.matching(&expand(t)))
        .collect();
    let unused: Vec<&str> = rules
        .file
        .rule
        .iter()
        .map(|r| r.id.as_str())
        .filter(|id| !matched.contains(id))
        .collect();
    assert!(unused.is_empty(), "rules no shape exercises: {unused:?}");
}

#[test]
fn the_rules_are_fast() {
    // Compiled once; a long ordinary value is checked quickly.
    let value = "x".repeat(64 << 10);
    let started = std::time::Instant::now();
    for _ in 0..20 {
        assert!(!super::values::value_has_credential(&value));
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
