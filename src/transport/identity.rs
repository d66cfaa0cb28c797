//! Transport identity: what a saved run pins about the CLI it launches, and how it changed.
//!
//! An identity holds the resolved executable path, the version, the sha256 of each config file
//! the CLI reads that autocode can see, and the sha256 of each identity-changing environment
//! value (never the value). Which files and variables count is decided by pure functions
//! ([`config_sources`], [`IDENTITY_ENV`]); [`TransportIdentity::collect`] reads the files
//! through a caller-given reader, so tests and the driver share one code path. A changed
//! identity pauses a saved run (`PAUSED_TRANSPORT_CHANGED`); [`compare`] lists the changes.
//!
//! For a built-in transport it also pins a digest of autocode's own launch policy (the fixed
//! flags, tool lists, denials and removed variables, see [`launch_policy_text`]), so a saved
//! run notices when an autocode upgrade changes how its CLI is launched.
//!
//! Config files per transport:
//! - every transport: the provider TOML bytes the caller loaded (label `provider_toml`);
//! - opencode: `$XDG_CONFIG_HOME/opencode/opencode.json` and `.jsonc` (XDG default
//!   `$HOME/.config`), the `OPENCODE_CONFIG` file, the workspace `opencode.json` and `.jsonc`
//!   and its `.opencode/` as a whole ([`tree_digest`]);
//! - claude: `settings.json` and `settings.local.json` in `$CLAUDE_CONFIG_DIR` (default
//!   `$HOME/.claude`) and in `<workspace>/.claude/` (and that directory as a whole), and
//!   `<workspace>/.mcp.json` (hooks, permissions, MCP servers);
//! - codex: `$CODEX_HOME/config.toml` (default `$HOME/.codex`) and `<workspace>/.codex/config.toml`
//!   (and that directory as a whole).
//!
//! Labels starting with `workspace_` name the project's own agent configuration
//! ([`is_project_config`]).

use super::BuiltinTransport;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Environment variables whose values change which configuration or endpoint a CLI uses.
/// `CLAUDE_CODE_MAX_OUTPUT_TOKENS` is deliberately not one of them.
pub const IDENTITY_ENV: [&str; 8] = [
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_EXECUTABLE",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "OPENAI_BASE_URL",
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_CONFIG_CONTENT",
];

/// A canonical description of how autocode launches a built-in transport: the plans of a
/// canonical request (placeholder model, effort, paths, an empty environment) for each sandbox,
/// fresh and resumed. Derived from the planning code itself, so any change to a fixed flag, tool
/// list, denial or added variable changes it.
pub fn launch_policy_text(transport: BuiltinTransport) -> String {
    use super::{Route, StageRequest};
    use crate::agent_env::AgentEnvironment;
    use crate::ids::{ProviderName, SessionId};
    use crate::role::{Role, SandboxMode};
    let mut text = String::new();
    for sandbox in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
        for resume in [false, true] {
            let request = StageRequest {
                role: Role::Builder,
                route: Route {
                    provider: match ProviderName::new(transport.as_str()) {
                        Ok(name) => name,
                        Err(e) => return format!("unplannable: {e}"),
                    },
                    model: "PROVIDER/MODEL".into(),
                    effort: Some("high".into()),
                    codex_model_provider: None,
                },
                workspace: "/WS".into(),
                sandbox,
                prompt: String::new(),
                schema_path: "/STAGE/schema.json".into(),
                schema_json: serde_json::json!({}),
                report_path: "/STAGE/report.json".into(),
                run_dir: "/RUN".into(),
                stage_dir: "/STAGE".into(),
                resume_session: resume
                    .then(|| SessionId::new("SESSION"))
                    .and_then(Result::ok),
                env: AgentEnvironment::default(),
                cli_version: None,
                confined: false,
            };
            match super::plan_launch(&request) {
                Ok(plan) => text.push_str(&format!(
                    "{} {:?}\nenv {:?}\nfiles {:?}\n",
                    plan.program, plan.args, plan.env, plan.files
                )),
                Err(e) => text.push_str(&format!("unplannable: {e}\n")),
            }
        }
    }
    text
}

/// The state of one config file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ConfigDigest {
    Absent,
    Sha256 {
        hex: String,
    },
    /// It exists but could not be read (the error kind, e.g. `permission denied`).
    Unreadable {
        error: String,
    },
}

/// One config file (or directory) the CLI reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigSource {
    /// A stable label (`global_opencode_json`, `workspace_claude_settings`, ...).
    pub label: String,
    pub path: PathBuf,
    /// A file, or a directory digested whole ([`tree_digest`]).
    #[serde(default)]
    pub kind: SourceKind,
}

/// What a [`ConfigSource`] names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    #[default]
    File,
    /// A directory whose every file counts (plugins, hooks, agents, commands, skills and the
    /// scripts they run, wherever in it they are).
    Tree,
}

/// What a saved run pins about its transport.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportIdentity {
    /// The provider name (`opencode`, `codex`, `claude`, or a registered tool).
    pub transport: String,
    pub executable: Option<PathBuf>,
    pub version: Option<String>,
    /// sha256 of [`launch_policy_text`] for a built-in transport.
    pub launch_policy: Option<String>,
    /// Config label → digest.
    pub configs: BTreeMap<String, ConfigDigest>,
    /// Variable name → sha256 of its value, `None` when unset.
    pub env: BTreeMap<String, Option<String>>,
}

/// One difference between two identities. Environment changes name the variable only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IdentityChange {
    Transport {
        old: String,
        new: String,
    },
    Executable {
        old: Option<PathBuf>,
        new: Option<PathBuf>,
    },
    Version {
        old: Option<String>,
        new: Option<String>,
    },
    LaunchPolicy,
    Config {
        label: String,
        old: Option<ConfigDigest>,
        new: Option<ConfigDigest>,
    },
    Env {
        name: String,
    },
}

/// The hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The config files a built-in transport reads, given the agents' environment.
pub fn config_sources(
    transport: BuiltinTransport,
    workspace: &Path,
    env: &BTreeMap<String, String>,
) -> Vec<ConfigSource> {
    let home = env.get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let source = |label: &str, path: PathBuf| ConfigSource {
        label: label.into(),
        path,
        kind: SourceKind::File,
    };
    let tree = |label: &str, path: PathBuf| ConfigSource {
        label: label.into(),
        path,
        kind: SourceKind::Tree,
    };
    let mut sources = Vec::new();
    match transport {
        BuiltinTransport::Opencode => {
            let xdg = env
                .get("XDG_CONFIG_HOME")
                .filter(|x| !x.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".config")));
            if let Some(xdg) = xdg {
                let dir = xdg.join("opencode");
                sources.push(source("global_opencode_json", dir.join("opencode.json")));
                sources.push(source("global_opencode_jsonc", dir.join("opencode.jsonc")));
            }
            if let Some(custom) = env.get("OPENCODE_CONFIG").filter(|c| !c.is_empty()) {
                sources.push(source("opencode_config_file", PathBuf::from(custom)));
            }
            sources.push(source(
                "workspace_opencode_json",
                workspace.join("opencode.json"),
            ));
            sources.push(source(
                "workspace_opencode_jsonc",
                workspace.join("opencode.jsonc"),
            ));
            // Its project directory: `opencode.json(c)`, plugins it loads unasked, agents,
            // commands, modes, themes and tools.
            sources.push(tree("workspace_opencode_dir", workspace.join(".opencode")));
        }
        BuiltinTransport::Claude => {
            let config_dir = env
                .get("CLAUDE_CONFIG_DIR")
                .filter(|c| !c.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".claude")));
            if let Some(dir) = config_dir {
                sources.push(source("claude_user_settings", dir.join("settings.json")));
                sources.push(source(
                    "claude_user_local_settings",
                    dir.join("settings.local.json"),
                ));
            }
            sources.push(source(
                "workspace_claude_settings",
                workspace.join(".claude").join("settings.json"),
            ));
            sources.push(source(
                "workspace_claude_local_settings",
                workspace.join(".claude").join("settings.local.json"),
            ));
            sources.push(source("workspace_mcp_json", workspace.join(".mcp.json")));
            // The whole project directory: the scripts its hooks run, agents, commands, skills.
            sources.push(tree("workspace_claude_dir", workspace.join(".claude")));
        }
        BuiltinTransport::Codex => {
            let codex_home = env
                .get("CODEX_HOME")
                .filter(|c| !c.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".codex")));
            if let Some(codex_home) = codex_home {
                sources.push(source("codex_config_toml", codex_home.join("config.toml")));
            }
            sources.push(source(
                "workspace_codex_config_toml",
                workspace.join(".codex").join("config.toml"),
            ));
            sources.push(tree("workspace_codex_dir", workspace.join(".codex")));
        }
    }
    sources
}

/// The project places a registered tool loads (`[loads] project`, `crate::provider::LoadsConfig`)
/// as config sources: a place ending in `/` is a directory digested whole, any other a file (a
/// directory there is digested whole too). Labelled `workspace_loads:<place>`.
pub fn registered_project_sources(places: &[String], workspace: &Path) -> Vec<ConfigSource> {
    places
        .iter()
        .map(|place| ConfigSource {
            label: format!("workspace_loads:{place}"),
            path: workspace.join(place.trim_end_matches('/')),
            kind: SourceKind::Tree,
        })
        .collect()
}

/// Whether a config label names a file of the project (the work tree) rather than the user's.
pub fn is_project_config(label: &str) -> bool {
    label.starts_with("workspace_")
}

/// What a CLI writes into its own project directory at every start, which a tree digest passes
/// over (measured: OpenCode 1.18.33 starting in a project with `.opencode/` writes there
/// `package.json` naming only `@opencode-ai/plugin`, installs it with npm into `node_modules/`
/// beside `package-lock.json`, and a `.gitignore` listing these and `bun.lock`). A
/// `package.json` with anything else (a script, another dependency) counts.
fn generated_by_the_cli(name: &std::ffi::OsStr, path: &Path) -> bool {
    match name.to_str() {
        Some("node_modules" | "package-lock.json" | "bun.lock" | ".gitignore") => true,
        Some("package.json") => {
            let Ok(text) = crate::bounded_read::read_to_string(path, 64 * 1024) else {
                return false;
            };
            let Ok(serde_json::Value::Object(top)) = serde_json::from_str(&text) else {
                return false;
            };
            let only_the_plugin_package = |deps: &serde_json::Value| {
                deps.as_object().is_some_and(|deps| {
                    deps.keys().all(|name| name == "@opencode-ai/plugin")
                        && deps.values().all(serde_json::Value::is_string)
                })
            };
            top.iter()
                .all(|(key, value)| key == "dependencies" && only_the_plugin_package(value))
        }
        _ => false,
    }
}
/// Entries of a tree whose content is read; past it only names, sizes and times count.
const TREE_CONTENT_CAP: usize = 10_000;

/// The digest of the directory `root` as a whole (followed if a symlink): every entry's relative
/// path and kind, a file's executable bit and content, a symlink's target, in name order, but
/// what the CLI itself writes there ([`generated_by_the_cli`]). `Absent` when it does not exist;
/// a file there is digested as a file.
pub fn tree_digest(root: &Path) -> ConfigDigest {
    let meta = match std::fs::metadata(root) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return ConfigDigest::Absent,
        Err(e) => {
            return ConfigDigest::Unreadable {
                error: e.kind().to_string(),
            };
        }
    };
    if !meta.is_dir() {
        return digest_of(std::fs::read(root));
    }
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut hasher = Sha256::new();
    let mut entries = 0usize;
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        let dir = root.join(&relative);
        let mut names: Vec<std::ffi::OsString> = match std::fs::read_dir(&dir) {
            Ok(read) => read.flatten().map(|e| e.file_name()).collect(),
            Err(e) => {
                hasher.update(format!("e\0{}\0{}\0", relative.display(), e.kind()));
                continue;
            }
        };
        names.sort();
        let mut subdirs = Vec::new();
        for name in names {
            let rel = relative.join(&name);
            let path = root.join(&rel);
            if generated_by_the_cli(&name, &path) {
                continue;
            }
            let shown = rel.to_string_lossy();
            entries += 1;
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => {
                    hasher.update(format!("d\0{shown}\0"));
                    subdirs.push(rel);
                }
                Ok(m) if m.file_type().is_symlink() => {
                    let target = std::fs::read_link(&path).unwrap_or_default();
                    hasher.update(format!("l\0{shown}\0{}\0", target.display()));
                }
                Ok(m) if m.is_file() => {
                    let exec = m.permissions().mode() & 0o111 != 0;
                    hasher.update(format!("f\0{shown}\0{exec}\0{}\0", m.len()));
                    if entries > TREE_CONTENT_CAP {
                        hasher.update(format!("{}.{}\0", m.mtime(), m.mtime_nsec()));
                    } else {
                        match std::fs::File::open(&path)
                            .and_then(|mut file| io::copy(&mut file, &mut hasher))
                        {
                            Ok(_) => hasher.update(b"\0"),
                            Err(e) => hasher.update(format!("e\0{}\0", e.kind())),
                        }
                    }
                }
                Ok(_) => hasher.update(format!("o\0{shown}\0")),
                Err(e) => hasher.update(format!("e\0{shown}\0{}\0", e.kind())),
            }
        }
        // Depth first, in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    ConfigDigest::Sha256 {
        hex: hex(&hasher.finalize()),
    }
}

/// The digest of a file read result (`NotFound` is [`ConfigDigest::Absent`]).
pub fn digest_of(read: io::Result<Vec<u8>>) -> ConfigDigest {
    match read {
        Ok(bytes) => ConfigDigest::Sha256 {
            hex: sha256_hex(&bytes),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => ConfigDigest::Absent,
        Err(e) => ConfigDigest::Unreadable {
            error: e.kind().to_string(),
        },
    }
}

/// The inputs of an identity.
#[derive(Debug, Clone)]
pub struct IdentityInput<'a> {
    /// The provider name.
    pub transport: &'a str,
    /// The built-in transport, when the provider is one (selects its config files).
    pub builtin: Option<BuiltinTransport>,
    pub executable: Option<PathBuf>,
    pub version: Option<String>,
    /// The provider TOML bytes, for a registered (or user-overridden) provider.
    pub provider_toml: Option<&'a [u8]>,
    /// For a tool that is no built-in CLI and drives none: the project places it loads
    /// ([`registered_project_sources`]).
    pub registered_project: &'a [String],
    pub workspace: &'a Path,
    /// The agents' environment.
    pub env: &'a BTreeMap<String, String>,
}

impl TransportIdentity {
    /// Builds the identity, reading config files through `read` (`std::fs::read` in
    /// production).
    pub fn collect(
        input: &IdentityInput<'_>,
        read: &dyn Fn(&Path) -> io::Result<Vec<u8>>,
    ) -> TransportIdentity {
        let mut configs = BTreeMap::new();
        if let Some(toml) = input.provider_toml {
            configs.insert(
                "provider_toml".to_string(),
                ConfigDigest::Sha256 {
                    hex: sha256_hex(toml),
                },
            );
        }
        if let Some(builtin) = input.builtin {
            for source in config_sources(builtin, input.workspace, input.env) {
                let digest = match source.kind {
                    SourceKind::File => digest_of(read(&source.path)),
                    SourceKind::Tree => tree_digest(&source.path),
                };
                configs.insert(source.label, digest);
            }
        } else {
            for source in registered_project_sources(input.registered_project, input.workspace) {
                configs.insert(source.label, tree_digest(&source.path));
            }
        }
        let env = IDENTITY_ENV
            .iter()
            .map(|name| {
                (
                    name.to_string(),
                    input.env.get(*name).map(|v| sha256_hex(v.as_bytes())),
                )
            })
            .collect();
        TransportIdentity {
            transport: input.transport.to_string(),
            executable: input.executable.clone(),
            version: input.version.clone(),
            launch_policy: input
                .builtin
                .map(|b| sha256_hex(launch_policy_text(b).as_bytes())),
            configs,
            env,
        }
    }
}

/// Resolves a program name the way a launch with this `PATH` would (a name holding `/` is
/// taken as a path). Returns the first executable regular file found.
pub fn resolve_executable(program: &str, path_env: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    path_env?
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| is_executable(candidate))
}

/// The differences between a saved identity and the current one.
pub fn compare(old: &TransportIdentity, new: &TransportIdentity) -> Vec<IdentityChange> {
    let mut changes = Vec::new();
    if old.transport != new.transport {
        changes.push(IdentityChange::Transport {
            old: old.transport.clone(),
            new: new.transport.clone(),
        });
    }
    if old.executable != new.executable {
        changes.push(IdentityChange::Executable {
            old: old.executable.clone(),
            new: new.executable.clone(),
        });
    }
    if old.version != new.version {
        changes.push(IdentityChange::Version {
            old: old.version.clone(),
            new: new.version.clone(),
        });
    }
    if old.launch_policy != new.launch_policy {
        changes.push(IdentityChange::LaunchPolicy);
    }
    let labels: std::collections::BTreeSet<&String> =
        old.configs.keys().chain(new.configs.keys()).collect();
    for label in labels {
        let (a, b) = (old.configs.get(label), new.configs.get(label));
        // A source one side does not know (recorded by an older or newer autocode) that the
        // other finds absent is no change.
        let unknown_and_absent = matches!(
            (a, b),
            (None, Some(ConfigDigest::Absent)) | (Some(ConfigDigest::Absent), None)
        );
        if a != b && !unknown_and_absent {
            changes.push(IdentityChange::Config {
                label: label.clone(),
                old: a.cloned(),
                new: b.cloned(),
            });
        }
    }
    let names: std::collections::BTreeSet<&String> = old.env.keys().chain(new.env.keys()).collect();
    for name in names {
        let a = old.env.get(name).cloned().flatten();
        let b = new.env.get(name).cloned().flatten();
        if a != b {
            changes.push(IdentityChange::Env { name: name.clone() });
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn files(map: BTreeMap<PathBuf, Vec<u8>>) -> impl Fn(&Path) -> io::Result<Vec<u8>> {
        move |p: &Path| {
            map.get(p)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
    }

    #[test]
    fn sha256_is_the_standard_digest() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn sources_follow_the_environment() {
        let ws = Path::new("/ws");
        let e = env(&[("HOME", "/home/u")]);
        let oc = config_sources(BuiltinTransport::Opencode, ws, &e);
        let paths: Vec<_> = oc.iter().map(|s| s.path.display().to_string()).collect();
        assert_eq!(
            paths,
            [
                "/home/u/.config/opencode/opencode.json",
                "/home/u/.config/opencode/opencode.jsonc",
                "/ws/opencode.json",
                "/ws/opencode.jsonc",
                "/ws/.opencode"
            ]
        );
        let e = env(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/xdg"),
            ("OPENCODE_CONFIG", "/etc/oc.json"),
            ("CODEX_HOME", "/ch"),
        ]);
        let oc = config_sources(BuiltinTransport::Opencode, ws, &e);
        assert_eq!(oc[0].path, Path::new("/xdg/opencode/opencode.json"));
        assert!(oc.iter().any(|s| s.path == Path::new("/etc/oc.json")));
        let cx = config_sources(BuiltinTransport::Codex, ws, &e);
        assert_eq!(cx[0].path, Path::new("/ch/config.toml"));
        let cx = config_sources(BuiltinTransport::Codex, ws, &env(&[("HOME", "/h")]));
        assert_eq!(cx[0].path, Path::new("/h/.codex/config.toml"));
        let cl = config_sources(BuiltinTransport::Claude, ws, &e);
        let paths: Vec<_> = cl.iter().map(|s| s.path.display().to_string()).collect();
        assert_eq!(
            paths,
            [
                "/home/u/.claude/settings.json",
                "/home/u/.claude/settings.local.json",
                "/ws/.claude/settings.json",
                "/ws/.claude/settings.local.json",
                "/ws/.mcp.json",
                "/ws/.claude"
            ]
        );
        let project: Vec<_> = cl
            .iter()
            .filter(|s| is_project_config(&s.label))
            .map(|s| s.path.display().to_string())
            .collect();
        assert!(project.iter().all(|p| p.starts_with("/ws/")), "{project:?}");
        assert_eq!(project.len(), 4);
    }

    #[test]
    fn a_tree_digest_changes_with_anything_a_cli_would_load_from_it() {
        let scratch = tempfile::tempdir().unwrap();
        let root = scratch.path().join(".opencode");
        assert_eq!(tree_digest(&root), ConfigDigest::Absent);
        std::fs::create_dir_all(root.join("agent")).unwrap();
        std::fs::write(root.join("agent/reviewer.md"), "review").unwrap();
        let base = tree_digest(&root);
        assert!(matches!(base, ConfigDigest::Sha256 { .. }));
        assert_eq!(tree_digest(&root), base, "the same tree, the same digest");
        // A plugin dropped in a new subdirectory, an edited file, a mode bit, a symlink.
        let mut seen = vec![base.clone()];
        let mut changed = |what: &str| {
            let now = tree_digest(&root);
            assert!(!seen.contains(&now), "{what} changed nothing");
            seen.push(now);
        };
        std::fs::create_dir_all(root.join("plugin")).unwrap();
        changed("an empty plugin directory");
        std::fs::write(root.join("plugin/helper.js"), "export default {}").unwrap();
        changed("a plugin");
        std::fs::write(root.join("plugin/helper.js"), "export default {x}").unwrap();
        changed("an edit");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            root.join("plugin/helper.js"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        changed("an executable bit");
        std::os::unix::fs::symlink("/bin/sh", root.join("tool")).unwrap();
        changed("a symlink");
        // What OpenCode writes there at every start does not count; a package.json that
        // runs a script at install does.
        let before = tree_digest(&root);
        std::fs::create_dir_all(root.join("node_modules/dep")).unwrap();
        std::fs::write(root.join("node_modules/dep/index.js"), "x").unwrap();
        std::fs::write(root.join("package-lock.json"), "{}").unwrap();
        std::fs::write(root.join(".gitignore"), "node_modules\n").unwrap();
        std::fs::write(
            root.join("package.json"),
            r#"{"dependencies": {"@opencode-ai/plugin": "1.18.33"}}"#,
        )
        .unwrap();
        assert_eq!(tree_digest(&root), before);
        std::fs::write(
            root.join("package.json"),
            r#"{"dependencies": {"@opencode-ai/plugin": "1.18.33"}, "scripts": {"postinstall": "sh x"}}"#,
        )
        .unwrap();
        assert_ne!(tree_digest(&root), before, "an install script counts");
    }

    #[test]
    fn identity_and_changes() {
        let ws = Path::new("/ws");
        let e1 = env(&[("HOME", "/h"), ("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")]);
        let mut disk = BTreeMap::new();
        disk.insert(PathBuf::from("/ws/.claude/settings.json"), b"{}".to_vec());
        let input = IdentityInput {
            transport: "claude",
            builtin: Some(BuiltinTransport::Claude),
            executable: Some("/usr/bin/claude".into()),
            version: Some("2.1.328".into()),
            provider_toml: None,
            registered_project: &[],
            workspace: ws,
            env: &e1,
        };
        let old = TransportIdentity::collect(&input, &files(disk.clone()));
        assert_eq!(
            old.configs["workspace_claude_settings"],
            ConfigDigest::Sha256 {
                hex: sha256_hex(b"{}")
            }
        );
        assert_eq!(
            old.launch_policy,
            Some(sha256_hex(
                launch_policy_text(BuiltinTransport::Claude).as_bytes()
            ))
        );
        assert!(launch_policy_text(BuiltinTransport::Claude).contains("Bash(git push:*)"));
        let json = serde_json::to_string(&old).unwrap();
        assert!(
            !json.contains("127.0.0.1"),
            "env values never stored: {json}"
        );
        assert_eq!(compare(&old, &old), []);

        disk.insert(
            PathBuf::from("/ws/.claude/settings.json"),
            b"{\"x\":1}".to_vec(),
        );
        let e2 = env(&[("HOME", "/h"), ("ANTHROPIC_BASE_URL", "http://127.0.0.1:2")]);
        let new = TransportIdentity::collect(
            &IdentityInput {
                version: Some("2.1.329".into()),
                env: &e2,
                ..input.clone()
            },
            &files(disk),
        );
        let changes = compare(&old, &new);
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert!(matches!(&changes[0], IdentityChange::Version { .. }));
        assert!(
            matches!(&changes[1], IdentityChange::Config { label, .. } if label == "workspace_claude_settings")
        );
        assert_eq!(
            changes[2],
            IdentityChange::Env {
                name: "ANTHROPIC_BASE_URL".into()
            }
        );

        let gone = TransportIdentity::collect(&input, &files(BTreeMap::new()));
        assert_eq!(
            gone.configs["workspace_claude_settings"],
            ConfigDigest::Absent
        );
        let toml = TransportIdentity::collect(
            &IdentityInput {
                transport: "kilocode",
                builtin: None,
                provider_toml: Some(b"name = \"kilocode\""),
                registered_project: &[],
                ..input.clone()
            },
            &files(BTreeMap::new()),
        );
        assert_eq!(toml.configs.len(), 1);
        assert_eq!(toml.launch_policy, None);
        assert!(
            compare(&old, &toml)
                .iter()
                .any(|c| matches!(c, IdentityChange::Transport { .. }))
        );
        assert!(compare(&old, &toml).contains(&IdentityChange::LaunchPolicy));
    }

    #[test]
    fn launch_policies_are_plannable_and_distinct() {
        let texts: Vec<String> = BuiltinTransport::ALL
            .into_iter()
            .map(launch_policy_text)
            .collect();
        for text in &texts {
            assert!(!text.contains("unplannable"), "{text}");
            assert_eq!(text.lines().count(), 12, "{text}");
        }
        assert!(texts[1].contains("sandbox_mode"));
        assert!(texts[0].contains("OPENCODE_CONFIG_CONTENT"));
        assert_ne!(texts[0], texts[1]);
    }

    #[test]
    fn unreadable_is_distinct_from_absent() {
        let d = digest_of(Err(io::Error::from(io::ErrorKind::PermissionDenied)));
        assert!(matches!(d, ConfigDigest::Unreadable { .. }));
        assert_eq!(
            digest_of(Err(io::Error::from(io::ErrorKind::NotFound))),
            ConfigDigest::Absent
        );
    }

    #[test]
    fn executables_resolve_through_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("mycli");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("notexec");
        std::fs::write(&plain, "").unwrap();
        let path = format!("/nonexistent:{}", dir.path().display());
        assert_eq!(resolve_executable("mycli", Some(&path)), Some(bin.clone()));
        assert_eq!(resolve_executable("notexec", Some(&path)), None);
        assert_eq!(resolve_executable("mycli", None), None);
        assert_eq!(
            resolve_executable(bin.to_str().unwrap(), None),
            Some(bin.clone())
        );
    }
}
