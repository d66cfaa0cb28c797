//! The edge error: every failure that reaches `main`, with its exit code and hints.
//!
//! Modules keep their own `thiserror` enums; this type only classifies them for the user.
//! Exit codes (documented in `docs/exit-codes.md`): 0 ok, 1 a check failed or an internal error,
//! 2 usage or configuration error, 3 paused.

use std::process::ExitCode;

/// The documented exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    /// A check failed (doctor, connections check, conformance) or an internal error happened.
    pub const FAILED: u8 = 1;
    /// Bad usage or configuration: nothing was started.
    pub const USAGE: u8 = 2;
    /// A run paused with a pause code.
    pub const PAUSED: u8 = 3;
}

/// An error as the user sees it: a message, its causes, hints, and an exit code.
#[derive(Debug)]
pub struct EdgeError {
    pub kind: EdgeKind,
    pub error: Box<dyn std::error::Error + Send + Sync>,
    pub hints: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// Bad arguments or configuration (exit 2).
    Usage,
    /// Something failed that is not the user's input (exit 1).
    Internal,
}

impl EdgeError {
    pub fn usage(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            kind: EdgeKind::Usage,
            error: error.into(),
            hints: Vec::new(),
        }
    }
    pub fn internal(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            kind: EdgeKind::Internal,
            error: error.into(),
            hints: Vec::new(),
        }
    }
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self.kind {
            EdgeKind::Usage => exit::USAGE,
            EdgeKind::Internal => exit::FAILED,
        })
    }
    /// The message with its chain of causes and hints, for stderr.
    pub fn render(&self) -> String {
        let mut out = format!("error: {}", self.error);
        let mut source = self.error.source();
        while let Some(cause) = source {
            // Many messages already quote their cause (`… : {source}`): say it once.
            let text = cause.to_string();
            if !out.contains(&text) {
                out.push_str(&format!("\n  caused by: {text}"));
            }
            source = cause.source();
        }
        for hint in &self.hints {
            out.push_str(&format!("\nhint: {hint}"));
        }
        crate::term_text::terminal_safe(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config: {0}")]
    struct Quoting(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot start the run")]
    struct Plain(#[source] std::io::Error);

    #[test]
    fn a_cause_the_message_already_quotes_is_said_once() {
        let quoted = EdgeError::usage(Quoting(std::io::Error::other("denied")));
        assert_eq!(quoted.render(), "error: cannot read config: denied");
        let plain = EdgeError::usage(Plain(std::io::Error::other("denied"))).hint("try again");
        assert_eq!(
            plain.render(),
            "error: cannot start the run\n  caused by: denied\nhint: try again"
        );
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let error = EdgeError::usage("bad name \u{1b}]0;pwned\u{7}");
        assert_eq!(error.render(), "error: bad name ]0;pwned");
    }
}
