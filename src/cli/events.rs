//! `autocode events normalize --transport opencode|codex|claude FILE [--report FILE] [--json]`:
//! reads a raw stage log (or any captured stream) and prints the normalized events, the final
//! report and the stop class. The tool to reach for when a CLI update changes its output.
//! `autocode events --follow RUN --jsonl` follows a run (`cli::exec::follow`).

use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use crate::error::EdgeError;
use crate::events::{self, TransportKind};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EventsArgs {
    #[command(subcommand)]
    pub command: Option<EventsCommand>,
    /// Follow this run's events until no autocode works on it (with --jsonl).
    #[arg(long, value_name = "RUN", requires = "jsonl")]
    pub follow: Option<crate::ids::RunId>,
    /// The project the run belongs to (default: the current directory).
    #[arg(long, default_value = ".")]
    pub workspace: PathBuf,
    /// Print the `autocode-exec/1` JSON lines (docs/headless.md).
    #[arg(long, requires = "follow")]
    pub jsonl: bool,
}

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
    Acp,
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
    /// Print JSON on stdout (data only; messages for people stay on stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: EventsArgs) -> Result<ExitCode, EdgeError> {
    match (args.command, args.follow) {
        (Some(EventsCommand::Normalize(args)), _) => normalize(args),
        (None, Some(run)) => super::exec::follow(&run, &args.workspace),
        (None, None) => Err(EdgeError::usage(
            "events needs a subcommand (normalize) or --follow RUN --jsonl",
        )),
    }
}

fn normalize(args: NormalizeArgs) -> Result<ExitCode, EdgeError> {
    let transport = match args.transport {
        TransportArg::Opencode => TransportKind::Opencode,
        TransportArg::Codex => TransportKind::Codex,
        TransportArg::Claude => TransportKind::Claude,
        TransportArg::Acp => TransportKind::Acp,
    };
    let report = match &args.report {
        Some(path) => Some(
            crate::bounded_read::read(path, crate::bounded_read::REPORT_CAP)
                .map_err(|e| EdgeError::usage(format!("cannot read {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let options = events::ParseOptions {
        report_file: report,
        ..events::ParseOptions::default()
    };
    let stdout = std::io::stdout();
    let mut sink = EventSink::new(
        std::io::BufWriter::with_capacity(1 << 16, stdout.lock()),
        args.json,
    );
    let summary = if args.file.as_os_str() == "-" {
        events::parse_stream(transport, std::io::stdin().lock(), &options, |e| {
            sink.event(&e)
        })
    } else {
        let file = std::fs::File::open(&args.file)
            .map_err(|e| EdgeError::usage(format!("cannot open {}: {e}", args.file.display())))?;
        events::parse_stream(
            transport,
            BufReader::with_capacity(1 << 16, file),
            &options,
            |e| sink.event(&e),
        )
    }
    .map_err(EdgeError::internal)?;
    sink.finish(&summary)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints events as the parser produces them, so memory does not grow with the input: human
/// lines, or one JSON document `{"events":[...],"summary":{...}}` written piece by piece. A
/// closed stdout ends the output quietly (the parse still runs to its end).
struct EventSink<W: Write> {
    out: W,
    json: bool,
    first: bool,
    error: Option<std::io::Error>,
    /// One event's bytes, reused from event to event (no allocation per event).
    buffer: Vec<u8>,
    line: String,
}

impl<W: Write> EventSink<W> {
    fn new(out: W, json: bool) -> Self {
        let mut sink = Self {
            out,
            json,
            first: true,
            error: None,
            buffer: Vec::with_capacity(1 << 12),
            line: String::with_capacity(1 << 10),
        };
        if json {
            sink.write(|out| out.write_all(b"{\"events\": ["));
        }
        sink
    }

    fn write(&mut self, body: impl FnOnce(&mut W) -> std::io::Result<()>) {
        if self.error.is_none()
            && let Err(e) = body(&mut self.out)
        {
            self.error = Some(e);
        }
    }

    fn event(&mut self, event: &events::NormalizedEvent) {
        if self.error.is_some() {
            return;
        }
        let bytes = if self.json {
            self.buffer.clear();
            self.buffer
                .extend_from_slice(if self.first { b"\n  " } else { b",\n  " });
            self.first = false;
            events::write_event_json(event, &mut self.buffer);
            &self.buffer[..]
        } else {
            self.line.clear();
            events::render_event_into(event, &mut self.line);
            self.line.push('\n');
            self.line.as_bytes()
        };
        if let Err(e) = self.out.write_all(bytes) {
            self.error = Some(e);
        }
    }

    fn finish(mut self, summary: &events::StreamSummary) -> Result<(), EdgeError> {
        if self.json {
            self.write(|out| {
                out.write_all(b"\n],\n\"summary\": ")?;
                serde_json::to_writer_pretty(&mut *out, summary).map_err(std::io::Error::other)?;
                out.write_all(b"\n}\n")
            });
        } else {
            let text = events::render_summary(summary);
            self.write(|out| out.write_all(text.trim_end().as_bytes()));
            self.write(|out| out.write_all(b"\n"));
        }
        self.write(|out| out.flush());
        match self.error {
            None => Ok(()),
            Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Some(e) => Err(EdgeError::internal(e)),
        }
    }
}
