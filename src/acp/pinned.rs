//! The pinned ACP agents that autocode's scripted setups (the `scripted-acp-*` scenario profiles,
//! the ACP end-to-end tests) register as TOML tools (`output = "acp"`): their names, commands,
//! the native CLI whose isolated configuration each reads, and the one function that writes the
//! tool into a provider registry's user folder.

use std::collections::BTreeMap;
use std::path::Path;

use crate::role::RoleKey;
use crate::transport::BuiltinTransport;

/// The variable naming the Claude Code executable Zed's adapter runs (its agent SDK's
/// `pathToClaudeCodeExecutable`; unset: the SDK's bundled Claude Code).
pub const CLAUDE_CODE_EXECUTABLE: &str = "CLAUDE_CODE_EXECUTABLE";

/// A pinned ACP agent (the versions are pinned in `tests/clis/package.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PinnedAcpAgent {
    /// OpenCode's own ACP server, `opencode acp` (runs commands with its own tools).
    Opencode,
    /// Zed's Claude Code adapter, `claude-code-acp` (runs commands in the client's terminal).
    Claude,
}

impl PinnedAcpAgent {
    pub const ALL: [PinnedAcpAgent; 2] = [PinnedAcpAgent::Opencode, PinnedAcpAgent::Claude];

    /// The registered tool's name (its provider name).
    pub fn tool_name(self) -> &'static str {
        match self {
            PinnedAcpAgent::Opencode => "opencode-acp",
            PinnedAcpAgent::Claude => "claude-acp",
        }
    }

    /// The agent's command line (found on PATH).
    pub fn command(self) -> &'static [&'static str] {
        match self {
            PinnedAcpAgent::Opencode => &["opencode", "acp"],
            PinnedAcpAgent::Claude => &["claude-code-acp"],
        }
    }

    /// The native CLI whose configuration the agent reads (the adapter drives Claude Code).
    pub fn cli(self) -> BuiltinTransport {
        match self {
            PinnedAcpAgent::Opencode => BuiltinTransport::Opencode,
            PinnedAcpAgent::Claude => BuiltinTransport::Claude,
        }
    }

    /// The tool's TOML file, every role key routed to `model(key)`.
    pub fn tool_toml(self, model: impl Fn(RoleKey) -> String) -> String {
        let roles: toml::Table = RoleKey::ALL
            .into_iter()
            .map(|key| {
                let mut route = toml::Table::new();
                route.insert("model".into(), toml::Value::String(model(key)));
                (key.as_str().to_owned(), toml::Value::Table(route))
            })
            .collect();
        let mut tool = toml::Table::new();
        tool.insert("name".into(), self.tool_name().into());
        tool.insert(
            "command".into(),
            toml::Value::Array(self.command().iter().map(|a| (*a).into()).collect()),
        );
        tool.insert("output".into(), "acp".into());
        tool.insert("roles".into(), toml::Value::Table(roles));
        tool.to_string()
    }

    /// Registers the tool in the provider folder `providers_dir` (a registry's
    /// `ConfigPaths::user_dir`), every role on `model(key)`; returns the variables the agent
    /// needs beyond its CLI's isolated configuration (Claude Code refuses to skip its permission
    /// prompts as root outside a sandbox, and autocode's room is that sandbox).
    ///
    /// `cli_bin`: the folder of the pinned CLIs (`tests/clis/node_modules/.bin`). Claude Code's
    /// adapter then runs the pinned Claude Code (`CLAUDE_CODE_EXECUTABLE`) instead of the one
    /// bundled in its agent SDK (2.1.44 under 0.16.2, which spins without a word once a
    /// command rewrites `~/.claude.json` mid-session; the pinned 2.1.328 does not, measured on
    /// `builder-plants-home-instructions`).
    pub fn register(
        self,
        providers_dir: &Path,
        cli_bin: Option<&Path>,
        model: impl Fn(RoleKey) -> String,
    ) -> std::io::Result<BTreeMap<String, String>> {
        std::fs::create_dir_all(providers_dir)?;
        std::fs::write(
            providers_dir.join(format!("{}.toml", self.tool_name())),
            self.tool_toml(model),
        )?;
        Ok(self.agent_env(cli_bin.map(|bin| bin.join("claude")).as_deref()))
    }

    /// The variables the agent needs beyond its CLI's isolated configuration; `cli`: the
    /// native CLI's executable, which Claude Code's adapter then runs (when it exists).
    pub fn agent_env(self, cli: Option<&Path>) -> BTreeMap<String, String> {
        match self {
            PinnedAcpAgent::Claude => {
                let mut env: BTreeMap<String, String> =
                    [("IS_SANDBOX".to_owned(), "1".to_owned())].into();
                if let Some(claude) = cli.and_then(|c| std::fs::canonicalize(c).ok()) {
                    env.insert(
                        CLAUDE_CODE_EXECUTABLE.to_owned(),
                        claude.to_string_lossy().into_owned(),
                    );
                }
                env
            }
            PinnedAcpAgent::Opencode => BTreeMap::new(),
        }
    }

    /// The pinned agent driving `cli`.
    pub fn for_cli(cli: BuiltinTransport) -> Option<Self> {
        Self::ALL.into_iter().find(|agent| agent.cli() == cli)
    }

    /// The model a scripted run routes every role of this agent's tool to: Claude Code's
    /// adapter lists only its aliases (the scripted model answers whichever it sends).
    pub fn scripted_model(self, model: &str) -> String {
        match self {
            PinnedAcpAgent::Opencode => format!("mock/{model}"),
            PinnedAcpAgent::Claude => "default".to_owned(),
        }
    }
}

/// Whether an ACP tool's command line runs Zed's Claude Code adapter (`claude-code-acp`, or
/// its later name `claude-agent-acp`, directly or through a launcher such as `npx`): the Claude
/// Code inside it loads the workspace's `.claude/settings.json` like the native CLI (an
/// `apiKeyHelper` there runs), so the stage gets the native CLI's checks of those settings.
pub fn runs_claude_code(command: &[String]) -> bool {
    command.iter().any(|word| {
        let name = word.rsplit('/').next().unwrap_or(word);
        let name = name
            .split('@')
            .find(|part| !part.is_empty())
            .unwrap_or(name);
        matches!(name, "claude-code-acp" | "claude-agent-acp")
    })
}

/// [`native_cli`] of a registered tool that speaks ACP (`None` for any other output).
pub fn driven_cli(config: &crate::provider::ProviderConfig) -> Option<BuiltinTransport> {
    (config.output == crate::provider::OutputMode::Acp)
        .then(|| native_cli(&config.command))
        .flatten()
}

/// A tool's `[confine]` templates, `writable` and `write_through`: its own, and for an ACP tool
/// driving a built-in CLI ([`driven_cli`]) that CLI's too, since the CLI inside writes its
/// sessions and refreshes its sign-in exactly as it does natively (Zed's Claude Code adapter
/// keeps its sessions in `~/.claude/projects/`, which a repair resumes from, and rotates the
/// OAuth token in `~/.claude/.credentials.json`, which must reach the user's file).
pub fn confine_templates(config: &crate::provider::ProviderConfig) -> (Vec<String>, Vec<String>) {
    use crate::provider::builtin as b;
    let (writable, write_through): (&[&str], &[&str]) = match driven_cli(config) {
        Some(BuiltinTransport::Claude) => (&b::CLAUDE_WRITABLE, &b::CLAUDE_WRITE_THROUGH),
        Some(BuiltinTransport::Opencode) => (&b::OPENCODE_WRITABLE, &b::OPENCODE_WRITE_THROUGH),
        Some(BuiltinTransport::Codex) => (&b::CODEX_WRITABLE, &b::CODEX_WRITE_THROUGH),
        None => (&[], &[]),
    };
    let merged = |own: &[String], driven: &[&str]| {
        let mut all = own.to_vec();
        for template in driven {
            if !all.iter().any(|t| t == template) {
                all.push((*template).to_owned());
            }
        }
        all
    };
    (
        merged(config.writable_templates(), writable),
        merged(config.write_through_templates(), write_through),
    )
}

/// The built-in CLI whose user configuration an ACP tool's agent loads, when autocode knows it:
/// Claude Code inside Zed's adapter ([`runs_claude_code`]), OpenCode's own `opencode acp`.
/// Its configuring places in the stage's HOME layer are dropped before each stage, as for the
/// native CLI (`crate::run::loaded_config`).
pub fn native_cli(command: &[String]) -> Option<BuiltinTransport> {
    if runs_claude_code(command) {
        return Some(BuiltinTransport::Claude);
    }
    let runs_opencode = command.iter().any(|word| {
        let name = word.rsplit('/').next().unwrap_or(word);
        name == "opencode" || name.starts_with("opencode-ai")
    });
    (runs_opencode && command.iter().any(|w| w == "acp")).then_some(BuiltinTransport::Opencode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acp_tool_driving_a_builtin_cli_has_that_clis_places_too() {
        let roles = "[roles]\n".to_owned()
            + &[
                "astra",
                "terra",
                "sol",
                "completion",
                "glm",
                "plan_reviewer",
            ]
            .map(|key| format!("{key} = {{ model = \"m\" }}\n"))
            .concat();
        let load = |name: &str, text: &str| {
            let text = format!("{text}{roles}");
            crate::provider::config::load_config(Path::new(&format!("{name}.toml")), &text)
                .unwrap()
                .config
        };
        let adapter = load(
            "claude-acp",
            "name = \"claude-acp\"\ncommand = [\"claude-code-acp\"]\noutput = \"acp\"\n\
             [confine]\nwritable = [\"~/.adapter/\"]\n\n",
        );
        let (writable, write_through) = confine_templates(&adapter);
        assert_eq!(writable[0], "~/.adapter/", "the tool's own come first");
        for template in crate::provider::builtin::CLAUDE_WRITABLE {
            assert!(writable.iter().any(|t| t == template), "{writable:?}");
        }
        assert_eq!(
            write_through,
            crate::provider::builtin::CLAUDE_WRITE_THROUGH
        );
        let other = load(
            "qwen",
            "name = \"qwen\"\ncommand = [\"qwen\", \"--acp\"]\noutput = \"acp\"\n",
        );
        assert_eq!(confine_templates(&other), (Vec::new(), Vec::new()));
    }

    #[test]
    fn the_claude_adapter_is_recognised_however_it_is_launched() {
        let words = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        for line in [
            "claude-code-acp",
            "/usr/local/bin/claude-code-acp",
            "npx -y @zed-industries/claude-code-acp@0.16.2",
            "npx @zed-industries/claude-agent-acp",
        ] {
            assert!(runs_claude_code(&words(line)), "{line}");
        }
        for line in ["opencode acp", "qwen --acp", "claude-code-acp-like"] {
            assert!(!runs_claude_code(&words(line)), "{line}");
        }
        let pinned: Vec<String> = PinnedAcpAgent::Claude
            .command()
            .iter()
            .map(|w| (*w).to_owned())
            .collect();
        assert!(runs_claude_code(&pinned));
    }
    #[test]
    fn the_native_cli_of_each_pinned_agent_is_known() {
        for agent in PinnedAcpAgent::ALL {
            let command: Vec<String> = agent.command().iter().map(|w| (*w).to_owned()).collect();
            assert_eq!(native_cli(&command), Some(agent.cli()), "{command:?}");
        }
        let words = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(native_cli(&words("qwen --acp")), None);
        assert_eq!(native_cli(&words("opencode run")), None);
    }

    use crate::provider::{ConfigPaths, Registry};

    #[test]
    fn registered_tools_load_as_acp_tools_with_every_role_routed() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ConfigPaths::under(dir.path());
        for agent in PinnedAcpAgent::ALL {
            let env = agent
                .register(&paths.user_dir, Some(dir.path()), |key| {
                    format!("m/{}", key.as_str())
                })
                .unwrap();
            assert_eq!(
                env.contains_key("IS_SANDBOX"),
                agent == PinnedAcpAgent::Claude
            );
            // No pinned `claude` in the folder: the adapter's own.
            assert!(!env.contains_key(CLAUDE_CODE_EXECUTABLE));
        }
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("claude"), "").unwrap();
        let env = PinnedAcpAgent::Claude
            .register(&paths.user_dir, Some(&bin), |_| "m".into())
            .unwrap();
        assert_eq!(
            env.get(CLAUDE_CODE_EXECUTABLE).map(String::as_str),
            bin.join("claude").canonicalize().unwrap().to_str()
        );
        let registry = Registry::new(paths);
        for agent in PinnedAcpAgent::ALL {
            let resolved = registry.resolve_name(agent.tool_name()).unwrap();
            assert!(resolved.warnings.is_empty(), "{:?}", resolved.warnings);
            let text = agent.tool_toml(|key| format!("m/{}", key.as_str()));
            let parsed: toml::Table = text.parse().unwrap();
            assert_eq!(parsed["output"].as_str(), Some("acp"), "{text}");
            assert_eq!(
                parsed["roles"]["plan_reviewer"]["model"].as_str(),
                Some("m/plan_reviewer")
            );
        }
    }
}
