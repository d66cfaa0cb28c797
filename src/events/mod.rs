//! Reads each CLI's raw output stream (OpenCode, Codex, Claude Code, an ACP agent) into one normalized event
//! stream, plus a constant-size [`StreamSummary`] (session, report, usage, stop).
//!
//! Theory of operation: a per-CLI parser mirrors that CLI's wire types (unknown types
//! tolerated) and is fed one line at a time ([`StreamParser::feed_line_into`]); it emits
//! [`NormalizedEvent`]s to the caller and keeps only what the summary needs, so memory does not
//! grow with the stream. [`read_lines`] feeds a parser from any `BufRead` with a line-length
//! cap. A line that is not JSON becomes [`NormalizedEvent::Malformed`] and the stream goes on;
//! no input makes a parser panic (proptest over arbitrary bytes).
//!
//! Invariants: a command's exit code is `None` unless the CLI reported it (such a command is
//! never evidence); usage fields the CLI did not report stay `None`; the stop is classified from
//! provider-error material only ([`stop`]); the events' serialized strings are API
//! (`docs/events.md`).

mod acp;
mod async_lines;
mod claude;
pub mod claude_transcript;
mod codex;
mod codex_wire;
mod common;
mod event_json;
mod final_message;
mod json_scan;
mod opencode;
mod render;
pub mod stop;
mod types;

use std::io::{self, BufRead, Read};

pub use acp::AcpParser;
pub use async_lines::{LiveLine, read_line_capped};
pub use claude::{ClaudeParser, MAX_PENDING_TOOLS};
pub use codex::CodexParser;
pub use event_json::write_event_json;
pub use final_message::{
    COMMAND_KEYS, FinalMessage, SHELL_CALL_ARGUMENTS, ShellCommandFinalMessage,
    classify_final_message,
};
pub use opencode::OpencodeParser;
pub use render::{render_event, render_event_into, render_human, render_summary};
pub use stop::{
    PauseCode, Stop, StopClass, classify_error, classify_log_tail, is_retryable_transport_error,
    stop_with_log_tail,
};
pub use types::{
    CodexThreadTotals, CommandStatus, CostSource, ErrorSignal, ErrorSource, EvidenceId,
    FileChangeKind, FinalReport, MalformedLine, NormalizedEvent, OUTPUT_EXCERPT_CAP, StreamSummary,
    ToolStatus, TransportKind, UNKNOWN_RAW_CAP, Usage, excerpt,
};

/// The default longest line a reader hands to a parser; a longer line is discarded while it
/// is read and becomes one malformed line.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Errors of reading a stream (parsing never fails: bad lines are events).
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error("reading the {transport} stream failed after line {line_no}")]
    Read {
        transport: TransportKind,
        line_no: u64,
        #[source]
        source: io::Error,
    },
}

/// Options of a parse.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// Codex: the contents of the `-o` report file, if the caller has it.
    pub report_file: Option<Vec<u8>>,
    /// Codex: the thread's totals after its previous call (resume), from the previous summary.
    pub codex_previous_total: Option<CodexThreadTotals>,
    /// Claude: the session's cost after its previous call (resume), from the previous
    /// summary's `claude_session_cost_usd`.
    pub claude_previous_session_cost_usd: Option<f64>,
    /// Line cap; `None` means [`DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: Option<usize>,
}

/// The common surface of the three parsers.
pub trait StreamParser {
    /// Parse one line (a trailing newline is allowed) and append its events to `out`.
    fn feed_line_into(&mut self, line: &[u8], out: &mut Vec<NormalizedEvent>);

    /// Parse one line and return its events.
    fn feed_line(&mut self, line: &[u8]) -> Vec<NormalizedEvent> {
        let mut out = Vec::new();
        self.feed_line_into(line, &mut out);
        out
    }

    /// Record a line of `bytes` bytes that exceeded the reader's `cap` and was discarded.
    fn feed_oversized_line_into(&mut self, bytes: u64, cap: usize, out: &mut Vec<NormalizedEvent>);

    /// End of stream: append the trailing events (held texts, the final report) and return the
    /// summary.
    fn finish_into(self, out: &mut Vec<NormalizedEvent>) -> StreamSummary;
}

macro_rules! impl_stream_parser {
    ($parser:ty) => {
        impl StreamParser for $parser {
            fn feed_line_into(&mut self, line: &[u8], out: &mut Vec<NormalizedEvent>) {
                <$parser>::feed_line_into(self, line, out)
            }
            fn feed_oversized_line_into(
                &mut self,
                bytes: u64,
                cap: usize,
                out: &mut Vec<NormalizedEvent>,
            ) {
                <$parser>::feed_oversized_line_into(self, bytes, cap, out)
            }
            fn finish_into(self, out: &mut Vec<NormalizedEvent>) -> StreamSummary {
                <$parser>::finish_into(self, out)
            }
        }
    };
}

impl_stream_parser!(OpencodeParser);
impl_stream_parser!(CodexParser);
impl_stream_parser!(ClaudeParser);
impl_stream_parser!(AcpParser);

/// A parser for any of the three CLIs.
#[derive(Debug)]
pub enum AnyParser {
    Opencode(OpencodeParser),
    Codex(CodexParser),
    Claude(ClaudeParser),
    Acp(AcpParser),
}

impl AnyParser {
    pub fn new(transport: TransportKind, options: &ParseOptions) -> AnyParser {
        match transport {
            TransportKind::Opencode => AnyParser::Opencode(OpencodeParser::new()),
            TransportKind::Codex => {
                let mut parser = CodexParser::new(options.codex_previous_total);
                if let Some(report) = &options.report_file {
                    parser.set_report_file(report);
                }
                AnyParser::Codex(parser)
            }
            TransportKind::Claude => AnyParser::Claude(ClaudeParser::with_previous_session_cost(
                options.claude_previous_session_cost_usd,
            )),
            TransportKind::Acp => AnyParser::Acp(AcpParser::new()),
        }
    }
}

impl StreamParser for AnyParser {
    fn feed_line_into(&mut self, line: &[u8], out: &mut Vec<NormalizedEvent>) {
        match self {
            AnyParser::Opencode(p) => p.feed_line_into(line, out),
            AnyParser::Codex(p) => p.feed_line_into(line, out),
            AnyParser::Claude(p) => p.feed_line_into(line, out),
            AnyParser::Acp(p) => p.feed_line_into(line, out),
        }
    }
    fn feed_oversized_line_into(&mut self, bytes: u64, cap: usize, out: &mut Vec<NormalizedEvent>) {
        match self {
            AnyParser::Opencode(p) => p.feed_oversized_line_into(bytes, cap, out),
            AnyParser::Codex(p) => p.feed_oversized_line_into(bytes, cap, out),
            AnyParser::Claude(p) => p.feed_oversized_line_into(bytes, cap, out),
            AnyParser::Acp(p) => p.feed_oversized_line_into(bytes, cap, out),
        }
    }
    fn finish_into(self, out: &mut Vec<NormalizedEvent>) -> StreamSummary {
        match self {
            AnyParser::Opencode(p) => p.finish_into(out),
            AnyParser::Codex(p) => p.finish_into(out),
            AnyParser::Claude(p) => p.finish_into(out),
            AnyParser::Acp(p) => p.finish_into(out),
        }
    }
}

/// One line from [`read_lines`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A line without its newline.
    Complete(&'a [u8]),
    /// A line longer than the cap; its `bytes` were read and discarded.
    Oversized { bytes: u64 },
}

/// Split `reader` into lines of at most `max_line_bytes`, calling `on_line` for each. Memory
/// is one line buffer of at most the cap plus one byte. Returns the number of lines.
///
/// A line that lies whole in the reader's buffer is handed over in place (no copy); one that
/// straddles the buffer's end is gathered with `read_until`. Both searches are word-at-a-time
/// (the byte loop they replaced cost a tenth of the parse time).
pub fn read_lines(
    mut reader: impl BufRead,
    max_line_bytes: usize,
    mut on_line: impl FnMut(Line<'_>),
) -> io::Result<u64> {
    let limit = u64::try_from(max_line_bytes).unwrap_or(u64::MAX);
    let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut lines = 0u64;
    loop {
        let available = reader.fill_buf()?;
        if let Some(end) = find_newline(available)
            && end <= max_line_bytes
        {
            lines += 1;
            on_line(Line::Complete(&available[..end]));
            reader.consume(end + 1);
            continue;
        }
        buffer.clear();
        let read = (&mut reader)
            .take(limit.saturating_add(1))
            .read_until(b'\n', &mut buffer)?;
        if read == 0 {
            return Ok(lines);
        }
        lines += 1;
        if buffer.last() == Some(&b'\n') {
            buffer.pop();
            on_line(Line::Complete(&buffer));
        } else if buffer.len() <= max_line_bytes {
            // The last line, without a newline.
            on_line(Line::Complete(&buffer));
        } else {
            // Over the cap: discard the rest of the line, one cap-sized piece at a time.
            let mut total = buffer.len() as u64;
            loop {
                buffer.clear();
                let read = (&mut reader)
                    .take(limit.max(1))
                    .read_until(b'\n', &mut buffer)?;
                if read == 0 {
                    break;
                }
                if buffer.last() == Some(&b'\n') {
                    total += read as u64 - 1;
                    break;
                }
                total += read as u64;
            }
            on_line(Line::Oversized { bytes: total });
        }
    }
}

/// The index of the first `\n` in `bytes`, eight bytes at a time.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const NEWLINES: u64 = ONES * b'\n' as u64;
    let mut words = bytes.chunks_exact(8);
    let mut start = 0;
    for chunk in &mut words {
        let Ok(chunk) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let word = u64::from_le_bytes(chunk) ^ NEWLINES;
        // The lowest set bit marks the first zero byte (borrows only disturb higher bytes).
        let zeros = word.wrapping_sub(ONES) & !word & HIGHS;
        if zeros != 0 {
            return Some(start + (zeros.trailing_zeros() / 8) as usize);
        }
        start += 8;
    }
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|offset| start + offset)
}

/// Parse a whole stream, handing each event to `on_event` as it is produced; returns the
/// summary. This is the constant-memory entry point.
pub fn parse_stream(
    transport: TransportKind,
    reader: impl BufRead,
    options: &ParseOptions,
    mut on_event: impl FnMut(NormalizedEvent),
) -> Result<StreamSummary, EventsError> {
    let cap = options.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES);
    let mut parser = AnyParser::new(transport, options);
    let mut events = Vec::new();
    let mut line_no = 0u64;
    read_lines(reader, cap, |line| {
        line_no += 1;
        match line {
            Line::Complete(bytes) => parser.feed_line_into(bytes, &mut events),
            Line::Oversized { bytes } => parser.feed_oversized_line_into(bytes, cap, &mut events),
        }
        for event in events.drain(..) {
            on_event(event);
        }
    })
    .map_err(|source| EventsError::Read {
        transport,
        line_no,
        source,
    })?;
    let summary = parser.finish_into(&mut events);
    for event in events {
        on_event(event);
    }
    Ok(summary)
}

/// A whole stream's events and summary (for `autocode events normalize`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Normalized {
    pub events: Vec<NormalizedEvent>,
    pub summary: StreamSummary,
}

/// Parse a whole stream into memory. `report_file` is Codex's `-o` file contents (ignored for
/// the other CLIs).
pub fn normalize_stream(
    transport: TransportKind,
    reader: impl BufRead,
    report_file: Option<&[u8]>,
) -> Result<Normalized, EventsError> {
    let options = ParseOptions {
        report_file: report_file.map(<[u8]>::to_vec),
        ..ParseOptions::default()
    };
    let mut events = Vec::new();
    let summary = parse_stream(transport, reader, &options, |e| events.push(e))?;
    Ok(Normalized { events, summary })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn collect_lines(input: &[u8], cap: usize, buffer: usize) -> Vec<Result<Vec<u8>, u64>> {
        let reader = io::BufReader::with_capacity(buffer, input);
        let mut lines = Vec::new();
        read_lines(reader, cap, |line| {
            lines.push(match line {
                Line::Complete(b) => Ok(b.to_vec()),
                Line::Oversized { bytes } => Err(bytes),
            })
        })
        .unwrap();
        lines
    }

    #[test]
    fn lines_are_split_and_capped() {
        let input = b"a\nbbbbbbbbbb\n\nccc";
        for buffer in [1, 2, 3, 64] {
            assert_eq!(
                collect_lines(input, 5, buffer),
                vec![
                    Ok(b"a".to_vec()),
                    Err(10),
                    Ok(Vec::new()),
                    Ok(b"ccc".to_vec())
                ],
                "buffer {buffer}"
            );
        }
        assert_eq!(collect_lines(b"", 5, 8), Vec::<Result<Vec<u8>, u64>>::new());
    }

    #[test]
    fn oversized_line_becomes_one_malformed_event() {
        let options = ParseOptions {
            max_line_bytes: Some(8),
            ..ParseOptions::default()
        };
        let input = b"{\"type\":\"turn.started\",\"padding\":\"xxxxxxxx\"}\n";
        let mut events = Vec::new();
        let summary = parse_stream(TransportKind::Codex, &input[..], &options, |e| {
            events.push(e)
        })
        .unwrap();
        assert_eq!(summary.malformed_lines, 1);
        assert!(
            matches!(&events[0], NormalizedEvent::Malformed { line_no: 1, error } if error.contains("line cap"))
        );
    }

    #[test]
    fn render_human_names_stop_and_report() {
        let input = include_bytes!("../../tests/fixtures/real-clis/codex/err429/stdout.jsonl");
        let normalized = normalize_stream(TransportKind::Codex, &input[..], Some(b"")).unwrap();
        let text = render_human(&normalized);
        assert!(
            text.contains("stop: rate_limit (PAUSED_RATE_LIMIT)"),
            "{text}"
        );
        assert!(text.contains("retry 1/5 (HTTP 429)"), "{text}");
        assert!(text.contains("report: none"), "{text}");
    }

    #[test]
    fn a_changed_session_id_is_reported() {
        let stream = concat!(
            r#"{"type":"step_start","sessionID":"ses_a","part":{}}"#,
            "\n",
            r#"{"type":"step_start","sessionID":"ses_b","part":{}}"#,
            "\n",
            r#"{"type":"step_start","sessionID":"ses_b","part":{}}"#,
            "\n",
        );
        let normalized =
            normalize_stream(TransportKind::Opencode, stream.as_bytes(), None).unwrap();
        assert_eq!(normalized.summary.session_id.as_deref(), Some("ses_a"));
        assert_eq!(
            normalized.summary.conflicting_session_id.as_deref(),
            Some("ses_b")
        );
        let sessions = normalized
            .events
            .iter()
            .filter(|e| matches!(e, NormalizedEvent::SessionStarted { .. }))
            .count();
        assert_eq!(sessions, 2);
    }

    #[test]
    fn empty_stream_is_a_start_failure_and_garbage_a_cut_stream() {
        for transport in TransportKind::ALL {
            let empty = normalize_stream(transport, &b"\n\n"[..], None).unwrap();
            assert_eq!(
                empty.summary.stop.class,
                StopClass::StartFailure,
                "{transport}"
            );
            assert_eq!(empty.summary.lines, 2);
            assert!(empty.events.is_empty());
            let garbage = normalize_stream(transport, &b"garbage\n"[..], None).unwrap();
            assert_eq!(
                garbage.summary.stop.class,
                StopClass::CutStream,
                "{transport}"
            );
            assert_eq!(garbage.summary.malformed_lines, 1);
            assert!(!is_retryable_transport_error(&garbage.summary));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn no_parser_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            for transport in TransportKind::ALL {
                let options = ParseOptions { max_line_bytes: Some(512), ..ParseOptions::default() };
                let mut count = 0u64;
                let summary = parse_stream(transport, &bytes[..], &options, |_| count += 1).unwrap();
                prop_assert_eq!(summary.events, count);
            }
        }

        #[test]
        fn find_newline_finds_the_first(bytes in proptest::collection::vec(prop::sample::select(vec![b'a', b'\n', 0x8a, 0x0b, 0x09, 0xff]), 0..70)) {
            prop_assert_eq!(find_newline(&bytes), bytes.iter().position(|&b| b == b'\n'));
        }

        #[test]
        fn read_lines_matches_a_plain_split(
            bytes in proptest::collection::vec(prop::sample::select(vec![b'a', b'b', b'\n', b'\r']), 0..200),
            cap in 1usize..12,
            buffer in 1usize..20,
        ) {
            let mut expected: Vec<Result<Vec<u8>, u64>> = bytes
                .split(|&b| b == b'\n')
                .map(|line| if line.len() <= cap { Ok(line.to_vec()) } else { Err(line.len() as u64) })
                .collect();
            // A trailing newline does not start another line.
            if bytes.is_empty() || bytes.last() == Some(&b'\n') {
                expected.pop();
            }
            prop_assert_eq!(collect_lines(&bytes, cap, buffer), expected);
        }

        #[test]
        fn no_parser_panics_on_json_shaped_lines(
            kind in prop::sample::select(vec![
                "step_start", "text", "tool_use", "step_finish", "error", "reasoning",
                "thread.started", "turn.started", "turn.completed", "turn.failed", "item.started",
                "item.completed", "system", "assistant", "user", "result", "stream_event", "zzz",
            ]),
            body in "[{}\\[\\]\":,a-z0-9 ]{0,200}",
        ) {
            let line = format!("{{\"type\":\"{kind}\",{body}");
            let line2 = format!("{{\"type\":\"{kind}\",\"part\":{body}}}\n{{\"type\":\"{kind}\",\"item\":{{\"type\":\"command_execution\"}},\"message\":{{\"content\":[{body}]}}}}");
            for transport in TransportKind::ALL {
                for input in [&line, &line2] {
                    let result = normalize_stream(transport, input.as_bytes(), None);
                    prop_assert!(result.is_ok());
                }
            }
        }
    }
}
