//! `autocode scripted-model serve`: the loopback model server that lets the real CLIs run
//! offline (see `docs/scripted-model.md`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::error::EdgeError;
use crate::scripted_model::{self, ScriptedModelError, ServeArgs};

#[derive(Debug, Subcommand)]
pub enum ScriptedModelCommand {
    /// Serve a script on 127.0.0.1 until SIGINT or SIGTERM; prints the bound address first.
    Serve(ServeCliArgs),
    /// Print the script `autocode demo` serves (JSON), e.g. to run its launches without autocode.
    DemoScript,
}

#[derive(Debug, Args)]
pub struct ServeCliArgs {
    /// The script (TOML or JSON): conversations, each a list of steps.
    #[arg(long)]
    pub script: PathBuf,
    /// The port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Also append every request as a JSON line to this file.
    #[arg(long)]
    pub log: Option<PathBuf>,
}

pub fn run(command: ScriptedModelCommand) -> Result<ExitCode, EdgeError> {
    match command {
        ScriptedModelCommand::Serve(args) => {
            let result = super::runtime()?.block_on(scripted_model::serve_command(ServeArgs {
                script: args.script,
                port: args.port,
                log: args.log,
            }));
            match result {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e @ ScriptedModelError::Script(_)) => Err(EdgeError::usage(e)),
                Err(e) => Err(EdgeError::internal(e)),
            }
        }
        ScriptedModelCommand::DemoScript => {
            use std::io::Write;
            let text = format!("{:#}\n", crate::demo::demo_script());
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(EdgeError::internal(e)),
                _ => Ok(ExitCode::SUCCESS),
            }
        }
    }
}
