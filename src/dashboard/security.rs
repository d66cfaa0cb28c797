//! The dashboard's security layer, applied to every request (static files and the event stream
//! included):
//! - the Host header must name the address the server listens on (`127.0.0.1:PORT`,
//!   `localhost:PORT`, `[::1]:PORT`): a DNS-rebinding page reaches the port under its own name;
//! - every path but `/login` needs the launch token, as the `HttpOnly; SameSite=Strict` cookie
//!   `/login?token=…` sets, or as `Authorization: Bearer …` for scripts; failed attempts are
//!   rate-limited (a few per window, then `429` without looking at the token);
//! - a `POST` must carry `Content-Type: application/json`, an `Origin` equal to the server's
//!   own, and the header `X-Autocode-Dashboard: 1` (a form or `text/plain` body from another
//!   page is refused before any handler runs); no CORS header is ever sent;
//! - every response carries `Content-Security-Policy: default-src 'self'; frame-ancestors
//!   'none'`, `X-Content-Type-Options: nosniff`, `Cache-Control: no-store` and
//!   `Referrer-Policy: no-referrer`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;

/// The cookie that carries the token after login.
pub const COOKIE: &str = "autocode_dashboard";
/// The header every mutation must carry (a cross-site form cannot set it).
pub const MUTATION_HEADER: &str = "x-autocode-dashboard";
/// Failed token attempts allowed per [`FAILURE_WINDOW`]; past them, `429`.
pub const FAILURES_ALLOWED: u32 = 5;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// A fresh launch token: 32 random bytes (256 bits) as hex.
pub fn new_token() -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system random source failed".to_owned())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Equal without an early exit on the first differing byte.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token, the names the server answers to, and the failure counter.
pub struct Guard {
    token: String,
    hosts: Vec<String>,
    origins: Vec<String>,
    failures: Mutex<(Instant, u32)>,
}

impl Guard {
    pub fn new(token: String, address: SocketAddr) -> Guard {
        let port = address.port();
        let mut names = vec![format!("localhost:{port}")];
        match address.ip() {
            IpAddr::V4(ip) => names.push(format!("{ip}:{port}")),
            IpAddr::V6(ip) => names.push(format!("[{ip}]:{port}")),
        }
        Guard {
            token,
            origins: names.iter().map(|h| format!("http://{h}")).collect(),
            hosts: names,
            failures: Mutex::new((Instant::now(), 0)),
        }
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| self.hosts.iter().any(|a| a.eq_ignore_ascii_case(h)))
    }

    /// Whether too many attempts failed in the current window.
    fn locked_out(&self) -> bool {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.0.elapsed() > FAILURE_WINDOW {
            *failures = (Instant::now(), 0);
        }
        failures.1 >= FAILURES_ALLOWED
    }

    fn failed(&self) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.1 = failures.1.saturating_add(1);
    }

    /// The token the request presents (cookie or bearer), if any.
    fn presented<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        bearer.or_else(|| {
            headers
                .get_all(header::COOKIE)
                .iter()
                .filter_map(|h| h.to_str().ok())
                .flat_map(|h| h.split(';'))
                .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        })
    }

    fn mutation_allowed(&self, headers: &HeaderMap) -> Result<(), &'static str> {
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err("a decision is a JSON POST (Content-Type: application/json)");
        }
        let origin = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok());
        if !origin.is_some_and(|o| self.origins.iter().any(|a| a.eq_ignore_ascii_case(o))) {
            return Err("a decision must come from the dashboard's own origin");
        }
        if headers.get(MUTATION_HEADER).and_then(|h| h.to_str().ok()) != Some("1") {
            return Err("a decision must carry the header X-Autocode-Dashboard: 1");
        }
        Ok(())
    }
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, axum::Json(serde_json::json!({ "error": why }))).into_response()
}

fn harden(response: &mut Response) {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; frame-ancestors 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

/// The layer around every route.
pub async fn layer(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = check(&state, request, next).await;
    harden(&mut response);
    response
}

async fn check(state: &AppState, request: Request, next: Next) -> Response {
    let guard = &state.guard;
    let headers = request.headers();
    if !guard.host_allowed(headers) {
        return refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "this server answers only to its own loopback address (Host header)",
        );
    }
    if request.uri().path() != "/login" {
        let ok = guard
            .presented(headers)
            .is_some_and(|t| same_secret(t.as_bytes(), guard.token.as_bytes()));
        if !ok {
            if guard.locked_out() {
                return refuse(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many failed token attempts; wait a minute",
                );
            }
            if guard.presented(headers).is_some() {
                guard.failed();
            }
            return refuse(
                StatusCode::UNAUTHORIZED,
                "open the login URL `autocode dashboard` printed (the token is in it)",
            );
        }
    }
    match *request.method() {
        Method::GET | Method::HEAD => {}
        Method::POST => {
            if let Err(why) = guard.mutation_allowed(headers) {
                return refuse(StatusCode::FORBIDDEN, why);
            }
        }
        _ => return refuse(StatusCode::METHOD_NOT_ALLOWED, "GET or JSON POST only"),
    }
    next.run(request).await
}

#[derive(serde::Deserialize)]
pub struct LoginQuery {
    token: Option<String>,
}

/// `GET /login?token=…`: the token for a cookie, then the runs page.
pub async fn login(State(state): State<AppState>, Query(query): Query<LoginQuery>) -> Response {
    let guard = &state.guard;
    if guard.locked_out() {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "too many failed token attempts; wait a minute",
        );
    }
    let Some(token) = query.token else {
        return refuse(StatusCode::UNAUTHORIZED, "the login URL carries ?token=");
    };
    if !same_secret(token.as_bytes(), guard.token.as_bytes()) {
        guard.failed();
        return refuse(StatusCode::UNAUTHORIZED, "wrong token");
    }
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_256_bits_and_differ() {
        let (a, b) = (new_token().expect("token"), new_token().expect("token"));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }

    #[test]
    fn hosts_and_origins_are_the_listening_address_only() {
        let guard = Guard::new("t".into(), "127.0.0.1:4000".parse().expect("addr"));
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:4000"));
        assert!(guard.host_allowed(&headers));
        headers.insert(header::HOST, HeaderValue::from_static("evil.example:4000"));
        assert!(!guard.host_allowed(&headers));
        headers.insert(header::HOST, HeaderValue::from_static("localhost:4001"));
        assert!(!guard.host_allowed(&headers));
        headers.remove(header::HOST);
        assert!(!guard.host_allowed(&headers));
    }
}
