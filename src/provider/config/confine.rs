//! The `[confine]` table: the state paths a provider's CLI writes outside the workspace, which
//! the agent's room makes writable (everything else outside the worktree stays read-only).
//!
//! An entry is a path template: `~/…` (the agents' HOME), `$VAR/…` or `${VAR}/…` (a variable of
//! the agents' environment) and `${VAR:-fallback}/…` (the fallback, itself starting with `~/`
//! or `/`, when `VAR` is unset or empty), or an absolute path. An entry ending in `/` names a
//! directory autocode creates before the launch when it is missing (a hierarchy that does not
//! exist cannot be granted); any other entry that does not exist at launch is skipped and the
//! receipt says so. Entries are checked when the file loads (a located error like every other
//! key) and expanded against the agents' environment at each launch.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[confine]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfineConfig {
    /// Path templates the CLI may write beneath (its own state, caches and logs).
    #[serde(default)]
    pub writable: Vec<String>,
    /// Files beneath HOME the CLI must persist for the user (a refreshed sign-in token): copied
    /// from the role's private layer to the user's HOME after each stage (regular,
    /// non-executable files under a size cap only). Same template syntax as `writable`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_through: Vec<String>,
    /// Loopback, private or link-local destinations the agents may connect to although no
    /// process of their own serves them (a test database): `ADDRESS[:PORT]`, `NETWORK/PREFIX`,
    /// `[IPV6]:PORT` (`crate::supervise::net::NetAllow`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_connect: Vec<String>,
}

/// Why a `[confine] writable` entry is refused at load time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WritableSyntax {
    #[error("a writable path must not be empty")]
    Empty,
    #[error("{entry:?} must start with `~/`, `/`, `$VAR` or `${{VAR}}`")]
    Relative { entry: String },
    #[error("{entry:?} has an unterminated `${{`")]
    Unterminated { entry: String },
    #[error("{name:?} in {entry:?} is not an environment variable name")]
    BadVariable { entry: String, name: String },
    #[error("{entry:?} has a fallback that does not start with `~/` or `/`")]
    BadFallback { entry: String },
    #[error("{entry:?} must not contain `..`")]
    ParentComponent { entry: String },
    #[error(
        "{entry:?} would make a whole home directory or the root writable; name the tool's own directory"
    )]
    TooBroad { entry: String },
}

/// An entry after expansion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Expanded {
    /// The path to grant; `create_dir` when the entry ended in `/`.
    Path { path: PathBuf, create_dir: bool },
    /// A variable it needs is unset (and it has no fallback): nothing is granted.
    Unset { variable: String },
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The head of an entry: what its first component stands for.
enum Head<'a> {
    Home,
    Root,
    Var {
        name: &'a str,
        fallback: Option<&'a str>,
    },
}

/// Splits an entry into its head and the rest (the rest starts with `/` or is empty).
fn split(entry: &str) -> Result<(Head<'_>, &str), WritableSyntax> {
    if entry.is_empty() {
        return Err(WritableSyntax::Empty);
    }
    if entry == "~" {
        return Ok((Head::Home, ""));
    }
    if let Some(rest) = entry.strip_prefix("~/") {
        return Ok((Head::Home, &entry[entry.len() - rest.len() - 1..]));
    }
    if entry.starts_with('/') {
        return Ok((Head::Root, entry));
    }
    if let Some(inner) = entry.strip_prefix("${") {
        let end = inner
            .find('}')
            .ok_or_else(|| WritableSyntax::Unterminated {
                entry: entry.to_owned(),
            })?;
        let body = &inner[..end];
        let rest = &inner[end + 1..];
        let (name, fallback) = match body.split_once(":-") {
            Some((name, fallback)) => (name, Some(fallback)),
            None => (body, None),
        };
        if !is_env_name(name) {
            return Err(WritableSyntax::BadVariable {
                entry: entry.to_owned(),
                name: name.to_owned(),
            });
        }
        if let Some(f) = fallback
            && !(f.starts_with("~/") || f.starts_with('/'))
        {
            return Err(WritableSyntax::BadFallback {
                entry: entry.to_owned(),
            });
        }
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(WritableSyntax::BadVariable {
                entry: entry.to_owned(),
                name: format!("{name}{rest}"),
            });
        }
        return Ok((Head::Var { name, fallback }, rest));
    }
    if let Some(inner) = entry.strip_prefix('$') {
        let end = inner.find('/').unwrap_or(inner.len());
        let name = &inner[..end];
        if !is_env_name(name) {
            return Err(WritableSyntax::BadVariable {
                entry: entry.to_owned(),
                name: name.to_owned(),
            });
        }
        return Ok((
            Head::Var {
                name,
                fallback: None,
            },
            &inner[end..],
        ));
    }
    Err(WritableSyntax::Relative {
        entry: entry.to_owned(),
    })
}

/// Checks one entry's syntax (the loader calls this for every `[confine] writable` element).
pub fn check_writable(entry: &str) -> Result<(), WritableSyntax> {
    let (head, rest) = split(entry)?;
    let mut tails = vec![rest];
    if let Head::Var {
        fallback: Some(f), ..
    } = head
    {
        tails.push(f);
    }
    if tails
        .iter()
        .any(|t| Path::new(t).components().any(|c| c == Component::ParentDir))
    {
        return Err(WritableSyntax::ParentComponent {
            entry: entry.to_owned(),
        });
    }
    let named = |s: &str| {
        Path::new(s)
            .components()
            .any(|c| matches!(c, Component::Normal(_)))
    };
    let too_broad = match head {
        Head::Home => !named(rest),
        Head::Root => !named(rest),
        Head::Var { name, .. } => name == "HOME" && !named(rest),
    };
    if too_broad {
        return Err(WritableSyntax::TooBroad {
            entry: entry.to_owned(),
        });
    }
    Ok(())
}

/// Expands one (already checked) entry against the agents' environment. `~` is the
/// environment's `HOME`; a missing HOME counts as an unset variable.
pub fn expand_writable(
    entry: &str,
    env: &BTreeMap<String, String>,
) -> Result<Expanded, WritableSyntax> {
    check_writable(entry)?;
    let (head, rest) = split(entry)?;
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).cloned();
    let home = || var("HOME");
    let unset = |variable: &str| Expanded::Unset {
        variable: variable.to_owned(),
    };
    let base = match head {
        Head::Home => match home() {
            Some(h) => h,
            None => return Ok(unset("HOME")),
        },
        Head::Root => String::new(),
        Head::Var { name, fallback } => match (var(name), fallback) {
            (Some(value), _) => value,
            (None, Some(f)) => match f.strip_prefix('~') {
                Some(after) => match home() {
                    Some(h) => format!("{h}{after}"),
                    None => return Ok(unset("HOME")),
                },
                None => f.to_owned(),
            },
            (None, None) => return Ok(unset(name)),
        },
    };
    let joined = format!("{base}{rest}");
    let path = PathBuf::from(&joined);
    if !path.is_absolute() {
        // A variable holding a relative path grants nothing (it would depend on the cwd).
        return Ok(unset(match head {
            Head::Var { name, .. } => name,
            _ => "HOME",
        }));
    }
    let create_dir = entry.ends_with('/');
    let path: PathBuf = path.components().collect();
    Ok(Expanded::Path { path, create_dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn path(p: &str, create_dir: bool) -> Expanded {
        Expanded::Path {
            path: PathBuf::from(p),
            create_dir,
        }
    }

    #[test]
    fn entries_expand_against_the_agents_environment() {
        let e = env(&[("HOME", "/h"), ("CODEX_HOME", "/c"), ("EMPTY", "")]);
        let x = |s| expand_writable(s, &e).unwrap();
        assert_eq!(x("~/.claude/"), path("/h/.claude", true));
        assert_eq!(x("~/.claude.json"), path("/h/.claude.json", false));
        assert_eq!(x("$CODEX_HOME"), path("/c", false));
        assert_eq!(x("${CODEX_HOME}/"), path("/c", true));
        assert_eq!(x("${NOPE:-~/.codex}/"), path("/h/.codex", true));
        assert_eq!(x("${EMPTY:-/opt/x}"), path("/opt/x", false));
        assert_eq!(x("/var/cache/tool"), path("/var/cache/tool", false));
        assert_eq!(
            x("$NOPE/x"),
            Expanded::Unset {
                variable: "NOPE".into()
            }
        );
        let no_home = env(&[]);
        assert_eq!(
            expand_writable("~/.x", &no_home).unwrap(),
            Expanded::Unset {
                variable: "HOME".into()
            }
        );
    }

    #[test]
    fn bad_entries_are_refused() {
        for (entry, want) in [
            ("", "empty"),
            ("relative/x", "must start"),
            ("${X", "unterminated"),
            ("$1x", "not an environment variable"),
            ("${X:-rel}", "fallback"),
            ("~/a/../..", "`..`"),
            ("~", "whole home"),
            ("~/", "whole home"),
            ("/", "whole home"),
            ("$HOME", "whole home"),
            ("${X}y", "not an environment variable"),
        ] {
            let err = check_writable(entry).unwrap_err().to_string();
            assert!(err.contains(want), "{entry:?}: {err}");
        }
    }
}
