//! Strings bound for a terminal. Text that comes from agents, reports, streams, objectives or
//! files may carry escape sequences (cursor moves, window titles, OSC 8 links, hidden text); a
//! terminal would obey them. [`terminal_safe`] removes every C0 and C1 control character except
//! newline and tab, and shows the invisible characters that reorder or hide text — the bidi
//! controls (U+202A–202E, U+2066–2069, U+200E/F, U+061C) and the zero-width ones (U+200B–200D,
//! U+2060, U+FEFF) — as a visible `<U+XXXX>`, so a line cannot read differently on screen than
//! it is (a "Trojan source" plan or question). That is what reaches a person's screen. `--json`
//! output needs nothing from here: JSON escapes control characters itself, and data keeps its
//! characters.
//!
//! [`abridge`] cuts a line too long for a screen (a plan step, a question, a pause reason, a
//! status line) and ends it with where the full text is.

use std::borrow::Cow;

/// Whether `c` may reach a terminal as it is: printable, visible text, newline and tab.
fn allowed(c: char) -> bool {
    c == '\n' || c == '\t' || !(c.is_control() || invisible(c))
}

/// The bidi controls and zero-width characters: shown as `<U+XXXX>`, never passed through.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// `text` without C0/C1 control characters (ESC, BEL, CSI, OSC, DEL, CR…), newline and tab kept,
/// and with each bidi control or zero-width character shown as `<U+XXXX>`. Borrowed when there
/// was nothing to change.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !has_control(text.as_bytes()) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if invisible(c) {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else if allowed(c) {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The longest line [`abridge`] leaves whole, in characters.
pub const LINE_MAX: usize = 300;

/// `text` with every line longer than `max` characters cut to `max` and ended with
/// `… (N more characters; full text: <where>)`. Borrowed when no line is too long.
pub fn abridge<'a>(text: &'a str, max: usize, full_text: &str) -> Cow<'a, str> {
    if text.lines().all(|line| line.chars().count() <= max) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max * 4));
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let count = line.chars().count();
        if count <= max {
            out.push_str(line);
        } else {
            out.extend(line.chars().take(max));
            out.push_str(&format!(
                "… ({} more characters; full text: {full_text})",
                count - max
            ));
        }
    }
    Cow::Owned(out)
}

/// Whether UTF-8 `bytes` hold a character [`allowed`] refuses, by bytes rather than chars:
/// C0 controls but newline and tab and DEL are single bytes, and the C1 controls
/// (U+0080–U+009F) are `0xC2` followed by `0x80`–`0x9F`. Printable ASCII, the common case, is
/// passed over sixteen bytes at a time (a loop the compiler vectorizes).
fn has_control(bytes: &[u8]) -> bool {
    let suspect = |b: u8| !(0x20..0x7f).contains(&b);
    let mut start = 0;
    for chunk in bytes.chunks(16) {
        if chunk.iter().fold(false, |any, &b| any | suspect(b)) {
            for (offset, &b) in chunk.iter().enumerate() {
                let at = start + offset;
                let next = |n: usize| bytes.get(at + n).copied().unwrap_or(0);
                let refused = match b {
                    b'\n' | b'\t' => false,
                    0..0x20 | 0x7f => true,
                    0xc2 => (0x80..=0x9f).contains(&next(1)),
                    // U+061C (D8 9C).
                    0xd8 => next(1) == 0x9c,
                    // U+200B–200F (E2 80 8B–8F), U+202A–202E (E2 80 AA–AE), U+2060 and
                    // U+2066–2069 (E2 81 A0, A6–A9).
                    0xe2 => match (next(1), next(2)) {
                        (0x80, c) => (0x8b..=0x8f).contains(&c) || (0xaa..=0xae).contains(&c),
                        (0x81, c) => c == 0xa0 || (0xa6..=0xa9).contains(&c),
                        _ => false,
                    },
                    // U+FEFF (EF BB BF).
                    0xef => next(1) == 0xbb && next(2) == 0xbf,
                    _ => false,
                };
                if refused {
                    return true;
                }
            }
        }
        start += chunk.len();
    }
    false
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

    proptest::proptest! {
        #[test]
        fn the_byte_scan_agrees_with_the_char_test(text in "(?s).{0,64}") {
            proptest::prop_assert_eq!(has_control(text.as_bytes()), !text.chars().all(allowed));
        }

        #[test]
        fn the_byte_scan_agrees_on_controls_and_c1(
            chars in proptest::collection::vec(
                proptest::prop_oneof![
                    0u32..0x100,
                    0x100u32..0x800,
                    0x2000u32..0x2100,
                    0x600u32..0x620,
                    0xFEF0u32..0xFF00,
                ],
                0..48,
            )
        ) {
            let text: String = chars.into_iter().filter_map(char::from_u32).collect();
            proptest::prop_assert_eq!(has_control(text.as_bytes()), !text.chars().all(allowed));
        }
    }

    #[test]
    fn bidi_and_zero_width_characters_are_shown_not_obeyed() {
        let cases = [
            // A "Trojan source" line: the override would show `run tests` reversed in order.
            (
                "ok \u{202E}stset nur\u{202C} done",
                "ok <U+202E>stset nur<U+202C> done",
            ),
            ("\u{2066}iso\u{2069}", "<U+2066>iso<U+2069>"),
            (
                "a\u{200B}b\u{200C}c\u{200D}d",
                "a<U+200B>b<U+200C>c<U+200D>d",
            ),
            ("\u{FEFF}bom", "<U+FEFF>bom"),
            ("lrm\u{200E}rlm\u{200F}", "lrm<U+200E>rlm<U+200F>"),
            ("arabic mark\u{061C}", "arabic mark<U+061C>"),
            ("word\u{2060}joiner", "word<U+2060>joiner"),
            ("\u{202A}\u{202B}\u{202D}", "<U+202A><U+202B><U+202D>"),
            ("\u{1b}[31m\u{202E}x", "[31m<U+202E>x"),
            // Neighbours that are ordinary text stay.
            (
                "\u{2010}\u{2019}\u{2030}\u{2070}é",
                "\u{2010}\u{2019}\u{2030}\u{2070}é",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(terminal_safe(input), expected, "{input:?}");
        }
    }

    #[test]
    fn long_lines_are_abridged_with_a_pointer_to_the_full_text() {
        assert!(matches!(
            abridge("short\nlines", 10, "x"),
            Cow::Borrowed("short\nlines")
        ));
        let long = format!("{}\nnext", "é".repeat(25));
        assert_eq!(
            abridge(&long, 10, "autocode status r1 --json"),
            format!(
                "{}… (15 more characters; full text: autocode status r1 --json)\nnext",
                "é".repeat(10)
            )
        );
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(terminal_safe("nothing to do"), Cow::Borrowed(_)));
    }
}
