//! The compact JSON of one [`NormalizedEvent`], written by hand: [`write_event_json`] appends
//! exactly the bytes `serde_json::to_writer(out, event)` would (a table and a proptest in this
//! module hold the two together), without serde's map-based serializing of the internally
//! tagged enum and with an escape scan that skips eight clean bytes at a time.
//!
//! Every variant is destructured field by field (no `..`), so a new variant or field is a
//! compile error here until it is written out too. The rare non-string leaves (`cost_usd`, a
//! structured report's `serde_json::Value`) go through serde_json itself.

use super::json_scan::find_string_special;
use super::render::{command_status_str, file_change_str, tool_status_str};
use super::types::{CostSource, ErrorSignal, ErrorSource, FinalReport, NormalizedEvent, Usage};

/// Appends `event` as serde_json's compact JSON to `out`.
pub fn write_event_json(event: &NormalizedEvent, out: &mut Vec<u8>) {
    let mut w = Obj::open(out, event.type_name());
    match event {
        NormalizedEvent::SessionStarted {
            session_id,
            api_key_source,
        } => {
            w.str("session_id", session_id);
            if let Some(source) = api_key_source {
                w.str("api_key_source", source);
            }
        }
        NormalizedEvent::Text { text, is_final } => {
            w.str("text", text);
            w.bool("is_final", *is_final);
        }
        NormalizedEvent::Reasoning { text } => w.str("text", text),
        NormalizedEvent::CommandStarted {
            evidence_id,
            command,
        } => {
            w.str("evidence_id", evidence_id.as_str());
            w.str("command", command);
        }
        NormalizedEvent::CommandFinished {
            evidence_id,
            command,
            exit_code,
            status,
            output_excerpt,
            output_bytes,
        } => {
            w.str("evidence_id", evidence_id.as_str());
            w.str("command", command);
            w.opt_int("exit_code", exit_code.map(i64::from));
            w.str("status", command_status_str(*status));
            w.str("output_excerpt", output_excerpt);
            w.int("output_bytes", Int::U(*output_bytes));
        }
        NormalizedEvent::ToolUse {
            evidence_id,
            tool,
            status,
            error,
        } => {
            w.str("evidence_id", evidence_id.as_str());
            w.str("tool", tool);
            w.str("status", tool_status_str(*status));
            if let Some(error) = error {
                w.str("error", error);
            }
        }
        NormalizedEvent::FileChange { path, kind } => {
            w.str("path", path);
            w.str("kind", file_change_str(*kind));
        }
        NormalizedEvent::PermissionDenied {
            tool,
            evidence_id,
            message,
        } => {
            w.str("tool", tool);
            if let Some(id) = evidence_id {
                w.str("evidence_id", id.as_str());
            }
            w.str("message", message);
        }
        NormalizedEvent::Retry {
            attempt,
            max_retries,
            http_status,
            message,
        } => {
            w.opt_int("attempt", attempt.map(i64::from));
            w.opt_int("max_retries", max_retries.map(i64::from));
            w.opt_int("http_status", http_status.map(i64::from));
            w.str("message", message);
        }
        NormalizedEvent::Usage { usage } => {
            w.key("usage");
            write_usage(usage, w.out);
        }
        NormalizedEvent::Notice { message } => w.str("message", message),
        NormalizedEvent::ProviderError { error } => {
            w.key("error");
            write_error_signal(error, w.out);
        }
        NormalizedEvent::FinalReport { report } => {
            w.key("report");
            let mut r = Obj::bare(w.out);
            match report {
                FinalReport::Structured(value) => {
                    r.str("kind", "structured");
                    r.key("value");
                    serde_leaf(value, r.out);
                }
                FinalReport::Text(text) => {
                    r.str("kind", "text");
                    r.str("value", text);
                }
            }
            r.close();
        }
        NormalizedEvent::Malformed { line_no, error } => {
            w.int("line_no", Int::U(*line_no));
            w.str("error", error);
        }
        NormalizedEvent::Unknown {
            line_no,
            event_type,
            raw,
        } => {
            w.int("line_no", Int::U(*line_no));
            match event_type {
                Some(t) => w.str("event_type", t),
                None => w.null("event_type"),
            }
            w.str("raw", raw);
        }
    }
    w.close();
}

fn write_usage(usage: &Usage, out: &mut Vec<u8>) {
    let Usage {
        input_tokens,
        cache_read_tokens,
        cache_write_tokens,
        output_tokens,
        reasoning_tokens,
        cost_usd,
        cost_source,
    } = usage;
    let mut w = Obj::bare(out);
    w.opt_int("input_tokens", input_tokens.map(Int::U));
    w.opt_int("cache_read_tokens", cache_read_tokens.map(Int::U));
    w.opt_int("cache_write_tokens", cache_write_tokens.map(Int::U));
    w.opt_int("output_tokens", output_tokens.map(Int::U));
    w.opt_int("reasoning_tokens", reasoning_tokens.map(Int::U));
    w.key("cost_usd");
    match cost_usd {
        Some(cost) => serde_leaf(cost, w.out),
        None => w.out.extend_from_slice(b"null"),
    }
    if let Some(source) = cost_source {
        w.str("cost_source", cost_source_str(*source));
    }
    w.close();
}

fn write_error_signal(error: &ErrorSignal, out: &mut Vec<u8>) {
    let ErrorSignal {
        source,
        message,
        http_status,
        kind,
        retryable,
        reset_hint,
    } = error;
    let mut w = Obj::bare(out);
    w.str("source", error_source_str(*source));
    w.str("message", message);
    w.opt_int("http_status", http_status.map(i64::from));
    w.opt_str("kind", kind.as_deref());
    w.key("retryable");
    match retryable {
        Some(b) => push_bool(w.out, *b),
        None => w.out.extend_from_slice(b"null"),
    }
    w.opt_str("reset_hint", reset_hint.as_deref());
    w.close();
}

/// A leaf serde_json writes itself (floats, arbitrary values): rare, and its formatting rules
/// (shortest round-trip floats, `null` for non-finite ones) are serde_json's.
fn serde_leaf<T: serde::Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail, and these types always serialize.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

fn error_source_str(source: ErrorSource) -> &'static str {
    match source {
        ErrorSource::ErrorEvent => "error_event",
        ErrorSource::TurnFailed => "turn_failed",
        ErrorSource::ResultRow => "result_row",
        ErrorSource::LogTail => "log_tail",
        ErrorSource::Direct => "direct",
    }
}

fn cost_source_str(source: CostSource) -> &'static str {
    match source {
        CostSource::Provider => "provider",
        CostSource::PriceTable => "price_table",
    }
}

/// An integer leaf.
#[derive(Clone, Copy)]
enum Int {
    U(u64),
    I(i64),
}

impl From<i64> for Int {
    fn from(v: i64) -> Int {
        Int::I(v)
    }
}

/// An object being written: `{` at open, a comma before every key but the first, `}` at close.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    /// `{"type":"<name>"` (the internally tagged enum's tag comes first).
    fn open(out: &'a mut Vec<u8>, type_name: &str) -> Obj<'a> {
        let mut obj = Obj::bare(out);
        obj.str("type", type_name);
        obj
    }

    fn bare(out: &'a mut Vec<u8>) -> Obj<'a> {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// `"key":` (keys here are fixed ASCII names that need no escaping).
    fn key(&mut self, key: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    fn str(&mut self, key: &str, value: &str) {
        self.key(key);
        push_json_str(self.out, value);
    }

    fn opt_str(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(v) => self.str(key, v),
            None => self.null(key),
        }
    }

    fn null(&mut self, key: &str) {
        self.key(key);
        self.out.extend_from_slice(b"null");
    }

    fn bool(&mut self, key: &str, value: bool) {
        self.key(key);
        push_bool(self.out, value);
    }

    fn int(&mut self, key: &str, value: Int) {
        self.key(key);
        push_int(self.out, value);
    }

    fn opt_int<I: Into<Int>>(&mut self, key: &str, value: Option<I>) {
        match value {
            Some(v) => self.int(key, v.into()),
            None => self.null(key),
        }
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

fn push_bool(out: &mut Vec<u8>, value: bool) {
    out.extend_from_slice(if value { b"true" } else { b"false" });
}

fn push_int(out: &mut Vec<u8>, value: Int) {
    let (negative, n) = match value {
        Int::U(n) => (false, n),
        Int::I(n) => (n < 0, n.unsigned_abs()),
    };
    if negative {
        out.push(b'-');
    }
    let mut digits = [0u8; 20];
    out.extend_from_slice(super::render::decimal(n, &mut digits));
}

/// serde_json's escape of one byte: 0 for none, `u` for `\u00XX`, else the short escape's letter.
const fn escape_of(byte: u8) -> u8 {
    match byte {
        0x08 => b'b',
        0x09 => b't',
        0x0A => b'n',
        0x0C => b'f',
        0x0D => b'r',
        b'"' => b'"',
        b'\\' => b'\\',
        0x00..=0x1F => b'u',
        _ => 0,
    }
}

/// Appends `value` as a JSON string, escaped as serde_json escapes it (the short escapes, else
/// `\u00xx` in lower-case hex for control characters; everything from 0x7F up as is). The
/// bytes to escape are exactly the ones [`find_string_special`] stops at.
pub(crate) fn push_json_str(out: &mut Vec<u8>, value: &str) {
    let bytes = value.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut at = 0;
    loop {
        let end = find_string_special(bytes, at);
        out.extend_from_slice(&bytes[at..end]);
        let Some(&byte) = bytes.get(end) else {
            break;
        };
        match escape_of(byte) {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xF)],
                ]);
            }
            escape => out.extend_from_slice(&[b'\\', escape]),
        }
        at = end + 1;
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::types::{CommandStatus, EvidenceId, FileChangeKind, ToolStatus};
    use proptest::prelude::*;

    /// Strings that exercise every escape path: quotes, backslashes, every control character,
    /// DEL, non-ASCII, U+2028/U+2029, and runs that straddle the eight-byte chunks.
    fn awkward() -> Vec<String> {
        let mut all_controls: String = (0u8..0x20).map(char::from).collect();
        all_controls.push('\u{7f}');
        vec![
            String::new(),
            "plain".into(),
            "exactly8".into(),
            "a \"quoted\" \\back\\slashed\\ value".into(),
            all_controls,
            "line\nbreak\r\ttab\u{8}\u{c}".into(),
            "é ü 中文 🦀 \u{2028} \u{2029} \u{85} \u{feff}".into(),
            "1234567\"1234567\\12345678\u{1}".into(),
            "\u{1b}[31mred\u{1b}[0m".into(),
            "x".repeat(63) + "\"" + &"y".repeat(9),
        ]
    }

    fn every_variant(s: &str) -> Vec<NormalizedEvent> {
        let id = EvidenceId::from_provider_id(s);
        let signal = |source| ErrorSignal {
            source,
            message: s.to_owned(),
            http_status: Some(429),
            kind: Some(s.to_owned()),
            retryable: Some(false),
            reset_hint: Some(s.to_owned()),
        };
        let mut events = vec![
            NormalizedEvent::SessionStarted {
                session_id: s.to_owned(),
                api_key_source: None,
            },
            NormalizedEvent::SessionStarted {
                session_id: s.to_owned(),
                api_key_source: Some(s.to_owned()),
            },
            NormalizedEvent::Text {
                text: s.to_owned(),
                is_final: true,
            },
            NormalizedEvent::Text {
                text: s.to_owned(),
                is_final: false,
            },
            NormalizedEvent::Reasoning { text: s.to_owned() },
            NormalizedEvent::CommandStarted {
                evidence_id: id.clone(),
                command: s.to_owned(),
            },
            NormalizedEvent::ToolUse {
                evidence_id: id.clone(),
                tool: s.to_owned(),
                status: ToolStatus::Completed,
                error: None,
            },
            NormalizedEvent::PermissionDenied {
                tool: s.to_owned(),
                evidence_id: None,
                message: s.to_owned(),
            },
            NormalizedEvent::PermissionDenied {
                tool: s.to_owned(),
                evidence_id: Some(id.clone()),
                message: s.to_owned(),
            },
            NormalizedEvent::Retry {
                attempt: None,
                max_retries: None,
                http_status: None,
                message: s.to_owned(),
            },
            NormalizedEvent::Retry {
                attempt: Some(u32::MAX),
                max_retries: Some(0),
                http_status: Some(u16::MAX),
                message: s.to_owned(),
            },
            NormalizedEvent::Notice {
                message: s.to_owned(),
            },
            NormalizedEvent::ProviderError {
                error: ErrorSignal::new(ErrorSource::ErrorEvent, s),
            },
            NormalizedEvent::FinalReport {
                report: FinalReport::Text(s.to_owned()),
            },
            NormalizedEvent::FinalReport {
                report: FinalReport::Structured(serde_json::json!({
                    "z": s, "a": [1, -2, 3.5, null, true, {"k": s}], "m": 1e300
                })),
            },
            NormalizedEvent::Malformed {
                line_no: u64::MAX,
                error: s.to_owned(),
            },
            NormalizedEvent::Unknown {
                line_no: 0,
                event_type: None,
                raw: s.to_owned(),
            },
            NormalizedEvent::Unknown {
                line_no: 7,
                event_type: Some(s.to_owned()),
                raw: s.to_owned(),
            },
        ];
        for source in [
            ErrorSource::ErrorEvent,
            ErrorSource::TurnFailed,
            ErrorSource::ResultRow,
            ErrorSource::LogTail,
            ErrorSource::Direct,
        ] {
            events.push(NormalizedEvent::ProviderError {
                error: signal(source),
            });
        }
        for (exit_code, status) in [
            (Some(0), CommandStatus::Succeeded),
            (Some(i32::MIN), CommandStatus::Failed),
            (Some(i32::MAX), CommandStatus::Denied),
            (None, CommandStatus::Unknown),
        ] {
            events.push(NormalizedEvent::CommandFinished {
                evidence_id: id.clone(),
                command: s.to_owned(),
                exit_code,
                status,
                output_excerpt: s.to_owned(),
                output_bytes: s.len() as u64,
            });
        }
        for status in [
            ToolStatus::Completed,
            ToolStatus::Failed,
            ToolStatus::Denied,
        ] {
            events.push(NormalizedEvent::ToolUse {
                evidence_id: id.clone(),
                tool: s.to_owned(),
                status,
                error: Some(s.to_owned()),
            });
        }
        for kind in [
            FileChangeKind::Add,
            FileChangeKind::Update,
            FileChangeKind::Delete,
            FileChangeKind::Write,
        ] {
            events.push(NormalizedEvent::FileChange {
                path: s.to_owned(),
                kind,
            });
        }
        let full = Usage {
            input_tokens: Some(1),
            cache_read_tokens: Some(0),
            cache_write_tokens: Some(u64::MAX),
            output_tokens: Some(42),
            reasoning_tokens: Some(7),
            cost_usd: Some(0.1 + 0.2),
            cost_source: Some(CostSource::Provider),
        };
        for usage in [
            Usage::default(),
            full,
            Usage {
                cost_usd: Some(f64::NAN),
                cost_source: Some(CostSource::PriceTable),
                ..Usage::default()
            },
            Usage {
                cost_usd: Some(f64::INFINITY),
                ..full
            },
            Usage {
                cost_usd: Some(1e-7),
                cost_source: None,
                ..full
            },
        ] {
            events.push(NormalizedEvent::Usage { usage });
        }
        events
    }

    fn hand(event: &NormalizedEvent) -> String {
        let mut out = Vec::new();
        write_event_json(event, &mut out);
        String::from_utf8(out).expect("the writer writes UTF-8")
    }

    fn serde(event: &NormalizedEvent) -> String {
        serde_json::to_string(event).expect("events serialize")
    }

    #[test]
    fn every_variant_matches_serde_json_on_awkward_strings() {
        let mut seen = std::collections::BTreeSet::new();
        for s in awkward() {
            for event in every_variant(&s) {
                seen.insert(event.type_name());
                assert_eq!(hand(&event), serde(&event), "{event:?}");
            }
        }
        // Every variant was covered (15 type names).
        assert_eq!(seen.len(), 15, "{seen:?}");
    }

    #[test]
    fn appends_to_what_is_there() {
        let mut out = b"kept,".to_vec();
        write_event_json(
            &NormalizedEvent::Notice {
                message: "m".into(),
            },
            &mut out,
        );
        assert_eq!(out, b"kept,{\"type\":\"notice\",\"message\":\"m\"}");
    }

    #[test]
    fn enum_names_are_the_serde_names() {
        let name = |v: serde_json::Value| v.as_str().map(str::to_owned);
        for s in [
            ErrorSource::ErrorEvent,
            ErrorSource::TurnFailed,
            ErrorSource::ResultRow,
            ErrorSource::LogTail,
            ErrorSource::Direct,
        ] {
            assert_eq!(
                Some(error_source_str(s).to_owned()),
                name(serde_json::to_value(s).unwrap())
            );
        }
        for s in [CostSource::Provider, CostSource::PriceTable] {
            assert_eq!(
                Some(cost_source_str(s).to_owned()),
                name(serde_json::to_value(s).unwrap())
            );
        }
    }

    #[test]
    fn every_byte_escapes_as_serde_json_escapes_it() {
        for byte in 0..0x80u8 {
            let text = format!("a{}b", char::from(byte));
            let mut out = Vec::new();
            push_json_str(&mut out, &text);
            assert_eq!(out, serde_json::to_vec(&text).unwrap(), "byte {byte:#x}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn any_string_in_any_variant_matches_serde_json(
            s in "(?s)[\\x00-\\x20\"\\\\a-z\u{7f}\u{80}-\u{10ffff}]{0,40}",
            numbers in (any::<u64>(), any::<i32>(), any::<u32>(), any::<u16>(), any::<f64>()),
        ) {
            let (n, code, attempt, status, cost) = numbers;
            let mut events = every_variant(&s);
            events.push(NormalizedEvent::CommandFinished {
                evidence_id: EvidenceId::from_provider_id(&s),
                command: s.clone(),
                exit_code: Some(code),
                status: CommandStatus::Failed,
                output_excerpt: s.clone(),
                output_bytes: n,
            });
            events.push(NormalizedEvent::Retry {
                attempt: Some(attempt),
                max_retries: Some(attempt),
                http_status: Some(status),
                message: s.clone(),
            });
            events.push(NormalizedEvent::Usage {
                usage: Usage { input_tokens: Some(n), cost_usd: Some(cost), ..Usage::default() },
            });
            for event in &events {
                prop_assert_eq!(hand(event), serde(event));
            }
        }
    }
}
