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

/// How many `-v` this process was given (set once by [`init_tracing`]).
static VERBOSE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether this process was given `-v` (details people asked for: a plain line when a stage
/// starts).
pub fn verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed) > 0
}

/// Sets up `tracing` on stderr. `RUST_LOG` wins over `-v`; colours follow `NO_COLOR`.
pub fn init_tracing(verbose: u8) {
    VERBOSE.store(verbose, std::sync::atomic::Ordering::Relaxed);
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

/// Prints `value` as pretty JSON on stdout, streamed (a 10,000-stage `status --json` is 9 MB: it
/// is never held whole). A closed pipe is not an error.
pub fn print_json<T: Serialize>(value: &T) -> Result<(), EdgeError> {
    // serde_json writes in small pieces: they are gathered first, then scanned in 64 kB blocks.
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, C1Escaping::new(stdout));
    let written = serde_json::to_writer_pretty(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(EdgeError::internal(e)),
    }
}

/// JSON escapes C0 controls itself; DEL and the C1 range (`U+007F`–`U+009F`, a terminal's
/// 8-bit CSI among them) are written as `\u` escapes too, so `--json` on a terminal cannot
/// drive it. They can only occur inside JSON strings, where the escape means the same text.
/// A writer, so the document streams: a C1 character is `0xC2 0x80..=0x9F` in UTF-8, and a
/// `0xC2` ending one write waits for the next byte.
struct C1Escaping<W: Write> {
    inner: W,
    pending_c2: bool,
}

impl<W: Write> C1Escaping<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            pending_c2: false,
        }
    }

    fn escape(&mut self, code: u8) -> std::io::Result<()> {
        write!(self.inner, "\\u{code:04x}")
    }
}

impl<W: Write> Write for C1Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Nearly every write holds neither byte (`contains` on bytes is a memchr).
        if !self.pending_c2 && !buf.contains(&0x7f) && !buf.contains(&0xc2) {
            self.inner.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut start = 0;
        for (i, &byte) in buf.iter().enumerate() {
            if self.pending_c2 {
                self.pending_c2 = false;
                if (0x80..=0x9f).contains(&byte) {
                    self.escape(byte)?;
                    start = i + 1;
                    continue;
                }
                self.inner.write_all(&[0xc2])?;
            }
            match byte {
                0x7f => {
                    self.inner.write_all(&buf[start..i])?;
                    self.escape(0x7f)?;
                    start = i + 1;
                }
                0xc2 => {
                    self.inner.write_all(&buf[start..i])?;
                    self.pending_c2 = true;
                    start = i + 1;
                }
                _ => {}
            }
        }
        self.inner.write_all(&buf[start..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if std::mem::take(&mut self.pending_c2) {
            self.inner.write_all(&[0xc2])?;
        }
        self.inner.flush()
    }
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
        // Written a byte at a time too, so a C1 character split across writes is caught.
        let mut whole = C1Escaping::new(Vec::new());
        whole.write_all(text.as_bytes()).unwrap();
        whole.flush().unwrap();
        let mut split = C1Escaping::new(Vec::new());
        for byte in text.as_bytes() {
            split.write_all(std::slice::from_ref(byte)).unwrap();
        }
        split.flush().unwrap();
        assert_eq!(whole.inner, split.inner);
        let escaped = String::from_utf8(whole.inner).unwrap();
        assert!(
            !escaped.chars().any(|c| c.is_control() && c != '\n'),
            "{escaped}"
        );
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back, value);
        // Other non-ASCII text passes unchanged (U+00C2 itself is 0xC3 0x82).
        let plain = "{\"a\": \"é Â ü \u{a0}\"}";
        let mut out = C1Escaping::new(Vec::new());
        out.write_all(plain.as_bytes()).unwrap();
        out.flush().unwrap();
        assert_eq!(out.inner, plain.as_bytes());
    }
}
