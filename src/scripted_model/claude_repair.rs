//! Claude Code's "double-escaped unicode" repair, undone in advance: Claude Code 2.1.328 decodes
//! every `\uXXXX` in the string values of a tool call's input (Write's `content`, Bash's
//! `command`, the structured report) before the tool runs, unless an odd number of backslashes
//! precedes it, the string looks like a Windows path, or the code point is a control character
//! or a lone surrogate (`tengu_repair_double_escaped_unicode` in its bundle). A script that writes
//! `/[\u0021-\u007E]/` into a JavaScript file would get `/[!-~]/` on disk. So that a script's
//! text reaches files byte for byte, the scripted model spells the backslash of each `\uXXXX`
//! Claude Code would decode as `\u005C`, which the repair turns back into the backslash.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Rewrites every string in `value` so that Claude Code's repair yields the original string.
pub fn shield(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(shielded) = shielded(text) {
                *text = shielded;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(shield),
        Value::Object(map) => map.values_mut().for_each(shield),
        _ => {}
    }
}

/// `text` with the backslash of each `\uXXXX` the repair would decode spelled `\u005C`; `None`
/// when the repair leaves `text` alone.
fn shielded(text: &str) -> Option<String> {
    if !text.contains("\\u") || looks_like_a_windows_path(text) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    let mut changed = false;
    let mut backslashes = 0usize;
    let mut last = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && backslashes.is_multiple_of(2)
            && bytes.get(i + 1) == Some(&b'u')
            && bytes
                .get(i + 2..i + 6)
                .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit))
        {
            out.push_str(&text[last..i]);
            out.push_str("\\u005C");
            last = i + 1;
            changed = true;
            // The escape's `u` and hex digits are no backslashes: the count starts over after it.
            i += 6;
            backslashes = 0;
            continue;
        }
        backslashes = if bytes[i] == b'\\' {
            backslashes + 1
        } else {
            0
        };
        i += 1;
    }
    out.push_str(&text[last..]);
    changed.then_some(out)
}

/// Claude Code's test for a string it leaves alone (a drive letter, `C:\\` or `c:/`, or a
/// UNC-like `\\\\host\\` after a space, a quote or `=`), as its bundle spells it but for the
/// lookahead `(?!\\)`, spelled as a following character that is no backslash, or the end.
static WINDOWS_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|[^A-Za-z])[A-Za-z]:[\\/]|(?:^|[\s"'=])\\\\[^\s\\/]+[\\/](?:[^\\]|$)"#)
        .expect("literal regex is valid")
});

fn looks_like_a_windows_path(text: &str) -> bool {
    WINDOWS_PATH.is_match(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claude Code's repair, as its bundle spells it (for `javaScriptSource: false`).
    fn claude_repair(text: &str) -> String {
        if !text.contains("\\u") || looks_like_a_windows_path(text) {
            return text.to_owned();
        }
        let re = regex::Regex::new(
            r"\\u([dD][89aAbB][0-9a-fA-F]{2})\\u([dD][c-fC-F][0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})",
        )
        .unwrap();
        let mut out = String::new();
        let mut last = 0;
        for caps in re.captures_iter(text) {
            let m = caps.get(0).unwrap();
            let preceding = text[..m.start()]
                .bytes()
                .rev()
                .take_while(|b| *b == b'\\')
                .count();
            out.push_str(&text[last..m.start()]);
            last = m.end();
            if !preceding.is_multiple_of(2) {
                out.push_str(m.as_str());
                continue;
            }
            if let (Some(high), Some(low)) = (caps.get(1), caps.get(2)) {
                let units = [
                    u16::from_str_radix(high.as_str(), 16).unwrap(),
                    u16::from_str_radix(low.as_str(), 16).unwrap(),
                ];
                out.push_str(&String::from_utf16(&units).unwrap());
                continue;
            }
            let q = u32::from_str_radix(&caps[3], 16).unwrap();
            if (0xD800..=0xDFFF).contains(&q) || q <= 31 || (127..=159).contains(&q) {
                out.push_str(m.as_str());
            } else {
                out.push(char::from_u32(q).unwrap());
            }
        }
        out.push_str(&text[last..]);
        out
    }

    #[test]
    fn the_repair_gives_back_every_original_text() {
        let texts = [
            r"var re = /^[\u0021\u0023-\u002B\u002D-\u003A]*$/;",
            r"printf '\u00e9' # \\u0041 stays \\\u0042",
            r"\uD83D\uDE00 a pair, \uD83D alone, \u0000 a control, \u009f too",
            r"\u005C\u005c\\\\u0021",
            "no escapes at all",
            r"C:\temp\u0021 is a Windows path: left alone",
            r#"x = "\\server\share\u0021""#,
            r"tail \u12",
            r"\u0021",
        ];
        for text in texts {
            let mut value = Value::String(text.to_owned());
            shield(&mut value);
            let sent = value.as_str().unwrap();
            assert_eq!(claude_repair(sent), text, "sent {sent:?}");
        }
        // Without the shield the repair changes the first text: the test has teeth.
        assert_ne!(claude_repair(texts[0]), texts[0]);
    }

    #[test]
    fn nested_values_are_shielded_and_others_kept() {
        let mut value = serde_json::json!({"a": [r"\u0041", 1, null], "b": {"c": r"\u0042"}});
        shield(&mut value);
        assert_eq!(value["a"][0], r"\u005Cu0041");
        assert_eq!(value["a"][1], 1);
        assert_eq!(value["b"]["c"], r"\u005Cu0042");
    }
}
