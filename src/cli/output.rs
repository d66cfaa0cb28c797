//! Output plumbing shared by every command: JSON on stdout, human text, colour policy and the
//! tracing subscriber.

use std::io::Write;

use serde::Serialize;

use crate::error::EdgeError;

/// Sets up `tracing` on stderr. `RUST_LOG` wins over `-v`; colours follow `NO_COLOR`.
pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(use_color())
        .try_init();
}

/// Whether stderr may carry colour: never with `NO_COLOR` set (any value), nor off a terminal.
pub fn use_color() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// Prints `value` as pretty JSON on stdout. A closed pipe is not an error.
pub fn print_json<T: Serialize>(value: &T) -> Result<(), EdgeError> {
    let text = serde_json::to_string_pretty(value).map_err(EdgeError::internal)?;
    print_stdout(&text)
}

/// Prints data text on stdout with a trailing newline. A closed pipe is not an error.
pub fn print_stdout(text: &str) -> Result<(), EdgeError> {
    // Human text may quote agents, reports and objectives: no control sequence gets through.
    let text = crate::term_text::terminal_safe(text);
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(EdgeError::internal(e)),
    }
}

/// Writes a line for people on stderr, stripped of control characters. A closed or broken
/// stderr is ignored: autocode's work (and the run it records) never depends on whether someone
/// is still reading.
pub fn say_line(text: &str) {
    crate::term_text::say_line(text);
}

/// [`say_line`] with `format!` arguments.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::output::say_line(&format!($($arg)*))
    };
}
pub(crate) use say;
