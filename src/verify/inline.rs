//! Tests that share a file with the code they test, and the witness's view of such a file: the
//! base code under the result's tests (`run::witness`, the replay `final_with_base_code`). A Rust
//! source's top-level `#[cfg(test)]` items are cut from the code by its braces, read past
//! comments and literals ([`rust_test_items`]); a Python module's doctests are its triple-quoted
//! literals holding a `>>>` line, given back to the base code under `__test__`
//! ([`python_doctests`]). Anything else (a nested test module, a Rust doc-test, an Elixir
//! doctest) comes back with its file. A doctest of the base altered or removed is a test change
//! ([`doctests_changed`], [`rust_doctests_changed`]), as an inline Rust test is.

/// The bytes of a Rust source that shape its items (`{ } ( ) [ ] ; #`), with their offsets,
/// outside comments, string, byte-string, raw-string and character literals.
pub(super) fn rust_structure(source: &str) -> Vec<(usize, u8)> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0usize;
    let ident = |i: usize| i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = source[i..].find('\n').map_or(b.len(), |n| i + n);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if b[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if !ident(i)
                || (i == 1 && b[0] == b'b')
                || (i > 1 && b[i - 1] == b'b' && !ident(i - 1)) =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let close = format!("\"{}", "#".repeat(hashes));
                    let from = i + 2 + hashes;
                    i = source[from..]
                        .find(&close)
                        .map_or(b.len(), |n| from + n + close.len());
                } else {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{1F600}', 'é') or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    // The escaped character is never the closing quote ('\'', '\\').
                    let from = (i + 3).min(b.len());
                    i = source[from..].find('\'').map_or(b.len(), |n| from + n + 1);
                } else if let Some(c) = source[i + 1..].chars().next()
                    && source[i + 1 + c.len_utf8()..].starts_with('\'')
                {
                    i += 2 + c.len_utf8();
                } else {
                    i += 1;
                }
            }
            c @ (b'{' | b'}' | b'(' | b')' | b'[' | b']' | b';' | b'#') => {
                out.push((i, c));
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// A Rust source split into its items marked `#[cfg(test)]` at the top level of the file (each
/// from its line's start through its closing `}` or `;` and the rest of that line), and the
/// source without them. `None` when the file has none or its braces do not balance.
pub fn rust_test_items(source: &str) -> Option<(String, Vec<String>)> {
    const MARK: &str = "#[cfg(test)]";
    let structure = rust_structure(source);
    let mut depth = 0i64;
    let mut items: Vec<(usize, usize)> = Vec::new();
    // The item being read: its start, and whether its body has opened.
    let mut open: Option<(usize, bool)> = None;
    let mut skip_until = 0usize;
    for &(at, c) in &structure {
        if at < skip_until {
            continue;
        }
        match c {
            b'#' if depth == 0 && open.is_none() && source[at..].starts_with(MARK) => {
                let line_start = source[..at].rfind('\n').map_or(0, |n| n + 1);
                let start = if source[line_start..at].trim().is_empty() {
                    line_start
                } else {
                    at
                };
                open = Some((start, false));
                skip_until = at + MARK.len();
            }
            b'{' | b'(' | b'[' => {
                depth += 1;
                if c == b'{'
                    && depth == 1
                    && let Some((start, false)) = open
                {
                    open = Some((start, true));
                }
            }
            b'}' | b')' | b']' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
                if depth == 0
                    && c == b'}'
                    && let Some((start, true)) = open
                {
                    items.push((start, at + 1));
                    open = None;
                }
            }
            b';' if depth == 0 => {
                if let Some((start, false)) = open {
                    items.push((start, at + 1));
                    open = None;
                }
            }
            _ => {}
        }
    }
    if depth != 0 || open.is_some() || items.is_empty() {
        return None;
    }
    let mut rest = String::new();
    let mut from = 0usize;
    let mut texts = Vec::new();
    for (start, end) in items {
        let end = source[end..]
            .find('\n')
            .map_or(source.len(), |n| end + n + 1);
        rest.push_str(&source[from..start]);
        texts.push(source[start..end].to_owned());
        from = end;
    }
    rest.push_str(&source[from..]);
    Some((rest, texts))
}

/// The Rust source `base` with the top-level `#[cfg(test)]` items of `result` in place of its
/// own: the base code under the result's inline tests (the witness's "base code with the
/// work's tests" where code and tests share a file). `None` when `result` has no such item.
pub fn base_code_with_inline_tests(base: &str, result: &str) -> Option<String> {
    let (_, tests) = rust_test_items(result)?;
    let code = match rust_test_items(base) {
        Some((code, _)) => code,
        None => base.to_owned(),
    };
    let mut out = code.trim_end().to_owned();
    for test in tests {
        out.push_str("\n\n");
        out.push_str(test.trim_end());
    }
    out.push('\n');
    Some(out)
}

/// The doc-tests of a Rust source: each fenced code block of its `///` and `//!` comments that
/// rustdoc runs (no `ignore`, `text` or other non-Rust info string), its lines trimmed.
pub fn rust_doctests(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in source.lines().map(str::trim_start) {
        let Some(doc) = line
            .strip_prefix("///")
            .or_else(|| line.strip_prefix("//!"))
        else {
            block = None;
            continue;
        };
        let doc = doc.trim();
        if let Some(info) = doc.strip_prefix("```") {
            match block.take() {
                Some(lines) => out.push(lines.join("\n")),
                None => {
                    let runs = info.split(',').map(str::trim).all(|word| {
                        matches!(
                            word,
                            "" | "rust"
                                | "should_panic"
                                | "no_run"
                                | "edition2015"
                                | "edition2018"
                                | "edition2021"
                                | "edition2024"
                        ) || word.starts_with("compile_fail")
                    });
                    if runs {
                        block = Some(Vec::new());
                    }
                }
            }
        } else if let Some(lines) = block.as_mut() {
            lines.push(doc);
        }
    }
    out
}

/// Whether the work removed or altered a doc-test of a Rust source (`base` → `now`): every
/// doc-test of the base must still be one of the source's (new ones may be added).
pub fn rust_doctests_changed(base: &str, now: &str) -> bool {
    let now = rust_doctests(now);
    rust_doctests(base).iter().any(|test| !now.contains(test))
}

/// Where the Python string literal opening at the quote `at` ends (past its closing quotes, at
/// the line's end for an unclosed one-line literal), and whether it is triple-quoted.
pub(super) fn python_string_end(source: &str, at: usize) -> (usize, bool) {
    let b = source.as_bytes();
    let q = b[at];
    let triple = b[at..].starts_with(&[q, q, q]);
    let mut j = if triple { at + 3 } else { at + 1 };
    let end = loop {
        if j >= b.len() {
            break b.len();
        }
        match b[j] {
            b'\\' => j += 2,
            c if c == q && (!triple || b[j..].starts_with(&[q, q, q])) => {
                break j + if triple { 3 } else { 1 };
            }
            b'\n' if !triple => break j,
            _ => j += 1,
        }
    };
    (end.min(b.len()), triple)
}

/// The triple-quoted string literals of a Python source that hold a doctest example (a line
/// starting `>>>`), each as it is written (prefix and quotes included); f-strings and bytes
/// are not docstrings and are left out.
pub fn python_doctests(source: &str) -> Vec<&str> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < b.len() {
        match b[i] {
            b'#' => i = source[i..].find('\n').map_or(b.len(), |n| i + n),
            b'\'' | b'"' => {
                let mut start = i;
                while start > 0 && b"rRbBuUfF".contains(&b[start - 1]) && i - start < 2 {
                    start -= 1;
                }
                if start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
                    start = i;
                }
                let prefix = &source[start..i];
                let (end, triple) = python_string_end(source, i);
                if triple
                    && !prefix.contains(['f', 'F', 'b', 'B'])
                    && source[i..end]
                        .lines()
                        .any(|l| l.trim_start().starts_with(">>>"))
                {
                    out.push(&source[start..end]);
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    out
}

/// The examples of a doctest literal, each its `>>>` line with the `...` lines and expected
/// output after it (up to a blank line or the next `>>>`), lines trimmed.
fn doctest_examples(doctest: &str) -> Vec<String> {
    let mut out: Vec<Vec<&str>> = Vec::new();
    let mut open = false;
    for line in doctest.lines().map(str::trim) {
        if line.starts_with(">>>") {
            out.push(vec![line]);
            open = true;
        } else if line.is_empty() || line.ends_with("\"\"\"") || line.ends_with("'''") {
            let rest = line.trim_end_matches(['"', '\'']);
            if open && !rest.is_empty() {
                out.last_mut().expect("open").push(rest);
            }
            open = false;
        } else if open {
            out.last_mut().expect("open").push(line);
        }
    }
    out.into_iter().map(|e| e.join("\n")).collect()
}

/// Whether the work removed or altered a doctest example of a Python module (`base` → `now`):
/// every example of the base (its input and expected output) must still be in one of the
/// module's doctests (new examples may be added anywhere).
pub fn doctests_changed(base: &str, now: &str) -> bool {
    let now: Vec<String> = python_doctests(now)
        .into_iter()
        .map(|d| {
            d.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    python_doctests(base)
        .into_iter()
        .flat_map(doctest_examples)
        .any(|example| !now.iter().any(|d| d.contains(&example)))
}

/// The Python source `base` with the doctests of `result` added under `__test__` (which
/// `doctest` and `pytest --doctest-modules` collect with the module's names): the base code
/// under the result's doctests. `None` when `result` holds none.
pub fn base_code_with_doctests(base: &str, result: &str) -> Option<String> {
    let doctests = python_doctests(result);
    if doctests.is_empty() {
        return None;
    }
    let mut out = base.trim_end().to_owned();
    out.push_str("\n\n\n# The work's doctests over the base code (autocode's witness replay).\n");
    out.push_str("__test__ = {\n    **globals().get(\"__test__\", {}),\n");
    for (n, doctest) in doctests.iter().enumerate() {
        out.push_str(&format!("    \"autocode_witness_{n}\": {doctest},\n"));
    }
    out.push_str("}\n");
    Some(out)
}

/// Whether a Python module whose name a check gives (`pytest --doctest-modules textkit.py`)
/// is code whose doctests are its tests, not a test file: it holds doctest examples (before or
/// after the work) and no test function or class on either side. Putting it back to its base
/// version would put back its code too, so its change is judged as tests beside code
/// ([`tests_beside_code_changed`]: examples lost or altered), not replayed with the file restored.
pub fn python_code_with_doctests(base: &str, now: &str) -> bool {
    let holds_test_code = |source: &str| {
        source.lines().any(|line| {
            let line = line.trim_start();
            let line = line.strip_prefix("async ").unwrap_or(line);
            line.starts_with("def test")
                || line.starts_with("class Test")
                || line.contains("TestCase")
        })
    };
    (!python_doctests(base).is_empty() || !python_doctests(now).is_empty())
        && !holds_test_code(base)
        && !holds_test_code(now)
}

/// The languages whose files may hold tests beside their code, as read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SharedFile {
    Rust,
    Python,
}

impl SharedFile {
    fn of(rel: &str) -> Option<SharedFile> {
        if rel.ends_with(".rs") {
            Some(SharedFile::Rust)
        } else if rel.ends_with(".py") {
            Some(SharedFile::Python)
        } else {
            None
        }
    }
}

/// Whether a file at `rel` may hold tests beside its code (a Rust source, a Python module).
pub fn may_hold_tests(rel: &str) -> bool {
    SharedFile::of(rel).is_some()
}

/// A code file of the base tree as the witness replay shows it, the base code with the
/// result's tests where they share the file: a Rust source's top-level `#[cfg(test)]` items,
/// a Python module's doctests. `None`: the base file comes back whole.
pub fn base_code_with_result_tests(rel: &str, base: &str, result: &str) -> Option<String> {
    match SharedFile::of(rel)? {
        SharedFile::Rust => base_code_with_inline_tests(base, result),
        SharedFile::Python => base_code_with_doctests(base, result),
    }
}

/// Whether the work removed or altered a test of the base that shares the code file `rel`
/// (`base` → `now`): a Rust source's `#[cfg(test)]` items, `#[test]` functions and doc-tests
/// (`verify::testfiles::inline_tests_changed`, [`rust_doctests_changed`]), a Python module's
/// doctest examples ([`doctests_changed`]).
pub fn tests_beside_code_changed(rel: &str, base: &str, now: &str) -> bool {
    match SharedFile::of(rel) {
        Some(SharedFile::Rust) => {
            super::testfiles::inline_tests_changed(base, now) || rust_doctests_changed(base, now)
        }
        Some(SharedFile::Python) => doctests_changed(base, now),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rust_doc_test_altered_or_removed_is_a_test_change() {
        let base = "/// Doubles.\n///\n/// ```\n/// assert_eq!(units::double(2), 4);\n/// ```\n///\n/// ```text\n/// not a test\n/// ```\npub fn double(x: i32) -> i32 {\n    2 * x\n}\n";
        assert_eq!(rust_doctests(base), ["assert_eq!(units::double(2), 4);"]);
        let added = base.replace(
            "pub fn double",
            "/// ```\n/// assert_eq!(units::double(0), 0);\n/// ```\npub fn double",
        );
        let reworded = base.replace("/// Doubles.", "/// Twice x.");
        let prose = base.replace("/// not a test", "/// still not a test");
        assert!(!rust_doctests_changed(base, &added));
        assert!(!rust_doctests_changed(base, &reworded));
        assert!(!rust_doctests_changed(base, &prose));
        assert!(rust_doctests_changed(
            base,
            &base.replace("(2), 4", "(2), 5")
        ));
        assert!(rust_doctests_changed(
            base,
            "pub fn double(x: i32) -> i32 {\n    2 * x\n}\n"
        ));
    }

    #[test]
    fn a_doctest_example_altered_or_removed_is_a_test_change() {
        let base = "def f(x):\n    \"\"\"Double.\n\n    >>> f(2)\n    4\n    >>> f(0)\n    0\n    \"\"\"\n    return 2 * x\n";
        let added = base.replace("    >>> f(0)", "    >>> f(1)\n    2\n    >>> f(0)");
        let reworded = base.replace("Double.", "Twice x.");
        let altered = base.replace("    4\n", "    5\n");
        let removed = base.replace("    >>> f(0)\n    0\n", "");
        assert!(!doctests_changed(base, &added));
        assert!(!doctests_changed(base, &reworded));
        assert!(!doctests_changed(base, base));
        assert!(doctests_changed(base, &altered));
        assert!(doctests_changed(base, &removed));
        assert!(doctests_changed(base, "def f(x):\n    return 2 * x\n"));
        assert!(!doctests_changed(
            "X = 1\n",
            "def f():\n    \"\"\"\n    >>> 1\n    1\n    \"\"\"\n"
        ));
    }

    #[test]
    fn inline_rust_tests_are_split_from_the_code_they_share_a_file_with() {
        let source = "use std::fmt;\n\n/// Braces in text: \"{\" '}' r#\"}\"# /* } */ // }\npub fn f() -> [u8; 2] {\n    let _s = \"}\";\n    let _c = '{';\n    let _q = ['\\'', '\\\\', '}'];\n    [0; 2]\n}\n\nfn g<'a>(x: &'a str) -> &'a str { x }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(f(), [0; 2]); let _ = \"}\"; }\n}\n\n#[cfg(test)]\nmod more;\n\npub fn h() {}\n";
        let (code, tests) = rust_test_items(source).unwrap();
        assert_eq!(tests.len(), 2);
        assert!(tests[0].starts_with("#[cfg(test)]\nmod tests {") && tests[0].ends_with("}\n"));
        assert_eq!(tests[1], "#[cfg(test)]\nmod more;\n");
        assert!(
            code.contains("pub fn f()")
                && code.contains("fn g<'a>")
                && code.contains("pub fn h() {}")
        );
        assert!(!code.contains("mod tests") && !code.contains("mod more"));
        // Nested test modules stay with their module; a file without any gives `None`.
        assert!(rust_test_items("mod a {\n    #[cfg(test)]\n    mod tests {}\n}\n").is_none());
        assert!(rust_test_items("pub fn f() {}\n").is_none());
        assert!(rust_test_items("#[cfg(test)]\nmod tests {\n").is_none());

        let base = "pub fn f() -> u8 { 1 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn one() { assert_eq!(super::f(), 1); }\n}\n";
        let result = "pub fn f() -> u8 { 1 }\npub fn g() -> u8 { 2 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn one() { assert_eq!(super::f(), 1); }\n    #[test]\n    fn two() { assert_eq!(super::g(), 2); }\n}\n";
        let spliced = base_code_with_inline_tests(base, result).unwrap();
        assert!(!spliced.contains("pub fn g()"), "{spliced}");
        assert!(
            spliced.contains("fn two()") && spliced.contains("fn one()"),
            "{spliced}"
        );
        assert_eq!(spliced.matches("mod tests").count(), 1, "{spliced}");
        assert!(base_code_with_inline_tests(base, "pub fn f() -> u8 { 1 }\n").is_none());
    }

    #[test]
    fn python_doctests_are_added_to_the_base_code() {
        let result = r#""""Module doc.

>>> 1 + 1
2
"""
import re  # a ''' comment """
X = 'it''s' "a\"b"
F = f""">>> {X}"""


def whisper(s):
    r'''Whisper.

    >>> whisper('HI\n')
    'hi\n...'
    '''
    return s.lower() + '...'


def plain():
    """No example."""
"#;
        let found = python_doctests(result);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("\"\"\"Module doc."));
        assert!(found[1].starts_with("r'''Whisper.") && found[1].ends_with("'''"));
        let base = "def shout(s):\n    return s.upper()\n";
        let spliced = base_code_with_doctests(base, result).unwrap();
        assert!(spliced.starts_with(base.trim_end()));
        assert!(!spliced.contains("return s.lower()"), "{spliced}");
        assert!(
            spliced.contains("\"autocode_witness_1\": r'''Whisper."),
            "{spliced}"
        );
        let no_example = "def f():\n    \"\"\"Doc.\"\"\"\n";
        assert_eq!(base_code_with_doctests(base, no_example), None);
        assert_eq!(base_code_with_result_tests("a.js", base, result), None);
        assert!(may_hold_tests("m.py") && may_hold_tests("src/lib.rs") && !may_hold_tests("a.js"));
    }
}
