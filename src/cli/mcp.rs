//! `autocode mcp [--read-only]`: the MCP server on stdio (`crate::mcp`); and
//! `autocode mcp install --client claude|codex|opencode [--read-only] [--dry-run]`: registers it
//! in that client's configuration the client's own way (`claude mcp add --scope user`,
//! `codex mcp add`, the `mcp` table of OpenCode's `opencode.json`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use super::output;
use crate::error::EdgeError;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// Offer only the observing tools (status, wait, events, list, explain).
    #[arg(long)]
    pub read_only: bool,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Register `autocode mcp` with an agent CLI.
    Install(InstallArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Client {
    Claude,
    Codex,
    Opencode,
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The agent CLI whose configuration gets the server.
    #[arg(long, value_enum)]
    pub client: Client,
    /// Register the server with --read-only.
    #[arg(long)]
    pub read_only: bool,
    /// Print what would be done, and do nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: McpArgs) -> Result<ExitCode, EdgeError> {
    match args.command {
        Some(McpCommand::Install(install)) => self::install(install),
        None => serve(args.read_only),
    }
}

fn env_map() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

fn serve(read_only: bool) -> Result<ExitCode, EdgeError> {
    let exe = crate::mcp::launch::current_exe().map_err(EdgeError::internal)?;
    let server = crate::mcp::Server::new(exe, env_map(), read_only);
    super::runtime()?
        .block_on(crate::mcp::serve(server))
        .map_err(EdgeError::internal)?;
    Ok(ExitCode::SUCCESS)
}

/// The server's argv as a client should start it.
fn server_argv(read_only: bool) -> Result<Vec<String>, EdgeError> {
    let exe = std::env::current_exe().map_err(EdgeError::internal)?;
    let mut argv = vec![exe.display().to_string(), "mcp".to_owned()];
    if read_only {
        argv.push("--read-only".to_owned());
    }
    Ok(argv)
}

fn install(args: InstallArgs) -> Result<ExitCode, EdgeError> {
    let server = server_argv(args.read_only)?;
    match args.client {
        Client::Claude | Client::Codex => {
            let (program, mut argv) = match args.client {
                Client::Claude => (
                    "claude",
                    vec!["mcp", "add", "--scope", "user", "autocode", "--"],
                ),
                _ => ("codex", vec!["mcp", "add", "autocode", "--"]),
            };
            let mut full: Vec<String> = argv.drain(..).map(str::to_owned).collect();
            full.extend(server.iter().cloned());
            let shown = std::iter::once(program.to_owned())
                .chain(full.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            if args.dry_run {
                output::print_stdout(&shown)?;
                return Ok(ExitCode::SUCCESS);
            }
            let cwd = std::env::current_dir().map_err(EdgeError::internal)?;
            let rest: Vec<OsString> = full.iter().map(OsString::from).collect();
            let out = super::runtime()?
                .block_on(crate::supervise::run_in_current_family(
                    &OsString::from(program),
                    &rest,
                    &cwd,
                    1 << 20,
                ))
                .map_err(|e| {
                    EdgeError::usage(format!("cannot run {program}: {e}"))
                        .hint(format!("install {program}, or run: {shown}"))
                })?;
            match out.exit {
                crate::supervise::Exit::Code(0) => {
                    output::say!("registered: {shown}");
                    Ok(ExitCode::SUCCESS)
                }
                other => Err(EdgeError::internal(format!(
                    "{shown} ended {other:?}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))),
            }
        }
        Client::Opencode => {
            let path = opencode_config_path()?;
            let current = match crate::bounded_read::read(&path, crate::bounded_read::CONFIG_CAP) {
                Ok(bytes) => Some(serde_json::from_slice::<Value>(&bytes).map_err(|e| {
                    EdgeError::usage(format!(
                        "{} is not plain JSON ({e}); add the server by hand: \"mcp\": {{\"autocode\": {}}}",
                        path.display(),
                        opencode_entry(&server)
                    ))
                })?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(EdgeError::usage(format!(
                        "cannot read {}: {e}",
                        path.display()
                    )));
                }
            };
            let updated = with_opencode_entry(current, &server)?;
            let text = serde_json::to_string_pretty(&updated).map_err(EdgeError::internal)?;
            if args.dry_run {
                output::say!("would write {}:", path.display());
                output::print_stdout(&text)?;
                return Ok(ExitCode::SUCCESS);
            }
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(EdgeError::internal)?;
            }
            crate::store::write_json(&path, &updated).map_err(EdgeError::internal)?;
            output::say!("registered autocode in {}", path.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `$XDG_CONFIG_HOME/opencode/opencode.json` (default `~/.config/opencode/opencode.json`).
fn opencode_config_path() -> Result<PathBuf, EdgeError> {
    let env = env_map();
    let base = env
        .get("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| env.get("HOME").map(|h| Path::new(h).join(".config")))
        .ok_or_else(|| EdgeError::usage("neither XDG_CONFIG_HOME nor HOME is set"))?;
    Ok(base.join("opencode").join("opencode.json"))
}

fn opencode_entry(server: &[String]) -> Value {
    json!({"type": "local", "command": server, "enabled": true})
}

/// The configuration with `mcp.autocode` set (everything else as it was).
fn with_opencode_entry(current: Option<Value>, server: &[String]) -> Result<Value, EdgeError> {
    let mut config =
        current.unwrap_or_else(|| json!({"$schema": "https://opencode.ai/config.json"}));
    let Some(object) = config.as_object_mut() else {
        return Err(EdgeError::usage("opencode.json is not a JSON object"));
    };
    let mcp = object.entry("mcp").or_insert_with(|| json!({}));
    let Some(mcp) = mcp.as_object_mut() else {
        return Err(EdgeError::usage(
            "the mcp member of opencode.json is not an object",
        ));
    };
    mcp.insert("autocode".to_owned(), opencode_entry(server));
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opencode_entry_is_added_and_keeps_what_was_there() {
        let server = vec!["/bin/autocode".to_owned(), "mcp".to_owned()];
        let before = json!({"model": "x/y", "mcp": {"other": {"type": "local", "command": ["o"]}}});
        let after = with_opencode_entry(Some(before), &server).expect("object");
        assert_eq!(after["model"], "x/y");
        assert_eq!(after["mcp"]["other"]["command"][0], "o");
        assert_eq!(
            after["mcp"]["autocode"],
            json!({"type": "local", "command": ["/bin/autocode", "mcp"], "enabled": true})
        );
        let fresh = with_opencode_entry(None, &server).expect("new");
        assert_eq!(fresh["mcp"]["autocode"]["type"], "local");
        assert!(with_opencode_entry(Some(json!([1])), &server).is_err());
    }
}
