//! Showing a run to a person while it runs: the renderer behind the engine's
//! [`ProgressSink`] and the driver's notes.
//!
//! - **Live** (stderr is a terminal, not `--json`, `TERM` is not `dumb`): each running stage has
//!   one line redrawn in place by `indicatif` — stage, route, elapsed, tokens so far, the command
//!   now running or the last event; a finished stage's line is replaced by its permanent line
//!   (the driver's note), printed above the live lines. Colour through `anstyle`, when
//!   `anstream` says the terminal takes it (`NO_COLOR`, `CLICOLOR`, `CLICOLOR_FORCE`).
//! - **Plain** (not a terminal, or `--json`): one line when a stage starts and the driver's line
//!   when it ends; never colour.
//! - **Quiet** (`-q`): nothing but the outcome, which `cli::run` prints itself.
//!
//! Every string shown passes [`terminal_safe`]; colour is added after, so only autocode's own
//! escape sequences reach the terminal. A closed or broken stderr is ignored.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::output::say_line;
use crate::run::progress::{ProgressSink, STAGE_COLUMN, StageActivity, StageStart, route_cell};
use crate::term_text::terminal_safe;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Live,
    Plain,
    Quiet,
}

impl Mode {
    /// The mode for this process: quiet when asked, live on a terminal (not with `--json`).
    pub fn detect(quiet: bool, json: bool) -> Self {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        if quiet {
            Mode::Quiet
        } else if !json && !dumb && std::io::stderr().is_terminal() {
            Mode::Live
        } else {
            Mode::Plain
        }
    }
}

/// Whether stderr takes colour: only in live mode, and only when `anstream` says so.
fn colour_for(mode: Mode) -> bool {
    mode == Mode::Live
        && anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// One running stage's live line and what it shows.
struct LiveStage {
    bar: ProgressBar,
    tokens: u64,
    last: Option<String>,
}

/// The renderer: the engine's progress sink and the sink of the driver's notes.
pub struct Progress {
    mode: Mode,
    colour: bool,
    multi: Option<MultiProgress>,
    stages: Mutex<BTreeMap<String, LiveStage>>,
}

impl Progress {
    pub fn new(mode: Mode) -> Arc<Self> {
        let multi = (mode == Mode::Live)
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(10)));
        Arc::new(Self {
            mode,
            colour: colour_for(mode),
            multi,
            stages: Mutex::new(BTreeMap::new()),
        })
    }

    /// [`Progress::new`] with the mode this process calls for.
    pub fn detect(quiet: bool, json: bool) -> Arc<Self> {
        Self::new(Mode::detect(quiet, json))
    }

    fn stages(&self) -> MutexGuard<'_, BTreeMap<String, LiveStage>> {
        // A panic elsewhere while holding the lock leaves plain data behind: keep using it.
        self.stages.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn paint(&self, style: Style, text: &str) -> String {
        if self.colour {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }

    /// A permanent line for people (a finished stage, a route, a warning). Quiet drops it.
    pub fn note(&self, line: &str) {
        match self.mode {
            Mode::Quiet => {}
            Mode::Plain => say_line(line),
            Mode::Live => {
                let line = self.colour_note(&terminal_safe(line));
                self.above(&line);
            }
        }
    }

    /// Prints `line` (already safe) above the live lines.
    fn above(&self, line: &str) {
        match &self.multi {
            Some(multi) if !self.stages().is_empty() => {
                let _ = multi.println(line);
            }
            _ => {
                use std::io::Write;
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
        }
    }

    /// Colours the outcome word of a finished stage's line (`accepted`, `diagnosed`,
    /// `rejected:`, `stopped:`, which follow the tokens column); other lines stay as they are.
    fn colour_note(&self, line: &str) -> String {
        const OUTCOME_AFTER: &str = " tok  ";
        if !self.colour {
            return line.to_owned();
        }
        let Some(at) = line.find(OUTCOME_AFTER).map(|at| at + OUTCOME_AFTER.len()) else {
            return line.to_owned();
        };
        let (head, outcome) = line.split_at(at);
        for (word, colour) in [
            ("accepted", AnsiColor::Green),
            ("diagnosed", AnsiColor::Cyan),
            ("rejected:", AnsiColor::Yellow),
            ("stopped:", AnsiColor::Red),
        ] {
            if let Some(rest) = outcome.strip_prefix(word) {
                let style = Style::new().fg_color(Some(colour.into())).bold();
                return format!("{head}{}{rest}", self.paint(style, word));
            }
        }
        line.to_owned()
    }

    /// Runs `f` (a question on the terminal) with the live lines out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.multi {
            Some(multi) => multi.suspend(f),
            None => f(),
        }
    }

    fn live_message(stage: &LiveStage) -> String {
        let mut message = format!("{:>7} tok", stage.tokens);
        if let Some(last) = &stage.last {
            message.push_str("  ");
            message.push_str(&crate::term_text::abridge(
                last,
                LIVE_MAX,
                "`autocode events`",
            ));
        }
        message
    }
}

/// The longest command the live line shows whole.
const LIVE_MAX: usize = 120;

/// One line of `text`, safe for a terminal (agents' commands span lines and carry escapes).
fn one_line(text: &str) -> String {
    terminal_safe(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl ProgressSink for Progress {
    fn stage_started(&self, stage: &StageStart) {
        match self.mode {
            Mode::Quiet => {}
            // Only with `-v`: by default a stage is one line, its end. Not a row of the stage
            // table (which the finished lines make): a different shape.
            Mode::Plain if super::output::verbose() => say_line(&format!(
                "started {} on {}",
                stage.dir,
                one_line(&stage.route)
            )),
            Mode::Plain => {}
            Mode::Live => {
                let Some(multi) = &self.multi else { return };
                let prefix = format!(
                    "{} {}",
                    self.paint(
                        Style::new().bold(),
                        &format!("{:<width$}", stage.dir, width = STAGE_COLUMN)
                    ),
                    route_cell(&one_line(&stage.route))
                );
                // The finished line's columns, the spinner in front (`wide_msg` is cut to the
                // terminal's width, so the live line never wraps into debris).
                let style =
                    ProgressStyle::with_template("{spinner} {prefix} {elapsed:>6} {wide_msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner());
                let bar = ProgressBar::new_spinner()
                    .with_style(style)
                    .with_prefix(prefix);
                let mut live = LiveStage {
                    bar,
                    tokens: 0,
                    last: None,
                };
                // The first frame already has every column.
                live.bar.set_message(Self::live_message(&live));
                live.bar = multi.add(live.bar);
                live.bar.enable_steady_tick(Duration::from_millis(200));
                self.stages().insert(stage.dir.clone(), live);
            }
        }
    }

    fn stage_activity(&self, dir: &str, activity: &StageActivity) {
        if self.mode != Mode::Live {
            return;
        }
        let mut stages = self.stages();
        let Some(stage) = stages.get_mut(dir) else {
            return;
        };
        match activity {
            StageActivity::Tokens(tokens) => stage.tokens = *tokens,
            StageActivity::Command(command) => {
                stage.last = Some(format!("$ {}", one_line(command)))
            }
            StageActivity::Event(event) => stage.last = Some(one_line(event)),
        }
        stage.bar.set_message(Self::live_message(stage));
    }

    fn stage_ended(&self, dir: &str) {
        let Some(stage) = self.stages().remove(dir) else {
            return;
        };
        stage.bar.finish_and_clear();
        if let Some(multi) = &self.multi {
            multi.remove(&stage.bar);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::role::Role;

    #[test]
    fn quiet_and_plain_modes_keep_no_live_state() {
        for mode in [Mode::Quiet, Mode::Plain] {
            let progress = Progress::new(mode);
            progress.stage_started(&StageStart {
                dir: "001-planner-1".into(),
                role: Role::Planner,
                route: "p/m".into(),
            });
            progress.stage_activity("001-planner-1", &StageActivity::Tokens(5));
            assert!(progress.stages().is_empty());
            assert!(progress.multi.is_none());
            progress.stage_ended("001-planner-1");
        }
    }

    #[test]
    fn notes_are_coloured_only_with_colour_on() {
        let mut progress = Progress::new(Mode::Plain);
        let line = "004-builder-1              p/m                     1.0s      12 tok  accepted";
        assert_eq!(progress.colour_note(line), line);
        Arc::get_mut(&mut progress).unwrap().colour = true;
        let painted = progress.colour_note(line);
        assert!(painted.contains("\u{1b}["), "{painted:?}");
        assert_eq!(strip_ansi_escapes::strip_str(&painted), line);
    }

    #[test]
    fn a_long_command_on_the_live_line_is_abridged_with_a_pointer() {
        let stage = LiveStage {
            bar: ProgressBar::hidden(),
            tokens: 42,
            last: Some(one_line(&format!("pytest {}", "tests/x.py ".repeat(40)))),
        };
        let message = Progress::live_message(&stage);
        assert!(
            message.contains("more characters; full text: `autocode events`"),
            "{message}"
        );
        assert!(message.chars().count() < 200, "{message}");
        // Hidden bidi controls are shown, never obeyed.
        assert_eq!(one_line("rm \u{202E}fr-"), "rm <U+202E>fr-");
    }

    #[test]
    fn commands_shown_live_are_one_safe_line() {
        assert_eq!(one_line("cargo\n test \u{1b}]0;x\u{7}"), "cargo test ]0;x");
    }
}
