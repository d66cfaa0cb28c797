//! The human rendering of normalized events: one line per event, then the summary block.
//! Every string that came from a stream passes through [`terminal_safe`] first, so an agent
//! cannot move the cursor, retitle a pane or hide text in the reader's terminal.

use std::fmt::Write as _;

use super::{FinalReport, Normalized, NormalizedEvent, StreamSummary, Usage};
use crate::term_text::terminal_safe;

fn one_line(text: &str, cap: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { '⏎' } else { c })
        .collect();
    if flat.chars().count() <= cap {
        flat
    } else {
        let cut: String = flat.chars().take(cap).collect();
        format!("{cut}…")
    }
}

fn opt<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "?".to_owned(), |v| v.to_string())
}

fn render_usage(usage: &Usage) -> String {
    format!(
        "input {} · cache read {} · cache write {} · output {} (reasoning {}){}",
        opt(usage.input_tokens),
        opt(usage.cache_read_tokens),
        opt(usage.cache_write_tokens),
        opt(usage.output_tokens),
        opt(usage.reasoning_tokens),
        usage
            .cost_usd
            .map(|c| format!(" · ${c:.6}"))
            .unwrap_or_default()
    )
}

/// A human rendering: one line per event, then the summary.
pub fn render_human(normalized: &Normalized) -> String {
    let mut out = String::new();
    for event in &normalized.events {
        out.push_str(&render_event(event));
        out.push('\n');
    }
    out.push_str(&render_summary(&normalized.summary));
    out
}

/// One event as one line (no newline); every string from the stream is made terminal-safe.
pub fn render_event(event: &NormalizedEvent) -> String {
    let line = match event {
        NormalizedEvent::SessionStarted {
            session_id,
            api_key_source,
        } => match api_key_source {
            Some(source) => format!("session {session_id} (api key source: {source})"),
            None => format!("session {session_id}"),
        },
        NormalizedEvent::Text { text, is_final } => format!(
            "{} {}",
            if *is_final { "final text:" } else { "text:" },
            one_line(text, 160)
        ),
        NormalizedEvent::Reasoning { text } => format!("reasoning: {}", one_line(text, 160)),
        NormalizedEvent::CommandStarted {
            evidence_id,
            command,
        } => format!("$ {} [{evidence_id}]", one_line(command, 160)),
        NormalizedEvent::CommandFinished {
            evidence_id,
            command,
            exit_code,
            status,
            output_bytes,
            ..
        } => format!(
            "command {} [{evidence_id}] exit {} ({}, {output_bytes} bytes of output)",
            one_line(command, 120),
            opt(*exit_code),
            serde_plain(status)
        ),
        NormalizedEvent::ToolUse {
            evidence_id,
            tool,
            status,
            error,
        } => format!(
            "tool {tool} [{evidence_id}] {}{}",
            serde_plain(status),
            error
                .as_deref()
                .map(|e| format!(": {}", one_line(e, 120)))
                .unwrap_or_default()
        ),
        NormalizedEvent::FileChange { path, kind } => {
            format!("file {} {path}", serde_plain(kind))
        }
        NormalizedEvent::PermissionDenied {
            tool,
            evidence_id,
            message,
        } => format!(
            "permission denied: {tool}{} {}",
            evidence_id
                .as_ref()
                .map(|e| format!(" [{e}]"))
                .unwrap_or_default(),
            one_line(message, 120)
        ),
        NormalizedEvent::Retry {
            attempt,
            max_retries,
            http_status,
            message,
        } => format!(
            "retry {}/{} (HTTP {}): {}",
            opt(*attempt),
            opt(*max_retries),
            opt(*http_status),
            one_line(message, 120)
        ),
        NormalizedEvent::Usage { usage } => format!("usage: {}", render_usage(usage)),
        NormalizedEvent::Notice { message } => format!("notice: {}", one_line(message, 160)),
        NormalizedEvent::ProviderError { error } => format!(
            "provider error (HTTP {}): {}",
            opt(error.http_status),
            one_line(&error.message, 160)
        ),
        NormalizedEvent::FinalReport { report } => match report {
            FinalReport::Structured(value) => {
                format!(
                    "final report (structured): {}",
                    one_line(&value.to_string(), 160)
                )
            }
            FinalReport::Text(text) => format!("final report (text): {}", one_line(text, 160)),
        },
        NormalizedEvent::Malformed { line_no, error } => {
            format!("malformed line {line_no}: {}", one_line(error, 160))
        }
        NormalizedEvent::Unknown {
            line_no,
            event_type,
            ..
        } => format!(
            "unknown line {line_no} (type {})",
            event_type.as_deref().unwrap_or("?")
        ),
    };
    match terminal_safe(&line) {
        std::borrow::Cow::Borrowed(_) => line,
        std::borrow::Cow::Owned(clean) => clean,
    }
}

/// The summary block that follows the events: transport, counts, session, stop, usage, report.
pub fn render_summary(s: &StreamSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "--");
    let _ = writeln!(
        out,
        "{}: {} lines, {} events, {} malformed",
        s.transport, s.lines, s.events, s.malformed_lines
    );
    let _ = writeln!(out, "session: {}", s.session_id.as_deref().unwrap_or("?"));
    let _ = writeln!(
        out,
        "stop: {}{}{}",
        s.stop.class,
        s.stop
            .pause_code
            .map(|c| format!(" ({c})"))
            .unwrap_or_default(),
        s.stop
            .detail
            .as_deref()
            .map(|d| format!(": {}", one_line(d, 160)))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "usage: {}", render_usage(&s.usage));
    let _ = writeln!(
        out,
        "report: {}",
        match &s.final_report {
            None => "none".to_owned(),
            Some(FinalReport::Structured(_)) => "structured".to_owned(),
            Some(FinalReport::Text(t)) => format!("text ({} bytes)", t.len()),
        }
    );
    terminal_safe(&out).into_owned()
}

/// The serde string of a unit enum variant (for display).
fn serde_plain<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_owned(),
    }
}
