//! A small borrowing JSON cursor for the parsers' fast paths: it reads the common shapes of a
//! line without serde's per-field machinery and answers `None` whenever it is not certain what
//! serde_json would make of the input (an escaped key, a surrogate escape, a float where an
//! integer is expected, a duplicate field, deep nesting, any syntax error...). `None` never
//! means "malformed": the caller then parses the line with serde_json, which decides (and
//! words the error). So a fast path built on it can only be faster, never different, provided
//! each `Some` it returns is what serde_json would return (the callers' proptests check that).

use std::borrow::Cow;

/// Deeper values than this are left to serde_json (its own limit is 128).
const MAX_DEPTH: u32 = 100;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `word` that end a run of plain string content (a control character < 0x20,
/// `"` or `\`), flagged by their high bits. The lowest flag is exact (a borrow only disturbs
/// the bytes above a flagged one), so its byte is the first such byte; bytes >= 0x80 never
/// count.
pub(crate) fn string_special_mask(word: u64) -> u64 {
    let has_zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGHS;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    control | has_zero(word ^ (ONES * u64::from(b'"'))) | has_zero(word ^ (ONES * u64::from(b'\\')))
}

fn is_string_special(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// The index of the first control character, `"` or `\` in `bytes` from `from`, else the
/// length; eight bytes at a time.
pub(crate) fn find_string_special(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let Ok(chunk) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let mask = string_special_mask(u64::from_le_bytes(chunk));
        if mask != 0 {
            // The flag is a byte's high bit: bit 8k + 7 for byte k.
            return at + (mask.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    bytes[at..]
        .iter()
        .position(|&b| is_string_special(b))
        .map_or(bytes.len(), |offset| at + offset)
}

/// A position in one JSON text (a whole line, already known to be UTF-8).
pub(crate) struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Cursor<'a> {
        Cursor { text, at: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips JSON whitespace (space, tab, newline, carriage return: serde_json's four).
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.at) {
            self.at += 1;
        }
    }

    /// The next non-whitespace byte, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes().get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn eat_literal(&mut self, literal: &[u8]) -> Option<()> {
        self.ws();
        let end = self.at + literal.len();
        (self.bytes().get(self.at..end)? == literal).then(|| self.at = end)
    }

    /// Only whitespace is left.
    pub fn end(&mut self) -> Option<()> {
        self.ws();
        (self.at == self.text.len()).then_some(())
    }

    /// `null`, consumed, if that is what comes next.
    pub fn null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.eat_literal(b"null")?;
            Some(true)
        } else {
            Some(false)
        }
    }

    /// A string: borrowed when it has no escapes, else unescaped into an owned one.
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let bytes = self.bytes();
        let start = self.at;
        let end = find_string_special(bytes, start);
        match bytes.get(end)? {
            b'"' => {
                self.at = end + 1;
                self.text.get(start..end).map(Cow::Borrowed)
            }
            b'\\' => {
                self.at = end;
                let mut owned = String::with_capacity(end - start + 16);
                owned.push_str(self.text.get(start..end)?);
                self.escaped_rest(&mut owned)?;
                Some(Cow::Owned(owned))
            }
            // A raw control character: serde_json refuses it.
            _ => None,
        }
    }

    /// The rest of a string from a backslash on, into `owned`; consumes the closing quote.
    fn escaped_rest(&mut self, owned: &mut String) -> Option<()> {
        let bytes = self.bytes();
        loop {
            match bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => {
                    let escape = *bytes.get(self.at + 1)?;
                    self.at += 2;
                    let c = match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hex = self.text.get(self.at..self.at + 4)?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return None;
                            }
                            self.at += 4;
                            // Surrogates (pairs or lone) are left to serde_json.
                            char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                        }
                        _ => return None,
                    };
                    owned.push(c);
                }
                _ => {
                    let end = find_string_special(bytes, self.at);
                    if end == self.at {
                        // A raw control character.
                        return None;
                    }
                    owned.push_str(self.text.get(self.at..end)?);
                    self.at = end;
                }
            }
        }
    }

    /// An object key without escapes (an escaped key is left to serde_json), and its colon.
    fn key(&mut self) -> Option<&'a str> {
        let Cow::Borrowed(key) = self.string()? else {
            return None;
        };
        self.eat(b':')?;
        Some(key)
    }

    /// The members of an object, each key handed to `member`, which must consume its value.
    pub fn object(
        &mut self,
        mut member: impl FnMut(&mut Cursor<'a>, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.key()?;
            member(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A non-negative integer that fits an `i64` (`0` or digits without a leading zero, not
    /// followed by a fraction or exponent); anything else is left to serde_json.
    pub fn uint(&mut self) -> Option<u64> {
        self.ws();
        let bytes = self.bytes();
        let start = self.at;
        let mut end = start;
        while bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = end - start;
        if digits == 0 || digits > 18 || (digits > 1 && bytes[start] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = bytes.get(end) {
            return None;
        }
        self.at = end;
        self.text.get(start..end)?.parse().ok()
    }

    /// Any value, checked as serde_json checks an ignored one, and dropped.
    pub fn skip_value(&mut self) -> Option<()> {
        self.skip_nested(0)
    }

    fn skip_nested(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|cursor, _| cursor.skip_nested(depth + 1)),
            b'[' => {
                self.at += 1;
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.skip_nested(depth + 1)?;
                    match self.peek()? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b't' => self.eat_literal(b"true"),
            b'f' => self.eat_literal(b"false"),
            b'n' => self.eat_literal(b"null"),
            b'-' | b'0'..=b'9' => self.skip_number(),
            _ => None,
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, the JSON number grammar.
    fn skip_number(&mut self) -> Option<()> {
        let bytes = self.bytes();
        let mut at = self.at;
        let digits = |at: &mut usize| {
            let start = *at;
            while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at - start
        };
        if bytes.get(at) == Some(&b'-') {
            at += 1;
        }
        let leading_zero = bytes.get(at) == Some(&b'0');
        let integer = digits(&mut at);
        if integer == 0 || (leading_zero && integer > 1) {
            return None;
        }
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            if digits(&mut at) == 0 {
                return None;
            }
        }
        if let Some(b'e' | b'E') = bytes.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            if digits(&mut at) == 0 {
                return None;
            }
        }
        self.at = at;
        Some(())
    }

    /// A string, or `None` inside for any other value (consumed): the lenient string fields.
    /// serde_json reads a number standing there in full (and refuses one beyond `f64`'s range,
    /// `1e400` or 400 digits), unlike a nested one, which it only checks for syntax: a number
    /// with an exponent or of more than 100 characters is left to it.
    pub fn lenient_str(&mut self) -> Option<Option<Cow<'a, str>>> {
        match self.peek()? {
            b'"' => self.string().map(Some),
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                self.skip_number()?;
                let number = &self.bytes()[start..self.at];
                let plain = number.len() <= 100 && !number.iter().any(|&b| b == b'e' || b == b'E');
                plain.then_some(None)
            }
            _ => self.skip_value().map(|()| None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_chunk_test_is_exact() {
        for byte in 0..=255u8 {
            for position in 0..8 {
                let mut chunk = [b'a'; 8];
                chunk[position] = byte;
                let mask = string_special_mask(u64::from_le_bytes(chunk));
                assert_eq!(
                    mask != 0,
                    is_string_special(byte),
                    "byte {byte:#x} at {position}"
                );
                if mask != 0 {
                    assert_eq!(mask.trailing_zeros() / 8, position as u32);
                }
            }
        }
    }

    fn skipped(text: &str) -> Option<usize> {
        let mut cursor = Cursor::new(text);
        cursor.skip_value()?;
        cursor.end()?;
        Some(cursor.at)
    }

    #[test]
    fn skip_accepts_only_what_serde_json_accepts() {
        for text in [
            r#"{"a":[1,-2.5e+3,true,false,null,"x\"\u00e9"],"b":{}}"#,
            "[]",
            " 0 ",
            "-0.0E-0",
        ] {
            assert!(skipped(text).is_some(), "{text}");
            assert!(serde_json::from_str::<serde_json::Value>(text).is_ok());
        }
        for text in [
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            "-",
            "1e",
            "\"\u{1}\"",
            "tru",
            "{1:2}",
            "[1 2]",
            "\"\\x\"",
            "\"\\ud800\"",
        ] {
            assert!(skipped(text).is_none(), "{text}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn find_string_special_finds_the_first(
            bytes in proptest::collection::vec(prop::sample::select(vec![b'a', b'"', b'\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff, 0x5b, 0x21]), 0..40),
            from in 0usize..40,
        ) {
            let from = from.min(bytes.len());
            let expected = bytes[from..].iter().position(|&b| is_string_special(b)).map_or(bytes.len(), |p| from + p);
            prop_assert_eq!(find_string_special(&bytes, from), expected);
        }

        /// Whatever the cursor reads, serde_json reads the same way.
        #[test]
        fn strings_and_values_agree_with_serde_json(
            text in "[\\[\\]{}\":,0-9.eE+\\- a-z\\\\/\u{1}\u{e9}\u{2028}]{0,24}",
        ) {
            let serde_value = serde_json::from_str::<serde_json::Value>(&text);
            if skipped(&text).is_some() {
                prop_assert!(serde_value.is_ok(), "{text}");
            }
            let quoted = format!("\"{text}\"");
            let mut cursor = Cursor::new(&quoted);
            if let Some(s) = cursor.string() && cursor.end().is_some() {
                prop_assert_eq!(Some(s.into_owned()), serde_json::from_str::<String>(&quoted).ok());
            }
        }

        #[test]
        fn uint_agrees_with_serde_json(n in any::<u64>(), lead in "[0 ]{0,2}", tail in "[.eE0-9 ,]{0,2}") {
            let text = format!("{lead}{n}{tail}");
            let mut cursor = Cursor::new(&text);
            if let Some(value) = cursor.uint() {
                let rest = &text[cursor.at..];
                let number = serde_json::Deserializer::from_str(&text).into_iter::<i64>().next();
                if let Some(Ok(parsed)) = number {
                    prop_assert_eq!(u64::try_from(parsed).ok(), Some(value), "{}", rest);
                } else {
                    prop_assert!(false, "cursor read {} from {:?}, serde_json did not", value, text);
                }
            }
        }
    }
}
