//! Stand-ins for the names the work adds, in the witness replay (`run::witness`, the replay
//! `final_with_base_code`): the base code does not define a function the work adds, so a check
//! importing it fails there however little it tests (`assertTrue(callable(title_words))`, a test
//! that only imports the module, a grep for the name). With the code changes taken back and each
//! name the result defines at the top level of a code file, and its base version does not, written
//! back as a stand-in that raises when called, a check fails there only if it runs the new code.
//!
//! A stand-in may only add what the base code lacks: it is written where it cannot break what
//! loaded or built before (Python: `def name(*args, **kwargs)` raising a `BaseException`, a class
//! whose constructor raises, a method added to a class of the base set on it after the class,
//! bound as the result binds it, dunders left out; JavaScript and TypeScript: the export form the
//! result uses, where the base file is an ES module or a CommonJS one as the result is, a method
//! added to a class of the base set on it by `Object.defineProperty`; Rust: the result's signature,
//! only where every name in it resolves in the base file, aborting), never for a name the base
//! file already mentions or may get from a star import. A stand-in that broke the build would
//! fail every check there, which counts as showing the change. Go and C get none: a Go package
//! spans files and its stand-ins' imports must all be used, a C function is declared in headers.

use std::sync::LazyLock;

use regex::Regex;

mod js;
mod python;
mod rust;

use js::{
    JsMember, ModuleKind, js_definitions, js_method_stand_in, js_methods_and_classes, js_stand_in,
};
use python::{python_definitions, python_method_stand_in, python_methods, python_stand_in};
use rust::{rust_functions, rust_signature_resolves, rust_stand_in};

/// What a stand-in raises: named so that the output of a check that fails on one says why.
const WHY: &str =
    "autocode witness replay: the work's code is taken back and this name it adds stands in";

/// The languages a stand-in is written for, by a file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Python,
    JavaScript,
    TypeScript,
    Rust,
}

impl Language {
    fn of(rel: &str) -> Option<Language> {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if name.ends_with(".d.ts") || name.ends_with(".d.mts") || name.ends_with(".d.cts") {
            return None;
        }
        match name.rsplit_once('.')?.1 {
            "py" => Some(Language::Python),
            "js" | "mjs" | "cjs" | "jsx" => Some(Language::JavaScript),
            "ts" | "mts" | "cts" | "tsx" => Some(Language::TypeScript),
            "rs" => Some(Language::Rust),
            _ => None,
        }
    }
}

/// Whether a stand-in may be written in the code file `rel` (by its language).
pub fn may_stand_in(rel: &str) -> bool {
    Language::of(rel).is_some()
}

/// The witness's text of the code file `rel`: `shown` (the base file as the witness shows it, its
/// tests beside the code already the result's; `None` when the base tree lacks the file) with a
/// stand-in for each name `result` defines at its top level that `base` (the base tree's own
/// text) does not mention. `None` when there is none to write (the file stays as `shown`).
pub fn with_stand_ins(
    rel: &str,
    base: Option<&str>,
    shown: Option<&str>,
    result: &str,
) -> Option<String> {
    let language = Language::of(rel)?;
    let stand_ins = stand_ins(language, base.unwrap_or(""), result)?;
    let mut out = shown.unwrap_or("").trim_end().to_owned();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(&stand_ins);
    Some(out)
}

/// The stand-ins' text for `result` over `base` (empty for a file the work adds).
fn stand_ins(language: Language, base: &str, result: &str) -> Option<String> {
    let mut out = String::new();
    match language {
        Language::Python => {
            if star_import(base, language) {
                return None;
            }
            for (kind, name) in added(python_definitions(result), base) {
                out.push_str(&python_stand_in(kind, &name));
            }
            // Methods the result adds to a class of the base file.
            let base_classes: Vec<String> = python_definitions(base)
                .into_iter()
                .filter(|(kind, _)| *kind == Kind::Class)
                .map(|(_, name)| name)
                .collect();
            let mut seen: Vec<(String, String)> = Vec::new();
            for method in python_methods(result) {
                let key = (method.class.clone(), method.name.clone());
                if !base_classes.contains(&method.class)
                    || mentions(base, &method.name)
                    || (method.name.starts_with("__") && method.name.ends_with("__"))
                    || seen.contains(&key)
                {
                    continue;
                }
                out.push_str(&python_method_stand_in(&method));
                seen.push(key);
            }
        }
        Language::JavaScript | Language::TypeScript => {
            if star_import(base, language) {
                return None;
            }
            if let Some(module) = ModuleKind::of(base, result) {
                for (kind, name) in added(js_definitions(result, module), base) {
                    out.push_str(&js_stand_in(language, module, kind, &name));
                }
            }
            // Methods the result adds to a class of the base file, set on the class.
            let base_classes: Vec<String> = js_methods_and_classes(base).1;
            let mut seen: Vec<(String, String, JsMember)> = Vec::new();
            for (class, name, member) in js_methods_and_classes(result).0 {
                let key = (class.clone(), name.clone(), member);
                if !base_classes.contains(&class) || mentions(base, &name) || seen.contains(&key) {
                    continue;
                }
                out.push_str(&js_method_stand_in(&class, &name, member));
                seen.push(key);
            }
        }
        Language::Rust => {
            // A file the work adds is compiled only where a module of the base declares it.
            if base.trim().is_empty() || star_import(base, language) || base.contains("#![no_std]")
            {
                return None;
            }
            let mut seen: Vec<String> = Vec::new();
            for (name, signature) in rust_functions(result) {
                if seen.contains(&name)
                    || mentions(base, &name)
                    || !rust_signature_resolves(&signature, &name, base)
                {
                    continue;
                }
                out.push_str(&rust_stand_in(&name, &signature));
                seen.push(name);
            }
        }
    }
    if out.is_empty() {
        return None;
    }
    Some(format!(
        "{} autocode witness replay: stand-ins for the names the work adds\n{out}",
        comment_mark(language)
    ))
}

fn comment_mark(language: Language) -> &'static str {
    match language {
        Language::Python => "#",
        Language::JavaScript | Language::TypeScript | Language::Rust => "//",
    }
}

/// What a top-level name is, as far as its stand-in goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Function,
    Class,
}

/// The definitions of `defined` whose name `base` does not mention, each once, in order.
fn added(defined: Vec<(Kind, String)>, base: &str) -> Vec<(Kind, String)> {
    let mut out: Vec<(Kind, String)> = Vec::new();
    for (kind, name) in defined {
        if out.iter().any(|(_, n)| *n == name) || mentions(base, &name) {
            continue;
        }
        out.push((kind, name));
    }
    out
}

/// Whether `text` holds `name` as a whole word.
fn mentions(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    text.match_indices(name).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(word)
            && !text[at + name.len()..].chars().next().is_some_and(word)
    })
}

/// Whether the base file may get names it does not spell (`from m import *`, `export * from`,
/// `Object.assign(module.exports, …)`, `use m::*;`): a stand-in could hide one.
fn star_import(base: &str, language: Language) -> bool {
    static PYTHON: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?m)^\s*from\s+\S+\s+import\s+\*").expect("a constant regex")
    });
    static JS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?m)^\s*export\s+\*|Object\.assign\(\s*(module\.)?exports|\.\.\.require\(")
            .expect("a constant regex")
    });
    static RUST: LazyLock<Regex> = LazyLock::new(|| {
        // At the top of the file: a test module's `use super::*;` brings the stand-in in.
        Regex::new(r"(?m)^(?:pub(?:\([^)\n]*\))?[ \t]+)?use[ \t][^;]*\*").expect("a constant regex")
    });
    match language {
        Language::Python => PYTHON.is_match(base),
        Language::JavaScript | Language::TypeScript => JS.is_match(base),
        Language::Rust => RUST.is_match(base),
    }
}
