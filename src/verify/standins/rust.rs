//! Rust's stand-ins (`verify::standins`): the functions a source defines at its top level, with
//! their signatures, whether every name in one resolves in the base file, and what stands in.

use std::sync::LazyLock;

use regex::Regex;

use super::{WHY, mentions};

/// The functions a Rust source defines at its top level, each with its signature (from its
/// visibility or `fn` to its body's `{`, attributes and comments before it left out). `None`
/// entries are skipped where the braces do not balance.
pub(super) fn rust_functions(source: &str) -> Vec<(String, String)> {
    static FN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"(?m)^[ \t]*((?:pub(?:\([^)\n]*\))?[ \t]+)?(?:const[ \t]+)?(?:async[ \t]+)?(?:unsafe[ \t]+)?(?:extern[ \t]+"[^"\n]*"[ \t]+)?fn[ \t]+([A-Za-z_][A-Za-z0-9_]*)[\s\S]*)\z"#,
        )
        .expect("a constant regex")
    });
    let mut out = Vec::new();
    let mut depth = 0i64;
    let mut item_start = 0usize;
    for (at, c) in crate::verify::inline::rust_structure(source) {
        match c {
            b'{' | b'(' | b'[' => {
                if c == b'{'
                    && depth == 0
                    && let Some(found) = FN.captures(&source[item_start..at])
                {
                    out.push((found[2].to_owned(), found[1].trim().to_owned()));
                }
                depth += 1;
            }
            b'}' | b')' | b']' => {
                depth -= 1;
                if depth < 0 {
                    return Vec::new();
                }
                if depth == 0 && c == b'}' {
                    item_start = at + 1;
                }
            }
            b';' if depth == 0 => item_start = at + 1,
            _ => {}
        }
    }
    out
}

/// Whether every name a Rust signature uses is sure to resolve in the base file: a keyword, a
/// primitive, a name of the prelude, a parameter or generic parameter it declares, a path from
/// `std`, `core` or `alloc`, or a name the base file mentions (its `use`s, its own types). A
/// stand-in that did not compile would fail the witness's build where the base code built, and
/// count as showing the change. `-> impl Trait` is left out (the stand-in's body has no type to
/// give it), as are paths through `crate`, `super`, `self` and `Self`.
pub(super) fn rust_signature_resolves(signature: &str, name: &str, base: &str) -> bool {
    const KNOWN: &[&str] = &[
        "fn",
        "pub",
        "crate",
        "const",
        "async",
        "unsafe",
        "extern",
        "mut",
        "dyn",
        "impl",
        "where",
        "for",
        "as",
        "ref",
        "static",
        "i8",
        "i16",
        "i32",
        "i64",
        "i128",
        "isize",
        "u8",
        "u16",
        "u32",
        "u64",
        "u128",
        "usize",
        "f32",
        "f64",
        "bool",
        "char",
        "str",
        "String",
        "Vec",
        "Option",
        "Result",
        "Box",
        "ToString",
        "ToOwned",
        "Into",
        "From",
        "TryFrom",
        "TryInto",
        "Iterator",
        "IntoIterator",
        "DoubleEndedIterator",
        "ExactSizeIterator",
        "Extend",
        "FromIterator",
        "AsRef",
        "AsMut",
        "Fn",
        "FnMut",
        "FnOnce",
        "Default",
        "Clone",
        "Copy",
        "Send",
        "Sync",
        "Sized",
        "Unpin",
        "PartialEq",
        "Eq",
        "PartialOrd",
        "Ord",
        "Drop",
    ];
    static IDENT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"'?[A-Za-z_][A-Za-z0-9_]*").expect("a constant regex"));
    let returns = signature.split_once("->").map_or("", |(_, r)| r);
    if returns.contains("impl")
        || ["crate::", "super::", "self::", "Self"]
            .iter()
            .any(|p| signature.contains(p))
    {
        return false;
    }
    // The parameters' `(` after the name (`pub(crate)` has one before it).
    let Some(named) = signature.find(&format!("fn {name}")) else {
        return false;
    };
    let Some(open) = signature[named..].find('(').map(|n| named + n) else {
        return false;
    };
    let mut declared: Vec<&str> = vec![name];
    // Generic parameters: the first name of each part of `<…>` after the function's name.
    let head = &signature[named..open];
    if let Some(lt) = head.find('<') {
        for part in split_top_level(&head[lt + 1..head.rfind('>').unwrap_or(head.len())]) {
            let part = part.trim().trim_start_matches("const ").trim_start();
            if let Some(found) = IDENT.find(part) {
                declared.push(found.as_str());
            }
        }
    }
    // Parameters: every name in each pattern before its `:`.
    let Some(close) = matching_paren(signature, open) else {
        return false;
    };
    for part in split_top_level(&signature[open + 1..close]) {
        if let Some((pattern, _)) = part.split_once(':') {
            declared.extend(IDENT.find_iter(pattern).map(|m| m.as_str()));
        }
    }
    let mut after_path = false;
    let mut at = 0usize;
    for found in IDENT.find_iter(signature) {
        let ident = found.as_str();
        let between = &signature[at..found.start()];
        at = found.end();
        let segment = between.trim_end().ends_with("::");
        let is_root = signature[found.end()..].trim_start().starts_with("::");
        if segment && after_path {
            continue;
        }
        after_path = false;
        if ident.starts_with('\'') || KNOWN.contains(&ident) || declared.contains(&ident) {
            continue;
        }
        if is_root && ["std", "core", "alloc"].contains(&ident) {
            after_path = true;
            continue;
        }
        if !mentions(base, ident) {
            return false;
        }
        after_path = is_root;
    }
    true
}

/// The parts of `text` between its commas outside brackets.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i64;
    let mut from = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' | '<' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '>' if !text[..i].ends_with('-') => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[from..]);
    out.retain(|p| !p.trim().is_empty());
    out
}

/// The offset of the `)` closing the `(` at `open`.
fn matching_paren(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0i64;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

/// A Rust stand-in aborts the process rather than panicking: `#[should_panic]` cannot take it
/// for the failure a test expects; it says why on the standard error itself, which a test
/// harness's capture does not hold back. `const` is dropped (the body writes).
pub(super) fn rust_stand_in(name: &str, signature: &str) -> String {
    let (qualifiers, rest) = signature.split_at(signature.find("fn ").unwrap_or(0));
    let signature = format!("{}{rest}", qualifiers.replace("const ", ""));
    format!(
        "/// {WHY}\n#[allow(unused_variables, dead_code, unreachable_code)]\n{signature} {{\n    let _ = ::std::io::Write::write_all(&mut ::std::io::stderr(), b\"{name}: {WHY}\\n\");\n    ::std::process::abort()\n}}\n\n"
    )
}

#[cfg(test)]
mod tests {
    use crate::verify::standins::with_stand_ins;

    #[test]
    fn a_rust_function_stands_in_only_where_its_signature_resolves() {
        let base = "use std::fmt;\nuse std::collections::HashMap;\n\npub struct Config;\n\n/// Shouts.\npub fn shout(s: &str) -> String {\n    s.to_uppercase()\n}\n\nimpl Config {\n    pub fn new() -> Self { Config }\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(shout(\"a\"), \"A\"); }\n}\n";
        let result = format!(
            "{base}\n/// Title-cases. A brace in text: \"{{\" and a comment: // }}\n#[inline]\npub fn title_words(s: &str) -> String {{\n    s.split(' ').map(|w| w.to_owned()).collect::<Vec<_>>().join(\" \")\n}}\n\npub(crate) const fn twice<const N: usize>(x: u32) -> [u32; N] {{ [x; N] }}\n\npub fn count<'a, T: fmt::Display + Clone>(items: &'a [T], (a, mut b): (u8, u8)) -> HashMap<String, usize>\nwhere\n    T: PartialEq,\n{{\n    HashMap::new()\n}}\n\npub fn load(path: &std::path::Path) -> std::io::Result<Config> {{ std::fs::read(path).map(|_| Config) }}\n\npub fn parse(s: &str) -> Settings {{ Settings }}\n\npub fn evens() -> impl Iterator<Item = u32> {{ (0..).step_by(2) }}\n\npub fn via(c: &crate::Config) {{}}\n"
        );
        let shown = with_stand_ins("src/lib.rs", Some(base), Some(base), &result).unwrap();
        assert!(shown.starts_with(base.trim_end()), "{shown}");
        for signature in [
            "pub fn title_words(s: &str) -> String {",
            "pub(crate) fn twice<const N: usize>(x: u32) -> [u32; N] {",
            "pub fn count<'a, T: fmt::Display + Clone>(items: &'a [T], (a, mut b): (u8, u8)) -> HashMap<String, usize>\nwhere\n    T: PartialEq, {",
            "pub fn load(path: &std::path::Path) -> std::io::Result<Config> {",
        ] {
            assert!(shown.contains(signature), "{signature}: {shown}");
        }
        // A type the work adds, `impl Trait` returned, a `crate::` path: no stand-in.
        assert!(
            !shown.contains("fn parse") && !shown.contains("fn evens") && !shown.contains("fn via"),
            "{shown}"
        );
        assert_eq!(shown.matches("fn shout").count(), 1, "{shown}");
        assert!(!shown.contains("fn new() -> Self {\n    ::std"), "{shown}");
        // A file the work adds, a glob import, `no_std`: none.
        assert_eq!(
            with_stand_ins("src/new.rs", None, None, "pub fn f() {}\n"),
            None
        );
        let glob = "use helpers::*;\n";
        assert_eq!(
            with_stand_ins(
                "src/lib.rs",
                Some(glob),
                Some(glob),
                &format!("{glob}pub fn f() {{}}\n")
            ),
            None
        );
    }
}
