//! Notifications: telling a person that a run needs them, paused, completed or failed.
//!
//! Configured by the `[notify]` table of `~/.config/autocode/config.toml` ([`NotifyConfig`]):
//! a `command` (an argv with placeholders, never a shell), a `webhook` (an ntfy-style POST, or
//! JSON with `format = "json"`), `desktop = true` (`notify-send`, when a session bus exists),
//! and the `events` to send. A notification is sent after the run's outcome is recorded and
//! shown, every channel at once, each within the timeout; it never changes the run's outcome,
//! and what became of each channel is an `activity.jsonl` line of the run ([`record`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::ids::RunId;
use crate::pause::PauseCode;

/// What a notification is about. The strings are API (config `events`, placeholders, JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// The run waits for a person: answers, a plan approval, a human review, test changes.
    NeedsPerson,
    /// The run paused for another reason (rate limit, budget, a verifier's refusal...).
    Paused,
    Complete,
    /// The run failed after it was created.
    Failed,
    /// `autocode notify test`.
    Test,
}

impl NotifyEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::NeedsPerson => "needs_person",
            NotifyEvent::Paused => "paused",
            NotifyEvent::Complete => "complete",
            NotifyEvent::Failed => "failed",
            NotifyEvent::Test => "test",
        }
    }

    /// The event of a pause with `code`.
    pub fn of_pause(code: PauseCode) -> NotifyEvent {
        match code {
            PauseCode::WaitingForUser
            | PauseCode::AwaitingPlanApproval
            | PauseCode::AwaitingHumanReview
            | PauseCode::AwaitingTestChangeReview => NotifyEvent::NeedsPerson,
            _ => NotifyEvent::Paused,
        }
    }
}

/// How a webhook's body is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// ntfy: the summary as the body, `Title`, `Priority` and `Tags` headers.
    #[default]
    Ntfy,
    /// One JSON object: [`Notification`].
    Json,
}

/// The default time a channel gets.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest time a channel may be given.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// The `[notify]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// argv; placeholders `{run_id}`, `{event}`, `{code}`, `{workspace}`, `{summary}`, `{url}`.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub webhook: Option<String>,
    #[serde(default)]
    pub format: WebhookFormat,
    #[serde(default)]
    pub desktop: bool,
    /// The events sent (default: all four).
    #[serde(default)]
    pub events: Option<Vec<NotifyEvent>>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum NotifyConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: [notify]: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl NotifyConfig {
    /// The `[notify]` table of `config_file`; an absent file or table configures nothing.
    pub fn load(config_file: &Path) -> Result<NotifyConfig, NotifyConfigError> {
        let bytes = match crate::bounded_read::read(config_file, crate::bounded_read::CONFIG_CAP) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(NotifyConfig::default());
            }
            Err(source) => {
                return Err(NotifyConfigError::Read {
                    path: config_file.to_owned(),
                    source,
                });
            }
        };
        let invalid = |message: String| NotifyConfigError::Invalid {
            path: config_file.to_owned(),
            message,
        };
        let text = String::from_utf8(bytes).map_err(|_| invalid("not UTF-8".into()))?;
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            notify: Option<NotifyConfig>,
        }
        let file: File = toml::from_str(&text).map_err(|e| invalid(e.message().to_owned()))?;
        let config = file.notify.unwrap_or_default();
        if config.command.as_ref().is_some_and(|argv| argv.is_empty()) {
            return Err(invalid("command is an empty argv".into()));
        }
        if let Some(url) = &config.webhook
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(invalid(format!("webhook {url:?} is not an http(s) URL")));
        }
        Ok(config)
    }

    /// Whether anything would be sent.
    pub fn any_channel(&self) -> bool {
        self.command.is_some() || self.webhook.is_some() || self.desktop
    }

    /// Whether `event` is one this configuration sends (`test` always is).
    pub fn wants(&self, event: NotifyEvent) -> bool {
        event == NotifyEvent::Test
            || self
                .events
                .as_ref()
                .is_none_or(|events| events.contains(&event))
    }

    pub fn timeout(&self) -> Duration {
        self.timeout_seconds
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_TIMEOUT)
            .min(MAX_TIMEOUT)
    }
}

/// One notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub event: NotifyEvent,
    pub run_id: Option<RunId>,
    pub code: Option<PauseCode>,
    pub workspace: PathBuf,
    /// One or two sentences for a person.
    pub summary: String,
    /// Where to look: the run's directory as a `file://` URL.
    pub url: String,
}

impl Notification {
    fn placeholders(&self) -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            (
                "{run_id}",
                self.run_id
                    .as_ref()
                    .map(|r| r.as_str().to_owned())
                    .unwrap_or_default(),
            ),
            ("{event}", self.event.as_str().to_owned()),
            (
                "{code}",
                self.code.map(|c| c.as_str().to_owned()).unwrap_or_default(),
            ),
            ("{workspace}", self.workspace.display().to_string()),
            ("{summary}", self.summary.clone()),
            ("{url}", self.url.clone()),
        ])
    }

    /// `argv` with its placeholders filled (each word on its own: no shell ever reads them).
    pub fn fill(&self, argv: &[String]) -> Vec<String> {
        let values = self.placeholders();
        argv.iter()
            .map(|word| {
                values.iter().fold(word.clone(), |word, (name, value)| {
                    word.replace(name, value)
                })
            })
            .collect()
    }

    fn title(&self) -> String {
        match &self.run_id {
            Some(run) => format!("autocode {}: {run}", self.event.as_str()),
            None => format!("autocode {}", self.event.as_str()),
        }
    }
}

/// Which channel a delivery went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Command,
    Webhook,
    Desktop,
}

/// What became of one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Delivered,
    Failed {
        reason: String,
    },
    TimedOut {
        after_ms: u64,
    },
    /// `desktop = true` without a session bus.
    Skipped {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    pub channel: Channel,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Delivery {
    pub fn describe(&self) -> String {
        let channel = match self.channel {
            Channel::Command => "command",
            Channel::Webhook => "webhook",
            Channel::Desktop => "desktop",
        };
        match &self.outcome {
            Outcome::Delivered => format!("{channel}: delivered"),
            Outcome::Failed { reason } => format!("{channel}: failed: {reason}"),
            Outcome::TimedOut { after_ms } => format!("{channel}: timed out after {after_ms} ms"),
            Outcome::Skipped { reason } => format!("{channel}: skipped: {reason}"),
        }
    }
}

/// Sends `note` through every configured channel at once, each within the configured timeout,
/// and returns what became of each. Never fails: a channel's failure is its outcome.
pub async fn send(
    config: &NotifyConfig,
    note: &Notification,
    env: &BTreeMap<String, String>,
) -> Vec<Delivery> {
    let timeout = config.timeout();
    let command = async {
        let argv = config.command.as_ref()?;
        Some(Delivery {
            channel: Channel::Command,
            outcome: run_argv(&note.fill(argv), &note.workspace, timeout).await,
        })
    };
    let webhook = async {
        let url = config.webhook.clone()?;
        Some(Delivery {
            channel: Channel::Webhook,
            outcome: post(url, config.format, note.clone(), timeout).await,
        })
    };
    let desktop = async {
        if !config.desktop {
            return None;
        }
        let outcome = if env
            .get("DBUS_SESSION_BUS_ADDRESS")
            .is_some_and(|v| !v.is_empty())
        {
            let argv = vec!["notify-send".to_owned(), note.title(), note.summary.clone()];
            run_argv(&argv, &note.workspace, timeout).await
        } else {
            Outcome::Skipped {
                reason: "no session bus (DBUS_SESSION_BUS_ADDRESS is not set)".into(),
            }
        };
        Some(Delivery {
            channel: Channel::Desktop,
            outcome,
        })
    };
    let (a, b, c) = tokio::join!(command, webhook, desktop);
    [a, b, c].into_iter().flatten().collect()
}

fn timed_out(started: Instant) -> Outcome {
    Outcome::TimedOut {
        after_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// Runs `argv` (no shell) as a plain child; killed when the timeout ends it.
async fn run_argv(argv: &[String], cwd: &Path, timeout: Duration) -> Outcome {
    let Some((program, rest)) = argv.split_first() else {
        return Outcome::Failed {
            reason: "empty argv".into(),
        };
    };
    let program = OsString::from(program);
    let rest: Vec<OsString> = rest.iter().map(OsString::from).collect();
    let cwd = if cwd.is_dir() { cwd } else { Path::new("/") };
    let started = Instant::now();
    let run = crate::supervise::run_in_current_family(&program, &rest, cwd, 64 << 10);
    match tokio::time::timeout(timeout, run).await {
        Err(_) => timed_out(started),
        Ok(Err(e)) => Outcome::Failed {
            reason: e.to_string(),
        },
        Ok(Ok(out)) => match out.exit {
            crate::supervise::Exit::Code(0) => Outcome::Delivered,
            other => Outcome::Failed {
                reason: format!(
                    "{} exited {other:?}: {}",
                    program.to_string_lossy(),
                    crate::term_text::terminal_safe(String::from_utf8_lossy(&out.stderr).trim())
                ),
            },
        },
    }
}

/// The webhook POST, on a blocking thread with the whole request bounded by `timeout`.
async fn post(
    url: String,
    format: WebhookFormat,
    note: Notification,
    timeout: Duration,
) -> Outcome {
    let started = Instant::now();
    let request = tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(timeout))
            .user_agent(concat!("autocode/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        let sent = match format {
            WebhookFormat::Ntfy => agent
                .post(&url)
                .header("Title", note.title())
                .header(
                    "Priority",
                    if note.event == NotifyEvent::NeedsPerson {
                        "high"
                    } else {
                        "default"
                    },
                )
                .header("Tags", note.event.as_str())
                .send(note.summary.as_bytes()),
            WebhookFormat::Json => agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(serde_json::to_vec(&note).unwrap_or_default().as_slice()),
        };
        match sent {
            Ok(response) if response.status().is_success() => Outcome::Delivered,
            Ok(response) => Outcome::Failed {
                reason: format!("HTTP {}", response.status()),
            },
            Err(ureq::Error::Timeout(_)) => timed_out(started),
            Err(e) => Outcome::Failed {
                reason: e.to_string(),
            },
        }
    });
    // The blocking thread ends by ureq's own timeout; this bound is the caller's.
    match tokio::time::timeout(timeout + Duration::from_millis(500), request).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => Outcome::Failed {
            reason: e.to_string(),
        },
        Err(_) => timed_out(started),
    }
}

/// Writes each delivery as an `activity.jsonl` line of the run in `run_dir`.
pub fn record(run_dir: &Path, event: NotifyEvent, deliveries: &[Delivery]) {
    #[derive(Serialize)]
    struct Line {
        at: chrono::DateTime<chrono::Utc>,
        event: String,
        detail: String,
    }
    for delivery in deliveries {
        let line = Line {
            at: chrono::Utc::now(),
            event: format!("notify {}", event.as_str()),
            detail: delivery.describe(),
        };
        if let Err(e) = crate::store::append_json_line_as(
            &run_dir.join("activity.jsonl"),
            &line,
            crate::store::Durability::Now,
        ) {
            tracing::warn!(error = %e, "cannot record a notification in the activity log");
        }
    }
}

#[cfg(test)]
mod tests;
