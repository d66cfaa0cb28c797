//! Tests of the provider TOML format: loading, located errors, validation.

use super::*;

const BASE: &str = r#"name = "t"
command = ["tool", "--model", "{model}", "--variant", "{effort}"]
prompt = "stdin"
output = "opencode_events"
resume = ["--session", "{session}"]

[roles]
astra = { model = "openai/gpt-6-sol", effort = "high" }
terra = { model = "zhipuai-coding-plan/glm-5.3", effort = "medium" }
sol = { model = "openai/gpt-6-sol", effort = "high" }
completion = { model = "openai/gpt-6-sol", effort = "medium" }
glm = { model = "zhipuai-coding-plan/glm-5.3", effort = "medium" }
plan_reviewer = { model = "openai/gpt-6-sol", effort = "high" }
"#;

fn load(text: &str) -> Result<LoadedConfig, ConfigError> {
    load_config(Path::new("/cfg/t.toml"), text)
}

fn with(replace: &str, by: &str) -> String {
    assert!(BASE.contains(replace), "{replace}");
    BASE.replacen(replace, by, 1)
}

fn err(text: &str) -> ConfigError {
    match load(text) {
        Ok(ok) => panic!("expected an error, loaded {ok:?}"),
        Err(e) => e,
    }
}

#[test]
fn base_loads_clean() {
    let loaded = load(BASE).unwrap();
    assert!(loaded.warnings.is_empty());
    assert!(loaded.same_family_pairs.is_empty());
    assert_eq!(loaded.config.output, OutputMode::OpencodeEvents);
    assert_eq!(
        loaded.config.route(Role::Requirements).unwrap().model,
        "zhipuai-coding-plan/glm-5.3"
    );
    assert_eq!(loaded.config.model_listing(), ModelListing::None);
}

#[test]
fn defaults_apply() {
    let text = with("prompt = \"stdin\"\noutput = \"opencode_events\"\n", "");
    let config = load(&text).unwrap().config;
    assert_eq!(config.prompt, PromptMode::Stdin);
    assert_eq!(config.output, OutputMode::ReportFile);
}

/// (text, line, column, key, words the message must hold)
#[test]
fn errors_name_line_column_and_key() {
    let cases: Vec<(String, usize, usize, &str, &str)> = vec![
        (
            with("\"{model}\"", "\"{modle}\""),
            2,
            31,
            "command[2]",
            "unknown placeholder {modle}",
        ),
        (
            with("prompt = \"stdin\"", "prompt = \"file\""),
            3,
            1,
            "prompt",
            "{prompt_file}",
        ),
        (
            with("prompt = \"stdin\"", "prompt = \"files\""),
            3,
            10,
            "prompt",
            "unknown variant",
        ),
        (
            with("\"tool\",", "\"tool\", \"{sandbox_args}\","),
            2,
            20,
            "command[1]",
            "sandbox_adapter",
        ),
        (
            with("output = \"opencode_events\"", "output = \"codex_events\""),
            4,
            1,
            "output",
            "built-in",
        ),
        (
            with("[\"--session\", \"{session}\"]", "[\"--continue\"]"),
            5,
            1,
            "resume",
            "{session}",
        ),
        (
            with("output = \"opencode_events\"", "output = \"acp\""),
            5,
            1,
            "resume",
            "session/resume or session/load",
        ),
        (
            with("\"{effort}\"]", "\"{effort}\", \"{session}\"]"),
            2,
            67,
            "command[5]",
            "resume",
        ),
        (
            with(
                "astra = { model = \"openai/gpt-6-sol\", effort = \"high\" }\n",
                "",
            ),
            7,
            2,
            "roles",
            "astra",
        ),
        (
            with("effort = \"medium\" }\nglm", "effort = \"\" }\nglm"),
            11,
            44,
            "roles.completion.effort",
            "must not be empty",
        ),
        (
            with("sol = {", "luna = {"),
            10,
            1,
            "roles.luna",
            "unknown variant",
        ),
        (
            with("command = [", "command = 3 #["),
            2,
            11,
            "command",
            "invalid type",
        ),
        (
            with("name = \"t\"", "name = \"other\""),
            1,
            1,
            "name",
            "differs from the file name",
        ),
        (
            with("name = \"t\"", "name = \"../x\""),
            1,
            8,
            "name",
            "invalid provider name",
        ),
        (
            format!("{BASE}models = [\"a\"]\n"),
            14,
            1,
            "roles.models",
            "unknown variant",
        ),
    ];
    for (text, line, column, key, words) in cases {
        let e = err(&text);
        let rendered = e.to_string();
        assert_eq!(
            (e.position.map(|p| (p.line, p.column)), e.key.as_deref()),
            (Some((line, column)), Some(key)),
            "{rendered}"
        );
        assert!(rendered.contains(words), "{rendered}");
        assert!(
            rendered.starts_with(&format!("/cfg/t.toml:{line}:{column}: key `{key}`: ")),
            "{rendered}"
        );
    }
}

#[test]
fn syntax_errors_are_located() {
    let e = err("name = \"t\"\ncommand = [\"a\",\n[roles]\n");
    assert!(matches!(e.problem, ConfigProblem::Syntax { .. }), "{e}");
    assert_eq!(e.position.map(|p| p.line), Some(3), "{e}");
    let e = err("name = \"t\"\ncommand = \"unterminated\n");
    assert_eq!(e.position.map(|p| p.line), Some(2), "{e}");
    assert_eq!(e.key.as_deref(), Some("command"), "{e}");
    let rendered = e.to_string();
    assert!(rendered.lines().count() <= 4, "{rendered}");
    assert!(
        rendered.contains(" 2 | command = \"unterminated"),
        "{rendered}"
    );
}

#[test]
fn unknown_keys_are_warnings_with_lines() {
    let text =
        format!("{BASE}\n[connection]\nstatus_command = [\"x\", \"status\"]\nsurprise = 1\n")
            .replace("glm = { model", "glm = { colour = \"red\", model");
    let loaded = load(&text).unwrap();
    let keys: Vec<_> = loaded.warnings.iter().map(|w| w.key.as_str()).collect();
    assert_eq!(keys, ["roles.glm.colour", "connection.surprise"]);
    let lines: Vec<_> = loaded
        .warnings
        .iter()
        .map(|w| w.position.map(|p| p.line))
        .collect();
    assert_eq!(lines, [Some(12), Some(17)]);
    assert!(
        loaded.warnings[0]
            .to_string()
            .starts_with("/cfg/t.toml:12:9: warning: key `roles.glm.colour`")
    );
}

fn adapter(command: &str) -> String {
    format!(
        "name = \"t\"\nsandbox_adapter = \"codex_artifacts\"\ncommand = {command}\n{}",
        &BASE[BASE.find("[roles]").unwrap_or(0)..]
    )
}

#[test]
fn adapter_refusals() {
    let ok = [
        r#"["codex", "exec", "{sandbox_args}", "-C", "{workspace}", "-c", "model_reasoning_effort=\"{effort}\"", "-c", "approval_policy=\"never\"", "-o", "{report}", "-"]"#,
        r#"["codex", "exec", "{sandbox_args}", "--cd={workspace}", "--config", "a.b=1"]"#,
    ];
    for command in ok {
        let text = adapter(command);
        assert!(load(&text).is_ok(), "{command}: {:?}", load(&text).err());
    }
    let refused: [(&str, &str, &str); 13] = [
        (r#"["codex", "exec"]"#, "command", "{sandbox_args}"),
        (
            r#"["codex", "{sandbox_args}", "--sandbox", "{sandbox}"]"#,
            "command[3]",
            "{sandbox}",
        ),
        (
            r#"["codex", "{sandbox_args}", "--sandbox", "read-only"]"#,
            "command[2]",
            "legacy sandbox",
        ),
        (
            r#"["codex", "{sandbox_args}", "-C", "/tmp"]"#,
            "command[3]",
            "exactly {workspace}",
        ),
        (
            r#"["codex", "{sandbox_args}", "--cd", "{workspace}/sub"]"#,
            "command[3]",
            "exactly {workspace}",
        ),
        (
            r#"["codex", "{sandbox_args}", "-C"]"#,
            "command[2]",
            "exactly {workspace}",
        ),
        (
            r#"["codex", "{sandbox_args}", "--add-dir", "/x"]"#,
            "command[2]",
            "writable roots",
        ),
        (
            r#"["codex", "{sandbox_args}", "-p", "work"]"#,
            "command[2]",
            "profiles",
        ),
        (
            r#"["codex", "{sandbox_args}", "--dangerously-bypass-approvals-and-sandbox"]"#,
            "command[2]",
            "bypassing",
        ),
        (
            r#"["codex", "{sandbox_args}", "-c", "sandbox_mode=\"danger-full-access\""]"#,
            "command[3]",
            "reserves",
        ),
        (
            r#"["codex", "{sandbox_args}", "-c", "sandbox_workspace_write.network_access=true"]"#,
            "command[3]",
            "reserves",
        ),
        (
            r#"["codex", "{sandbox_args}", "-c", "{{\"a\":1}}"]"#,
            "command[3]",
            "JSON blobs",
        ),
        (
            r#"["codex", "{sandbox_args}", "-c", "novalue"]"#,
            "command[3]",
            "key=value",
        ),
    ];
    for (command, key, words) in refused {
        let e = err(&adapter(command));
        assert_eq!(e.key.as_deref(), Some(key), "{command}: {e}");
        assert!(e.to_string().contains(words), "{command}: {e}");
    }
}

#[test]
fn builder_retry_rules() {
    let retry = |strong: &str, checker: &str| {
        format!(
            "{BASE}\n[builder_retry]\nstrong_model = \"{strong}\"\nchecker_model = \"{checker}\"\n"
        )
    };
    let loaded = load(&retry("openai/gpt-6-sol", "zhipuai-coding-plan/glm-5.3")).unwrap();
    assert_eq!(loaded.config.builder_retry.unwrap().strong_effort, "xhigh");
    let cases = [
        (
            retry("zhipuai-coding-plan/glm-5.3", "openai/gpt-6-sol"),
            "builder_retry.strong_model",
            "Builder",
        ),
        (
            retry("openai/gpt-6-sol", "openai/gpt-6-sol"),
            "builder_retry.checker_model",
            "differ",
        ),
        (
            retry("zai/glm-5.2", "zhipuai-coding-plan/glm-5.3"),
            "builder_retry.checker_model",
            "glm family",
        ),
        (
            retry("xiaomi/mimo-v2", "mimo-v3"),
            "builder_retry.checker_model",
            "mimo family",
        ),
    ];
    for (text, key, words) in cases {
        let e = err(&text);
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.to_string().contains(words), "{e}");
    }
    let listed = format!(
        "{}models = [\"openai/gpt-6-sol\"]\n{}",
        &BASE[..BASE.find("[roles]").unwrap_or(0)],
        &retry("openai/gpt-6-sol", "zhipuai-coding-plan/glm-5.3")
            [BASE.find("[roles]").unwrap_or(0)..]
    );
    let e = err(&listed);
    assert_eq!(e.key.as_deref(), Some("builder_retry.checker_model"), "{e}");
    assert!(e.to_string().contains("static models list"), "{e}");
}

#[test]
fn auth_checks() {
    let auth = |pattern: &str, env: &str| {
        format!(
            "{BASE}\n[auth]\ncommand = [\"kilo\", \"auth\", \"list\"]\nforbid_env = [\"{env}\"]\n\n[[auth.routes]]\nmodels = \"openai/\"\nbilling = \"pay per token\"\npattern = '{pattern}'\nexpect = \"oauth\"\n"
        )
    };
    let loaded = load(&auth(r"^OpenAI\s+(\S+)$", "OPENAI_API_KEY")).unwrap();
    let route = &loaded.config.auth.unwrap().routes[0];
    assert_eq!(route.billing, Some(Billing::PayPerToken));
    assert_eq!(route.display_name(), "openai/");
    let e = err(&auth(r"^OpenAI\s+(\S+$", "OPENAI_API_KEY"));
    assert_eq!(e.key.as_deref(), Some("auth.routes[0].pattern"), "{e}");
    assert_eq!(e.position.map(|p| p.line), Some(22), "{e}");
    assert!(e.to_string().contains("does not compile"), "{e}");
    let e = err(&auth("x", "BAD NAME"));
    assert_eq!(e.key.as_deref(), Some("auth.forbid_env[0]"), "{e}");
}

#[test]
fn models_sources() {
    let both = format!("models_command = [\"t\", \"models\"]\nmodels = [\"a\"]\n{BASE}");
    assert_eq!(err(&both).key.as_deref(), Some("models"));
    let listed = format!("models = [\"a\", \"b\"]\n{BASE}");
    let config = load(&listed).unwrap().config;
    assert_eq!(
        config.model_listing(),
        ModelListing::Static(&["a".into(), "b".into()])
    );
}

#[test]
fn serialization_is_stable() {
    let config = load(BASE).unwrap().config;
    let json = serde_json::to_value(&config).unwrap();
    assert_eq!(json["output"], "opencode_events");
    assert_eq!(json["roles"]["plan_reviewer"]["model"], "openai/gpt-6-sol");
    let error = err(&with("\"{model}\"", "\"{x}\""));
    let json = serde_json::to_value(&error).unwrap();
    assert_eq!(json["key"], "command[2]");
    assert_eq!(json["position"]["line"], 2);
    assert_eq!(json["problem"]["kind"], "template");
}

#[test]
fn loads_entries_load_and_bad_ones_are_located() {
    let text = format!(
        "{BASE}\n[loads]\nproject = [\".tool/\", \"tool.json\"]\nhome = [\"~/.tool/settings.json\"]\n"
    );
    let loaded = load(&text).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let loads = loaded.config.loads.expect("[loads]");
    assert_eq!(
        loads.project.as_deref(),
        Some(&[".tool/".to_owned(), "tool.json".to_owned()][..])
    );
    let e = err(&format!(
        "{BASE}\n[loads]\nproject = [\n  \".tool/\",\n  \"../up\",\n]\n"
    ));
    assert_eq!(e.key.as_deref(), Some("loads.project[1]"), "{e}");
    assert_eq!(e.position.map(|p| p.line), Some(18), "{e}");
    assert!(e.to_string().contains("[loads]"), "{e}");
    let e = err(&format!("{BASE}\n[loads]\nproject = [\".git/hooks/\"]\n"));
    assert!(e.to_string().contains("git's or autocode's"), "{e}");
    let e = err(&format!("{BASE}\n[loads]\nhome = [\"relative\"]\n"));
    assert_eq!(e.key.as_deref(), Some("loads.home[0]"), "{e}");
}

#[test]
fn confine_entries_load_and_bad_ones_are_located() {
    let text = format!("{BASE}\n[confine]\nwritable = [\"~/.tool/\", \"$TOOL_HOME\"]\n");
    let config = load(&text).unwrap().config;
    assert_eq!(config.writable_templates(), ["~/.tool/", "$TOOL_HOME"]);
    let text = format!("{BASE}\n[confine]\nwritable = [\n  \"~/.tool/\",\n  \"relative\",\n]\n");
    let e = err(&text);
    assert_eq!(e.key.as_deref(), Some("confine.writable[1]"), "{e}");
    assert_eq!(e.position.map(|p| (p.line, p.column)), Some((18, 3)), "{e}");
    assert!(e.to_string().contains("must start with"), "{e}");
    let e = err(&format!("{BASE}\n[confine]\nwritable = [\"~\"]\n"));
    assert!(e.to_string().contains("whole home"), "{e}");
}

#[test]
fn allow_connect_entries_load_and_bad_ones_are_located() {
    let text = format!(
        "{BASE}\n[confine]\nallow_connect = [\"127.0.0.1:5432\", \"10.0.0.0/8\", \"[fd00::/8]:6379\"]\n"
    );
    let config = load(&text).unwrap().config;
    let allowed: Vec<String> = config
        .allow_connect()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(allowed, ["127.0.0.1:5432", "10.0.0.0/8", "[fd00::/8]:6379"]);
    let text = format!(
        "{BASE}\n[confine]\nallow_connect = [\n  \"127.0.0.1:5432\",\n  \"db.local:5432\",\n]\n"
    );
    let e = err(&text);
    assert_eq!(e.key.as_deref(), Some("confine.allow_connect[1]"), "{e}");
    assert_eq!(e.position.map(|p| p.line), Some(18), "{e}");
    assert!(e.to_string().contains("is not an address"), "{e}");
    let e = err(&format!(
        "{BASE}\n[confine]\nallow_connect = [\"10.0.0.1/8\"]\n"
    ));
    assert!(e.to_string().contains("host bits"), "{e}");
}
