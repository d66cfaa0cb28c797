//! Stop requests while a run is driven: SIGINT, SIGTERM and SIGHUP are watched once per
//! process; the first one ends the running attempt and pauses the run (`PAUSED_INTERRUPTED`),
//! a second one stops autocode at once.

/// The first stop request (SIGINT, SIGTERM, SIGHUP) seen while a run is driven.
struct Interrupt {
    signal: std::sync::OnceLock<&'static str>,
    notify: tokio::sync::Notify,
}

fn interrupt() -> &'static Interrupt {
    static INTERRUPT: std::sync::OnceLock<Interrupt> = std::sync::OnceLock::new();
    INTERRUPT.get_or_init(|| Interrupt {
        signal: std::sync::OnceLock::new(),
        notify: tokio::sync::Notify::new(),
    })
}

/// Starts (once per process) watching SIGINT, SIGTERM and SIGHUP. The first one ends the
/// running attempt and pauses the run; a second one stops autocode at once (exit 130), and the
/// keeper ends whatever family is left.
pub(super) fn watch_stop_signals() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    _ = int.recv() => "SIGINT",
                    _ = term.recv() => "SIGTERM",
                    _ = hup.recv() => "SIGHUP",
                };
                if interrupt().signal.set(name).is_err() {
                    std::process::exit(130);
                }
                interrupt().notify.notify_waiters();
            }
        });
    });
}

/// The stop request already received, if any.
pub(super) fn stop_requested() -> Option<&'static str> {
    interrupt().signal.get().copied()
}

/// Resolves with the signal's name once autocode is asked to stop.
pub(super) async fn interrupted() -> &'static str {
    loop {
        let notified = interrupt().notify.notified();
        if let Some(name) = stop_requested() {
            return name;
        }
        notified.await;
    }
}
