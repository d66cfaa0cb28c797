//! The direct runtime's tools: what each role is offered ([`tool_specs`]) and how a call runs.
//!
//! `shell` runs `bash -c CMD` (`sh` where no bash is installed: `verify::check_shell`) through the process boundary (`crate::supervise`) inside the stage's
//! room, with the agents' environment, a time bound and a capped, marked output. `read_file` and
//! `write_file` run in autocode itself and are confined to the stage's tree by path resolution:
//! relative paths only, no `..`, no symlink on the way, never inside `.git`; `write_file` is not
//! offered to read-only roles and refused if called anyway. `report` carries the stage's
//! structured report: its parameters are the role's report schema.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::protocol::ToolSpec;
use crate::report::ReportKind;
use crate::supervise::{
    self, Exit, LaunchSpec, LedgerEntry, Receipt, Room, StdinSource, StdioMode,
};

pub const SHELL: &str = "shell";
pub const READ_FILE: &str = "read_file";
pub const WRITE_FILE: &str = "write_file";
pub const REPORT: &str = "report";

/// The output a tool hands back to the model, at most (bytes); longer output is cut and marked.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// The tools offered to a role.
pub fn tool_specs(kind: ReportKind, writable: bool) -> Vec<ToolSpec> {
    let mut tools = vec![
        ToolSpec {
            name: SHELL,
            description: if writable {
                "Run a shell command (`bash -c`) in the stage's directory. Returns its event id, exit code and output (cut at 64 KiB). Cite a check in your report by this event id."
            } else {
                // Measured with a 1.5B model: its planner and plan reviewer used `shell` to do
                // the objective (`echo … > hello.txt`, `git checkout -f`) before reporting.
                "Run a shell command (`bash -c`) in the stage's directory to inspect it: this stage reads and does not change files (a later builder stage does the work), so a command that writes fails. Returns its event id, exit code and output (cut at 64 KiB)."
            },
            parameters: json!({"type": "object", "properties": {
                "command": {"type": "string", "description": "The command line"}},
                "required": ["command"], "additionalProperties": false}),
        },
        ToolSpec {
            name: READ_FILE,
            description: "Read a UTF-8 text file of the stage's directory (relative path).",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"}}, "required": ["path"], "additionalProperties": false}),
        },
    ];
    if writable {
        tools.push(ToolSpec {
            name: WRITE_FILE,
            description: "Create or replace a file of the stage's directory (relative path) with this content.",
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"], "additionalProperties": false}),
        });
    }
    tools.push(ToolSpec {
        name: REPORT,
        description: "Submit the stage's final report (the arguments are the report). Call it exactly once, when done.",
        parameters: kind.cli_schema(),
    });
    tools
}

/// How `shell` runs commands.
#[derive(Debug, Clone)]
pub struct ShellContext {
    pub cwd: PathBuf,
    pub env: BTreeMap<String, String>,
    pub room: Option<Room>,
    pub timeout: Duration,
}

/// One executed command.
#[derive(Debug, Clone)]
pub struct ShellRun {
    pub exit: Exit,
    /// stdout then stderr, cut at the cap with a marker line when longer.
    pub output: String,
    /// The full output length in bytes as captured.
    pub output_bytes: u64,
    /// Whether `output` was cut.
    pub truncated: bool,
    pub receipt: Receipt,
    /// Every exec of the command's family, attested by the kernel where it keeps a ledger.
    pub ledger: Vec<LedgerEntry>,
}

/// What a supervised command runs.
#[derive(Debug, Clone, Copy)]
pub enum Argv<'a> {
    /// `bash -c LINE` (`verify::check_shell`).
    Shell(&'a str),
    /// A program and its arguments, no shell.
    Exec {
        program: &'a str,
        args: &'a [String],
    },
}

/// How one command is started beyond the shell context.
#[derive(Debug, Clone, Default)]
pub struct CommandOptions {
    /// Variables added to (or replacing) the context's environment.
    pub extra_env: Vec<(String, String)>,
    /// Another working directory (already confined by the caller); the context's by default.
    pub cwd: Option<PathBuf>,
    /// The output cap in bytes; [`OUTPUT_CAP`] by default (and at most).
    pub cap: Option<usize>,
}

/// Runs `command` under the boundary and the room.
pub async fn run_shell(
    ctx: &ShellContext,
    label: String,
    command: &str,
) -> Result<ShellRun, supervise::LaunchError> {
    let options = CommandOptions::default();
    let running = start_command(ctx, label, Argv::Shell(command), &options).await?;
    finish_command(running, &options).await
}

/// Starts a command under the boundary and the room; [`finish_command`] waits for it (a
/// [`supervise::Canceller`] taken from the handle ends it early).
pub async fn start_command(
    ctx: &ShellContext,
    label: String,
    argv: Argv<'_>,
    options: &CommandOptions,
) -> Result<supervise::Running, supervise::LaunchError> {
    let (program, args) = match argv {
        Argv::Shell(line) => (
            crate::verify::check_shell(ctx.env.get("PATH").map(String::as_str)).into_os_string(),
            vec![OsString::from("-c"), OsString::from(line)],
        ),
        Argv::Exec { program, args } => (
            OsString::from(program),
            args.iter().map(OsString::from).collect(),
        ),
    };
    let mut env: BTreeMap<OsString, OsString> = ctx
        .env
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    for (k, v) in &options.extra_env {
        env.insert(OsString::from(k), OsString::from(v));
    }
    let cap = options.cap.unwrap_or(OUTPUT_CAP).min(OUTPUT_CAP);
    let spec = LaunchSpec {
        label,
        program,
        args,
        env,
        cwd: options.cwd.clone().unwrap_or_else(|| ctx.cwd.clone()),
        stdin: StdinSource::Null,
        // One byte over the cap tells a cut stream from one that just fits.
        stdio: StdioMode::Captured { limit: cap + 1 },
        timeout: Some(ctx.timeout),
        room: ctx.room.clone(),
    };
    let mut running = supervise::spawn(spec, supervise::LaunchOptions::default()).await?;
    // Nobody reads the live stream: the output is kept (capped) in `Finished`.
    drop(running.stdout());
    Ok(running)
}

/// Waits for a command started by [`start_command`] and its verified cleanup.
pub async fn finish_command(
    running: supervise::Running,
    options: &CommandOptions,
) -> Result<ShellRun, supervise::LaunchError> {
    let cap = options.cap.unwrap_or(OUTPUT_CAP).min(OUTPUT_CAP);
    let finished = running.finish().await?;
    let mut bytes = finished.stdout;
    let stdout_cut = bytes.len() > cap;
    bytes.extend_from_slice(&finished.stderr);
    let stderr_cut = finished.stderr.len() > cap;
    let output_bytes = bytes.len() as u64;
    let (output, truncated) = cap_text_at(&bytes, stdout_cut || stderr_cut, cap);
    Ok(ShellRun {
        exit: finished.exit,
        output,
        output_bytes,
        truncated,
        receipt: finished.receipt,
        ledger: finished.ledger,
    })
}

/// `bytes` as text of at most [`OUTPUT_CAP`] bytes, with a marker line when cut (or when `cut`
/// says the source was already cut). Returns whether it was cut.
pub fn cap_text(bytes: &[u8], cut: bool) -> (String, bool) {
    cap_text_at(bytes, cut, OUTPUT_CAP)
}

/// [`cap_text`] at `cap` bytes.
pub fn cap_text_at(bytes: &[u8], cut: bool, cap: usize) -> (String, bool) {
    if bytes.len() <= cap && !cut {
        return (String::from_utf8_lossy(bytes).into_owned(), false);
    }
    let mut end = bytes.len().min(cap);
    // Never split a UTF-8 sequence.
    while end > 0 && end < bytes.len() && (bytes[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    let mut text = String::from_utf8_lossy(&bytes[..end]).into_owned();
    text.push_str(&format!(
        "\n[autocode: output cut at {cap} bytes; more was produced]\n"
    ));
    (text, true)
}

/// Why a file tool refused a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    #[error("`{0}` must be a relative path inside the stage's directory, without `..`")]
    Outside(String),
    #[error("`{0}` is inside .git, which no tool may touch")]
    GitMetadata(String),
    #[error("`{0}` goes through a symbolic link, which file tools do not follow")]
    Symlink(String),
    #[error("this role is read-only: it may not write `{0}`")]
    ReadOnly(String),
}

/// Resolves `rel` under `root`: relative, no `..`, no `.git`, no symlink on the way (the last
/// component may be absent).
pub fn confined_path(root: &Path, rel: &str) -> Result<PathBuf, PathRefusal> {
    let path = Path::new(rel);
    if rel.is_empty() || path.is_absolute() {
        return Err(PathRefusal::Outside(rel.into()));
    }
    let mut out = root.to_owned();
    for component in path.components() {
        match component {
            Component::Normal(part) => {
                if part == ".git" {
                    return Err(PathRefusal::GitMetadata(rel.into()));
                }
                out.push(part);
                if std::fs::symlink_metadata(&out).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(PathRefusal::Symlink(rel.into()));
                }
            }
            Component::CurDir => {}
            _ => return Err(PathRefusal::Outside(rel.into())),
        }
    }
    if out == root {
        return Err(PathRefusal::Outside(rel.into()));
    }
    Ok(out)
}

/// `read_file`: the file's text, capped and marked.
pub fn read_file(root: &Path, rel: &str) -> Result<String, String> {
    let path = confined_path(root, rel).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read `{rel}`: {e}"))?;
    Ok(cap_text(&bytes, false).0)
}

/// `write_file`: creates or replaces the file (parents created inside the tree). Returns whether
/// it existed before.
pub fn write_file(root: &Path, writable: bool, rel: &str, content: &str) -> Result<bool, String> {
    if !writable {
        return Err(PathRefusal::ReadOnly(rel.into()).to_string());
    }
    let path = confined_path(root, rel).map_err(|e| e.to_string())?;
    let existed = path.exists();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create `{rel}`: {e}"))?;
        // The parents just made are real directories under root; check nothing raced a link in.
        confined_path(root, rel).map_err(|e| e.to_string())?;
    }
    std::fs::write(&path, content).map_err(|e| format!("cannot write `{rel}`: {e}"))?;
    Ok(existed)
}

/// A string argument of a tool call.
pub fn str_arg<'a>(arguments: &'a Value, key: &str) -> Result<&'a str, String> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the `{key}` argument (a string) is missing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_tools_stay_in_the_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        for bad in ["/etc/passwd", "../x", "a/../../x", "", "."] {
            assert!(confined_path(root, bad).is_err(), "{bad}");
        }
        assert!(matches!(
            confined_path(root, ".git/config"),
            Err(PathRefusal::GitMetadata(_))
        ));
        assert!(matches!(
            confined_path(root, "link/passwd"),
            Err(PathRefusal::Symlink(_))
        ));
        assert!(write_file(root, true, "src/new.txt", "hi").is_ok());
        assert_eq!(read_file(root, "src/new.txt").unwrap(), "hi");
        assert!(write_file(root, false, "x.txt", "no").is_err());
        assert!(!root.join("x.txt").exists());
        assert!(read_file(root, "link/passwd").is_err());
    }

    #[test]
    fn output_is_capped_and_marked() {
        let big = vec![b'a'; OUTPUT_CAP + 10];
        let (text, cut) = cap_text(&big, false);
        assert!(cut);
        assert!(text.contains("output cut"));
        assert!(text.len() < OUTPUT_CAP + 100);
        let (text, cut) = cap_text(b"small", false);
        assert!(!cut);
        assert_eq!(text, "small");
    }

    #[test]
    fn read_only_roles_are_not_offered_writes() {
        let names = |writable| {
            tool_specs(ReportKind::Build, writable)
                .into_iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(false), [SHELL, READ_FILE, REPORT]);
        assert_eq!(names(true), [SHELL, READ_FILE, WRITE_FILE, REPORT]);
    }
}
