//! The `[loads]` table: what a registered tool loads besides its prompt, so that a judging
//! stage runs on what the user configured and never on what a stage planted
//! (`crate::run::loaded_config`):
//!
//! - `project`: places in the work tree the tool reads its agent configuration from (settings
//!   with hooks or MCP servers, plugins, extensions). A judge does not start when a stage changed
//!   one since the run began. Relative paths; an entry ending in `/` is a directory, digested
//!   whole. A tool whose file has no `project` key gets [`FIELD_PROJECT_CONFIG`], the places the
//!   field's coding agents load from a project; `project = []` says it loads none.
//! - `home`: its user configuration beneath HOME (same templates as `[confine] writable`),
//!   dropped from a judge's private HOME layer before each of its stages, so a judge's earlier
//!   attempt cannot configure its next one.
//!
//! Instruction files (`AGENTS.md`, `GEMINI.md`) are not configuration here: a task may change
//! them honestly, and what they say reaches a judge as text, which no gate believes.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

/// `[loads]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadsConfig {
    /// Places in the work tree (relative; a trailing `/` names a directory). Absent: the field's
    /// defaults ([`FIELD_PROJECT_CONFIG`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Vec<String>>,
    /// The tool's user configuration beneath HOME (path templates as in `[confine]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub home: Vec<String>,
}

/// The project places the field's coding agents load configuration from (settings with hooks
/// and MCP servers, plugins, extensions): what a registered tool that declares none is held to.
/// OpenCode and its forks, Claude Code (and the many tools reading `.mcp.json`), Codex, Gemini
/// CLI, Qwen Code, Kilo Code, Cursor's agent, VS Code's MCP file, Crush.
pub const FIELD_PROJECT_CONFIG: [&str; 14] = [
    ".opencode/",
    "opencode.json",
    "opencode.jsonc",
    ".claude/",
    ".mcp.json",
    ".codex/",
    ".gemini/",
    ".qwen/",
    ".kilocode/",
    ".cursor/",
    ".vscode/mcp.json",
    ".crush.json",
    "crush.json",
    ".crush/",
];

/// Why a `[loads] project` entry is refused at load time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectEntrySyntax {
    #[error("a project place must not be empty")]
    Empty,
    #[error("{entry:?} must be relative to the work tree")]
    Absolute { entry: String },
    #[error("{entry:?} must not contain `..` or `.`")]
    NotNormal { entry: String },
    #[error("{entry:?} is git's or autocode's own directory, not a tool's configuration")]
    Reserved { entry: String },
}

/// Checks one `[loads] project` entry.
pub fn check_project_entry(entry: &str) -> Result<(), ProjectEntrySyntax> {
    let owned = || entry.to_owned();
    if entry.trim().is_empty() {
        return Err(ProjectEntrySyntax::Empty);
    }
    if entry.starts_with('/') || entry.starts_with('~') || entry.starts_with('$') {
        return Err(ProjectEntrySyntax::Absolute { entry: owned() });
    }
    let path = Path::new(entry.trim_end_matches('/'));
    if !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(ProjectEntrySyntax::NotNormal { entry: owned() });
    }
    if matches!(
        path.components().next(),
        Some(Component::Normal(first)) if first == ".git" || first == ".autocode"
    ) {
        return Err(ProjectEntrySyntax::Reserved { entry: owned() });
    }
    Ok(())
}

impl LoadsConfig {
    /// The project places a tool with this table (or none) loads.
    pub fn project_places(loads: Option<&LoadsConfig>) -> Vec<String> {
        match loads.and_then(|l| l.project.as_ref()) {
            Some(places) => places.clone(),
            None => FIELD_PROJECT_CONFIG.iter().map(|p| p.to_string()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_entries_stay_in_the_work_tree_and_off_git() {
        for good in [
            ".gemini/",
            "GEMINI-settings.json",
            ".vscode/mcp.json",
            "tool.toml",
        ] {
            assert_eq!(check_project_entry(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            " ",
            "/etc/tool.json",
            "~/.tool",
            "$HOME/x",
            "../up",
            "a/../b",
            "./x",
        ] {
            assert!(check_project_entry(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            check_project_entry(".git/hooks/"),
            Err(ProjectEntrySyntax::Reserved { .. })
        ));
        assert!(matches!(
            check_project_entry(".autocode"),
            Err(ProjectEntrySyntax::Reserved { .. })
        ));
        for default in FIELD_PROJECT_CONFIG {
            assert_eq!(check_project_entry(default), Ok(()), "{default}");
        }
    }

    #[test]
    fn a_tool_without_the_key_gets_the_fields_places_and_an_empty_list_means_none() {
        assert_eq!(
            LoadsConfig::project_places(None).len(),
            FIELD_PROJECT_CONFIG.len()
        );
        let none = LoadsConfig {
            project: Some(Vec::new()),
            home: Vec::new(),
        };
        assert!(LoadsConfig::project_places(Some(&none)).is_empty());
        let own = LoadsConfig {
            project: Some(vec![".tool/".into()]),
            home: Vec::new(),
        };
        assert_eq!(LoadsConfig::project_places(Some(&own)), vec![".tool/"]);
    }
}
