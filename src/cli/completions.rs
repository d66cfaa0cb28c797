//! `autocode completions bash|zsh|fish|elvish|powershell` and `autocode man`: shell completion
//! scripts and a roff man page, generated from the same clap definition the binary parses
//! with, so they can never drift from the real flags.

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::Cli;
use crate::error::EdgeError;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to write a completion script for (on stdout).
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {}

fn write_stdout(bytes: &[u8]) -> Result<ExitCode, EdgeError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(EdgeError::internal(e)),
    }
}

pub fn completions(args: CompletionsArgs) -> Result<ExitCode, EdgeError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "autocode", &mut script);
    write_stdout(&script)
}

pub fn man(_args: ManArgs) -> Result<ExitCode, EdgeError> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(EdgeError::internal)?;
    write_stdout(&page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_the_commands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "autocode", &mut script);
            let text = String::from_utf8(script).unwrap();
            assert!(
                text.contains("resume") && text.contains("doctor"),
                "{shell:?}"
            );
        }
    }

    #[test]
    fn the_man_page_is_roff_for_autocode() {
        let mut page = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut page)
            .unwrap();
        let text = String::from_utf8(page).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH autocode"),
            "{text}"
        );
    }
}
