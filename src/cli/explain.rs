//! `autocode explain CODE`: what a pause code means and the command that continues it.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::output;
use crate::error::EdgeError;
use crate::pause::PauseCode;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The pause code, e.g. PAUSED_RATE_LIMIT (case does not matter). Omit it to list them all.
    pub code: Option<String>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Print the generated `docs/pause-codes.md`.
    #[arg(long, conflicts_with_all = ["code", "json"])]
    pub markdown: bool,
}

#[derive(Serialize)]
struct Explained {
    code: PauseCode,
    explanation: &'static str,
    next_step: &'static str,
}

pub fn run(args: ExplainArgs) -> Result<ExitCode, EdgeError> {
    if args.markdown {
        output::print_stdout(crate::pause::render_markdown().trim_end())?;
        return Ok(ExitCode::SUCCESS);
    }
    let codes: Vec<PauseCode> =
        match &args.code {
            Some(text) => vec![text.parse::<PauseCode>().map_err(|e| {
                EdgeError::usage(e).hint("`autocode explain` lists every pause code")
            })?],
            None => PauseCode::ALL.to_vec(),
        };
    let explained: Vec<Explained> = codes
        .into_iter()
        .map(|code| Explained {
            code,
            explanation: code.explanation(),
            next_step: code.next_step(),
        })
        .collect();
    if args.json {
        match explained.as_slice() {
            [one] if args.code.is_some() => output::print_json(one)?,
            all => output::print_json(&all)?,
        }
    } else {
        let text: Vec<String> = explained
            .iter()
            .map(|e| format!("{}\n  {}\n  next: {}", e.code, e.explanation, e.next_step))
            .collect();
        output::print_stdout(&text.join("\n\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}
