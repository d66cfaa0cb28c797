//! `autocode supervise [--json] [--timeout SECS] [--receipt PATH] [--ledger PATH] [--room DIR]… -- CMD ARGS…`: runs any command
//! under the process-ownership boundary with autocode's environment and terminal, passes its exit
//! code through (128+N for signal N, 124 for a timeout, 2 when the boundary refuses), and prints
//! the receipt (stderr for people, stdout with `--json`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::error::EdgeError;

#[derive(Debug, Args)]
pub struct SuperviseArgs {
    /// Print the receipt as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Stop the whole family after this many seconds.
    #[arg(long)]
    pub timeout: Option<f64>,
    /// Also write the receipt to this file.
    #[arg(long)]
    pub receipt: Option<PathBuf>,
    /// Write the exec ledger (JSON lines, one entry per exec) to this file.
    #[arg(long)]
    pub ledger: Option<PathBuf>,
    /// Confine the family to a room whose writable places are these (repeatable); pathname
    /// unix-socket connects then reach only sockets beneath them.
    #[arg(long = "room", value_name = "DIR")]
    pub room: Vec<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

pub fn run(args: SuperviseArgs) -> Result<ExitCode, EdgeError> {
    let timeout = match args.timeout {
        Some(secs) if !(secs.is_finite() && secs > 0.0) => {
            return Err(EdgeError::usage(format!(
                "--timeout must be a positive number of seconds, not {secs}"
            )));
        }
        Some(secs) => Some(Duration::from_secs_f64(secs)),
        None => None,
    };
    let code = super::runtime()?.block_on(crate::supervise::supervise_command(
        args.command,
        timeout,
        args.json,
        args.receipt,
        (!args.room.is_empty()).then(|| crate::supervise::Room::writable(args.room)),
        args.ledger,
    ));
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
