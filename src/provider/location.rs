//! Source locations in provider TOML: key paths, byte spans, and 1-based line/column.
//!
//! Serde and validation speak in key paths (`auth.routes[0].pattern`); users want `file:line:col`.
//! This module maps between the two over the span-carrying document (`toml::de::DeTable`). It
//! never fails: a path it cannot find simply has no position.

use serde::Serialize;
use std::fmt;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum KeySeg {
    Key(String),
    Index(usize),
}

/// A path to a value in a TOML document, displayed as `auth.routes[0].pattern`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<KeySeg>);

impl KeyPath {
    pub fn root() -> Self {
        KeyPath(Vec::new())
    }
    pub fn key(name: &str) -> Self {
        KeyPath(vec![KeySeg::Key(name.to_owned())])
    }
    pub fn push_key(mut self, name: &str) -> Self {
        self.0.push(KeySeg::Key(name.to_owned()));
        self
    }
    pub fn push_index(mut self, index: usize) -> Self {
        self.0.push(KeySeg::Index(index));
        self
    }
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                KeySeg::Key(k) if i == 0 => f.write_str(k)?,
                KeySeg::Key(k) => write!(f, ".{k}")?,
                KeySeg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

impl Serialize for KeyPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

/// The position of byte `offset` in `text` (clamped to the text).
pub fn position_of(text: &str, offset: usize) -> Position {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    Position { line, column }
}

/// The text of 1-based `line`, without its newline.
pub fn line_text(text: &str, line: usize) -> Option<&str> {
    text.lines().nth(line.checked_sub(1)?)
}

fn contains(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

/// The span of `path` in `doc`: the key's span for a final key, the item's for a final index.
/// When the full path is absent, the span of the deepest part that exists.
pub fn locate(doc: &DeTable<'_>, path: &KeyPath) -> Option<Range<usize>> {
    let mut table = Some(doc);
    let mut value: Option<&Spanned<DeValue<'_>>> = None;
    let mut found: Option<Range<usize>> = None;
    for (i, seg) in path.0.iter().enumerate() {
        let last = i + 1 == path.0.len();
        match seg {
            KeySeg::Key(name) => {
                let (key, entry) = table?.get_key_value(name.as_str())?;
                found = Some(if last { key.span() } else { entry.span() });
                value = Some(entry);
            }
            KeySeg::Index(n) => {
                let item = value?.get_ref().as_array()?.get(*n)?;
                found = Some(item.span());
                value = Some(item);
            }
        }
        table = value.and_then(|v| v.get_ref().as_table());
    }
    found
}

/// The deepest key path whose key or value covers byte `offset`.
pub fn path_at(doc: &DeTable<'_>, offset: usize) -> KeyPath {
    KeyPath(search_table(doc, offset).unwrap_or_default())
}

fn search_table(table: &DeTable<'_>, offset: usize) -> Option<Vec<KeySeg>> {
    for (key, value) in table.iter() {
        let here = KeySeg::Key(key.get_ref().to_string());
        if contains(&key.span(), offset) {
            return Some(vec![here]);
        }
        if let Some(mut deeper) = search_value(value, offset) {
            deeper.insert(0, here);
            return Some(deeper);
        }
        if contains(&value.span(), offset) {
            return Some(vec![here]);
        }
    }
    None
}

fn search_value(value: &Spanned<DeValue<'_>>, offset: usize) -> Option<Vec<KeySeg>> {
    match value.get_ref() {
        DeValue::Table(table) => search_table(table, offset),
        DeValue::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            if let Some(mut deeper) = search_value(item, offset) {
                deeper.insert(0, KeySeg::Index(i));
                Some(deeper)
            } else if contains(&item.span(), offset) {
                Some(vec![KeySeg::Index(i)])
            } else {
                None
            }
        }),
        _ => None,
    }
}

/// A best guess at the key a (syntactically broken) line is about: `key = ...` or `[table]`.
pub fn key_on_line(line: &str) -> Option<String> {
    let trimmed = line.trim();
    if let Some(header) = trimmed.strip_prefix('[') {
        let header = header.trim_start_matches('[');
        let end = header.find(']')?;
        return Some(header[..end].trim().to_owned()).filter(|h| !h.is_empty());
    }
    let (key, _) = trimmed.split_once('=')?;
    let key = key.trim();
    (!key.is_empty() && !key.contains(char::is_whitespace)).then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let text = "a = 1\nbé = [\"x\", 2]\n";
        assert_eq!(position_of(text, 0), Position { line: 1, column: 1 });
        assert_eq!(position_of(text, 6), Position { line: 2, column: 1 });
        // byte 14 is after the two-byte é: column counts characters
        assert_eq!(position_of(text, 14).column, 8);
        assert_eq!(position_of(text, 999).line, 3);
        assert_eq!(line_text(text, 2), Some("bé = [\"x\", 2]"));
        assert_eq!(line_text(text, 0), None);
    }

    #[test]
    fn locate_and_path_at_agree() {
        let text =
            "name = \"x\"\n[roles]\nterra = { model = \"m\" }\n[[auth.routes]]\npattern = \"(\"\n";
        let doc = DeTable::parse(text).unwrap();
        let path = KeyPath::key("auth")
            .push_key("routes")
            .push_index(0)
            .push_key("pattern");
        assert_eq!(path.to_string(), "auth.routes[0].pattern");
        let span = locate(doc.get_ref(), &path).unwrap();
        assert_eq!(
            position_of(text, span.start),
            Position { line: 5, column: 1 }
        );
        let model = KeyPath::key("roles").push_key("terra").push_key("model");
        let span = locate(doc.get_ref(), &model).unwrap();
        assert_eq!(
            position_of(text, span.start),
            Position {
                line: 3,
                column: 11
            }
        );
        assert_eq!(path_at(doc.get_ref(), span.start), model);
        assert_eq!(locate(doc.get_ref(), &KeyPath::key("nope")), None);
    }

    #[test]
    fn keys_on_broken_lines() {
        assert_eq!(key_on_line("  command = [\"a\""), Some("command".into()));
        assert_eq!(key_on_line("[[auth.routes]]"), Some("auth.routes".into()));
        assert_eq!(key_on_line("garbage"), None);
    }
}
