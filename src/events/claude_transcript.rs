//! Claude Code's session transcript (`<config dir>/projects/<dir>/<session id>.jsonl`, the file
//! Claude Code appends every message of a session to), read for what Zed's Claude Code adapter
//! does not pass on over ACP: the token usage and cost of a stage's turn. The native stream
//! carries the same figures (`claude.rs`); the adapter sends no `usage_update` and no `usage` in
//! its prompt answer.
//!
//! Each model response is an `assistant` line whose `message` has an `id` and a `usage`
//! (Anthropic's fields; one response split into several content blocks repeats the same id and
//! usage, so a response counts once, by id). Claude Code also appends a `cost-state` line with
//! the process's running `totalCostUSD` and its `startTime` (milliseconds since the epoch). Only
//! what a stage's own process wrote counts: responses stamped at or after the stage began (a
//! resumed session's file holds the earlier attempt's too), the last `cost-state` of a process
//! started then.
//!
//! Lines are read one at a time (`super::read_lines`), each at most [`LINE_CAP`] bytes (a longer
//! one, such as a request blob, is skipped): memory stays bounded whatever the file's size.

use std::collections::BTreeMap;
use std::io::BufRead;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::claude::WireUsage;
use super::types::{CostSource, Usage};

/// The longest transcript line read; longer ones are skipped.
pub const LINE_CAP: usize = 4 << 20;

#[derive(Deserialize)]
struct TranscriptLine {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    timestamp: Option<DateTime<Utc>>,
    #[serde(default)]
    message: Option<Message>,
    #[serde(rename = "startTime", default)]
    start_time_ms: Option<i64>,
    #[serde(rename = "totalCostUSD", default)]
    total_cost_usd: Option<f64>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// The usage of the responses a transcript records from `since` on, with the cost Claude Code
/// counted for a process started then; `None` when it records no response since then.
pub fn usage_since(reader: impl BufRead, since: DateTime<Utc>) -> Option<Usage> {
    let mut responses: BTreeMap<String, WireUsage> = BTreeMap::new();
    let mut unnamed: Vec<WireUsage> = Vec::new();
    let mut cost = None;
    // A read error ends the reading: what was read so far counts.
    let _ = super::read_lines(reader, LINE_CAP, |line| {
        let super::Line::Complete(bytes) = line else {
            return;
        };
        // Only two kinds of line matter; the rest (requests, attachments) are not parsed.
        if !contains(bytes, b"\"assistant\"") && !contains(bytes, b"\"cost-state\"") {
            return;
        }
        let Ok(line) = serde_json::from_slice::<TranscriptLine>(bytes) else {
            return;
        };
        match line.kind.as_str() {
            "assistant" if line.timestamp.is_some_and(|at| at >= since) => {
                if let Some(Message {
                    id,
                    usage: Some(usage),
                }) = line.message
                {
                    match id {
                        Some(id) => {
                            responses.insert(id, usage);
                        }
                        None => unnamed.push(usage),
                    }
                }
            }
            "cost-state"
                if line
                    .start_time_ms
                    .is_some_and(|ms| ms >= since.timestamp_millis()) =>
            {
                cost = line.total_cost_usd.or(cost);
            }
            _ => {}
        }
    });
    if responses.is_empty() && unnamed.is_empty() {
        return None;
    }
    let sum = |field: fn(&WireUsage) -> Option<u64>| -> Option<u64> {
        responses
            .values()
            .chain(&unnamed)
            .map(field)
            .reduce(|a, b| match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            })
            .flatten()
    };
    Some(Usage {
        input_tokens: sum(|u| u.input_tokens),
        cache_read_tokens: sum(|u| u.cache_read_input_tokens),
        cache_write_tokens: sum(|u| u.cache_creation_input_tokens),
        output_tokens: sum(|u| u.output_tokens),
        reasoning_tokens: None,
        cost_usd: cost,
        cost_source: cost.map(|_| CostSource::Provider),
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn assistant(id: &str, when: &str, input: u64, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","timestamp":"{when}","message":{{"id":"{id}","role":"assistant","usage":{{"input_tokens":{input},"cache_creation_input_tokens":3,"cache_read_input_tokens":6,"output_tokens":{output}}}}},"sessionId":"s"}}"#
        )
    }

    #[test]
    fn each_response_counts_once_and_only_since_the_stage_began() {
        let text = [
            // The earlier attempt's response in a resumed session's file.
            assistant("msg_0", "2026-12-03T08:00:00.000Z", 500, 50),
            r#"{"type":"cost-state","startTime":1796284800000,"totalCostUSD":0.5}"#.to_owned(),
            assistant("msg_1", "2026-12-03T08:10:51.174Z", 1000, 40),
            // The same response's second content block repeats its id and usage.
            assistant("msg_1", "2026-12-03T08:10:51.180Z", 1000, 40),
            r#"{"type":"user","timestamp":"2026-12-03T08:10:51.300Z","message":{"role":"user","content":"ok"}}"#.to_owned(),
            assistant("msg_2", "2026-12-03T08:10:51.423Z", 1100, 41),
            "not json".to_owned(),
            r#"{"type":"cost-state","startTime":1796285449674,"totalCostUSD":0.0205}"#.to_owned(),
        ]
        .join("\n");
        let usage = usage_since(text.as_bytes(), at("2026-12-03T08:10:49.000Z")).unwrap();
        assert_eq!(usage.input_tokens, Some(2100));
        assert_eq!(usage.output_tokens, Some(81));
        assert_eq!(usage.cache_read_tokens, Some(12));
        assert_eq!(usage.cache_write_tokens, Some(6));
        assert_eq!(usage.cost_usd, Some(0.0205));
        assert_eq!(usage.cost_source, Some(CostSource::Provider));
    }

    #[test]
    fn no_response_since_then_is_no_usage() {
        let text = assistant("msg_0", "2026-12-03T08:00:00.000Z", 500, 50);
        assert!(usage_since(text.as_bytes(), at("2026-12-03T08:10:00.000Z")).is_none());
        assert!(usage_since(&b""[..], at("2026-12-03T08:10:00.000Z")).is_none());
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_and_the_next_is_read() {
        let blob = format!(
            r#"{{"type":"api-request-blob","data":"{}"}}"#,
            "x".repeat(LINE_CAP)
        );
        let text = [
            assistant("msg_1", "2026-12-03T08:10:51.174Z", 1000, 40),
            blob,
            assistant("msg_2", "2026-12-03T08:10:51.423Z", 1100, 41),
        ]
        .join("\n");
        let reader = std::io::BufReader::with_capacity(7, text.as_bytes());
        let usage = usage_since(reader, at("2026-12-03T08:10:49.000Z")).unwrap();
        assert_eq!(usage.input_tokens, Some(2100));
        assert_eq!(usage.output_tokens, Some(81));
    }
}
