//! Stop classification: why a CLI's run ended, and which pause code that maps to.
//!
//! Inputs are only provider-error material: error events, Codex `turn.failed`, Claude Code's
//! `result` row and the plain `ERROR:`/`Error:` lines that END a log. Assistant text and tool
//! output earlier in a log never classify a stop (a model saying "429" is not a rate limit).
//!
//! Decisions taken from the fixtures: Codex renders every HTTP 5xx as "We’re currently
//! experiencing high demand…" (the mock answered 500), so that sentence is a server error
//! (uncertain), never a capacity stop; capacity is 529 / "overloaded" only. Authentication and
//! context-window stops pause as uncertain (never as an output cap).

use serde::{Deserialize, Serialize};

pub use crate::pause::PauseCode;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

use super::types::{ErrorSignal, ErrorSource, StreamSummary};

/// Why a run ended. Serialized strings are API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopClass {
    /// A clean completion: the CLI finished its turn.
    Completed,
    RateLimit,
    /// Overloaded (529) or an explicit capacity error.
    ProviderCapacity,
    /// Quota, plan usage limit, spend limit or billing.
    Budget,
    ContentRefusal,
    /// HTTP 401/403 or an invalid/expired credential.
    Authentication,
    /// Finish reason length / `max_output_tokens`.
    OutputCap,
    /// The prompt does not fit the context window (never an output cap).
    ContextWindow,
    /// HTTP 5xx after the CLI's own retries.
    ServerError,
    /// Connection reset/refused/timed out.
    TransportError,
    /// Claude Code gave up on invalid structured output.
    StructuredOutputExhausted,
    /// The stream ended cleanly after a tool step but without a final answer.
    EndedWithoutAnswer,
    /// The stream stopped in the middle (no terminal event).
    CutStream,
    /// Nothing was written: the CLI failed before its first event.
    StartFailure,
    /// An error the classifier does not recognise.
    Unclassified,
}

impl StopClass {
    pub fn as_str(self) -> &'static str {
        match self {
            StopClass::Completed => "completed",
            StopClass::RateLimit => "rate_limit",
            StopClass::ProviderCapacity => "provider_capacity",
            StopClass::Budget => "budget",
            StopClass::ContentRefusal => "content_refusal",
            StopClass::Authentication => "authentication",
            StopClass::OutputCap => "output_cap",
            StopClass::ContextWindow => "context_window",
            StopClass::ServerError => "server_error",
            StopClass::TransportError => "transport_error",
            StopClass::StructuredOutputExhausted => "structured_output_exhausted",
            StopClass::EndedWithoutAnswer => "ended_without_answer",
            StopClass::CutStream => "cut_stream",
            StopClass::StartFailure => "start_failure",
            StopClass::Unclassified => "unclassified",
        }
    }

    /// The pause code of this stop; `None` for a completion.
    pub fn pause_code(self) -> Option<PauseCode> {
        Some(match self {
            StopClass::Completed => return None,
            StopClass::RateLimit => PauseCode::PausedRateLimit,
            StopClass::ProviderCapacity => PauseCode::PausedProviderCapacity,
            StopClass::Budget => PauseCode::PausedBudget,
            StopClass::ContentRefusal => PauseCode::PausedContentFilter,
            StopClass::OutputCap => PauseCode::PausedOutputCap,
            StopClass::Authentication
            | StopClass::ContextWindow
            | StopClass::ServerError
            | StopClass::TransportError
            | StopClass::StructuredOutputExhausted
            | StopClass::EndedWithoutAnswer
            | StopClass::CutStream
            | StopClass::StartFailure
            | StopClass::Unclassified => PauseCode::PausedProviderUncertain,
        })
    }
}

impl fmt::Display for StopClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A classified stop: the class, the pause code it maps to, and what decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    pub class: StopClass,
    pub pause_code: Option<PauseCode>,
    /// The provider message that decided the class, if any.
    pub detail: Option<String>,
    pub http_status: Option<u16>,
    /// A reset time or retry-after hint (rate limit and budget stops).
    pub reset_hint: Option<String>,
}

impl Stop {
    pub fn new(class: StopClass) -> Stop {
        Stop {
            class,
            pause_code: class.pause_code(),
            detail: None,
            http_status: None,
            reset_hint: None,
        }
    }

    pub fn from_signal(signal: &ErrorSignal) -> Stop {
        let class = classify_error(signal);
        Stop {
            class,
            pause_code: class.pause_code(),
            detail: Some(signal.message.clone()),
            http_status: signal.http_status,
            reset_hint: signal
                .reset_hint
                .clone()
                .or_else(|| reset_hint(&signal.message)),
        }
    }
}

fn contains_any(haystack: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| haystack.contains(n))
}

/// The status of a `API Error: NNN` in `message` (lower case).
fn status_in_words(message: &str) -> Option<u16> {
    let (_, after) = message.split_once("api error: ")?;
    let digits = after.get(..3)?;
    let status: u16 = digits.parse().ok()?;
    let ends = after[3..]
        .chars()
        .next()
        .is_none_or(|c| !c.is_ascii_digit());
    ((400..600).contains(&status) && ends).then_some(status)
}

/// Classify one provider error. Order matters: quota before rate limit (a used-up quota comes
/// as a 429 too), context window before output cap, explicit texts before bare statuses.
pub fn classify_error(signal: &ErrorSignal) -> StopClass {
    let message = signal.message.to_lowercase();
    let kind = signal.kind.as_deref().unwrap_or("").to_lowercase();
    // Claude Code names the status in its words when nothing else carries it (through an ACP
    // adapter: `Internal error: Failed to authenticate. API Error: 401 …`).
    let status = signal.http_status.or_else(|| status_in_words(&message));
    let text = format!("{kind} {message}");

    if matches!(status, Some(401 | 403))
        || contains_any(
            &text,
            &[
                "authentication_error",
                "invalid api key",
                "incorrect api key",
                "invalid x-api-key",
                "failed to authenticate",
                "invalid_api_key",
                "unauthorized",
                "oauth token has expired",
                "please run /login",
                "missing environment variable",
                "permission_error",
            ],
        )
    {
        return StopClass::Authentication;
    }
    if contains_any(
        &text,
        &[
            "prompt is too long",
            "context window",
            "context_length_exceeded",
            "maximum context length",
            "context length",
            "input is too long",
        ],
    ) {
        return StopClass::ContextWindow;
    }
    if contains_any(
        &text,
        &[
            "max_output_tokens",
            "output token maximum",
            "finish reason length",
            "finish_reason: length",
        ],
    ) {
        return StopClass::OutputCap;
    }
    // "rate limit reached" is a rate limit, not a used-up plan ("5-hour limit reached").
    let budget_text = text.replace("rate limit reached", "rate limit");
    if matches!(status, Some(402))
        || contains_any(
            &budget_text,
            &[
                "insufficient_quota",
                "exceeded your current quota",
                "quota exceeded",
                "usage limit",
                "spend limit",
                "spending limit",
                "credit balance",
                "billing",
                "hit your limit",
                "limit reached",
                "out of credits",
                "usage_limit",
            ],
        )
    {
        return StopClass::Budget;
    }
    if matches!(status, Some(429))
        || contains_any(
            &text,
            &[
                "rate_limit",
                "rate limit",
                "rate-limit",
                "too many requests",
            ],
        )
    {
        return StopClass::RateLimit;
    }
    if matches!(status, Some(529)) || contains_any(&text, &["overloaded", "capacity"]) {
        return StopClass::ProviderCapacity;
    }
    if contains_any(
        &text,
        &[
            "refusal",
            "content_filter",
            "content filter",
            "content policy",
            "content management policy",
            "usage policy",
            "safety system",
        ],
    ) {
        return StopClass::ContentRefusal;
    }
    if matches!(status, Some(500..=599))
        || contains_any(
            &text,
            &[
                "server_error",
                "server error",
                "high demand",
                "internal error",
            ],
        )
    {
        return StopClass::ServerError;
    }
    if contains_any(
        &text,
        &[
            "econnreset",
            "etimedout",
            "epipe",
            "econnrefused",
            "connection refused",
            "connection failed",
            "cannot connect",
            "unable to connect",
            "error sending request",
            "timed out",
            "connection reset",
            "stream disconnected",
        ],
    ) {
        return StopClass::TransportError;
    }
    StopClass::Unclassified
}

static RESET_IN_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:resets?(?: at)?|try again (?:at|in)|retry after)\s+([^.\n·]+)")
        .expect("literal regex is valid")
});

static EPOCH_SUFFIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\|(\d{9,11})\s*$").expect("literal regex is valid"));

/// An HTTP status mentioned in a provider message (`last status: 429`, `(429)`,
/// `API Error: 500`, `HTTP 503`): a 3-digit number from 100 to 599 right after one of those
/// markers. Hand-written rather than a regex because it runs on every error line.
pub fn http_status_in_text(message: &str) -> Option<u16> {
    const MARKERS: [&str; 6] = ["status:", "status", "(", "http", "api error:", "api error"];
    let bytes = message.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i - start != 3 {
            continue;
        }
        let Ok(status) = message[start..i].parse::<u16>() else {
            continue;
        };
        if !(100..=599).contains(&status) {
            continue;
        }
        // The markers are lower-case ASCII: comparing the tail case-insensitively is the same
        // as lower-casing the text before (without an allocation per number).
        let before = message[..start].trim_end().as_bytes();
        let ends_with = |m: &str| {
            before.len() >= m.len()
                && before[before.len() - m.len()..].eq_ignore_ascii_case(m.as_bytes())
        };
        let after_ok = bytes.get(i).is_none_or(|b| !b.is_ascii_alphanumeric());
        if after_ok && MARKERS.iter().any(|m| ends_with(m)) {
            return Some(status);
        }
    }
    None
}

/// Whether `message` may hold a reset hint: a `|`, or `reset`, `try again` or `retry after` in
/// any case (one pass over the bytes, comparing only where an `r` or a `t` stands).
fn may_hold_reset_hint(message: &str) -> bool {
    let bytes = message.as_bytes();
    bytes.iter().enumerate().any(|(at, &b)| {
        let rest = &bytes[at..];
        let starts = |needle: &str| {
            rest.get(..needle.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(needle.as_bytes()))
        };
        match b | 0x20 {
            b'|' => b == b'|',
            b'r' => starts("reset") || starts("retry after"),
            b't' => starts("try again"),
            _ => false,
        }
    })
}

/// A reset time in a provider message (`resets 3pm`, `…|1767225600`, `try again in 20s`).
pub fn reset_hint(message: &str) -> Option<String> {
    if !may_hold_reset_hint(message) {
        return None;
    }
    if let Some(epoch) = EPOCH_SUFFIX.captures(message).and_then(|c| c.get(1)) {
        return Some(epoch.as_str().to_owned());
    }
    RESET_IN_TEXT
        .captures(message)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().trim().to_owned())
}

/// The provider error in a log's last non-blank line, when that line is a plain `ERROR:` or
/// `Error:` line (ANSI colours stripped). Earlier lines are never read: tool output that
/// mentions an error is not the provider's reason.
pub fn classify_log_tail(log: &[u8]) -> Option<ErrorSignal> {
    // Only the last non-blank line matters; strip colours from that line alone so a long log
    // costs nothing.
    let last_raw = log
        .split(|&b| b == b'\n')
        .rev()
        .find(|line| !strip_ansi_escapes::strip(line).trim_ascii().is_empty())?;
    let stripped = strip_ansi_escapes::strip(last_raw);
    let text = String::from_utf8_lossy(&stripped);
    let last = text.trim();
    let message = last
        .strip_prefix("ERROR:")
        .or_else(|| last.strip_prefix("Error:"))?
        .trim();
    let mut signal = ErrorSignal::new(ErrorSource::LogTail, message);
    signal.http_status = http_status_in_text(message);
    signal.reset_hint = reset_hint(message);
    Some(signal)
}

/// Whether an error is a pure retryable transport error: explicitly retryable (OpenCode's
/// `isRetryable: true`; Codex and Claude Code retry by themselves and never set it) and either
/// ECONNRESET, ETIMEDOUT, EPIPE or HTTP 500/502/503/504.
pub fn is_retryable_transport_signal(signal: &ErrorSignal) -> bool {
    if signal.retryable != Some(true) {
        return false;
    }
    if matches!(signal.http_status, Some(500 | 502 | 503 | 504)) {
        return true;
    }
    contains_any(&signal.message, &["ECONNRESET", "ETIMEDOUT", "EPIPE"])
}

/// The one automatic same-stage retry predicate: the run did not complete, its whole stream
/// holds no content (no text, command, tool, report or malformed line), at least one provider
/// error, and every provider error is a retryable transport error. The caller still checks
/// the process exit, cleanup and unchanged workspace.
pub fn is_retryable_transport_error(summary: &StreamSummary) -> bool {
    summary.stop.class != StopClass::Completed
        && summary.content_events == 0
        && summary.unknown_lines == 0
        && summary.provider_errors > 0
        && summary.all_errors_retryable_transport
}

/// The stop of a run given its stream summary and the tail of its log (stderr, or the stdout
/// of a CLI that prints plain errors). The stream's own verdict wins unless it only knows the
/// run did not finish; then an `ERROR:` line that ends the log decides.
pub fn stop_with_log_tail(summary: &StreamSummary, log_tail: &[u8]) -> Stop {
    let undecided = matches!(
        summary.stop.class,
        StopClass::CutStream | StopClass::StartFailure | StopClass::Unclassified
    );
    if undecided && let Some(signal) = classify_log_tail(log_tail) {
        return Stop::from_signal(&signal);
    }
    summary.stop.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signal(message: &str, status: Option<u16>, kind: Option<&str>) -> ErrorSignal {
        ErrorSignal {
            source: ErrorSource::ErrorEvent,
            message: message.into(),
            http_status: status,
            kind: kind.map(str::to_owned),
            retryable: None,
            reset_hint: None,
        }
    }

    #[test]
    fn pause_code_strings_are_stable() {
        for code in PauseCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
        assert_eq!(
            StopClass::ContextWindow.pause_code(),
            Some(PauseCode::PausedProviderUncertain)
        );
        assert_eq!(StopClass::Completed.pause_code(), None);
    }

    /// Real lines from the fixtures plus the documented Claude Code stop texts.
    #[test]
    fn classifier_table() {
        let table: &[(&str, Option<u16>, Option<&str>, StopClass)] = &[
            // Through the ACP adapters a JSON-RPC error carries no status: the words decide.
            (
                "Internal error: Failed to authenticate. API Error: 401 invalid x-api-key",
                None,
                Some("-32603"),
                StopClass::Authentication,
            ),
            (
                "Internal error: API Error: 429 mock 429 error",
                None,
                Some("-32603"),
                StopClass::RateLimit,
            ),
            (
                "Internal error: Incorrect API key provided: sk-mock. You can find your API key at https://platform.openai.com/account/api-keys.: {\"service\":\"session\",\"errorName\":\"APIError\"}",
                None,
                Some("-32603"),
                StopClass::Authentication,
            ),
            (
                "Internal error: API Error: 5000 tokens",
                None,
                Some("-32603"),
                StopClass::ServerError,
            ),
            // Claude Code 2.1.328 with CLAUDE_CODE_MAX_RETRIES=0 (found by the scenario scorecard)
            (
                "API Error: Request rejected (429) · rate limit reached",
                Some(429),
                None,
                StopClass::RateLimit,
            ),
            (
                "5-hour limit reached · resets 3pm (UTC)",
                None,
                None,
                StopClass::Budget,
            ),
            // opencode err429 / err500 / down
            (
                "mock 429 error",
                Some(429),
                Some("APIError"),
                StopClass::RateLimit,
            ),
            (
                "mock 500 error",
                Some(500),
                Some("APIError"),
                StopClass::ServerError,
            ),
            (
                "Cannot connect to API: Unable to connect. Is the computer able to access the url?",
                None,
                Some("APIError"),
                StopClass::TransportError,
            ),
            // codex err429 / err500 / down_bounded / envkey_missing
            (
                "exceeded retry limit, last status: 429 Too Many Requests",
                None,
                None,
                StopClass::RateLimit,
            ),
            (
                "We’re currently experiencing high demand, which may cause temporary errors.",
                None,
                None,
                StopClass::ServerError,
            ),
            (
                "Connection failed: error sending request",
                None,
                None,
                StopClass::TransportError,
            ),
            (
                "Missing environment variable: `MOCK_API_KEY`.",
                None,
                None,
                StopClass::Authentication,
            ),
            // claude err429 / err500 / down
            (
                "API Error: Request rejected (429) · mock 429 error",
                Some(429),
                Some("api_error"),
                StopClass::RateLimit,
            ),
            (
                "API Error: 500 mock 500 error. This is a server-side issue, usually temporary — try again in a moment.",
                Some(500),
                Some("api_error"),
                StopClass::ServerError,
            ),
            (
                "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
                None,
                Some("api_error"),
                StopClass::TransportError,
            ),
            // documented classes
            ("Overloaded", Some(529), None, StopClass::ProviderCapacity),
            (
                "{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}",
                None,
                None,
                StopClass::ProviderCapacity,
            ),
            (
                "Claude AI usage limit reached|1767225600",
                None,
                None,
                StopClass::Budget,
            ),
            (
                "You exceeded your current quota, please check your plan and billing details.",
                Some(429),
                None,
                StopClass::Budget,
            ),
            (
                "Invalid API key · Please run /login",
                None,
                None,
                StopClass::Authentication,
            ),
            ("Forbidden", Some(403), None, StopClass::Authentication),
            (
                "Prompt is too long",
                Some(400),
                None,
                StopClass::ContextWindow,
            ),
            (
                "Claude's response exceeded the 32000 output token maximum.",
                None,
                None,
                StopClass::OutputCap,
            ),
            ("", None, Some("refusal"), StopClass::ContentRefusal),
            (
                "Incomplete response returned, reason: max_output_tokens",
                None,
                None,
                StopClass::OutputCap,
            ),
            // A request that asks for too many output tokens is a bad request, not a cut answer.
            (
                "max_tokens: 64000 > 32000, which is the maximum allowed number of output tokens",
                Some(400),
                None,
                StopClass::Unclassified,
            ),
            ("something odd", None, None, StopClass::Unclassified),
        ];
        for (message, status, kind, expected) in table {
            assert_eq!(
                classify_error(&signal(message, *status, *kind)),
                *expected,
                "{message:?}"
            );
        }
    }

    #[test]
    fn status_and_reset_extraction() {
        assert_eq!(
            http_status_in_text("exceeded retry limit, last status: 429 Too Many Requests"),
            Some(429)
        );
        assert_eq!(
            http_status_in_text("API Error: Request rejected (429) · x"),
            Some(429)
        );
        assert_eq!(
            http_status_in_text("API Error: 500 mock 500 error."),
            Some(500)
        );
        assert_eq!(http_status_in_text("Reconnecting... 1/5"), None);
        assert_eq!(
            reset_hint("Claude AI usage limit reached|1767225600").as_deref(),
            Some("1767225600")
        );
        assert_eq!(
            reset_hint("5-hour limit reached · resets 3pm (UTC)").as_deref(),
            Some("3pm (UTC)")
        );
    }

    #[test]
    fn log_tail_reads_only_the_last_line() {
        let log = b"tool said ERROR: 429 earlier\nWARNING: x\nERROR: exceeded retry limit, last status: 429 Too Many Requests\n\n";
        let signal = classify_log_tail(log).unwrap();
        assert_eq!(signal.http_status, Some(429));
        assert_eq!(classify_error(&signal), StopClass::RateLimit);
        // An error that is followed by other output is not the provider's reason.
        assert!(classify_log_tail(b"ERROR: 429 Too Many Requests\nall good\n").is_none());
        // codex wire_chat: the Error line does not end the log.
        let wire_chat = "Error loading config.toml: `wire_api = \"chat\"` is no longer supported.\nHow to fix: set `wire_api = \"responses\"` in your provider config.\nin `model_providers.mock.wire_api`\n";
        assert!(classify_log_tail(wire_chat.as_bytes()).is_none());
        let colored = b"\x1b[91mError:\x1b[0m You've hit your limit \xc2\xb7 resets 5pm\n";
        let signal = classify_log_tail(colored).unwrap();
        assert_eq!(classify_error(&signal), StopClass::Budget);
        assert_eq!(signal.reset_hint.as_deref(), Some("5pm"));
    }

    #[test]
    fn retryable_signal_needs_explicit_flag_and_transport_kind() {
        let mut s = signal("mock 500 error", Some(500), Some("APIError"));
        assert!(!is_retryable_transport_signal(&s));
        s.retryable = Some(true);
        assert!(is_retryable_transport_signal(&s));
        s.http_status = Some(429);
        assert!(!is_retryable_transport_signal(&s));
        let mut reset = signal("read ECONNRESET", None, None);
        reset.retryable = Some(true);
        assert!(is_retryable_transport_signal(&reset));
        let mut refused = signal("connect ECONNREFUSED 127.0.0.1", None, None);
        refused.retryable = Some(true);
        assert!(!is_retryable_transport_signal(&refused));
    }

    /// The status scan as it was before it stopped lower-casing the text (the reference).
    fn http_status_reference(message: &str) -> Option<u16> {
        const MARKERS: [&str; 6] = ["status:", "status", "(", "http", "api error:", "api error"];
        let bytes = message.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if !bytes[i].is_ascii_digit() {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            if i - start != 3 {
                continue;
            }
            let Ok(status) = message[start..i].parse::<u16>() else {
                continue;
            };
            if !(100..=599).contains(&status) {
                continue;
            }
            let before = message[..start].trim_end().to_ascii_lowercase();
            let after_ok = bytes.get(i).is_none_or(|b| !b.is_ascii_alphanumeric());
            if after_ok && MARKERS.iter().any(|m| before.ends_with(m)) {
                return Some(status);
            }
        }
        None
    }

    proptest::proptest! {
        #[test]
        fn status_and_hint_scans_match_lower_casing(
            text in "(?s)(status:? ?|STATUS|HTTP|Api Error:?|\\(|reset|Try Again|RETRY AFTER|[0-9]{1,4}| |é|ß|\\||[a-z]){0,12}",
        ) {
            proptest::prop_assert_eq!(http_status_in_text(&text), http_status_reference(&text));
            let lower = text.to_ascii_lowercase();
            let mut any = text.contains('|');
            for needle in ["reset", "try again", "retry after"] {
                any |= lower.contains(needle);
            }
            proptest::prop_assert_eq!(may_hold_reset_hint(&text), any);
        }
    }
}
