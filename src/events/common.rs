//! Pieces every CLI parser shares: the constant-size [`Tally`] that turns emitted events into a
//! [`StreamSummary`], and lenient wire helpers ([`LenientStr`], [`StrOr`]) that keep one odd
//! field from making a whole line malformed.
//!
//! Invariant: the tally's size does not depend on the stream's length (counters, the first and
//! last of a few things, nothing per line).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::stop::{Stop, StopClass, is_retryable_transport_signal};
use super::types::{
    CodexThreadTotals, FinalReport, MalformedLine, NormalizedEvent, StreamSummary, TransportKind,
    UNKNOWN_RAW_CAP, Usage, truncate_to,
};

/// Counters and first/last values of a stream, updated for every emitted event.
#[derive(Debug)]
pub(crate) struct Tally {
    pub transport: TransportKind,
    pub lines: u64,
    pub events: u64,
    pub session_id: Option<String>,
    last_session_id: Option<String>,
    pub conflicting_session_id: Option<String>,
    pub api_key_source: Option<String>,
    pub usage: Usage,
    pub malformed_lines: u64,
    pub first_malformed: Option<MalformedLine>,
    pub unknown_lines: u64,
    pub commands_finished: u64,
    pub permission_denials: u64,
    pub retries: u64,
    pub provider_errors: u64,
    pub content_events: u64,
    pub last_error: Option<super::types::ErrorSignal>,
    pub all_errors_retryable_transport: bool,
}

impl Tally {
    pub fn new(transport: TransportKind) -> Tally {
        Tally {
            transport,
            lines: 0,
            events: 0,
            session_id: None,
            last_session_id: None,
            conflicting_session_id: None,
            api_key_source: None,
            usage: Usage::default(),
            malformed_lines: 0,
            first_malformed: None,
            unknown_lines: 0,
            commands_finished: 0,
            permission_denials: 0,
            retries: 0,
            provider_errors: 0,
            content_events: 0,
            last_error: None,
            all_errors_retryable_transport: true,
        }
    }

    /// Record and emit one event.
    pub fn emit(&mut self, out: &mut Vec<NormalizedEvent>, event: NormalizedEvent) {
        self.events += 1;
        if event.is_content() {
            self.content_events += 1;
        }
        match &event {
            NormalizedEvent::SessionStarted {
                session_id,
                api_key_source,
            } => {
                match &self.session_id {
                    None => self.session_id = Some(session_id.clone()),
                    Some(first) if first != session_id && self.conflicting_session_id.is_none() => {
                        self.conflicting_session_id = Some(session_id.clone());
                    }
                    Some(_) => {}
                }
                if api_key_source.is_some() {
                    self.api_key_source.clone_from(api_key_source);
                }
            }
            NormalizedEvent::Malformed { line_no, error } => {
                self.malformed_lines += 1;
                if self.first_malformed.is_none() {
                    self.first_malformed = Some(MalformedLine {
                        line_no: *line_no,
                        error: error.clone(),
                    });
                }
            }
            NormalizedEvent::Unknown { .. } => self.unknown_lines += 1,
            NormalizedEvent::CommandFinished { .. } => self.commands_finished += 1,
            NormalizedEvent::PermissionDenied { .. } => self.permission_denials += 1,
            NormalizedEvent::Retry { .. } => self.retries += 1,
            NormalizedEvent::Usage { usage } => self.usage = self.usage.add(usage),
            NormalizedEvent::ProviderError { error } => {
                self.provider_errors += 1;
                self.all_errors_retryable_transport &= is_retryable_transport_signal(error);
                // In place: a stream of retries replaces it at every line.
                match &mut self.last_error {
                    Some(last) => last.clone_from(error),
                    None => self.last_error = Some(error.clone()),
                }
            }
            _ => {}
        }
        out.push(event);
    }

    /// Emit `SessionStarted` when `id` differs from the last session id seen.
    pub fn session(
        &mut self,
        out: &mut Vec<NormalizedEvent>,
        id: &str,
        api_key_source: Option<String>,
    ) {
        if self.last_session_id.as_deref() == Some(id) && api_key_source.is_none() {
            return;
        }
        self.last_session_id = Some(id.to_owned());
        self.emit(
            out,
            NormalizedEvent::SessionStarted {
                session_id: id.to_owned(),
                api_key_source,
            },
        );
    }

    pub fn malformed(&mut self, out: &mut Vec<NormalizedEvent>, error: String) {
        let line_no = self.lines;
        self.emit(out, NormalizedEvent::Malformed { line_no, error });
    }

    pub fn unknown(
        &mut self,
        out: &mut Vec<NormalizedEvent>,
        event_type: Option<&str>,
        raw: &[u8],
    ) {
        let line_no = self.lines;
        let raw = truncate_to(&String::from_utf8_lossy(raw), UNKNOWN_RAW_CAP);
        self.emit(
            out,
            NormalizedEvent::Unknown {
                line_no,
                event_type: event_type.map(str::to_owned),
                raw,
            },
        );
    }

    /// Count a line and return it trimmed, or `None` when it is blank (blank lines are not
    /// malformed: CLIs flush stray newlines).
    pub fn start_line<'l>(&mut self, line: &'l [u8]) -> Option<&'l [u8]> {
        self.lines += 1;
        let trimmed = line.trim_ascii();
        (!trimmed.is_empty()).then_some(trimmed)
    }

    /// The stop of a stream that never reached a terminal event: a start failure when it
    /// produced nothing at all, else a cut stream.
    pub fn nothing_stop(&self) -> StopClass {
        if self.events == 0 {
            StopClass::StartFailure
        } else {
            StopClass::CutStream
        }
    }

    pub fn oversized(&mut self, out: &mut Vec<NormalizedEvent>, bytes: u64, cap: usize) {
        self.lines += 1;
        self.malformed(
            out,
            format!("line of {bytes} bytes exceeds the {cap}-byte line cap"),
        );
    }

    /// Ends the stream: the final report (if any) as the last event, then the summary.
    pub fn finish_with_report(
        mut self,
        out: &mut Vec<NormalizedEvent>,
        final_report: Option<FinalReport>,
        stop: Stop,
        codex_thread_totals: Option<CodexThreadTotals>,
    ) -> StreamSummary {
        if let Some(report) = &final_report {
            self.emit(
                out,
                NormalizedEvent::FinalReport {
                    report: report.clone(),
                },
            );
        }
        self.into_summary(final_report, stop, codex_thread_totals)
    }

    pub fn into_summary(
        self,
        final_report: Option<FinalReport>,
        stop: Stop,
        codex_thread_totals: Option<CodexThreadTotals>,
    ) -> StreamSummary {
        StreamSummary {
            transport: self.transport,
            lines: self.lines,
            events: self.events,
            session_id: self.session_id,
            conflicting_session_id: self.conflicting_session_id,
            api_key_source: self.api_key_source,
            final_report,
            usage: self.usage,
            codex_thread_totals,
            claude_session_cost_usd: None,
            stop,
            malformed_lines: self.malformed_lines,
            first_malformed: self.first_malformed,
            unknown_lines: self.unknown_lines,
            commands_finished: self.commands_finished,
            permission_denials: self.permission_denials,
            retries: self.retries,
            provider_errors: self.provider_errors,
            content_events: self.content_events,
            last_error: self.last_error,
            all_errors_retryable_transport: self.all_errors_retryable_transport,
        }
    }
}

/// Deserializes one line. A line that is valid UTF-8 as a whole (nearly every line) is read
/// as a `str`, so serde_json does not check each string it keeps again (that check was ~7 % of
/// a Codex parse); any other line is read as bytes exactly as before, where serde_json checks
/// only the strings it keeps. Either way the values and errors are the same.
pub(crate) fn parse_line<'a, T: Deserialize<'a>>(line: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    }
}

/// A JSON error message without serde_json's position suffix noise kept short.
pub(crate) fn json_error(error: &serde_json::Error) -> String {
    truncate_to(&error.to_string(), 300)
}

/// A string field that tolerates any other JSON type (read as `None`), so one unexpected
/// value does not make the whole line malformed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct LenientStr<'a>(pub Option<Cow<'a, str>>);

impl<'a> LenientStr<'a> {
    pub fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LenientStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = LenientStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(LenientStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(LenientStr(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(LenientStr(Some(Cow::Owned(v))))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LenientStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LenientStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LenientStr(None))
            }
        }
        deserializer.deserialize_any(V(PhantomData))
    }
}

/// A field that is either a string or a structured value (Claude's `message`, `content` and
/// `tool_use_result` all come in both shapes). Other JSON types are a type error.
#[derive(Debug)]
pub(crate) enum StrOr<'a, T> {
    Str(Cow<'a, str>),
    Other(T),
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for StrOr<'a, T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<'a, T>(PhantomData<(&'a (), T)>);
        impl<'de: 'a, 'a, T: Deserialize<'de>> Visitor<'de> for V<'a, T> {
            type Value = StrOr<'a, T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, an object or an array")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(StrOr::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StrOr::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(StrOr::Str(Cow::Owned(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(StrOr::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                T::deserialize(SeqAccessDeserializer::new(seq)).map(StrOr::Other)
            }
        }
        deserializer.deserialize_any(V(PhantomData))
    }
}

/// `i64` exit code from the wire to `i32`, `None` when it does not fit.
pub(crate) fn exit_code(value: Option<i64>) -> Option<i32> {
    value.and_then(|v| i32::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        field: LenientStr<'a>,
        #[serde(borrow, default)]
        either: Option<StrOr<'a, Vec<u32>>>,
    }

    #[test]
    fn lenient_str_tolerates_any_type() {
        for (json, expected) in [
            (r#"{"field":"x"}"#, Some("x")),
            (r#"{"field":"a\nb"}"#, Some("a\nb")),
            (r#"{"field":3}"#, None),
            (r#"{"field":{"a":[1,{"b":2}]}}"#, None),
            (r#"{"field":null}"#, None),
            (r#"{}"#, None),
        ] {
            let probe: Probe = serde_json::from_str(json).unwrap();
            assert_eq!(probe.field.as_deref(), expected, "{json}");
        }
    }

    #[test]
    fn str_or_reads_both_shapes() {
        let probe: Probe = serde_json::from_str(r#"{"either":"s"}"#).unwrap();
        assert!(matches!(probe.either, Some(StrOr::Str(s)) if s == "s"));
        let probe: Probe = serde_json::from_str(r#"{"either":[1,2]}"#).unwrap();
        assert!(matches!(probe.either, Some(StrOr::Other(v)) if v == [1, 2]));
        assert!(serde_json::from_str::<Probe>(r#"{"either":true}"#).is_err());
    }
}
