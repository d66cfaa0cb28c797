//! Codex's wire lines (`codex exec --json`, 0.169.0) as the parser reads them, and
//! [`parse_wire_line`], which reads one: a hand-written fast path over [`Cursor`] for the
//! shapes Codex writes, and serde_json (the derived `Deserialize`) for anything the fast path is
//! not certain of. Both give the same [`WireLine`] for every line the fast path accepts (a
//! proptest over generated lines and a test over every fixture line hold them together), so
//! the fast path changes speed only. Codex lines are short (~120 bytes), so serde's per-field
//! overhead was most of the parse.

use std::borrow::Cow;

use serde::Deserialize;

use super::common::{LenientStr, parse_line};
use super::json_scan::Cursor;

/// One line into its wire form: the fast path, else serde_json (which also words the error
/// of a malformed line).
pub(super) fn parse_wire_line(line: &[u8]) -> serde_json::Result<WireLine<'_>> {
    if let Ok(text) = std::str::from_utf8(line)
        && let Some(wire) = fast_line(text)
    {
        return Ok(wire);
    }
    parse_line(line)
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct WireLine<'a> {
    #[serde(borrow, rename = "type")]
    pub(super) kind: Cow<'a, str>,
    #[serde(borrow, default)]
    pub(super) thread_id: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) item: Option<Box<WireItem<'a>>>,
    #[serde(default)]
    pub(super) usage: Option<Box<WireUsage>>,
    #[serde(borrow, default)]
    pub(super) message: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) error: Option<WireTurnError<'a>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct WireTurnError<'a> {
    #[serde(borrow, default)]
    pub(super) message: LenientStr<'a>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct WireItem<'a> {
    #[serde(borrow, default)]
    pub(super) id: LenientStr<'a>,
    #[serde(borrow, rename = "type", default)]
    pub(super) kind: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) text: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) command: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) aggregated_output: LenientStr<'a>,
    #[serde(default)]
    pub(super) exit_code: Option<i64>,
    #[serde(borrow, default)]
    pub(super) status: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) message: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) tool: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) changes: Option<Vec<WireChange<'a>>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct WireChange<'a> {
    #[serde(borrow, default)]
    pub(super) path: LenientStr<'a>,
    #[serde(borrow, default)]
    pub(super) kind: LenientStr<'a>,
}

#[derive(Debug, PartialEq, Deserialize, Clone, Copy)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub(super) input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cached_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) cache_write_input_tokens: Option<u64>,
    #[serde(default)]
    pub(super) output_tokens: Option<u64>,
    #[serde(default)]
    pub(super) reasoning_output_tokens: Option<u64>,
}

/// Marks field `bit` as seen; `None` when it was already (serde_json refuses a duplicate
/// field: leave the line to it).
fn once(seen: &mut u16, bit: u16) -> Option<()> {
    let mask = 1 << bit;
    (*seen & mask == 0).then(|| *seen |= mask)
}

fn lenient<'a>(cursor: &mut Cursor<'a>) -> Option<LenientStr<'a>> {
    cursor.lenient_str().map(LenientStr)
}

/// `null` as `None`, else what `read` reads.
fn nullable<'a, T>(
    cursor: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<T>> {
    if cursor.null()? {
        Some(None)
    } else {
        read(cursor).map(Some)
    }
}

fn fast_line(text: &str) -> Option<WireLine<'_>> {
    let mut cursor = Cursor::new(text);
    let mut seen = 0u16;
    let mut kind = None;
    let mut thread_id = LenientStr::default();
    let mut item = None;
    let mut usage = None;
    let mut message = LenientStr::default();
    let mut error = None;
    cursor.object(|c, key| {
        match key {
            "type" => {
                once(&mut seen, 0)?;
                kind = Some(c.string()?);
            }
            "thread_id" => {
                once(&mut seen, 1)?;
                thread_id = lenient(c)?;
            }
            "item" => {
                once(&mut seen, 2)?;
                item = nullable(c, |c| fast_item(c).map(Box::new))?;
            }
            "usage" => {
                once(&mut seen, 3)?;
                usage = nullable(c, |c| fast_usage(c).map(Box::new))?;
            }
            "message" => {
                once(&mut seen, 4)?;
                message = lenient(c)?;
            }
            "error" => {
                once(&mut seen, 5)?;
                error = nullable(c, fast_turn_error)?;
            }
            _ => c.skip_value()?,
        }
        Some(())
    })?;
    cursor.end()?;
    Some(WireLine {
        kind: kind?,
        thread_id,
        item,
        usage,
        message,
        error,
    })
}

fn fast_turn_error<'a>(cursor: &mut Cursor<'a>) -> Option<WireTurnError<'a>> {
    let mut seen = 0u16;
    let mut message = LenientStr::default();
    cursor.object(|c, key| {
        if key == "message" {
            once(&mut seen, 0)?;
            message = lenient(c)?;
        } else {
            c.skip_value()?;
        }
        Some(())
    })?;
    Some(WireTurnError { message })
}

fn fast_item<'a>(cursor: &mut Cursor<'a>) -> Option<WireItem<'a>> {
    let mut seen = 0u16;
    let mut item = WireItem {
        id: LenientStr::default(),
        kind: LenientStr::default(),
        text: LenientStr::default(),
        command: LenientStr::default(),
        aggregated_output: LenientStr::default(),
        exit_code: None,
        status: LenientStr::default(),
        message: LenientStr::default(),
        tool: LenientStr::default(),
        changes: None,
    };
    cursor.object(|c, key| {
        let (bit, field) = match key {
            "id" => (0, &mut item.id),
            "type" => (1, &mut item.kind),
            "text" => (2, &mut item.text),
            "command" => (3, &mut item.command),
            "aggregated_output" => (4, &mut item.aggregated_output),
            "status" => (5, &mut item.status),
            "message" => (6, &mut item.message),
            "tool" => (7, &mut item.tool),
            "exit_code" => {
                once(&mut seen, 8)?;
                item.exit_code = nullable(c, |c| c.uint().and_then(|n| i64::try_from(n).ok()))?;
                return Some(());
            }
            // A list of changes is left to serde_json (rare, and nested).
            "changes" => {
                once(&mut seen, 9)?;
                return if c.null()? { Some(()) } else { None };
            }
            _ => return c.skip_value(),
        };
        once(&mut seen, bit)?;
        *field = lenient(c)?;
        Some(())
    })?;
    Some(item)
}

fn fast_usage(cursor: &mut Cursor<'_>) -> Option<WireUsage> {
    let mut seen = 0u16;
    let mut usage = WireUsage {
        input_tokens: None,
        cached_input_tokens: None,
        cache_write_input_tokens: None,
        output_tokens: None,
        reasoning_output_tokens: None,
    };
    cursor.object(|c, key| {
        let (bit, field) = match key {
            "input_tokens" => (0, &mut usage.input_tokens),
            "cached_input_tokens" => (1, &mut usage.cached_input_tokens),
            "cache_write_input_tokens" => (2, &mut usage.cache_write_input_tokens),
            "output_tokens" => (3, &mut usage.output_tokens),
            "reasoning_output_tokens" => (4, &mut usage.reasoning_output_tokens),
            _ => return c.skip_value(),
        };
        once(&mut seen, bit)?;
        *field = nullable(c, Cursor::uint)?;
        Some(())
    })?;
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn serde_wire(line: &str) -> serde_json::Result<WireLine<'_>> {
        serde_json::from_str(line)
    }

    #[test]
    fn every_fixture_line_takes_the_fast_path_and_reads_as_serde_reads_it() {
        let root = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/real-clis/codex"
        );
        let mut lines = 0;
        for case in std::fs::read_dir(root).expect("codex fixtures") {
            let Ok(stream) =
                std::fs::read_to_string(case.expect("entry").path().join("stdout.jsonl"))
            else {
                continue;
            };
            for line in stream.lines().map(str::trim).filter(|l| l.starts_with('{')) {
                let fast = fast_line(line);
                assert!(fast.is_some(), "fast path refused {line}");
                assert_eq!(fast.ok_or(()), serde_wire(line).map_err(drop), "{line}");
                lines += 1;
            }
        }
        assert!(lines > 100, "only {lines} fixture lines");
    }

    #[test]
    fn what_the_fast_path_leaves_to_serde_json() {
        for line in [
            r#"{"type":"a","type":"b"}"#,
            r#"{"thread_id":"t"}"#,
            r#"{"typ\u0065":"a"}"#,
            r#"{"type":"item.completed","item":{"exit_code":-1}}"#,
            r#"{"type":"item.completed","item":{"exit_code":1.0}}"#,
            r#"{"type":"item.completed","item":{"changes":[]}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":01}}"#,
            r#"{"type":"x","message":"\ud83e\udd80"}"#,
            r#"{"type":"x"} x"#,
            r#"{"type":"x","thread_id":1e400}"#,
            r#"{"type":"x",}"#,
            "[\"x\"]",
        ] {
            assert!(fast_line(line).is_none(), "{line}");
        }
        // Every one of them still parses (or fails) through serde_json.
        assert!(parse_wire_line(br#"{"type":"item.completed","item":{"changes":[]}}"#).is_ok());
        assert!(parse_wire_line(br#"{"type":"a","type":"b"}"#).is_err());
        // serde_json reads a number standing for a lenient field in full and refuses this one.
        assert!(parse_wire_line(br#"{"type":"x","thread_id":1e400}"#).is_err());
        assert!(parse_wire_line(br#"{"type":"x","thread_id":[1e400]}"#).is_ok());
    }

    /// A JSON string literal with the escapes and characters Codex output carries, and some
    /// serde_json refuses (a raw control character, a bad escape).
    fn json_string() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "a",
                "Z",
                " ",
                "é",
                "中",
                "🦀",
                "\u{2028}",
                "\\n",
                "\\\"",
                "\\\\",
                "\\/",
                "\\t",
                "\\b",
                "\\f",
                "\\r",
                "\\u0041",
                "\\u00E9",
                "\\u001b",
                "\\ud83e\\udd80",
                "\\ud800",
                "\\x",
                "\u{1}",
                "\t",
                "'",
                "{",
                "}",
                ":",
                ",",
            ]),
            0..8,
        )
        .prop_map(|parts| format!("\"{}\"", parts.concat()))
    }

    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            json_string(),
            prop::sample::select(vec![
                "null",
                "true",
                "false",
                "0",
                "7",
                "-1",
                "-0",
                "3.5",
                "1e2",
                "012",
                "2100",
                "18446744073709551616",
                "999999999999999999",
                "[]",
                "[1,\"a\",{}]",
                "{}",
                "{\"message\":\"m\"}",
                "{\"k\":[null]}",
                "[1,]",
                "nul",
                "1e400",
                "-1E+400",
                "1e-400",
                "[1e400]",
                "{\"k\":1e999}",
                "0.5e1",
            ])
            .prop_map(str::to_owned),
            Just(format!("1{}", "0".repeat(400))),
            Just(format!("[1{}]", "0".repeat(400))),
        ]
    }

    fn object(keys: Vec<&'static str>, value: BoxedStrategy<String>) -> BoxedStrategy<String> {
        let ws = prop::sample::select(vec!["", " ", "\t", "\n "]);
        prop::collection::vec((prop::sample::select(keys), value, ws), 0..6)
            .prop_map(|members| {
                let body: Vec<String> = members
                    .into_iter()
                    .map(|(key, value, ws)| format!("{ws}\"{key}\"{ws}:{ws}{value}{ws}"))
                    .collect();
                format!("{{{}}}", body.join(","))
            })
            .boxed()
    }

    fn line() -> impl Strategy<Value = String> {
        let item = object(
            vec![
                "id",
                "type",
                "text",
                "command",
                "aggregated_output",
                "exit_code",
                "status",
                "message",
                "tool",
                "changes",
                "other",
            ],
            scalar().boxed(),
        );
        let usage = object(
            vec![
                "input_tokens",
                "cached_input_tokens",
                "output_tokens",
                "other",
            ],
            scalar().boxed(),
        );
        let turn_error = object(vec!["message", "other"], scalar().boxed());
        let value = prop_oneof![
            3 => scalar(),
            1 => item,
            1 => usage,
            1 => turn_error,
        ]
        .boxed();
        object(
            vec![
                "type",
                "type",
                "thread_id",
                "item",
                "usage",
                "message",
                "error",
                "other",
                "typ\\u0065",
            ],
            value,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn the_fast_path_reads_what_serde_json_reads(line in line()) {
            if let Some(fast) = fast_line(&line) {
                let serde = serde_wire(&line);
                prop_assert!(serde.is_ok(), "fast path accepted what serde refuses: {line}: {serde:?}");
                prop_assert_eq!(Ok(fast), serde.map_err(|e| e.to_string()), "{}", line);
            }
        }
    }
}
