//! `autocode events normalize --transport opencode|codex|claude FILE [--report FILE] [--json]`:
//! reads a raw stage log (or any captured stream) and prints the normalized events, the final
//! report and the stop class. The tool to reach for when a CLI update changes its output.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use super::output;
use crate::error::EdgeError;
use crate::events::{self, TransportKind};

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Normalize a captured stream.
    Normalize(NormalizeArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TransportArg {
    Opencode,
    Codex,
    Claude,
}

#[derive(Debug, Args)]
pub struct NormalizeArgs {
    /// Which CLI wrote the stream.
    #[arg(long, value_enum)]
    pub transport: TransportArg,
    /// The captured stdout (`-` for stdin).
    pub file: PathBuf,
    /// Codex only: the `-o` report file of the same call.
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: EventsCommand) -> Result<ExitCode, EdgeError> {
    let EventsCommand::Normalize(args) = command;
    let transport = match args.transport {
        TransportArg::Opencode => TransportKind::Opencode,
        TransportArg::Codex => TransportKind::Codex,
        TransportArg::Claude => TransportKind::Claude,
    };
    let report = match &args.report {
        Some(path) => Some(
            std::fs::read(path)
                .map_err(|e| EdgeError::usage(format!("cannot read {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let normalized = if args.file.as_os_str() == "-" {
        events::normalize_stream(transport, std::io::stdin().lock(), report.as_deref())
    } else {
        let file = std::fs::File::open(&args.file)
            .map_err(|e| EdgeError::usage(format!("cannot open {}: {e}", args.file.display())))?;
        events::normalize_stream(transport, BufReader::new(file), report.as_deref())
    }
    .map_err(EdgeError::internal)?;
    if args.json {
        output::print_json(&normalized)?;
    } else {
        output::print_stdout(events::render_human(&normalized).trim_end())?;
    }
    Ok(ExitCode::SUCCESS)
}
