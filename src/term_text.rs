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
    if !has_control(text.as_bytes()) {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.chars().filter(|&c| allowed(c)).collect())
    }
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
                let refused = match b {
                    b'\n' | b'\t' => false,
                    0..0x20 | 0x7f => true,
                    0xc2 => bytes
                        .get(start + offset + 1)
                        .is_some_and(|next| (0x80..=0x9f).contains(next)),
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
                proptest::prop_oneof![0u32..0x100, 0x100u32..0x800, 0x2000u32..0x2100],
                0..48,
            )
        ) {
            let text: String = chars.into_iter().filter_map(char::from_u32).collect();
            proptest::prop_assert_eq!(has_control(text.as_bytes()), !text.chars().all(allowed));
        }
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(terminal_safe("nothing to do"), Cow::Borrowed(_)));
    }
}
