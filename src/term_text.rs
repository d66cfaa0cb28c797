//! Strings bound for a terminal. Text that comes from agents, reports, streams, objectives or
//! files may carry escape sequences (cursor moves, window titles, OSC 8 links, hidden text); a
//! terminal would obey them. [`terminal_safe`] removes every C0 and C1 control character except
//! newline and tab, which is what reaches a person's screen. `--json` output needs nothing from
//! here: JSON escapes control characters itself.

use std::borrow::Cow;

/// Whether `c` may reach a terminal: printable text, newline and tab.
fn allowed(c: char) -> bool {
    c == '\n' || c == '\t' || !(c.is_control())
}

/// `text` without C0/C1 control characters (ESC, BEL, CSI, OSC, DEL, CR…), newline and tab kept.
/// Borrowed when there was nothing to remove.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if text.chars().all(allowed) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.chars().filter(|&c| allowed(c)).collect())
    }
}

/// Writes `text` and a newline on stderr, stripped by [`terminal_safe`]. A closed or broken
/// stderr is ignored (`eprintln!` would panic on a closed pipe): nothing autocode records
/// depends on whether someone still reads. The command line's `say!` uses it; so do the modules
/// outside the command line that must speak to a person.
pub fn say_line(text: &str) {
    use std::io::Write;
    let text = terminal_safe(text);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_lose_their_control_characters() {
        let cases = [
            ("plain text", "plain text"),
            ("tab\tand\nnewline", "tab\tand\nnewline"),
            ("\u{1b}]0;owned\u{7}title", "]0;ownedtitle"),
            ("\u{1b}[2K\u{1b}[1Aup", "[2K[1Aup"),
            ("c1 \u{9b}31m csi", "c1 31m csi"),
            ("cr\roverwrite", "croverwrite"),
            ("del\u{7f}", "del"),
            ("nul\u{0}", "nul"),
            ("ünïcode ✓", "ünïcode ✓"),
        ];
        for (input, expected) in cases {
            assert_eq!(terminal_safe(input), expected, "{input:?}");
        }
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(terminal_safe("nothing to do"), Cow::Borrowed(_)));
    }
}
