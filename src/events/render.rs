//! The human rendering of normalized events: one line per event, then the summary block.
//! Every string that came from a stream passes through [`terminal_safe`] first, so an agent
//! cannot move the cursor, retitle a pane or hide text in the reader's terminal.
//!
//! [`render_event_into`] appends to a caller's buffer, so a long stream is rendered without an
//! allocation per event (`autocode events normalize` reuses one buffer).

use std::fmt::Write as _;

use super::{
    CommandStatus, FileChangeKind, FinalReport, Normalized, NormalizedEvent, StreamSummary,
    ToolStatus, Usage,
};
use crate::term_text::terminal_safe;

/// Appends `text` on one line: newlines and carriage returns become `⏎`, and past `cap`
/// characters it is cut and ends with `…`.
fn push_one_line(out: &mut String, text: &str, cap: usize) {
    // A text of at most `cap` bytes has at most `cap` characters, and so has an ASCII prefix.
    let end = if text.len() <= cap {
        text.len()
    } else if text.as_bytes()[..cap].is_ascii() {
        cap
    } else {
        text.char_indices().nth(cap).map_or(text.len(), |(i, _)| i)
    };
    let head = &text[..end];
    let mut from = 0;
    // Newlines and carriage returns are ASCII: a byte search finds them on char boundaries.
    while let Some(at) = find_line_break(head.as_bytes(), from) {
        out.push_str(&head[from..at]);
        out.push('⏎');
        from = at + 1;
    }
    out.push_str(&head[from..]);
    if end < text.len() {
        out.push('…');
    }
}

/// The index of the first `\n` or `\r` in `bytes` from `from`, eight bytes at a time.
fn find_line_break(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let Ok(chunk) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let word = u64::from_le_bytes(chunk);
        let mask =
            has_zero(word ^ (ONES * u64::from(b'\n'))) | has_zero(word ^ (ONES * u64::from(b'\r')));
        if mask != 0 {
            // The lowest flag is exact: bit 8k + 7 for byte k.
            return Some(at + (mask.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|offset| at + offset)
}

/// Appends `n` in decimal (what `Display` writes), without the formatting machinery.
fn push_int(out: &mut String, n: i64) {
    if n < 0 {
        out.push('-');
    }
    push_uint(out, n.unsigned_abs());
}

fn push_uint(out: &mut String, n: u64) {
    let mut digits = [0u8; 20];
    out.extend(decimal(n, &mut digits).iter().map(|&d| char::from(d)));
}

/// `n`'s decimal digits (what `Display` writes), in `digits`; shared with the JSON writer.
pub(super) fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        // `n % 10` is below 10: the cast keeps it exactly.
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &digits[at..]
}

/// A value or `?` when it is unknown (what `Opt` displays).
fn push_opt_int(out: &mut String, n: Option<i64>) {
    match n {
        Some(n) => push_int(out, n),
        None => out.push('?'),
    }
}

fn push_opt_uint(out: &mut String, n: Option<u64>) {
    match n {
        Some(n) => push_uint(out, n),
        None => out.push('?'),
    }
}

#[cfg(test)]
fn one_line(text: &str, cap: usize) -> String {
    let mut out = String::with_capacity(text.len().min(cap * 4) + 3);
    push_one_line(&mut out, text, cap);
    out
}

fn push_usage(out: &mut String, usage: &Usage) {
    out.push_str("input ");
    push_opt_uint(out, usage.input_tokens);
    out.push_str(" · cache read ");
    push_opt_uint(out, usage.cache_read_tokens);
    out.push_str(" · cache write ");
    push_opt_uint(out, usage.cache_write_tokens);
    out.push_str(" · output ");
    push_opt_uint(out, usage.output_tokens);
    out.push_str(" (reasoning ");
    push_opt_uint(out, usage.reasoning_tokens);
    out.push(')');
    if let Some(c) = usage.cost_usd {
        let _ = write!(out, " · ${c:.6}");
    }
}

/// A human rendering: one line per event, then the summary.
pub fn render_human(normalized: &Normalized) -> String {
    let mut out = String::new();
    for event in &normalized.events {
        render_event_into(event, &mut out);
        out.push('\n');
    }
    out.push_str(&render_summary(&normalized.summary));
    out
}

/// One event as one line (no newline); every string from the stream is made terminal-safe.
pub fn render_event(event: &NormalizedEvent) -> String {
    let mut line = String::new();
    render_event_into(event, &mut line);
    line
}

/// Appends [`render_event`]'s line (no newline) to `out`.
pub fn render_event_into(event: &NormalizedEvent, out: &mut String) {
    let start = out.len();
    push_event(event, out);
    if let std::borrow::Cow::Owned(clean) = terminal_safe(&out[start..]) {
        out.truncate(start);
        out.push_str(&clean);
    }
}

fn push_event(event: &NormalizedEvent, out: &mut String) {
    match event {
        NormalizedEvent::SessionStarted {
            session_id,
            api_key_source,
        } => {
            out.push_str("session ");
            out.push_str(session_id);
            if let Some(source) = api_key_source {
                let _ = write!(out, " (api key source: {source})");
            }
        }
        NormalizedEvent::Text { text, is_final } => {
            out.push_str(if *is_final { "final text: " } else { "text: " });
            push_one_line(out, text, 160);
        }
        NormalizedEvent::Reasoning { text } => {
            out.push_str("reasoning: ");
            push_one_line(out, text, 160);
        }
        NormalizedEvent::CommandStarted {
            evidence_id,
            command,
        } => {
            out.push_str("$ ");
            push_one_line(out, command, 160);
            out.push_str(" [");
            out.push_str(evidence_id.as_str());
            out.push(']');
        }
        NormalizedEvent::CommandFinished {
            evidence_id,
            command,
            exit_code,
            status,
            output_bytes,
            ..
        } => {
            out.push_str("command ");
            push_one_line(out, command, 120);
            out.push_str(" [");
            out.push_str(evidence_id.as_str());
            out.push_str("] exit ");
            push_opt_int(out, exit_code.map(i64::from));
            out.push_str(" (");
            out.push_str(command_status_str(*status));
            out.push_str(", ");
            push_uint(out, *output_bytes);
            out.push_str(" bytes of output)");
        }
        NormalizedEvent::ToolUse {
            evidence_id,
            tool,
            status,
            error,
        } => {
            let _ = write!(
                out,
                "tool {tool} [{evidence_id}] {}",
                tool_status_str(*status)
            );
            if let Some(e) = error {
                out.push_str(": ");
                push_one_line(out, e, 120);
            }
        }
        NormalizedEvent::FileChange { path, kind } => {
            let _ = write!(out, "file {} {path}", file_change_str(*kind));
        }
        NormalizedEvent::PermissionDenied {
            tool,
            evidence_id,
            message,
        } => {
            let _ = write!(out, "permission denied: {tool}");
            if let Some(e) = evidence_id {
                let _ = write!(out, " [{e}]");
            }
            out.push(' ');
            push_one_line(out, message, 120);
        }
        NormalizedEvent::Retry {
            attempt,
            max_retries,
            http_status,
            message,
        } => {
            out.push_str("retry ");
            push_opt_int(out, attempt.map(i64::from));
            out.push('/');
            push_opt_int(out, max_retries.map(i64::from));
            out.push_str(" (HTTP ");
            push_opt_int(out, http_status.map(i64::from));
            out.push_str("): ");
            push_one_line(out, message, 120);
        }
        NormalizedEvent::Usage { usage } => {
            out.push_str("usage: ");
            push_usage(out, usage);
        }
        NormalizedEvent::Notice { message } => {
            out.push_str("notice: ");
            push_one_line(out, message, 160);
        }
        NormalizedEvent::ProviderError { error } => {
            out.push_str("provider error (HTTP ");
            push_opt_int(out, error.http_status.map(i64::from));
            out.push_str("): ");
            push_one_line(out, &error.message, 160);
        }
        NormalizedEvent::FinalReport { report } => match report {
            FinalReport::Structured(value) => {
                out.push_str("final report (structured): ");
                push_one_line(out, &value.to_string(), 160);
            }
            FinalReport::Text(text) => {
                out.push_str("final report (text): ");
                push_one_line(out, text, 160);
            }
        },
        NormalizedEvent::Malformed { line_no, error } => {
            let _ = write!(out, "malformed line {line_no}: ");
            push_one_line(out, error, 160);
        }
        NormalizedEvent::Unknown {
            line_no,
            event_type,
            ..
        } => {
            let _ = write!(
                out,
                "unknown line {line_no} (type {})",
                event_type.as_deref().unwrap_or("?")
            );
        }
    }
}

/// The serialized names of the status enums (their serde strings, checked in the tests).
pub(super) fn command_status_str(status: CommandStatus) -> &'static str {
    match status {
        CommandStatus::Succeeded => "succeeded",
        CommandStatus::Failed => "failed",
        CommandStatus::Denied => "denied",
        CommandStatus::Ended => "ended",
        CommandStatus::Unknown => "unknown",
    }
}

pub(super) fn tool_status_str(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Completed => "completed",
        ToolStatus::Failed => "failed",
        ToolStatus::Denied => "denied",
    }
}

pub(super) fn file_change_str(kind: FileChangeKind) -> &'static str {
    match kind {
        FileChangeKind::Add => "add",
        FileChangeKind::Update => "update",
        FileChangeKind::Delete => "delete",
        FileChangeKind::Write => "write",
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
    let _ = write!(out, "stop: {}", s.stop.class);
    if let Some(code) = s.stop.pause_code {
        let _ = write!(out, " ({code})");
    }
    if let Some(detail) = s.stop.detail.as_deref() {
        out.push_str(": ");
        push_one_line(&mut out, detail, 160);
    }
    out.push('\n');
    out.push_str("usage: ");
    push_usage(&mut out, &s.usage);
    out.push('\n');
    match &s.final_report {
        None => out.push_str("report: none\n"),
        Some(FinalReport::Structured(_)) => out.push_str("report: structured\n"),
        Some(FinalReport::Text(t)) => {
            let _ = writeln!(out, "report: text ({} bytes)", t.len());
        }
    }
    terminal_safe(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The rendering this module had before it wrote into a buffer (the reference).
    fn one_line_reference(text: &str, cap: usize) -> String {
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

    fn serde_name<T: serde::Serialize>(value: T) -> String {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::String(s)) => s,
            other => panic!("not a string: {other:?}"),
        }
    }

    #[test]
    fn status_names_are_the_serde_names() {
        for s in [
            CommandStatus::Succeeded,
            CommandStatus::Failed,
            CommandStatus::Denied,
            CommandStatus::Unknown,
        ] {
            assert_eq!(command_status_str(s), serde_name(s));
        }
        for s in [
            ToolStatus::Completed,
            ToolStatus::Failed,
            ToolStatus::Denied,
        ] {
            assert_eq!(tool_status_str(s), serde_name(s));
        }
        for k in [
            FileChangeKind::Add,
            FileChangeKind::Update,
            FileChangeKind::Delete,
            FileChangeKind::Write,
        ] {
            assert_eq!(file_change_str(k), serde_name(k));
        }
    }

    #[test]
    fn one_line_cuts_and_flattens() {
        assert_eq!(one_line("a\nb\rc", 10), "a⏎b⏎c");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("abc", 3), "abc");
        assert_eq!(one_line("ééé", 2), "éé…");
        assert_eq!(one_line("", 0), "");
        assert_eq!(one_line("x", 0), "…");
    }

    #[test]
    fn events_render_as_before() {
        let event = NormalizedEvent::CommandFinished {
            evidence_id: super::super::EvidenceId::from_provider_id("c1"),
            command: "echo \u{1b}[31mhi\nthere".into(),
            exit_code: None,
            status: CommandStatus::Unknown,
            output_excerpt: String::new(),
            output_bytes: 7,
        };
        assert_eq!(
            render_event(&event),
            "command echo [31mhi⏎there [event:c1] exit ? (unknown, 7 bytes of output)"
        );
        let mut buffer = String::from("kept|");
        render_event_into(
            &NormalizedEvent::Retry {
                attempt: Some(1),
                max_retries: None,
                http_status: Some(429),
                message: "slow down".into(),
            },
            &mut buffer,
        );
        assert_eq!(buffer, "kept|retry 1/? (HTTP 429): slow down");
    }

    #[test]
    fn numbers_render_as_display_does() {
        for n in [0, 7, -1, 10, 429, i64::from(i32::MIN), i64::MAX, i64::MIN] {
            let mut out = String::new();
            push_int(&mut out, n);
            assert_eq!(out, n.to_string());
        }
        let mut out = String::new();
        push_opt_uint(&mut out, Some(u64::MAX));
        push_opt_uint(&mut out, None);
        push_opt_int(&mut out, None);
        assert_eq!(out, format!("{}??", u64::MAX));
        let event = NormalizedEvent::CommandFinished {
            evidence_id: super::super::EvidenceId::from_provider_id("c2"),
            command: "false".into(),
            exit_code: Some(-9),
            status: CommandStatus::Failed,
            output_excerpt: String::new(),
            output_bytes: 0,
        };
        assert_eq!(
            render_event(&event),
            "command false [event:c2] exit -9 (failed, 0 bytes of output)"
        );
    }

    proptest! {
        #[test]
        fn find_line_break_finds_the_first(
            bytes in proptest::collection::vec(prop::sample::select(vec![b'a', b'\n', b'\r', 0x0b, 0x0c, 0x8a, 0x8d, 0xff]), 0..40),
            from in 0usize..40,
        ) {
            let from = from.min(bytes.len());
            prop_assert_eq!(
                find_line_break(&bytes, from),
                bytes[from..].iter().position(|&b| b == b'\n' || b == b'\r').map(|p| from + p)
            );
        }

        #[test]
        fn int_renders_as_display(n in any::<i64>(), u in any::<u64>()) {
            let mut out = String::new();
            push_int(&mut out, n);
            push_uint(&mut out, u);
            prop_assert_eq!(out, format!("{n}{u}"));
        }

        #[test]
        fn one_line_matches_the_reference(text in "(?s).{0,40}", cap in 0usize..30) {
            prop_assert_eq!(one_line(&text, cap), one_line_reference(&text, cap));
        }
    }
}
