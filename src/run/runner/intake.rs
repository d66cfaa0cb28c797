//! Where a stage's events go as they arrive, whichever way they come (a CLI's stdout lines
//! through its parser, or an ACP session's lines and autocode's own served events): the live
//! progress, the command records the judgement reads, the failed commands the room's refusals
//! are read from, `events.jsonl`, and the run's token budget (over it, the family is cancelled).

use super::attempt::keep_failed_command;
use super::judge::command_record;
use crate::events::{self, AnyParser, NormalizedEvent, StreamParser};
use crate::report::evidence::CommandRecord;
use crate::run::progress::StageProgress;
use crate::supervise::Canceller;

pub(super) struct Intake<'a> {
    pub(super) parser: Option<AnyParser>,
    pub(super) progress: &'a mut StageProgress,
    pub(super) records: Vec<CommandRecord>,
    /// Failed commands, a few, for the room's refusals (`run::room_refusal`).
    pub(super) failed_commands: Vec<NormalizedEvent>,
    pub(super) events_log: Option<std::io::BufWriter<std::fs::File>>,
    pub(super) over_budget: bool,
    /// Some usage event came (from the agent's stream or autocode).
    pub(super) usage_seen: bool,
    tokens_seen: u64,
    tokens_left: Option<u64>,
    canceller: Canceller,
    batch: Vec<NormalizedEvent>,
}

impl<'a> Intake<'a> {
    pub(super) fn new(
        parser: Option<AnyParser>,
        progress: &'a mut StageProgress,
        events_log: Option<std::io::BufWriter<std::fs::File>>,
        tokens_left: Option<u64>,
        canceller: Canceller,
    ) -> Self {
        Intake {
            parser,
            progress,
            records: Vec::new(),
            failed_commands: Vec::new(),
            events_log,
            over_budget: false,
            usage_seen: false,
            tokens_seen: 0,
            tokens_left,
            canceller,
            batch: Vec::new(),
        }
    }

    /// One line of the agent's stdout (`Some(bytes)`: longer than `cap`, discarded).
    pub(super) fn line(&mut self, line: &[u8], oversized: Option<u64>, cap: usize) {
        let Some(parser) = self.parser.as_mut() else {
            return;
        };
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        match oversized {
            Some(bytes) => StreamParser::feed_oversized_line_into(parser, bytes, cap, &mut batch),
            None => StreamParser::feed_line_into(parser, line, &mut batch),
        }
        for event in batch.drain(..) {
            self.event(event);
        }
        self.batch = batch;
    }

    /// One event, from the parser or from autocode itself.
    pub(super) fn event(&mut self, event: NormalizedEvent) {
        self.progress.event(&event);
        if let Some(record) = command_record(&event) {
            self.records.push(record);
        }
        keep_failed_command(&mut self.failed_commands, &event);
        if let NormalizedEvent::Usage { usage } = &event {
            self.usage_seen = true;
            self.tokens_seen += usage.total_tokens();
            if self.tokens_left.is_some_and(|left| self.tokens_seen > left) && !self.over_budget {
                self.over_budget = true;
                self.canceller.cancel();
            }
        }
        write_event(&mut self.events_log, &event);
    }

    /// Reads a CLI's stdout to its end.
    pub(super) async fn read_stdout(&mut self, stdout: crate::supervise::StageStdout, cap: usize) {
        let mut reader = tokio::io::BufReader::with_capacity(1 << 16, stdout);
        let mut line = Vec::new();
        loop {
            // At most `cap` bytes are ever held: a longer line is read and dropped in pieces,
            // and reported with its length.
            match events::read_line_capped(&mut reader, &mut line, cap).await {
                Ok(events::LiveLine::End) | Err(_) => break,
                Ok(events::LiveLine::Complete) => self.line(&line, None, cap),
                Ok(events::LiveLine::Oversized { bytes }) => self.line(&[], Some(bytes), cap),
            }
        }
    }
}

pub(super) fn write_event(
    log: &mut Option<std::io::BufWriter<std::fs::File>>,
    event: &NormalizedEvent,
) {
    use std::io::Write;
    if let Some(writer) = log.as_mut()
        && serde_json::to_writer(&mut *writer, event).is_ok()
    {
        let _ = writer.write_all(b"\n");
    }
}
