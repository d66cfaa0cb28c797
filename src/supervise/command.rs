//! `autocode supervise [--json] [--timeout SECS] [--confine …] -- CMD ARGS…`: any command under
//! the boundary, with the caller's environment, working directory and terminal; with a room,
//! confined to it (writable: the given paths, or the working directory, plus a fresh private
//! temporary directory exported as `TMPDIR` and removed afterwards).
//!
//! Invariants: the command's exit code passes through (a signal becomes 128 + signal, a timeout
//! 124, a refused or failed launch 2); the receipt goes to stderr for people or, with `--json`,
//! as one JSON document on stdout.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::{Exit, LaunchOptions, LaunchSpec, Receipt, Room, StdinSource, StdioMode};

/// Exit code of a launch that timed out (as `timeout(1)`).
pub const EXIT_TIMED_OUT: i32 = 124;
/// Exit code when the launch was refused or could not start.
pub const EXIT_LAUNCH_FAILED: i32 = 2;

/// Runs `argv` under the boundary and returns the exit code to leave with. With `room`, the
/// family is confined to it: an empty `room.writable` means the working directory; a fresh
/// private temporary directory is always added (and exported as `TMPDIR`).
pub async fn supervise_command(
    argv: Vec<OsString>,
    timeout: Option<Duration>,
    json: bool,
    receipt_path: Option<PathBuf>,
    room: Option<Room>,
    ledger_path: Option<PathBuf>,
) -> i32 {
    let Some((program, args)) = argv.split_first() else {
        crate::term_text::say_line(
            "autocode supervise: no command given (usage: autocode supervise [--json] [--timeout SECS] -- CMD ARGS…)",
        );
        return EXIT_LAUNCH_FAILED;
    };
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => {
            crate::term_text::say_line(&format!(
                "autocode supervise: no working directory: {error}"
            ));
            return EXIT_LAUNCH_FAILED;
        }
    };
    let mut env: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    // Lives until the family is gone; removed on drop.
    let mut private_tmp = None;
    let room = match room {
        Some(mut room) => {
            let tmp = match tempfile::Builder::new().prefix("autocode-room-").tempdir() {
                Ok(tmp) => tmp,
                Err(error) => {
                    crate::term_text::say_line(&format!(
                        "autocode supervise: cannot create the room's temporary directory: {error}"
                    ));
                    return EXIT_LAUNCH_FAILED;
                }
            };
            if room.writable.is_empty() {
                room.writable.push(cwd.clone());
            }
            room.writable.push(tmp.path().to_owned());
            env.insert("TMPDIR".into(), tmp.path().into());
            // What the command may write beneath a private view is shown there as it is.
            if let Some(views) = room.views.as_mut() {
                for path in &room.writable {
                    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
                    if views.covers(&path) && !views.real.iter().any(|r| r.path == path) {
                        views.real.push(super::RealPath {
                            path,
                            writable: true,
                        });
                    }
                }
            }
            private_tmp = Some(tmp);
            Some(room)
        }
        None => None,
    };
    let spec = LaunchSpec {
        label: format!("supervise {}", program.to_string_lossy()),
        program: program.clone(),
        args: args.to_vec(),
        env,
        cwd,
        stdin: StdinSource::Inherit,
        stdio: StdioMode::Terminal,
        timeout,
        room,
    };
    let options = LaunchOptions {
        receipt_path: receipt_path.clone(),
        ledger_path,
        ..LaunchOptions::default()
    };
    let finished = super::run_with(spec, options).await;
    drop(private_tmp);
    let finished = match finished {
        Ok(finished) => finished,
        Err(error) => {
            crate::term_text::say_line(&format!("autocode supervise: {error}"));
            return EXIT_LAUNCH_FAILED;
        }
    };
    if let Some(path) = &receipt_path
        && let Err(error) = super::write_receipt(path, &finished.receipt)
    {
        crate::term_text::say_line(&format!(
            "autocode supervise: cannot write the receipt to {}: {error}",
            path.display()
        ));
    }
    if json {
        match serde_json::to_string(&finished.receipt) {
            Ok(text) => {
                // A closed stdout is not a failure of the supervised command.
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}").and_then(|()| out.flush());
            }
            Err(error) => crate::term_text::say_line(&format!("autocode supervise: {error}")),
        }
    } else {
        crate::term_text::say_line(&describe(&finished.receipt));
    }
    match finished.exit {
        Exit::Code(code) => code,
        Exit::Signal(signal) => 128 + signal,
        Exit::TimedOut => EXIT_TIMED_OUT,
    }
}

/// One line for people (two with a room).
pub fn describe(receipt: &Receipt) -> String {
    let room = match &receipt.room {
        Some(room) => {
            let list = |paths: &[PathBuf]| {
                let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            };
            format!(
                "\nautocode supervise: room {}: writable {}{}{}; unreadable {}{}; signals {}, abstract unix sockets {}, pathname unix connects and local addresses {}",
                room.mechanisms.join("+"),
                list(&room.writable),
                if room.read_only.is_empty() {
                    String::new()
                } else {
                    format!(" except read-only {}", list(&room.read_only))
                },
                match &room.overlay {
                    Some(o) => format!(
                        "; {} shows {} (writes kept in {})",
                        o.dir.display(),
                        o.lower.display(),
                        o.upper.display()
                    ),
                    None => String::new(),
                },
                list(&room.unreadable),
                if room.skipped.is_empty() {
                    String::new()
                } else {
                    format!("; skipped (missing) {}", list(&room.skipped))
                },
                if room.signals_scoped {
                    "scoped"
                } else {
                    "NOT scoped"
                },
                if room.abstract_sockets_scoped {
                    "scoped"
                } else {
                    "NOT scoped"
                },
                if room.unix_connect_gated {
                    "gated"
                } else {
                    "not gated"
                },
            )
        }
        None => String::new(),
    };
    format!(
        "autocode supervise: {} (root {}, {} session(s), {} group(s) recorded, {} denied, {} killed{}) in {:.1} ms + cleanup {:.1} ms",
        if receipt.verified {
            "family gone, verified by the kernel"
        } else {
            "CLEANUP NOT VERIFIED"
        },
        receipt.root_pid,
        receipt.sessions.len(),
        receipt.groups.len(),
        receipt.denied.len(),
        receipt.killed.len(),
        if receipt.keeper_lost {
            ", keeper lost"
        } else {
            ""
        },
        receipt.run_ms,
        receipt.cleanup_ms,
    ) + &room
}
