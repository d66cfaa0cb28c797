//! A client of a running `autocode dashboard` for the tests (`dashboard`, `dashboard_browser`):
//! the server started through `run_e2e`'s harness, requests written by hand over a TCP socket so
//! every header (Host, Origin, Content-Type) is exactly what a test says.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::run_e2e::{BUILD, CHECK, Harness, wait_until};

/// A running `autocode dashboard` (killed when dropped).
pub(super) struct Dashboard {
    child: Child,
    pub(super) port: u16,
    pub(super) token: String,
    pub(super) login_url: String,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Dashboard {
    /// Starts the dashboard on `workspaces` with the harness's environment and reads the JSON
    /// document it prints once it listens.
    pub(super) fn start(harness: &Harness, workspaces: &[&Path]) -> Dashboard {
        Dashboard::start_with(harness, workspaces, &[])
    }

    /// [`Dashboard::start`] with more arguments.
    pub(super) fn start_with(harness: &Harness, workspaces: &[&Path], extra: &[&str]) -> Dashboard {
        let mut args: Vec<String> = vec!["dashboard".into(), "--json".into()];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        for ws in workspaces {
            args.push("--workspace".into());
            args.push(ws.display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = harness
            .command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start autocode dashboard");
        let stdout = child.stdout.take().expect("stdout");
        let mut reader = BufReader::new(stdout);
        let mut text = String::new();
        let started: Value = loop {
            let mut line = String::new();
            let n = reader
                .read_line(&mut line)
                .expect("read the dashboard's stdout");
            assert!(n > 0, "the dashboard ended before it listened: {text}");
            text.push_str(&line);
            if let Ok(v) = serde_json::from_str(&text) {
                break v;
            }
        };
        let login_url = started["login_url"].as_str().expect("login_url").to_owned();
        let token = login_url
            .split("token=")
            .nth(1)
            .expect("token in the URL")
            .to_owned();
        let port = started["address"]
            .as_str()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .expect("port");
        Dashboard {
            child,
            port,
            token,
            login_url,
        }
    }

    pub(super) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A request with the given head lines (no Host unless given), and a body.
    pub(super) fn raw(&self, head: &str, body: &str) -> Reply {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let request = format!(
            "{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("write");
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).expect("read");
        Reply::parse(&bytes)
    }

    /// An authenticated GET with the right Host.
    pub(super) fn get(&self, path: &str) -> Reply {
        self.raw(
            &format!(
                "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: autocode_dashboard={}",
                self.host(),
                self.token
            ),
            "",
        )
    }

    pub(super) fn get_json(&self, path: &str) -> Value {
        let reply = self.get(path);
        assert_eq!(reply.status, 200, "GET {path}: {reply:?}");
        reply.json()
    }

    /// A decision as the page posts it.
    pub(super) fn decide(&self, ws: usize, run: &str, body: &Value) -> Reply {
        self.raw(
            &format!(
                "POST /api/ws/{ws}/runs/{run}/decide HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nContent-Type: application/json\r\nX-Autocode-Dashboard: 1\r\nCookie: autocode_dashboard={}",
                self.token,
                host = self.host()
            ),
            &body.to_string(),
        )
    }

    /// Polls a decision until it is no longer running.
    pub(super) fn wait_decision(&self, id: &str) -> Value {
        let mut record = Value::Null;
        wait_until("the decision to finish", Duration::from_secs(120), || {
            record = self.get_json(&format!("/api/decisions/{id}"));
            record["status"] != "running"
        });
        record
    }
}

/// An HTTP reply: status, lower-cased headers, body (chunked encoding undone).
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) headers: BTreeMap<String, String>,
    pub(super) body: String,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}\n{}", self.status, self.headers, self.body)
    }
}

impl Reply {
    fn parse(bytes: &[u8]) -> Reply {
        let text = String::from_utf8_lossy(bytes);
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let headers: BTreeMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let body = if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
            let mut out = String::new();
            let mut rest = rest;
            while let Some((size, after)) = rest.split_once("\r\n") {
                let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
                    break;
                };
                if size == 0 || after.len() < size {
                    out.push_str(after.get(..size.min(after.len())).unwrap_or(""));
                    break;
                }
                out.push_str(&after[..size]);
                rest = after[size..].trim_start_matches("\r\n");
            }
            out
        } else {
            rest.to_owned()
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// The only run directory of the harness's workspace, and its id.
pub(super) fn only_run(harness: &Harness) -> (PathBuf, String) {
    let runs = harness.workspace().join(".autocode/runs");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&runs)
        .expect("runs dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = dirs.remove(0);
    let id = dir
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    (dir, id)
}

/// A builder whose report carries markup, an escape sequence and bidi controls.
pub(super) fn hostile_builder() -> Value {
    json!([{"run": BUILD}, {"run": CHECK}, {"report": {
        "status": "done",
        "summary": "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\u{1b}[31mred\u{202e}evil\u{2066}",
        "files_changed": ["hello.txt"],
        "checks": [{"command": CHECK, "exit_code": 0, "evidence_ref": "{{last_event}}"}],
        "blockers": []
    }}])
}
