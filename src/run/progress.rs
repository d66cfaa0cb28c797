//! The observer seam for live progress: what the engine tells whoever shows a run to a person
//! while a stage runs (its start, its activity — tokens so far, the command now running, the
//! last event — and its end). The engine only emits; rendering lives in `cli::progress`.
//!
//! A runner holds an optional [`ProgressSink`]; each attempt takes a [`StageProgress`] guard
//! whose drop reports the stage's end, so an attempt cut off by Ctrl-C (its future dropped)
//! still ends its live line.

use std::sync::Arc;

use crate::events::NormalizedEvent;
use crate::role::Role;

/// The width of the stage column of a run's stage lines (fits `006-completion_reviewer-10`).
pub const STAGE_COLUMN: usize = 26;
/// The width of the route column; a longer route is cut with `…`.
pub const ROUTE_COLUMN: usize = 20;

/// `route` in its column: padded, or cut to the column with `…` at its end.
pub fn route_cell(route: &str) -> String {
    let count = route.chars().count();
    if count <= ROUTE_COLUMN {
        format!("{route:<ROUTE_COLUMN$}")
    } else {
        let head: String = route.chars().take(ROUTE_COLUMN - 1).collect();
        format!("{head}…")
    }
}

/// A finished attempt's line for people: stage, route, seconds and tokens in columns that fit
/// 80 with a one-word outcome, then the outcome (a rejection's reason may run on).
pub fn stage_line(dir: &str, route: &str, seconds: f64, tokens: u64, outcome: &str) -> String {
    format!(
        "{dir:<STAGE_COLUMN$} {} {seconds:>6.1}s {tokens:>7} tok  {outcome}",
        route_cell(route)
    )
}

/// A stage that just started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageStart {
    /// The attempt's directory name (`004-builder-1`).
    pub dir: String,
    pub role: Role,
    /// `provider/model`.
    pub route: String,
}

/// Something a running stage did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageActivity {
    /// The stage's tokens so far (input, cache and output).
    Tokens(u64),
    /// A shell command started (or ended, for CLIs that only announce ends).
    Command(String),
    /// Any other event, in a few words (`tool read`, `text`, `retry 2/5`).
    Event(String),
}

/// Receives a run's progress. Implementations must be cheap: they are called from the stream
/// reader for every event.
pub trait ProgressSink: Send + Sync {
    fn stage_started(&self, stage: &StageStart);
    fn stage_activity(&self, dir: &str, activity: &StageActivity);
    fn stage_ended(&self, dir: &str);
}

/// One attempt's progress handle: reports activity, and the stage's end when dropped.
pub struct StageProgress {
    sink: Option<Arc<dyn ProgressSink>>,
    dir: String,
    tokens: u64,
}

impl StageProgress {
    /// Reports `stage` as started (nothing without a sink).
    pub fn start(sink: Option<Arc<dyn ProgressSink>>, stage: StageStart) -> Self {
        if let Some(sink) = &sink {
            sink.stage_started(&stage);
        }
        Self {
            sink,
            dir: stage.dir,
            tokens: 0,
        }
    }

    /// Reports what `event` says about the stage's progress.
    pub fn event(&mut self, event: &NormalizedEvent) {
        let Some(sink) = &self.sink else {
            return;
        };
        let activity = match event {
            NormalizedEvent::Usage { usage } => {
                self.tokens += [
                    usage.input_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                    usage.output_tokens,
                ]
                .into_iter()
                .flatten()
                .sum::<u64>();
                StageActivity::Tokens(self.tokens)
            }
            NormalizedEvent::CommandStarted { command, .. }
            | NormalizedEvent::CommandFinished { command, .. } => {
                StageActivity::Command(command.clone())
            }
            other => match describe(other) {
                Some(text) => StageActivity::Event(text),
                None => return,
            },
        };
        sink.stage_activity(&self.dir, &activity);
    }
}

impl Drop for StageProgress {
    fn drop(&mut self) {
        if let Some(sink) = &self.sink {
            sink.stage_ended(&self.dir);
        }
    }
}

/// A few words for an event that is neither usage nor a command.
fn describe(event: &NormalizedEvent) -> Option<String> {
    Some(match event {
        NormalizedEvent::SessionStarted { .. } => "session started".into(),
        NormalizedEvent::Text { is_final: true, .. } => "final report".into(),
        NormalizedEvent::Text { .. } => "writing".into(),
        NormalizedEvent::Reasoning { .. } => "thinking".into(),
        NormalizedEvent::ToolUse { tool, .. } => format!("tool {tool}"),
        NormalizedEvent::FileChange { path, .. } => format!("edited {path}"),
        NormalizedEvent::PermissionDenied { tool, .. } => format!("denied {tool}"),
        NormalizedEvent::Retry {
            attempt,
            max_retries,
            ..
        } => match (attempt, max_retries) {
            (Some(a), Some(m)) => format!("model request retry {a}/{m}"),
            _ => "model request retry".into(),
        },
        NormalizedEvent::ProviderError { .. } => "provider error".into(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stage_line_fits_80_columns_with_the_longest_stage_and_a_long_route() {
        let line = super::stage_line(
            "006-completion_reviewer-10",
            "opencode/openai/gpt-6-sol-preview-2026",
            1234.5,
            9_999_999,
            "accepted",
        );
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}",
            line.chars().count()
        );
        assert!(line.contains("opencode/openai/gpt…"), "{line}");
        assert!(line.ends_with(" tok  accepted"), "{line}");
        // Short routes are padded, so the columns line up.
        let short = super::stage_line("001-planner-1", "p/m", 1.0, 12, "accepted");
        let column = |text: &str| text.split(" tok ").next().map(|head| head.chars().count());
        assert_eq!(column(&short), column(&line), "{short}\n{line}");
    }

    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl ProgressSink for Recorder {
        fn stage_started(&self, stage: &StageStart) {
            self.0.lock().unwrap().push(format!("start {}", stage.dir));
        }
        fn stage_activity(&self, dir: &str, activity: &StageActivity) {
            self.0.lock().unwrap().push(format!("{dir} {activity:?}"));
        }
        fn stage_ended(&self, dir: &str) {
            self.0.lock().unwrap().push(format!("end {dir}"));
        }
    }

    #[test]
    fn a_stage_reports_start_activity_and_end_on_drop() {
        let recorder = Arc::new(Recorder::default());
        let sink: Arc<dyn ProgressSink> = recorder.clone();
        let mut progress = StageProgress::start(
            Some(sink),
            StageStart {
                dir: "004-builder-1".into(),
                role: Role::Builder,
                route: "p/m".into(),
            },
        );
        let usage = |n| NormalizedEvent::Usage {
            usage: crate::events::Usage {
                output_tokens: Some(n),
                ..Default::default()
            },
        };
        progress.event(&usage(10));
        progress.event(&usage(5));
        progress.event(&NormalizedEvent::Reasoning { text: "x".into() });
        drop(progress);
        assert_eq!(
            *recorder.0.lock().unwrap(),
            [
                "start 004-builder-1",
                "004-builder-1 Tokens(10)",
                "004-builder-1 Tokens(15)",
                "004-builder-1 Event(\"thinking\")",
                "end 004-builder-1",
            ]
        );
    }
}
