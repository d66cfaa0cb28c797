//! A stage's live events over server-sent events: `events.jsonl` is read from a byte offset in
//! bounded chunks (the server never holds the file whole), each complete line is one `event`
//! whose id is the byte offset after it, so a client that reconnects with `Last-Event-ID` (or
//! `?from=`) resumes exactly there. While the stage runs the file is followed; `alive` events
//! (every [`ALIVE_EVERY`]) tell the page the stream is not stale; `end` closes it once the
//! stage finished and every line was sent.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures_util::stream::{self, Stream};

use super::AppState;
use super::view::{ViewError, found};
use crate::run::state::AttemptStatus;

/// The most read from the file at once.
const CHUNK: usize = 64 << 10;
/// A line longer than this is not sent; a `truncated` event says how long it was.
pub const LINE_CAP: usize = 1 << 20;
/// How often a followed file is looked at again when it has no new line.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);
/// How often an idle stream says it is alive.
pub const ALIVE_EVERY: Duration = Duration::from_secs(3);
/// How often an idle stream reloads the run to see whether the stage finished.
const RECHECK_EVERY: Duration = Duration::from_secs(1);

#[derive(serde::Deserialize)]
pub struct FromQuery {
    from: Option<u64>,
}

/// What the file held, ready to be sent.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    /// A complete line and the byte offset after it.
    Line { end: u64, text: String },
    /// A line over [`LINE_CAP`]: its length, and the offset after it.
    Truncated { end: u64, length: u64 },
}

impl Item {
    fn event(self) -> Event {
        match self {
            Item::Line { end, text } => Event::default()
                .id(end.to_string())
                .event("line")
                .data(text),
            Item::Truncated { end, length } => Event::default()
                .id(end.to_string())
                .event("truncated")
                .data(length.to_string()),
        }
    }
}

/// Where the stream stands.
struct Tail {
    path: PathBuf,
    run_dir: PathBuf,
    stage: String,
    offset: u64,
    /// Bytes read past `offset` that do not end a line yet.
    pending: Vec<u8>,
    /// Inside a line over the cap: skip to its end.
    skipping: Option<u64>,
    ready: std::collections::VecDeque<Item>,
    last_sent: Instant,
    last_check: Instant,
    finished: bool,
    ended: bool,
}

impl Tail {
    /// Reads what the file holds past the current position into `ready` events.
    fn read_more(&mut self) -> std::io::Result<bool> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let start = self.offset + self.pending.len() as u64 + self.skipping.unwrap_or(0);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = vec![0u8; CHUNK];
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(false);
        }
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let newline = rest.iter().position(|b| *b == b'\n');
            if let Some(skipped) = self.skipping {
                match newline {
                    Some(i) => {
                        let length = skipped + i as u64;
                        self.offset += length + 1;
                        self.skipping = None;
                        self.ready.push_back(Item::Truncated {
                            end: self.offset,
                            length,
                        });
                        rest = &rest[i + 1..];
                    }
                    None => {
                        self.skipping = Some(skipped + rest.len() as u64);
                        rest = &[];
                    }
                }
                continue;
            }
            match newline {
                Some(i) if self.pending.len() + i > LINE_CAP => {
                    let length = (self.pending.len() + i) as u64;
                    self.offset += length + 1;
                    self.pending.clear();
                    self.ready.push_back(Item::Truncated {
                        end: self.offset,
                        length,
                    });
                    rest = &rest[i + 1..];
                }
                Some(i) => {
                    self.pending.extend_from_slice(&rest[..i]);
                    self.offset += self.pending.len() as u64 + 1;
                    let text = String::from_utf8_lossy(&self.pending).replace('\r', "\\r");
                    self.ready.push_back(Item::Line {
                        end: self.offset,
                        text,
                    });
                    self.pending.clear();
                    rest = &rest[i + 1..];
                }
                None => {
                    self.pending.extend_from_slice(rest);
                    if self.pending.len() > LINE_CAP {
                        self.skipping = Some(self.pending.len() as u64);
                        self.pending.clear();
                    }
                    rest = &[];
                }
            }
        }
        Ok(true)
    }

    /// Whether the stage is over (its attempt no longer `running`, or the run unreadable).
    fn stage_over(&self) -> bool {
        match crate::run::load(&self.run_dir) {
            Ok(state) => !state
                .attempts
                .iter()
                .any(|a| a.dir == self.stage && matches!(a.status, AttemptStatus::Running)),
            Err(_) => true,
        }
    }
}

/// The next event of the stream, waiting for the file to grow while the stage runs.
async fn next(mut tail: Tail) -> Option<(Result<Event, std::convert::Infallible>, Tail)> {
    loop {
        if let Some(item) = tail.ready.pop_front() {
            tail.last_sent = Instant::now();
            return Some((Ok(item.event()), tail));
        }
        if tail.ended {
            return None;
        }
        let grew = tail.read_more().unwrap_or(false);
        if grew {
            continue;
        }
        if tail.finished {
            tail.ended = true;
            let event = Event::default()
                .id(tail.offset.to_string())
                .event("end")
                .data(tail.offset.to_string());
            return Some((Ok(event), tail));
        }
        if tail.last_check.elapsed() >= RECHECK_EVERY {
            tail.last_check = Instant::now();
            // Read once more after seeing it over: the last lines may have come in between.
            tail.finished = tail.stage_over();
            continue;
        }
        if tail.last_sent.elapsed() >= ALIVE_EVERY {
            tail.last_sent = Instant::now();
            let event = Event::default()
                .event("alive")
                .data(chrono::Utc::now().to_rfc3339());
            return Some((Ok(event), tail));
        }
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}

/// `GET …/stages/{stage}/events`: the stream, from `Last-Event-ID` (or `?from=`) on.
pub async fn stream(
    State(state): State<AppState>,
    UrlPath((ws, run_id, stage)): UrlPath<(usize, String, String)>,
    Query(query): Query<FromQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>>, ViewError> {
    let found = found(&state, ws, &run_id).await?;
    let attempt = found
        .state
        .attempts
        .iter()
        .find(|a| a.dir == stage)
        .ok_or_else(|| ViewError::NoStage {
            run: run_id.clone(),
            stage: stage.clone(),
        })?;
    let resume_at = headers
        .get("last-event-id")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.trim().parse::<u64>().ok())
        .or(query.from)
        .unwrap_or(0);
    let path = found
        .dir
        .join("stages")
        .join(&attempt.dir)
        .join("events.jsonl");
    // An offset past the end (a file replaced under the client) starts over.
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let mut tail = Tail::new(
        path,
        found.dir.clone(),
        attempt.dir.clone(),
        if resume_at > len { 0 } else { resume_at },
    );
    tail.finished = !matches!(attempt.status, AttemptStatus::Running);
    Ok(Sse::new(stream::unfold(tail, next)))
}

impl Tail {
    fn new(path: PathBuf, run_dir: PathBuf, stage: String, offset: u64) -> Tail {
        Tail {
            path,
            run_dir,
            stage,
            offset,
            pending: Vec::new(),
            skipping: None,
            ready: Default::default(),
            last_sent: Instant::now(),
            last_check: Instant::now(),
            finished: false,
            ended: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn drain(tail: &mut Tail) -> Vec<Item> {
        while tail.read_more().expect("read") {}
        tail.ready.drain(..).collect()
    }

    #[test]
    fn lines_come_with_their_end_offsets_and_a_long_line_is_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let long = "x".repeat(LINE_CAP + 5);
        std::fs::write(
            &path,
            format!("{{\"a\":1}}\n{long}\n{{\"b\":\"\r\"}}\npartial"),
        )
        .expect("write");
        let mut tail = Tail::new(path.clone(), dir.path().into(), "s".into(), 0);
        let items = drain(&mut tail);
        let first_end = 8;
        let long_end = first_end + long.len() as u64 + 1;
        assert_eq!(
            items,
            [
                Item::Line {
                    end: first_end,
                    text: "{\"a\":1}".into()
                },
                Item::Truncated {
                    end: long_end,
                    length: long.len() as u64
                },
                Item::Line {
                    end: long_end + 10,
                    text: "{\"b\":\"\\r\"}".into()
                },
            ]
        );
        // The partial last line waits for its newline; then it comes, and nothing twice.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        file.write_all(b" line\n").expect("append");
        assert_eq!(
            drain(&mut tail),
            [Item::Line {
                end: long_end + 10 + 13,
                text: "partial line".into()
            }]
        );
        // From an offset (Last-Event-ID): exactly what follows it.
        let mut resumed = Tail::new(path, dir.path().into(), "s".into(), long_end);
        assert_eq!(drain(&mut resumed).len(), 2);
    }
}
