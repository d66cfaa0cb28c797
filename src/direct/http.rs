//! The direct runtime's HTTP: one `ureq` agent (rustls, webpki roots) per endpoint, JSON POSTs
//! with the endpoint's authentication, and every way a request can fail as a typed
//! [`HttpFailure`].
//!
//! Invariants: HTTPS is required except on loopback ([`check_base_url`]); redirects are never
//! followed (a 3xx is a failure naming its `location`); every socket read is bounded
//! ([`READ_TIMEOUT`]), and a checking client ([`Client::with_deadline`]: `doctor`, `connections
//! check`, the preflight) also ends every request by one total deadline, whatever the server
//! trickles, naming the URL that ran out of time; a key is never logged (`Secret`'s `Debug` and `Display` hide it); a
//! loopback endpoint is reached without any proxy from the environment. A request read with a
//! [`Cancel`] stops between two reads once it is cancelled and closes its connection, so a
//! dropped stage neither keeps a server generating nor holds the process open.

use std::fmt;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use ureq::http::Uri;

/// The bound on every socket read (the reference's 60 s HTTP read bound).
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The bound on connecting (DNS, TCP, TLS).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response body read.
pub const MAX_BODY: u64 = 32 << 20;
/// The longest line of a line-streamed answer ([`Client::post_json_lines`]).
pub const MAX_LINE: u64 = 64 << 10;
/// The total time a readiness check of one endpoint model may take (its metadata requests and
/// its canaries together), unless [`CHECK_DEADLINE_ENV`] says otherwise.
pub const CHECK_DEADLINE: Duration = Duration::from_secs(180);
/// The environment variable that sets [`CHECK_DEADLINE`] in seconds (a slow local model on a
/// CPU may need more).
pub const CHECK_DEADLINE_ENV: &str = "AUTOCODE_CHECK_DEADLINE";

/// The check deadline from [`CHECK_DEADLINE_ENV`]'s value (whole seconds, at least 1), else
/// [`CHECK_DEADLINE`].
pub fn check_deadline(value: Option<&str>) -> Duration {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|secs| *secs > 0)
        .map(Duration::from_secs)
        .unwrap_or(CHECK_DEADLINE)
}
/// The Anthropic API version sent with every Messages request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A credential; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }
    /// The value, for the one header that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<hidden>)")
    }
}

/// The longest key autocode takes (from standard input or a terminal): real API keys are well
/// under 1 KiB; anything longer is a mistake (a file, `/dev/zero`) and is refused unread.
pub const SECRET_CAP: usize = 4096;

/// Why a key given by the user is refused. Never carries the key's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("the key is empty")]
    Empty,
    #[error("the key is longer than {cap} bytes: that is not an API key")]
    TooLong { cap: usize },
    #[error("the key holds {what} at byte {at}: a key is one line of printable ASCII")]
    Forbidden { what: &'static str, at: usize },
}

impl Secret {
    /// A key typed or piped by the user: surrounding blanks and one final line end are dropped;
    /// what is left must be 1..=[`SECRET_CAP`] bytes of printable ASCII (no space, no control
    /// character, no second line, no escape sequence).
    pub fn parse(text: &str) -> Result<Secret, SecretError> {
        let key = text.trim_matches(|c| c == ' ' || c == '\t');
        let key = key
            .strip_suffix("\r\n")
            .or_else(|| key.strip_suffix('\n'))
            .unwrap_or(key)
            .trim_matches(|c| c == ' ' || c == '\t');
        if key.is_empty() {
            return Err(SecretError::Empty);
        }
        if key.len() > SECRET_CAP {
            return Err(SecretError::TooLong { cap: SECRET_CAP });
        }
        let offset = text.len() - text.trim_start_matches([' ', '\t']).len();
        if let Some((at, c)) = key.char_indices().find(|(_, c)| !c.is_ascii_graphic()) {
            let what = match c {
                '\n' | '\r' => "a line break",
                ' ' | '\t' => "a blank",
                '\u{1b}' => "an escape character",
                c if c.is_control() => "a control character",
                _ => "a character outside ASCII",
            };
            return Err(SecretError::Forbidden {
                what,
                at: offset + at,
            });
        }
        Ok(Secret(key.to_owned()))
    }

    /// Reads a key from `input` (standard input) and [`parse`](Secret::parse)s it; at most
    /// [`SECRET_CAP`] + 2 bytes are ever read, so an endless input is refused at once.
    pub fn read_from(input: impl Read) -> Result<Secret, ReadSecretError> {
        let limit = SECRET_CAP as u64 + 3;
        let mut bytes = Vec::new();
        input.take(limit).read_to_end(&mut bytes)?;
        if bytes.len() as u64 >= limit {
            return Err(SecretError::TooLong { cap: SECRET_CAP }.into());
        }
        let text = String::from_utf8(bytes).map_err(|e| SecretError::Forbidden {
            what: "a byte that is not UTF-8",
            at: e.utf8_error().valid_up_to(),
        })?;
        Ok(Secret::parse(&text)?)
    }
}

/// Why reading a key failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadSecretError {
    #[error(transparent)]
    Invalid(#[from] SecretError),
    #[error("cannot read the key: {0}")]
    Io(#[from] std::io::Error),
}

/// How a request authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    /// `authorization: Bearer KEY` (OpenAI and compatible servers).
    Bearer(Secret),
    /// `x-api-key: KEY` plus `anthropic-version` (Anthropic).
    AnthropicKey(Secret),
    /// `api-key: KEY` (MiMo).
    ApiKeyHeader(Secret),
}

/// A base URL that may not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("`{0}` is not a URL: {1}")]
    Invalid(String, String),
    #[error(
        "`{0}` must use https (plain http is allowed only for loopback: 127.0.0.1, ::1, localhost)"
    )]
    NotHttps(String),
    #[error("`{0}` must not carry a query, a fragment or credentials")]
    Extra(String),
}

/// Whether `host` is a loopback name or address.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Checks an endpoint's base URL: https, or http on loopback; no query, fragment or userinfo.
/// Returns whether it is loopback.
pub fn check_base_url(url: &str) -> Result<bool, UrlError> {
    let uri: Uri = url
        .parse()
        .map_err(|e: ureq::http::uri::InvalidUri| UrlError::Invalid(url.into(), e.to_string()))?;
    let host = uri
        .host()
        .ok_or_else(|| UrlError::Invalid(url.into(), "no host".into()))?;
    if uri.query().is_some()
        || url.contains('#')
        || uri.authority().is_some_and(|a| a.as_str().contains('@'))
    {
        return Err(UrlError::Extra(url.into()));
    }
    let loopback = is_loopback_host(host);
    match uri.scheme_str() {
        Some("https") => Ok(loopback),
        Some("http") if loopback => Ok(true),
        Some("http") => Err(UrlError::NotHttps(url.into())),
        _ => Err(UrlError::Invalid(
            url.into(),
            "the scheme must be https".into(),
        )),
    }
}

/// Why a model request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpFailure {
    #[error("HTTP 429 rate limited{}", retry_after.as_ref().map(|r| format!(" (retry-after {r})")).unwrap_or_default())]
    RateLimited {
        retry_after: Option<String>,
        message: String,
    },
    #[error("HTTP {status} from the server: {message}")]
    Server { status: u16, message: String },
    #[error("HTTP {status}: {message}")]
    Client { status: u16, message: String },
    #[error("HTTP {status} redirect to {location} refused (redirects are never followed)")]
    Redirect { status: u16, location: String },
    #[error("the endpoint did not answer in time: {0}")]
    Timeout(String),
    #[error("the endpoint could not be reached: {0}")]
    Transport(String),
    #[error("the response body could not be read: {0}")]
    Body(String),
}

/// Stops a request's body read between two reads: set when whoever waits for the answer is
/// gone (the blocking read runs on its own thread and outlives a dropped future otherwise).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
    /// A guard that cancels when dropped (hold it across the await of the request).
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Cancels its [`Cancel`] when dropped.
#[derive(Debug)]
pub struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A 2xx answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub body: Vec<u8>,
    /// The server answered with `text/event-stream` (a streamed response).
    pub event_stream: bool,
    /// The caller's watch stopped the read before the answer ended ([`Client::post_json_watched`]):
    /// `body` is what had arrived, and the connection is closed.
    pub cut: bool,
}

/// Looks at each piece of a 2xx answer's body as it arrives; `false` stops reading there.
pub type Watch<'a> = &'a mut dyn FnMut(&[u8]) -> bool;

/// A connection to one endpoint.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base_url: String,
    auth: Auth,
    /// When every request of this client must be over, and the total it was given.
    deadline: Option<(Instant, Duration)>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("auth", &self.auth)
            .finish()
    }
}

impl Client {
    /// A client for `base_url` (checked by [`check_base_url`]).
    pub fn new(base_url: &str, auth: Auth) -> Result<Client, UrlError> {
        let loopback = check_base_url(base_url)?;
        let mut config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .https_only(!loopback)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_per_read(Some(READ_TIMEOUT))
            .user_agent(concat!("autocode/", env!("CARGO_PKG_VERSION")));
        if loopback {
            config = config.proxy(None);
        }
        Ok(Client {
            agent: config.build().new_agent(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            auth,
            deadline: None,
        })
    }

    /// This client with every request (connect, send, the whole body) ending within `total`
    /// from now, all requests together: a server that trickles bytes cannot hold a check open.
    pub fn with_deadline(mut self, total: Duration) -> Client {
        self.deadline = Some((Instant::now() + total, total));
        self
    }

    /// The time left for `method url` (`Err`: none left), as a per-request global timeout.
    fn remaining(&self, method: &str, url: &str) -> Result<Option<Duration>, HttpFailure> {
        let Some((end, total)) = self.deadline else {
            return Ok(None);
        };
        match end.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => Err(HttpFailure::Timeout(format!(
                "{method} {url}: not started, the check's {} s deadline had passed",
                total.as_secs()
            ))),
        }
    }

    /// Names the URL (and the deadline) in a timeout.
    fn name_timeout(&self, method: &str, url: &str, failure: HttpFailure) -> HttpFailure {
        match failure {
            HttpFailure::Timeout(detail) => HttpFailure::Timeout(match self.deadline {
                Some((_, total)) => format!(
                    "{method} {url}: no complete answer within the check's {} s deadline ({detail})",
                    total.as_secs()
                ),
                None => format!("{method} {url}: {detail}"),
            }),
            other => other,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// POSTs `body` to `{base_url}{path}` and returns the 2xx answer (blocking). A streamed
    /// answer is read to its end, each read bounded by [`READ_TIMEOUT`].
    pub fn post_json(&self, path: &str, body: &Value) -> Result<Reply, HttpFailure> {
        self.post_json_to(&format!("{}{}", self.base_url, path), body)
    }

    /// [`Client::post_json`] that stops reading (and closes the connection) once `cancel` is
    /// set: the answer is then a [`HttpFailure::Body`] nobody waits for.
    pub fn post_json_cancellable(
        &self,
        path: &str,
        body: &Value,
        cancel: &Cancel,
    ) -> Result<Reply, HttpFailure> {
        self.post(
            &format!("{}{}", self.base_url, path),
            body,
            Some((cancel, None)),
        )
    }

    /// [`Client::post_json_cancellable`] that also hands each piece of a 2xx body to `watch` as
    /// it arrives: when `watch` answers `false` the read stops, the connection is closed and the
    /// reply holds what had arrived, marked [`Reply::cut`].
    pub fn post_json_watched(
        &self,
        path: &str,
        body: &Value,
        cancel: &Cancel,
        watch: Watch<'_>,
    ) -> Result<Reply, HttpFailure> {
        self.post(
            &format!("{}{}", self.base_url, path),
            body,
            Some((cancel, Some(watch))),
        )
    }

    /// POSTs `body` to the absolute `url` (same server, e.g. Ollama's `/api/show`).
    pub fn post_json_to(&self, url: &str, body: &Value) -> Result<Reply, HttpFailure> {
        self.post(url, body, None)
    }

    fn post(
        &self,
        url: &str,
        body: &Value,
        cancel: Option<(&Cancel, Option<Watch<'_>>)>,
    ) -> Result<Reply, HttpFailure> {
        self.post_once(url, body, cancel)
            .map_err(|e| self.name_timeout("POST", url, e))
    }

    fn post_once(
        &self,
        url: &str,
        body: &Value,
        cancel: Option<(&Cancel, Option<Watch<'_>>)>,
    ) -> Result<Reply, HttpFailure> {
        let bytes = serde_json::to_vec(body).map_err(|e| HttpFailure::Body(e.to_string()))?;
        let left = self.remaining("POST", url)?;
        let mut request = self
            .agent
            .post(url)
            .config()
            .timeout_global(left)
            .build()
            .header("content-type", "application/json");
        request = match &self.auth {
            Auth::None => request,
            Auth::Bearer(key) => {
                request.header("authorization", format!("Bearer {}", key.expose()))
            }
            Auth::AnthropicKey(key) => request
                .header("x-api-key", key.expose())
                .header("anthropic-version", ANTHROPIC_VERSION),
            Auth::ApiKeyHeader(key) => request.header("api-key", key.expose()),
        };
        if url.ends_with("/messages") && !matches!(self.auth, Auth::AnthropicKey(_)) {
            request = request.header("anthropic-version", ANTHROPIC_VERSION);
        }
        finish(request.send(&bytes[..]).map_err(transport_failure)?, cancel)
    }

    /// POSTs `body` to the absolute `url` and hands each line of a 2xx answer to `on_line` as
    /// it arrives (Ollama's streamed `/api/pull`); `on_line` returning `false` stops reading
    /// and closes the connection. Each read is bounded by [`READ_TIMEOUT`], each line by
    /// [`MAX_LINE`]; the stream's end is `Ok` (the caller judges whether it was complete).
    pub fn post_json_lines(
        &self,
        url: &str,
        body: &Value,
        mut on_line: impl FnMut(&[u8]) -> bool,
    ) -> Result<(), HttpFailure> {
        let bytes = serde_json::to_vec(body).map_err(|e| HttpFailure::Body(e.to_string()))?;
        let request = self
            .agent
            .post(url)
            .header("content-type", "application/json");
        let response = request.send(&bytes[..]).map_err(transport_failure)?;
        let status = response.status().as_u16();
        if !(200..=299).contains(&status) {
            return finish(response, None).map(|_| ());
        }
        let mut reader = std::io::BufReader::new(response.into_body().into_reader());
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = std::io::BufRead::read_until(
                &mut std::io::Read::take(&mut reader, MAX_LINE),
                b'\n',
                &mut line,
            );
            match read {
                Ok(0) => return Ok(()),
                Ok(_) if !line.ends_with(b"\n") && line.len() as u64 >= MAX_LINE => {
                    return Err(HttpFailure::Body(format!(
                        "POST {url}: a line of the answer is longer than {MAX_LINE} bytes"
                    )));
                }
                Ok(_) => {
                    let text = line.trim_ascii();
                    if !text.is_empty() && !on_line(text) {
                        return Ok(());
                    }
                }
                Err(e) => {
                    return Err(match e.downcast::<ureq::Error>() {
                        Ok(ureq::Error::Timeout(t)) => HttpFailure::Timeout(t.to_string()),
                        Ok(other) => HttpFailure::Body(other.to_string()),
                        Err(e) => HttpFailure::Body(e.to_string()),
                    });
                }
            }
        }
    }

    /// GETs the absolute `url` with the endpoint's authentication (blocking).
    pub fn get(&self, url: &str) -> Result<Vec<u8>, HttpFailure> {
        self.get_once(url)
            .map_err(|e| self.name_timeout("GET", url, e))
    }

    fn get_once(&self, url: &str) -> Result<Vec<u8>, HttpFailure> {
        let left = self.remaining("GET", url)?;
        let mut request = self.agent.get(url).config().timeout_global(left).build();
        request = match &self.auth {
            Auth::None => request,
            Auth::Bearer(key) => {
                request.header("authorization", format!("Bearer {}", key.expose()))
            }
            Auth::AnthropicKey(key) => request
                .header("x-api-key", key.expose())
                .header("anthropic-version", ANTHROPIC_VERSION),
            Auth::ApiKeyHeader(key) => request.header("api-key", key.expose()),
        };
        finish(request.call().map_err(transport_failure)?, None).map(|r| r.body)
    }
}

/// A response's 2xx body, or its status as a typed failure (redirects are never followed).
fn finish(
    response: ureq::http::Response<ureq::Body>,
    cancel: Option<(&Cancel, Option<Watch<'_>>)>,
) -> Result<Reply, HttpFailure> {
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = header("retry-after");
    let location = header("location");
    let event_stream =
        header("content-type").is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    let mut body = response.into_body();
    // Only a 2xx body is watched: an error's body is read whole for its message.
    let cancel =
        cancel.map(|(cancel, watch)| (cancel, watch.filter(|_| (200..=299).contains(&status))));
    let read = match cancel {
        None => body
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec()
            .map(|body| (body, false))
            .map_err(|e| match transport_failure(e) {
                HttpFailure::Transport(m) => HttpFailure::Body(m),
                other => other,
            }),
        Some((cancel, watch)) => {
            read_until_cancelled(body.with_config().limit(MAX_BODY).reader(), cancel, watch)
        }
    };
    let read_body = |read: Result<(Vec<u8>, bool), HttpFailure>| read.map(|(body, _)| body);
    match status {
        200..=299 => read.map(|(body, cut)| Reply {
            body,
            event_stream,
            cut,
        }),
        300..=399 => Err(HttpFailure::Redirect {
            status,
            location: location.unwrap_or_else(|| "(no location)".into()),
        }),
        429 => Err(HttpFailure::RateLimited {
            retry_after,
            message: error_message(&read_body(read).unwrap_or_default()),
        }),
        500..=599 => Err(HttpFailure::Server {
            status,
            message: error_message(&read_body(read).unwrap_or_default()),
        }),
        _ => Err(HttpFailure::Client {
            status,
            message: error_message(&read_body(read).unwrap_or_default()),
        }),
    }
}

/// Reads `reader` to its end, checking `cancel` before every read and handing each piece to
/// `watch`; a cancelled read drops the reader (closing the connection), a watch that answers
/// `false` ends the read there (`true` in the answer: the body was cut).
fn read_until_cancelled(
    mut reader: impl Read,
    cancel: &Cancel,
    mut watch: Option<Watch<'_>>,
) -> Result<(Vec<u8>, bool), HttpFailure> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if cancel.is_cancelled() {
            return Err(HttpFailure::Body("the request was cancelled".into()));
        }
        match reader.read(&mut chunk) {
            Ok(0) => return Ok((out, false)),
            Ok(n) => {
                out.extend_from_slice(&chunk[..n]);
                if let Some(watch) = watch.as_mut()
                    && !watch(&chunk[..n])
                {
                    return Ok((out, true));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(match e.downcast::<ureq::Error>() {
                    Ok(ureq::Error::Timeout(t)) => HttpFailure::Timeout(t.to_string()),
                    Ok(other) => HttpFailure::Body(other.to_string()),
                    Err(e) => HttpFailure::Body(e.to_string()),
                });
            }
        }
    }
}

fn transport_failure(error: ureq::Error) -> HttpFailure {
    match error {
        ureq::Error::Timeout(t) => HttpFailure::Timeout(t.to_string()),
        other => HttpFailure::Transport(other.to_string()),
    }
}

/// The error message of an API error body (`{"error": {"message"}}`, Anthropic's the same), else
/// the start of the body.
fn error_message(body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    if let Some(message) = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
    }) {
        return clip(message);
    }
    clip(&String::from_utf8_lossy(body))
}

/// At most 300 characters, terminal-safe.
fn clip(text: &str) -> String {
    let text: String = text.chars().take(300).collect();
    crate::term_text::terminal_safe(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{ReadSecretError, SECRET_CAP, Secret, SecretError};

    #[test]
    fn a_key_is_one_bounded_line_of_printable_ascii() {
        let ok = |text: &str, key: &str| {
            assert_eq!(
                Secret::parse(text).map(|s| s.expose().to_owned()),
                Ok(key.to_owned())
            )
        };
        ok("sk-abc\n", "sk-abc");
        ok("  sk-abc \r\n", "sk-abc");
        ok(&"k".repeat(SECRET_CAP), &"k".repeat(SECRET_CAP));
        let refused = |text: &str, want: SecretError| assert_eq!(Secret::parse(text), Err(want));
        refused("", SecretError::Empty);
        refused(" \n", SecretError::Empty);
        refused(
            &"k".repeat(SECRET_CAP + 1),
            SecretError::TooLong { cap: SECRET_CAP },
        );
        let at = |what, at| SecretError::Forbidden { what, at };
        refused("sk-a\nsk-b\n", at("a line break", 4));
        refused("sk\x1b[31m", at("an escape character", 2));
        refused("  sk\u{7f}", at("a control character", 4));
        refused("sk a", at("a blank", 2));
        refused("sk\u{e9}", at("a character outside ASCII", 2));
        // The refusal never carries the key.
        let shown = Secret::parse("sk-supersecret\x1b").unwrap_err().to_string();
        assert!(!shown.contains("supersecret"), "{shown}");
    }

    #[test]
    fn reading_a_key_stops_after_the_cap() {
        // An endless input (like /dev/zero) is refused after a few KiB, not read to the end.
        let endless = std::io::repeat(b'k');
        match Secret::read_from(endless) {
            Err(ReadSecretError::Invalid(SecretError::TooLong { cap })) => {
                assert_eq!(cap, SECRET_CAP)
            }
            other => panic!("{other:?}"),
        }
        let key = Secret::read_from(&b"sk-xyz\n"[..]).unwrap();
        assert_eq!(key.expose(), "sk-xyz");
        assert!(matches!(
            Secret::read_from(&b"sk-\xff"[..]),
            Err(ReadSecretError::Invalid(SecretError::Forbidden { .. }))
        ));
    }

    use super::*;

    #[test]
    fn https_is_required_except_on_loopback() {
        assert_eq!(check_base_url("https://api.openai.com/v1"), Ok(false));
        assert_eq!(check_base_url("http://127.0.0.1:8080/v1"), Ok(true));
        assert_eq!(check_base_url("http://localhost:11434/v1"), Ok(true));
        assert_eq!(check_base_url("http://[::1]:1/v1"), Ok(true));
        assert!(matches!(
            check_base_url("http://api.example.com/v1"),
            Err(UrlError::NotHttps(_))
        ));
        assert!(matches!(
            check_base_url("http://127.0.0.1.example.com/v1"),
            Err(UrlError::NotHttps(_))
        ));
        assert!(matches!(
            check_base_url("https://u:p@api.example.com/v1"),
            Err(UrlError::Extra(_))
        ));
        assert!(check_base_url("ftp://x/v1").is_err());
        assert!(check_base_url("not a url").is_err());
    }

    /// A stream that never ends (a model writing thousands of tokens): a cancelled read returns
    /// at its next read and closes the connection, which ends the server's writing.
    #[test]
    fn a_cancelled_request_stops_reading_and_closes_its_connection() {
        use std::io::Write;
        use std::sync::mpsc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let (sent_tx, sent_rx) = mpsc::channel::<usize>();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request);
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                .unwrap();
            let event = b"data: {\"choices\":[{\"delta\":{\"content\":\"\\n\"}}]}\n\n";
            let mut sent = 0usize;
            loop {
                let chunk = [format!("{:x}\r\n", event.len()).as_bytes(), event, b"\r\n"].concat();
                if socket
                    .write_all(&chunk)
                    .and_then(|()| socket.flush())
                    .is_err()
                {
                    return sent;
                }
                sent += 1;
                let _ = sent_tx.send(sent);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let client = Client::new(&url, Auth::None).unwrap();
        let cancel = Cancel::new();
        let (done_tx, done_rx) = mpsc::channel();
        let flag = cancel.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(client.post_json_cancellable(
                "/chat/completions",
                &serde_json::json!({}),
                &flag,
            ));
        });
        // Some of the stream has been read or is in flight; then whoever waited is gone.
        while sent_rx.recv().unwrap() < 20 {}
        drop(cancel.on_drop());
        let answer = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a cancelled request returns");
        assert_eq!(
            answer,
            Err(HttpFailure::Body("the request was cancelled".into()))
        );
        // The connection is closed: the never-ending stream stops.
        let sent = server.join().unwrap();
        assert!(sent >= 20, "{sent}");
    }

    /// A server that answers every request with headers at once, then one body byte at a time
    /// on a timer, forever (until the client hangs up): per-read timeouts never fire.
    fn trickling_server(every: Duration) -> String {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for socket in listener.incoming() {
                let Ok(mut socket) = socket else { return };
                std::thread::spawn(move || {
                    let mut request = [0u8; 8192];
                    let _ = socket.read(&mut request);
                    let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n";
                    if socket.write_all(head).is_err() {
                        return;
                    }
                    while socket.write_all(b" ").and_then(|()| socket.flush()).is_ok() {
                        std::thread::sleep(every);
                    }
                });
            }
        });
        url
    }

    #[test]
    fn a_checking_client_ends_by_its_total_deadline_and_names_the_url() {
        let url = trickling_server(Duration::from_millis(200));
        let client = Client::new(&url, Auth::None)
            .unwrap()
            .with_deadline(Duration::from_secs(1));
        let started = Instant::now();
        let got = client.get(&format!("{url}/models"));
        let took = started.elapsed();
        match &got {
            Err(HttpFailure::Timeout(detail)) => {
                assert!(detail.contains(&format!("GET {url}/models")), "{detail}");
                assert!(detail.contains("1 s deadline"), "{detail}");
            }
            other => panic!("{other:?}"),
        }
        // The deadline is total: well before one per-read timeout (60 s) could have passed.
        assert!(took < Duration::from_secs(20), "{took:?}");
        // The deadline spans the client's requests: the next one does not start.
        let next = client.post_json("/chat/completions", &serde_json::json!({}));
        match next {
            Err(HttpFailure::Timeout(detail)) => {
                assert!(detail.contains("not started"), "{detail}");
                assert!(
                    detail.contains(&format!("POST {url}/chat/completions")),
                    "{detail}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(check_deadline(Some("7")), Duration::from_secs(7));
        assert_eq!(check_deadline(Some("0")), CHECK_DEADLINE);
        assert_eq!(check_deadline(Some("soon")), CHECK_DEADLINE);
        assert_eq!(check_deadline(None), CHECK_DEADLINE);
    }

    #[test]
    fn secrets_never_print() {
        let auth = Auth::Bearer(Secret::new("sk-very-secret"));
        assert!(!format!("{auth:?}").contains("sk-very"));
    }
}
