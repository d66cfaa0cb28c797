//! Output plumbing shared by every command: JSON on stdout, human text, colour policy and the
//! tracing subscriber.

use std::io::Write;

use serde::Serialize;

use crate::error::EdgeError;

/// Opens `/dev/null` on whichever of descriptors 0, 1 and 2 is closed (`autocode … 2>&-`).
/// Otherwise the first file autocode opens would become "stderr", and a stage's log, lock or
/// pipe would receive what is meant for a person (and the agents would inherit it as theirs).
pub fn ensure_standard_fds() {
    use std::os::fd::{AsRawFd, IntoRawFd};
    // open() returns the lowest free descriptor: while that is 0, 1 or 2, it fills a hole.
    while let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        if file.as_raw_fd() > 2 {
            break;
        }
        // Kept open for the life of the process, as the standard descriptor it now is.
        let _ = file.into_raw_fd();
    }
}

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
    write_stdout(&escape_c1(&text))
}

/// JSON escapes C0 controls itself; DEL and the C1 range (`U+007F`–`U+009F`, a terminal's
/// 8-bit CSI among them) are written as `\u` escapes too, so `--json` on a terminal cannot
/// drive it. They can only occur inside JSON strings, where the escape means the same text.
fn escape_c1(json: &str) -> std::borrow::Cow<'_, str> {
    let c1 = |c: char| ('\u{7f}'..='\u{9f}').contains(&c);
    if !json.contains(c1) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c1(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Prints data text on stdout with a trailing newline. A closed pipe is not an error.
pub fn print_stdout(text: &str) -> Result<(), EdgeError> {
    // Human text may quote agents, reports and objectives: no control sequence gets through.
    write_stdout(&crate::term_text::terminal_safe(text))
}

fn write_stdout(text: &str) -> Result<(), EdgeError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_its_meaning_without_raw_control_characters() {
        let value = serde_json::json!({"text": "a\u{1b}]0;t\u{7}b\u{9b}31m\u{7f}"});
        let text = serde_json::to_string_pretty(&value).unwrap();
        let escaped = escape_c1(&text);
        assert!(
            !escaped.chars().any(|c| c.is_control() && c != '\n'),
            "{escaped}"
        );
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back, value);
    }
}
