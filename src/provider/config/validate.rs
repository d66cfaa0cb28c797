//! Validation of a parsed provider configuration: every check [`validate_config`] applies, each
//! failure an [`Invalid`] naming the key it is about (the loader places it in the file).

use super::*;
use crate::provider::family::Family;
use crate::provider::location::KeyPath;
use crate::provider::template::{Placeholder, placeholders_in};

fn check_argv(key: KeyPath, argv: &[String], what: &'static str) -> Result<(), Invalid> {
    if argv.is_empty() {
        return Err(invalid(key, ConfigProblem::Empty { what }));
    }
    if let Some(i) = argv.iter().position(String::is_empty) {
        return Err(invalid(
            key.push_index(i),
            ConfigProblem::Empty {
                what: "a command argument",
            },
        ));
    }
    Ok(())
}

/// The placeholders of every argument, or the first syntax error with its key.
fn template_placeholders(
    key: &KeyPath,
    argv: &[String],
) -> Result<Vec<(usize, Vec<Placeholder>)>, Invalid> {
    argv.iter()
        .enumerate()
        .map(|(i, arg)| {
            placeholders_in(arg).map(|ps| (i, ps)).map_err(|source| {
                invalid(
                    key.clone().push_index(i),
                    ConfigProblem::Template { source },
                )
            })
        })
        .collect()
}

/// Every check a configuration must pass (see the module doc and `docs/providers-registry.md`).
pub fn validate_config(config: &ProviderConfig, origin: Origin) -> Result<(), Invalid> {
    let command_key = KeyPath::key("command");
    check_argv(command_key.clone(), &config.command, "command")?;
    let command_uses = template_placeholders(&command_key, &config.command)?;
    let first_use = |wanted: Placeholder| {
        command_uses
            .iter()
            .find(|(_, ps)| ps.contains(&wanted))
            .map(|(i, _)| *i)
    };
    if let Some(i) = first_use(Placeholder::Session) {
        return Err(invalid(
            command_key.push_index(i),
            ConfigProblem::PlaceholderNotAllowed {
                placeholder: Placeholder::Session,
                reason: "a session is only known when resuming; put it in resume",
            },
        ));
    }
    if config.prompt == PromptMode::File && first_use(Placeholder::PromptFile).is_none() {
        return Err(invalid(
            KeyPath::key("prompt"),
            ConfigProblem::PromptFileMissing,
        ));
    }
    if origin == Origin::File && config.output.builtin_only() {
        return Err(invalid(
            KeyPath::key("output"),
            ConfigProblem::BuiltinOutputMode {
                mode: config.output.as_str(),
            },
        ));
    }
    match config.sandbox_adapter {
        None => {
            if let Some(i) = first_use(Placeholder::SandboxArgs) {
                return Err(invalid(
                    command_key.push_index(i),
                    ConfigProblem::SandboxArgsWithoutAdapter,
                ));
            }
        }
        Some(SandboxAdapter::CodexArtifacts) => check_codex_artifacts(config, &command_uses)?,
    }
    if let Some(resume) = &config.resume {
        let key = KeyPath::key("resume");
        if config.output == OutputMode::Acp {
            return Err(invalid(key, ConfigProblem::ResumeWithAcp));
        }
        check_argv(key.clone(), resume, "resume")?;
        let uses = template_placeholders(&key, resume)?;
        if let Some((i, _)) = uses
            .iter()
            .find(|(_, ps)| ps.contains(&Placeholder::SandboxArgs))
        {
            return Err(invalid(
                key.push_index(*i),
                ConfigProblem::PlaceholderNotAllowed {
                    placeholder: Placeholder::SandboxArgs,
                    reason: "only the command takes the sandbox splice",
                },
            ));
        }
        if !uses
            .iter()
            .any(|(_, ps)| ps.contains(&Placeholder::Session))
        {
            return Err(invalid(key, ConfigProblem::ResumeWithoutSession));
        }
    }
    if config.models_command.is_some() && config.models.is_some() {
        return Err(invalid(KeyPath::key("models"), ConfigProblem::ModelsTwice));
    }
    if let Some(command) = &config.models_command {
        check_argv(KeyPath::key("models_command"), command, "models_command")?;
    }
    if let Some(models) = &config.models {
        let key = KeyPath::key("models");
        if models.is_empty() {
            return Err(invalid(key, ConfigProblem::Empty { what: "models" }));
        }
        if let Some(i) = models.iter().position(|m| m.trim().is_empty()) {
            return Err(invalid(
                key.push_index(i),
                ConfigProblem::Empty { what: "a model id" },
            ));
        }
    }
    if let Some(command) = &config.version_command {
        check_argv(KeyPath::key("version_command"), command, "version_command")?;
    }
    check_roles(config)?;
    if let Some(confine) = &config.confine {
        let lists = [
            ("writable", &confine.writable),
            ("write_through", &confine.write_through),
        ];
        for (key, entries) in lists {
            for (i, entry) in entries.iter().enumerate() {
                if let Err(e) = super::confine::check_writable(entry) {
                    return Err(invalid(
                        KeyPath::key("confine").push_key(key).push_index(i),
                        ConfigProblem::Confine {
                            message: e.to_string(),
                        },
                    ));
                }
            }
        }
        for (i, entry) in confine.allow_connect.iter().enumerate() {
            if let Err(e) = entry.parse::<crate::supervise::net::NetAllow>() {
                return Err(invalid(
                    KeyPath::key("confine")
                        .push_key("allow_connect")
                        .push_index(i),
                    ConfigProblem::Confine {
                        message: e.to_string(),
                    },
                ));
            }
        }
    }
    if let Some(loads) = &config.loads {
        for (i, entry) in loads.project.iter().flatten().enumerate() {
            if let Err(e) = super::loads::check_project_entry(entry) {
                return Err(invalid(
                    KeyPath::key("loads").push_key("project").push_index(i),
                    ConfigProblem::Loads {
                        message: e.to_string(),
                    },
                ));
            }
        }
        for (i, entry) in loads.home.iter().enumerate() {
            if let Err(e) = super::confine::check_writable(entry) {
                return Err(invalid(
                    KeyPath::key("loads").push_key("home").push_index(i),
                    ConfigProblem::Loads {
                        message: e.to_string(),
                    },
                ));
            }
        }
    }
    if let Some(auth) = &config.auth {
        check_auth(auth)?;
    }
    if let Some(retry) = &config.builder_retry {
        check_builder_retry(config, retry)?;
    }
    if let Some(connection) = &config.connection {
        let key = KeyPath::key("connection");
        if let Some(command) = &connection.login_command {
            check_argv(
                key.clone().push_key("login_command"),
                command,
                "login_command",
            )?;
        }
        if let Some(command) = &connection.status_command {
            check_argv(key.push_key("status_command"), command, "status_command")?;
        }
    }
    Ok(())
}

fn check_roles(config: &ProviderConfig) -> Result<(), Invalid> {
    // autocode's own runtime has no default models: its routes name the user's direct
    // connections (`ENDPOINT/MODEL`), given per run.
    let required: &[_] = if config.output == OutputMode::DirectRuntime {
        &[]
    } else {
        &REQUIRED_ROLE_KEYS
    };
    for &key in required {
        if !config.roles.contains_key(&key) {
            return Err(invalid(
                KeyPath::key("roles"),
                ConfigProblem::MissingRole { key: key.as_str() },
            ));
        }
    }
    for (role_key, route) in &config.roles {
        let key = KeyPath::key("roles").push_key(role_key.as_str());
        if route.model.trim().is_empty() {
            return Err(invalid(
                key.push_key("model"),
                ConfigProblem::Empty { what: "model" },
            ));
        }
        for (field, value) in [
            ("effort", &route.effort),
            ("light_effort", &route.light_effort),
        ] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                return Err(invalid(
                    key.clone().push_key(field),
                    ConfigProblem::Empty {
                        what: "an effort (leave it out for the tool's default)",
                    },
                ));
            }
        }
    }
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_auth(auth: &AuthConfig) -> Result<(), Invalid> {
    let key = KeyPath::key("auth");
    check_argv(
        key.clone().push_key("command"),
        &auth.command,
        "auth.command",
    )?;
    for (i, name) in auth.forbid_env.iter().enumerate() {
        if !is_env_name(name) {
            return Err(invalid(
                key.clone().push_key("forbid_env").push_index(i),
                ConfigProblem::BadEnvName { name: name.clone() },
            ));
        }
    }
    for (i, route) in auth.routes.iter().enumerate() {
        let route_key = key.clone().push_key("routes").push_index(i);
        if route.models.is_empty() {
            return Err(invalid(
                route_key.push_key("models"),
                ConfigProblem::Empty {
                    what: "a route's model prefix",
                },
            ));
        }
        if let Err(error) = regex::Regex::new(&route.pattern) {
            // The regex crate's message spans several lines; keep its last (the reason).
            let message = error.to_string();
            let reason = message.lines().last().unwrap_or(&message).trim();
            return Err(invalid(
                route_key.push_key("pattern"),
                ConfigProblem::BadPattern {
                    message: reason.trim_start_matches("error: ").to_owned(),
                },
            ));
        }
        if route.expect.is_empty() {
            return Err(invalid(
                route_key.push_key("expect"),
                ConfigProblem::Empty { what: "expect" },
            ));
        }
    }
    Ok(())
}

/// Families whose other members may not check the strong model (the reference's rule).
fn checker_family_guarded(family: &Family) -> bool {
    matches!(family, Family::Glm | Family::Mimo)
}

fn check_builder_retry(config: &ProviderConfig, retry: &BuilderRetry) -> Result<(), Invalid> {
    let key = KeyPath::key("builder_retry");
    let bad = |field: &str, reason: String| {
        Err(invalid(
            key.clone().push_key(field),
            ConfigProblem::BuilderRetry { reason },
        ))
    };
    for (field, value) in [
        ("strong_model", &retry.strong_model),
        ("checker_model", &retry.checker_model),
        ("strong_effort", &retry.strong_effort),
    ] {
        if value.trim().is_empty() {
            return bad(field, format!("{field} must not be empty"));
        }
    }
    if let Some(builder) = config.roles.get(&RoleKey::Terra)
        && builder.model == retry.strong_model
    {
        return bad(
            "strong_model",
            format!(
                "strong_model {:?} is already the Builder's (terra) model",
                retry.strong_model
            ),
        );
    }
    if retry.checker_model == retry.strong_model {
        return bad(
            "checker_model",
            "checker_model must differ from strong_model".to_owned(),
        );
    }
    let strong_family = family_of(&retry.strong_model);
    if checker_family_guarded(&strong_family) && family_of(&retry.checker_model) == strong_family {
        return bad(
            "checker_model",
            format!(
                "checker_model {:?} is in strong_model's {strong_family} family",
                retry.checker_model
            ),
        );
    }
    if let Some(models) = &config.models {
        for (field, model) in [
            ("strong_model", &retry.strong_model),
            ("checker_model", &retry.checker_model),
        ] {
            if !models.contains(model) {
                return bad(
                    field,
                    format!("{field} {model:?} is not in the static models list"),
                );
            }
        }
    }
    Ok(())
}

/// Flags the codex artifact adapter refuses outright (it owns sandbox and profile policy).
const ADAPTER_REFUSED_FLAGS: &[(&str, &str)] = &[
    (
        "--sandbox",
        "a legacy sandbox flag; {sandbox_args} sets the sandbox",
    ),
    (
        "-s",
        "a legacy sandbox flag; {sandbox_args} sets the sandbox",
    ),
    ("--add-dir", "additional writable roots"),
    ("--profile", "configuration profiles"),
    ("-p", "configuration profiles"),
    (
        "--dangerously-bypass-approvals-and-sandbox",
        "bypassing the sandbox",
    ),
    ("--yolo", "bypassing the sandbox"),
    ("--full-auto", "a sandbox policy override"),
];

/// `-c key=value` keys the adapter reserves (policy and project trust). `approval_policy` is
/// left to the user, as in the reference example.
const ADAPTER_RESERVED_CONFIG_KEYS: &[&str] = &[
    "sandbox_mode",
    "sandbox_permissions",
    "sandbox_workspace_write",
    "default_permissions",
    "permissions",
    "profile",
    "profiles",
    "projects",
];

fn check_config_override(value: &str) -> Result<(), String> {
    let Some((key, val)) = value.split_once('=') else {
        return Err(format!(
            "-c {value:?} is not a key=value override (JSON blobs are not config overrides)"
        ));
    };
    let key = key.trim();
    let key_ok = !key.is_empty()
        && key.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !key_ok {
        return Err(format!(
            "-c {value:?} is not a key=value override (JSON blobs are not config overrides)"
        ));
    }
    if val.trim().is_empty() {
        return Err(format!("-c {value:?} has an empty value"));
    }
    if let Some(reserved) = ADAPTER_RESERVED_CONFIG_KEYS
        .iter()
        .find(|r| key == **r || key.starts_with(&format!("{r}.")))
    {
        return Err(format!(
            "-c {key}=... sets {reserved}, a policy key the adapter reserves"
        ));
    }
    Ok(())
}

fn check_codex_artifacts(
    config: &ProviderConfig,
    command_uses: &[(usize, Vec<Placeholder>)],
) -> Result<(), Invalid> {
    let command_key = KeyPath::key("command");
    let refuse = |i: usize, reason: String| {
        Err(invalid(
            command_key.clone().push_index(i),
            ConfigProblem::AdapterRefused { reason },
        ))
    };
    if config.output != OutputMode::ReportFile {
        return Err(invalid(
            KeyPath::key("output"),
            ConfigProblem::AdapterRefused {
                reason: "the adapter is for output = \"report_file\" commands".to_owned(),
            },
        ));
    }
    if let Some((i, _)) = command_uses
        .iter()
        .find(|(_, ps)| ps.contains(&Placeholder::Sandbox))
    {
        return refuse(*i, "legacy {sandbox}; use {sandbox_args}".to_owned());
    }
    if !command_uses
        .iter()
        .any(|(_, ps)| ps.contains(&Placeholder::SandboxArgs))
    {
        return Err(invalid(
            command_key,
            ConfigProblem::AdapterRefused {
                reason: "the command needs a {sandbox_args} argument".to_owned(),
            },
        ));
    }
    let args = &config.command;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => (flag, Some(value)),
            _ => (arg, None),
        };
        if let Some((_, why)) = ADAPTER_REFUSED_FLAGS.iter().find(|(f, _)| *f == flag) {
            return refuse(i, format!("{flag} ({why})"));
        }
        match flag {
            "-C" | "--cd" => {
                let value = match inline {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        args.get(i).map(String::as_str)
                    }
                };
                if value != Some("{workspace}") {
                    return refuse(
                        i.min(args.len().saturating_sub(1)),
                        format!("{flag} must be followed by exactly {{workspace}}"),
                    );
                }
            }
            "-c" | "--config" => {
                let value = match inline {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        args.get(i).map(String::as_str)
                    }
                };
                let Some(value) = value else {
                    return refuse(args.len() - 1, format!("{flag} without a value"));
                };
                if let Err(reason) = check_config_override(value) {
                    return refuse(i, reason);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}
