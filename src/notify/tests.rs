//! Tests of `notify`.

use super::*;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

fn config_from(text: &str) -> Result<NotifyConfig, NotifyConfigError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).expect("write");
    NotifyConfig::load(&path)
}

fn note(event: NotifyEvent) -> Notification {
    Notification {
        event,
        run_id: Some(RunId::new("20260101-000000-abcdef").expect("id")),
        code: Some(PauseCode::AwaitingPlanApproval),
        workspace: std::env::temp_dir(),
        summary: "plan waits; $(touch pwned) `x` ; rm -rf /".into(),
        url: "file:///runs/x".into(),
    }
}

#[test]
fn the_notify_table_is_read_with_its_events_and_bad_tables_are_refused() {
    let config = config_from(
        "default_provider = \"codex\"\n[notify]\ncommand = [\"echo\", \"{event}\"]\nwebhook = \"http://127.0.0.1:9/t\"\nformat = \"json\"\ndesktop = true\nevents = [\"needs_person\", \"failed\"]\ntimeout_seconds = 99\n",
    )
    .expect("valid");
    assert_eq!(config.format, WebhookFormat::Json);
    assert!(config.desktop && config.any_channel());
    assert!(config.wants(NotifyEvent::NeedsPerson) && config.wants(NotifyEvent::Failed));
    assert!(!config.wants(NotifyEvent::Complete) && !config.wants(NotifyEvent::Paused));
    assert!(config.wants(NotifyEvent::Test));
    assert_eq!(config.timeout(), MAX_TIMEOUT, "the timeout is capped");

    let none = config_from("default_provider = \"codex\"\n").expect("no table");
    assert!(!none.any_channel());
    assert!(none.wants(NotifyEvent::Complete), "every event by default");
    let absent = NotifyConfig::load(Path::new("/nonexistent/autocode/config.toml"));
    assert_eq!(absent.expect("absent file"), NotifyConfig::default());

    for bad in [
        "[notify]\ncommand = []\n",
        "[notify]\nwebhook = \"ftp://x\"\n",
        "[notify]\nevents = [\"sometimes\"]\n",
        "[notify]\nwebhok = \"http://x\"\n",
    ] {
        let e = config_from(bad).expect_err(bad);
        assert!(e.to_string().contains("[notify]"), "{bad}: {e}");
    }
}

#[test]
fn pauses_that_wait_for_a_person_are_needs_person_and_others_paused() {
    for code in [
        PauseCode::WaitingForUser,
        PauseCode::AwaitingPlanApproval,
        PauseCode::AwaitingHumanReview,
        PauseCode::AwaitingTestChangeReview,
    ] {
        assert_eq!(NotifyEvent::of_pause(code), NotifyEvent::NeedsPerson);
    }
    assert_eq!(
        NotifyEvent::of_pause(PauseCode::PausedRateLimit),
        NotifyEvent::Paused
    );
}

#[test]
fn placeholders_fill_whole_words_and_never_split_them() {
    let filled = note(NotifyEvent::NeedsPerson).fill(&[
        "tool".into(),
        "--event={event}".into(),
        "{summary}".into(),
        "{code} {run_id}".into(),
    ]);
    assert_eq!(filled.len(), 4);
    assert_eq!(filled[1], "--event=needs_person");
    assert_eq!(filled[2], "plan waits; $(touch pwned) `x` ; rm -rf /");
    assert_eq!(filled[3], "AWAITING_PLAN_APPROVAL 20260101-000000-abcdef");
}

/// A loopback HTTP listener: sends each request's head and body; answers 200, or holds the
/// connection open without a word when `hang`.
async fn webhook(hang: bool) -> (String, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/topic", listener.local_addr().expect("addr"));
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut bytes = Vec::new();
            let mut buf = [0u8; 4096];
            let head_end = loop {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => bytes.extend_from_slice(&buf[..n]),
                }
                if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(at + 4);
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            while bytes.len() < head_end + length {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => bytes.extend_from_slice(&buf[..n]),
                }
            }
            let _ = tx.send((head, bytes[head_end..].to_vec()));
            if hang {
                held.push(socket);
            } else {
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            }
        }
    });
    (url, rx)
}

#[tokio::test]
async fn an_ntfy_webhook_gets_the_summary_with_title_and_priority() {
    let (url, mut requests) = webhook(false).await;
    let config = NotifyConfig {
        webhook: Some(url),
        ..NotifyConfig::default()
    };
    let deliveries = send(&config, &note(NotifyEvent::NeedsPerson), &BTreeMap::new()).await;
    assert_eq!(
        deliveries,
        [Delivery {
            channel: Channel::Webhook,
            outcome: Outcome::Delivered
        }]
    );
    let (head, body) = requests.recv().await.expect("a request");
    assert!(head.starts_with("POST /topic "), "{head}");
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("title: autocode needs_person: 20260101-000000-abcdef"),
        "{head}"
    );
    assert!(head.contains("priority: high"), "{head}");
    assert_eq!(body, note(NotifyEvent::NeedsPerson).summary.as_bytes());
}

#[tokio::test]
async fn a_json_webhook_gets_the_notification_as_json() {
    let (url, mut requests) = webhook(false).await;
    let config = NotifyConfig {
        webhook: Some(url),
        format: WebhookFormat::Json,
        ..NotifyConfig::default()
    };
    let deliveries = send(&config, &note(NotifyEvent::Complete), &BTreeMap::new()).await;
    assert!(
        matches!(deliveries[0].outcome, Outcome::Delivered),
        "{deliveries:?}"
    );
    let (_, body) = requests.recv().await.expect("a request");
    let value: serde_json::Value = serde_json::from_slice(&body).expect("JSON body");
    assert_eq!(value["event"], "complete");
    assert_eq!(value["run_id"], "20260101-000000-abcdef");
    assert_eq!(value["code"], "AWAITING_PLAN_APPROVAL");
}

#[tokio::test]
async fn a_hanging_webhook_times_out_within_the_bound_and_the_other_channels_deliver() {
    let (url, mut requests) = webhook(true).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("record");
    let config = NotifyConfig {
        webhook: Some(url),
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            "printf '%s\\n' \"$@\" > \"$0\"".into(),
            record.display().to_string(),
            "{event}".into(),
            "{summary}".into(),
            "{url}".into(),
        ]),
        desktop: true,
        timeout_seconds: Some(1),
        ..NotifyConfig::default()
    };
    let started = Instant::now();
    let deliveries = send(&config, &note(NotifyEvent::Failed), &BTreeMap::new()).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    requests.recv().await.expect("the webhook was called");
    let outcome = |channel| {
        deliveries
            .iter()
            .find(|d| d.channel == channel)
            .map(|d| d.outcome.clone())
    };
    assert!(
        matches!(outcome(Channel::Webhook), Some(Outcome::TimedOut { .. })),
        "{deliveries:?}"
    );
    assert_eq!(outcome(Channel::Command), Some(Outcome::Delivered));
    assert!(
        matches!(outcome(Channel::Desktop), Some(Outcome::Skipped { .. })),
        "no session bus in the test's environment: {deliveries:?}"
    );
    let recorded = std::fs::read_to_string(&record).expect("the command ran");
    assert_eq!(
        recorded,
        "failed\nplan waits; $(touch pwned) `x` ; rm -rf /\nfile:///runs/x\n"
    );
}

#[tokio::test]
async fn a_failing_command_is_a_failed_delivery_not_an_error() {
    let config = NotifyConfig {
        command: Some(vec!["/nonexistent/notifier".into()]),
        ..NotifyConfig::default()
    };
    let deliveries = send(&config, &note(NotifyEvent::Paused), &BTreeMap::new()).await;
    assert!(
        matches!(deliveries[0].outcome, Outcome::Failed { .. }),
        "{deliveries:?}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    record(dir.path(), NotifyEvent::Paused, &deliveries);
    let log = std::fs::read_to_string(dir.path().join("activity.jsonl")).expect("activity");
    let line: serde_json::Value = serde_json::from_str(log.trim()).expect("one line");
    assert_eq!(line["event"], "notify paused");
    assert!(
        line["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("command: failed")),
        "{line}"
    );
}
