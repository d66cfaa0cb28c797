use super::*;
use crate::provider::builtin::{builtin, bundled_text};
use crate::provider::config::load_config;
use crate::provider::config::{AuthConfig, ConnectionConfig};

fn route(models: &str, pattern: &str, expect: &str) -> AuthRoute {
    AuthRoute {
        models: models.into(),
        pattern: pattern.into(),
        expect: expect.into(),
        name: None,
        billing: None,
    }
}

fn kilo_routes() -> Vec<AuthRoute> {
    let loaded = load_config(
        Path::new("kilocode.toml"),
        bundled_text("kilocode").unwrap(),
    )
    .unwrap();
    loaded.config.auth.unwrap().routes
}

fn ms(models: &[&str]) -> Vec<String> {
    models.iter().map(|m| m.to_string()).collect()
}

const KILO_LISTING: &str = "\u{1b}[1mCredentials\u{1b}[0m ~/.local/share/kilo/auth.json\n\
        \u{1b}[32m●\u{1b}[0m OpenAI \u{1b}[2moauth\u{1b}[0m\n\
        • Zhipu AI Coding Plan api\n\
        ● Alibaba Token Plan oauth\r\n\
        \n2 credentials\n";

#[test]
fn auth_table() {
    let routes = kilo_routes();
    // (models, ok, per-route outcomes in route order, unrouted)
    type Case = (
        &'static [&'static str],
        bool,
        Vec<(&'static str, RouteOutcome)>,
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        (
            &["openai/gpt-5.6-sol"],
            true,
            vec![("openai/", RouteOutcome::Pass)],
            &[],
        ),
        (
            &["openai/gpt-5.6-sol", "zhipuai-coding-plan/glm-5.3"],
            true,
            vec![
                ("openai/", RouteOutcome::Pass),
                ("zhipuai-coding-plan/", RouteOutcome::Pass),
            ],
            &[],
        ),
        (
            &["alibaba-token-plan/qwen3.8-max"],
            false,
            vec![(
                "alibaba-token-plan/",
                RouteOutcome::Mismatch {
                    found: vec!["oauth".into()],
                },
            )],
            &[],
        ),
        (
            &["kilo/x"],
            false,
            vec![("kilo/", RouteOutcome::NoMatch)],
            &[],
        ),
        (
            &["zai-coding-plan/glm-4.6"],
            false,
            vec![("zai-coding-plan/", RouteOutcome::NoMatch)],
            &[],
        ),
        (&["mistral/large"], false, vec![], &["mistral/large"]),
        (&[], true, vec![], &[]),
    ];
    for (models, ok, outcomes, unrouted) in cases {
        let report = evaluate_auth(KILO_LISTING, &routes, &ms(models));
        let got: Vec<_> = report
            .routes
            .iter()
            .map(|r| (r.models.as_str(), r.outcome.clone()))
            .collect();
        assert_eq!(got, outcomes, "{models:?}");
        assert_eq!(report.ok, ok, "{models:?}");
        assert_eq!(report.unrouted_models, ms(unrouted), "{models:?}");
    }
}

#[test]
fn auth_details() {
    // every match must equal expect
    let routes = vec![route("gpt-", r"^Logged in using (\w+)$", "ChatGPT")];
    let two = "Logged in using ChatGPT\nLogged in using ApiKey\n";
    let r = evaluate_auth(two, &routes, &ms(&["gpt-6-sol"]));
    assert_eq!(
        r.routes[0].outcome,
        RouteOutcome::Mismatch {
            found: ms(&["ChatGPT", "ApiKey"])
        }
    );
    // whole match when there is no group
    let routes = vec![route("gpt-", r"ChatGPT", "ChatGPT")];
    assert!(evaluate_auth("using ChatGPT", &routes, &ms(&["gpt-x"])).ok);
    // no routes declared: nothing required
    assert!(evaluate_auth("", &[], &ms(&["anything"])).ok);
    // the longest prefix wins
    let routes = vec![route("openai/", "A", "A"), route("openai/gpt-", "B", "B")];
    let r = evaluate_auth("B", &routes, &ms(&["openai/gpt-6"]));
    assert_eq!(r.routes.len(), 1);
    assert_eq!((r.routes[0].models.as_str(), r.ok), ("openai/gpt-", true));
    // a model selected twice is listed once; the name defaults to the prefix
    let r = evaluate_auth("A", &routes[..1], &ms(&["openai/x", "openai/x"]));
    assert_eq!(r.routes[0].selected, ms(&["openai/x"]));
    assert_eq!(r.routes[0].name, "openai/");
    // codex_receipts' own pattern with (?m)
    let codex = load_config(
        Path::new("codex_receipts.toml"),
        bundled_text("codex_receipts").unwrap(),
    )
    .unwrap();
    let routes = codex.config.auth.unwrap().routes;
    assert!(evaluate_auth("Logged in using ChatGPT\n", &routes, &ms(&["gpt-6-sol"])).ok);
    assert!(
        !evaluate_auth(
            "Logged in using an API key - sk-...\n",
            &routes,
            &ms(&["gpt-6-sol"])
        )
        .ok
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["routes"][0]["outcome"], "pass");
}

#[test]
fn pure_helpers() {
    assert_eq!(
        first_line("\n  kilo 1.2.3  \nmore"),
        Some("kilo 1.2.3".into())
    );
    assert_eq!(first_line("\n \n"), None);
    assert_eq!(
        parse_model_lines(&clean_text(b"\x1b[1mopenai/gpt-6-sol\x1b[0m\n\n  glm-5 \n")),
        ms(&["openai/gpt-6-sol", "glm-5"])
    );
    assert_eq!(classify_status(Exit::Code(0)), ConnectionStatus::Present);
    assert_eq!(
        classify_status(Exit::Code(1)),
        ConnectionStatus::SignInRequired
    );
    assert_eq!(
        classify_status(Exit::Code(2)),
        ConnectionStatus::CheckFailed {
            exit: Exit::Code(2)
        }
    );
    assert_eq!(
        classify_status(Exit::Signal(9)),
        ConnectionStatus::CheckFailed {
            exit: Exit::Signal(9)
        }
    );
    let env: Env = [("OPENAI_API_KEY", ""), ("HOME", "/h")]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    assert_eq!(
        forbidden_env_present(&ms(&["OPENAI_API_KEY", "CODEX_API_KEY"]), &env),
        ms(&["OPENAI_API_KEY"])
    );
}

struct Bin {
    dir: tempfile::TempDir,
}

impl Bin {
    fn new() -> Self {
        Bin {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
    fn ctx(&self, extra: &[(&str, &str)]) -> ProbeContext {
        let mut env: Env = extra
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect();
        let path = format!("{}:/usr/bin:/bin", self.dir.path().display());
        env.insert("PATH".into(), path.into());
        ProbeContext {
            env,
            cwd: self.dir.path().to_owned(),
            timeout: Duration::from_secs(20),
            version_cache: None,
        }
    }
}

#[test]
fn resolve_on_path_rules() {
    let bin = Bin::new();
    let tool = bin.script("faketool", "exit 0");
    let plain = bin.dir.path().join("notexec");
    std::fs::write(&plain, "x").unwrap();
    let path_var = OsString::from(format!("rel/dir::{}", bin.dir.path().display()));
    assert_eq!(resolve_on_path("faketool", &path_var), Some(tool.clone()));
    assert_eq!(resolve_on_path("notexec", &path_var), None);
    assert_eq!(resolve_on_path("missing", &path_var), None);
    assert_eq!(resolve_on_path("", &path_var), None);
    assert_eq!(
        resolve_on_path(tool.to_str().unwrap(), OsStr::new("")),
        Some(tool)
    );
    // relative PATH entries are skipped
    assert_eq!(resolve_on_path("faketool", OsStr::new("rel")), None);
}

fn config_with(
    version: &[&str],
    models: &[&str],
    auth: &[&str],
    status: &[&str],
) -> ProviderConfig {
    let mut config = builtin("opencode").unwrap();
    config.version_command = Some(ms(version));
    config.models_command = Some(ms(models));
    config.auth = Some(AuthConfig {
        command: ms(auth),
        forbid_env: ms(&["OPENAI_API_KEY"]),
        routes: kilo_routes(),
    });
    config.connection = Some(ConnectionConfig {
        login_command: None,
        status_command: Some(ms(status)),
    });
    config
}

#[tokio::test]
async fn probes_run_through_the_boundary() {
    let bin = Bin::new();
    bin.script(
        "fk",
        r#"case "$1" in
  --version) printf '\033[1mfk 1.18.33\033[0m\nbuild abc\n' ;;
  models) printf 'openai/gpt-5.6-sol\n\n  zhipuai-coding-plan/glm-5.3\n' ;;
  auth) printf '%s\n' "$AUTH_LISTING" ;;
  status) exit "$STATUS_CODE" ;;
  fail) echo "bad thing" >&2; exit 3 ;;
esac"#,
    );
    let config = config_with(
        &["fk", "--version"],
        &["fk", "models"],
        &["fk", "auth"],
        &["fk", "status"],
    );
    let ctx = bin.ctx(&[("AUTH_LISTING", "● OpenAI oauth"), ("STATUS_CODE", "1")]);
    assert_eq!(probe_version(&config, &ctx).await.unwrap(), "fk 1.18.33");
    let models = probe_models(&config, &ctx).await.unwrap();
    assert_eq!(models.source, ModelsSource::Command);
    assert_eq!(
        models.models,
        ms(&["openai/gpt-5.6-sol", "zhipuai-coding-plan/glm-5.3"])
    );
    let report = check_auth(&config, &ms(&["openai/gpt-5.6-sol"]), &ctx)
        .await
        .unwrap();
    assert!(report.ok, "{report:?}");
    let report = check_auth(&config, &ms(&["zhipuai-coding-plan/glm-5.3"]), &ctx)
        .await
        .unwrap();
    assert!(!report.ok);
    assert_eq!(
        connection_status(&config, &ctx).await.unwrap(),
        ConnectionStatus::SignInRequired
    );
    let ctx0 = bin.ctx(&[("STATUS_CODE", "0"), ("OPENAI_API_KEY", "sk")]);
    assert_eq!(
        connection_status(&config, &ctx0).await.unwrap(),
        ConnectionStatus::Present
    );
    let ctx7 = bin.ctx(&[("STATUS_CODE", "7")]);
    assert_eq!(
        connection_status(&config, &ctx7).await.unwrap(),
        ConnectionStatus::CheckFailed {
            exit: Exit::Code(7)
        }
    );
    // forbid_env is checked against the given environment
    let report = check_auth(&config, &ms(&["openai/gpt-5.6-sol"]), &ctx0)
        .await
        .unwrap();
    assert_eq!(report.forbidden_env, ms(&["OPENAI_API_KEY"]));
    assert!(!report.ok);
    // a failing listing fails the check, with the reason
    let failing = config_with(
        &["fk", "fail"],
        &["fk", "fail"],
        &["fk", "fail"],
        &["fk", "status"],
    );
    let report = check_auth(&failing, &ms(&["openai/x"]), &ctx)
        .await
        .unwrap();
    assert!(!report.ok);
    assert!(
        report
            .listing_failed
            .as_deref()
            .unwrap_or("")
            .contains("(exit 3): bad thing"),
        "{report:?}"
    );
    let e = probe_version(&failing, &ctx).await.unwrap_err();
    assert!(
        matches!(
            e,
            ProbeError::Failed {
                exit: Exit::Code(3),
                ..
            }
        ),
        "{e}"
    );
    // static lists and missing tools
    let codex = builtin("codex").unwrap();
    assert_eq!(
        probe_models(&codex, &ctx).await.unwrap().source,
        ModelsSource::Static
    );
    let missing = config_with(&["no-such-tool-xyz"], &["x"], &["x"], &["x"]);
    assert_eq!(
        probe_version(&missing, &ctx).await.unwrap_err(),
        ProbeError::NotOnPath {
            program: "no-such-tool-xyz".into()
        }
    );
    let claude = builtin("claude").unwrap();
    assert!(matches!(
        probe_models(&claude, &ctx).await,
        Err(ProbeError::NotConfigured { .. })
    ));
    // The built-in claude checks its login with `claude auth status`, here not on PATH.
    assert_eq!(
        connection_status(&claude, &ctx).await.unwrap_err(),
        ProbeError::NotOnPath {
            program: "claude".into()
        }
    );
    let mut unchecked = claude.clone();
    unchecked.connection = None;
    assert_eq!(
        connection_status(&unchecked, &ctx).await.unwrap(),
        ConnectionStatus::Unchecked
    );
}

#[tokio::test]
async fn probes_time_out() {
    let bin = Bin::new();
    bin.script("slow", "exec sleep 30");
    let mut config = builtin("opencode").unwrap();
    config.version_command = Some(ms(&["slow"]));
    let mut ctx = bin.ctx(&[]);
    ctx.timeout = Duration::from_millis(200);
    let e = probe_version(&config, &ctx).await.unwrap_err();
    assert!(matches!(e, ProbeError::TimedOut { .. }), "{e}");
}

#[tokio::test]
async fn a_version_is_probed_once_while_its_executable_stays_the_same_file() {
    let bin = Bin::new();
    let runs = bin.dir.path().join("runs");
    let body = |version: &str| {
        format!(
            "echo run >> '{}'\necho '{version}'",
            runs.display().to_string().replace('\'', "'\\''")
        )
    };
    bin.script("vt", &body("vt 1.0"));
    let mut config = builtin("opencode").unwrap();
    config.version_command = Some(ms(&["vt", "--version"]));
    let ctx = bin.ctx(&[]);
    let probed = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(probe_version(&config, &ctx).await.unwrap(), "vt 1.0");
    assert_eq!(probe_version(&config, &ctx).await.unwrap(), "vt 1.0");
    assert_eq!(probed(), 1, "the second probe reuses the first answer");
    // Another environment is another question.
    let other = bin.ctx(&[("VT_MODE", "x")]);
    assert_eq!(probe_version(&config, &other).await.unwrap(), "vt 1.0");
    assert_eq!(probed(), 2);
    // The tool replaced (an upgrade): probed again, and its new answer is the one given.
    let replacement = bin.dir.path().join("vt.new");
    std::fs::write(&replacement, format!("#!/bin/sh\n{}\n", body("vt 2.0"))).unwrap();
    std::fs::set_permissions(&replacement, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&replacement, bin.dir.path().join("vt")).unwrap();
    assert_eq!(probe_version(&config, &ctx).await.unwrap(), "vt 2.0");
    assert_eq!(probed(), 3);
    // Rewritten in place, same size: its ctime moves, so it is probed again too.
    bin.script("vt", &body("vt 3.0"));
    assert_eq!(probe_version(&config, &ctx).await.unwrap(), "vt 3.0");
    assert_eq!(probed(), 4);
}

/// A later process (here: the cache without this process's memo) is answered from the user's
/// version cache while every file the probe ran is unchanged: the command's own file and the
/// file it execs, as Codex's `codex.js` execs its native binary.
#[tokio::test]
async fn a_version_is_kept_for_later_processes_while_every_file_it_ran_is_unchanged() {
    let bin = Bin::new();
    let runs = bin.dir.path().join("runs");
    let inner = bin.dir.path().join("vw-inner");
    let write_inner = |version: &str| {
        let text = format!(
            "#!/bin/sh\necho run >> '{}'\necho '{version}'\n",
            runs.display()
        );
        let next = bin.dir.path().join("vw-inner.new");
        std::fs::write(&next, text).unwrap();
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&next, &inner).unwrap();
    };
    write_inner("vw 1.0");
    bin.script("vw", &format!("exec '{}' \"$@\"", inner.display()));
    let argv = ms(&["vw", "--version"]);
    let cache = bin.dir.path().join("state/version-probes.json");
    let mut ctx = bin.ctx(&[("VW_TOKEN", "secret-value-7731")]);
    ctx.version_cache = Some(cache.clone());
    let probed = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // What a new process asks: this process's memo left out.
    let ask = |ctx: ProbeContext| {
        let argv = argv.clone();
        async move {
            let key = VersionKey::of(&argv, &ctx);
            probe_version_across_processes(&argv, &ctx, key.as_ref()).await
        }
    };
    assert_eq!(ask(ctx.clone()).await.unwrap(), "vw 1.0");
    assert_eq!(probed(), 1);
    assert_eq!(ask(ctx.clone()).await.unwrap(), "vw 1.0");
    assert_eq!(
        probed(),
        1,
        "the second process reads the first one's answer"
    );
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(!text.contains("secret-value-7731"), "{text}");
    assert!(
        text.contains("vw-inner"),
        "the exec'd file is named: {text}"
    );
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    // Another environment is another question.
    let mut other = bin.ctx(&[("VW_TOKEN", "another")]);
    other.version_cache = Some(cache.clone());
    assert_eq!(ask(other).await.unwrap(), "vw 1.0");
    assert_eq!(probed(), 2);
    // Only the file the command execs is replaced (the command's own file is unchanged).
    write_inner("vw 2.0");
    assert_eq!(ask(ctx.clone()).await.unwrap(), "vw 2.0");
    assert_eq!(probed(), 3);
    assert_eq!(ask(ctx.clone()).await.unwrap(), "vw 2.0");
    assert_eq!(probed(), 3);
    // Without a cache file every process asks the tool.
    let mut uncached = ctx.clone();
    uncached.version_cache = None;
    assert_eq!(ask(uncached).await.unwrap(), "vw 2.0");
    assert_eq!(probed(), 4);
}
