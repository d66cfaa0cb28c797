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

/// The offsets in a Python source where a line starts outside a string literal.
fn python_line_starts(source: &str) -> Vec<usize> {
    let b = source.as_bytes();
    let mut out = vec![0];
    let mut i = 0usize;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                out.push(i + 1);
                i += 1;
            }
            b'#' => i = source[i..].find('\n').map_or(b.len(), |n| i + n),
            b'\'' | b'"' => i = super::inline::python_string_end(source, i).0,
            _ => i += 1,
        }
    }
    out.retain(|&at| at < b.len());
    out
}

/// The functions and classes a Python module defines at its top level (`def`, `async def`,
/// `class` at the first column, outside string literals).
fn python_definitions(source: &str) -> Vec<(Kind, String)> {
    static DEF: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:async[ \t]+)?(def|class)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*[(:]")
            .expect("a constant regex")
    });
    python_line_starts(source)
        .into_iter()
        .filter_map(|at| {
            let line = source[at..].lines().next()?;
            let found = DEF.captures(line)?;
            let kind = if &found[1] == "def" {
                Kind::Function
            } else {
                Kind::Class
            };
            Some((kind, found[2].to_owned()))
        })
        .collect()
}

/// A method a top-level class of a Python module defines in its body, with how it is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PythonMethod {
    class: String,
    name: String,
    /// `property`, `staticmethod` or `classmethod` when so decorated.
    wrapper: Option<&'static str>,
}

/// The methods of a Python module's top-level classes: each `def` at the first indentation of a
/// class body, with the decorator that binds it (`@property`, `@staticmethod`, `@classmethod`).
fn python_methods(source: &str) -> Vec<PythonMethod> {
    static CLASS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^class[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*[(:]").expect("a constant regex")
    });
    static DEF: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(")
            .expect("a constant regex")
    });
    let mut out = Vec::new();
    // The class being read, the indentation of its body, the decorator seen last.
    let mut class: Option<(String, Option<String>)> = None;
    let mut wrapper: Option<&'static str> = None;
    for at in python_line_starts(source) {
        let line = source[at..].lines().next().unwrap_or("");
        let code = line.trim_start();
        if code.is_empty() || code.starts_with('#') {
            continue;
        }
        let indent = &line[..line.len() - code.len()];
        if indent.is_empty() {
            class = CLASS
                .captures(line)
                .map(|found| (found[1].to_owned(), None));
            wrapper = None;
            continue;
        }
        let Some((name, body)) = &mut class else {
            continue;
        };
        let body = body.get_or_insert_with(|| indent.to_owned());
        if indent != body.as_str() {
            continue;
        }
        if let Some(decorator) = code.strip_prefix('@') {
            wrapper = match decorator.trim_end() {
                "property" => Some("property"),
                "staticmethod" => Some("staticmethod"),
                "classmethod" => Some("classmethod"),
                _ => wrapper,
            };
            continue;
        }
        if let Some(found) = DEF.captures(code) {
            out.push(PythonMethod {
                class: name.clone(),
                name: found[1].to_owned(),
                wrapper,
            });
        }
        wrapper = None;
    }
    out
}

/// A method stands in on its base class, set after the class: `Cal.century = …` (wrapped as
/// the result binds it, so a property raises when read).
fn python_method_stand_in(method: &PythonMethod) -> String {
    let PythonMethod {
        class,
        name,
        wrapper,
    } = method;
    let helper = format!("_autocode_stand_in_{class}_{name}");
    let bound = match wrapper {
        Some(wrapper) => format!("{wrapper}({helper})"),
        None => helper.clone(),
    };
    format!(
        "def {helper}(*args, **kwargs):\n    raise type(\"AutocodeStandIn\", (BaseException,), {{}})(\"{class}.{name}: {WHY}\")\n\n\n{class}.{name} = {bound}\ndel {helper}\n\n\n"
    )
}

fn python_stand_in(kind: Kind, name: &str) -> String {
    let raise =
        format!("raise type(\"AutocodeStandIn\", (BaseException,), {{}})(\"{name}: {WHY}\")");
    match kind {
        Kind::Function => format!("def {name}(*args, **kwargs):\n    {raise}\n\n\n"),
        Kind::Class => format!(
            "class {name}:\n    def __init__(self, *args, **kwargs):\n        {raise}\n\n\n"
        ),
    }
}

/// How a JavaScript or TypeScript file exports: the stand-ins use the result's form, and only
/// where the base file (when there is one) has it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModuleKind {
    Esm,
    CommonJs,
}

impl ModuleKind {
    fn of(base: &str, result: &str) -> Option<ModuleKind> {
        static ESM: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"(?m)^(export|import)\s").expect("a constant regex"));
        static CJS: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"\bmodule\.exports\b|(?m)^exports\.").expect("a constant regex")
        });
        let kind = |text: &str| match (ESM.is_match(text), CJS.is_match(text)) {
            (true, false) => Some(ModuleKind::Esm),
            (false, true) => Some(ModuleKind::CommonJs),
            _ => None,
        };
        let result_kind = kind(result)?;
        if base.trim().is_empty() || kind(base) == Some(result_kind) {
            Some(result_kind)
        } else {
            None
        }
    }
}

/// The functions and classes a JavaScript or TypeScript module exports at its top level, as
/// the result writes them: `export function`, `export class`, `export const name = (…) =>` or
/// `= function`, or declared so and named by an `export { … }` list (ES modules); `function
/// name` or `class Name` named by `module.exports` or `exports.name` (CommonJS).
fn js_definitions(source: &str, module: ModuleKind) -> Vec<(Kind, String)> {
    static EXPORTED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?m)^export[ \t]+(?:(?:async[ \t]+)?function\*?[ \t]*([A-Za-z_$][\w$]*)|(?:abstract[ \t]+)?class[ \t]+([A-Za-z_$][\w$]*)|(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)(?:[ \t]*:[^=\n]+)?[ \t]*=[ \t]*(?:async[ \t]+)?(?:function\b|\(|[A-Za-z_$][\w$]*[ \t]*=>))",
        )
        .expect("a constant regex")
    });
    static DECLARED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?m)^(?:(?:async[ \t]+)?function\*?[ \t]*([A-Za-z_$][\w$]*)|class[ \t]+([A-Za-z_$][\w$]*)|(?:const|let|var)[ \t]+([A-Za-z_$][\w$]*)[ \t]*=[ \t]*(?:async[ \t]+)?(?:function\b|\(|[A-Za-z_$][\w$]*[ \t]*=>))",
        )
        .expect("a constant regex")
    });
    let kind_of = |found: &regex::Captures<'_>| {
        if found.get(2).is_some() {
            Kind::Class
        } else {
            Kind::Function
        }
    };
    let name_of = |found: &regex::Captures<'_>| {
        found
            .get(1)
            .or_else(|| found.get(2))
            .or_else(|| found.get(3))
            .map(|m| m.as_str().to_owned())
    };
    match module {
        ModuleKind::Esm => {
            static LISTED: LazyLock<Regex> = LazyLock::new(|| {
                Regex::new(r"(?m)^export[ \t]*\{[^}]*\}").expect("a constant regex")
            });
            let listed: String = LISTED
                .find_iter(source)
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let mut out: Vec<(Kind, String)> = EXPORTED
                .captures_iter(source)
                .filter_map(|found| Some((kind_of(&found), name_of(&found)?)))
                .collect();
            // Declared, then exported by a list (`export { titleWords };`).
            out.extend(
                DECLARED
                    .captures_iter(source)
                    .filter_map(|found| Some((kind_of(&found), name_of(&found)?)))
                    .filter(|(_, name)| mentions(&listed, name)),
            );
            out
        }
        ModuleKind::CommonJs => {
            let exports = commonjs_export_text(source);
            DECLARED
                .captures_iter(source)
                .filter_map(|found| Some((kind_of(&found), name_of(&found)?)))
                .filter(|(_, name)| mentions(&exports, name))
                .collect()
        }
    }
}

/// The text of a CommonJS module's export statements (`module.exports = { … }`,
/// `module.exports.name = …`, `exports.name = …`), each from its start to its `;` or the end of
/// its object.
fn commonjs_export_text(source: &str) -> String {
    let mut out = String::new();
    for (at, _) in source.match_indices("exports") {
        let rest = &source[at..];
        let end = match rest.find(['{', ';', '\n']) {
            Some(n) if rest.as_bytes()[n] == b'{' => {
                rest[n..].find('}').map_or(rest.len(), |m| n + m + 1)
            }
            Some(n) => n,
            None => rest.len(),
        };
        out.push_str(&rest[..end]);
        out.push('\n');
    }
    out
}

fn js_stand_in(language: Language, module: ModuleKind, kind: Kind, name: &str) -> String {
    let (args, returns) = match language {
        Language::TypeScript => ("..._args: any[]", ": any"),
        _ => ("", ""),
    };
    let throw = format!("throw new Error({:?});", format!("{name}: {WHY}"));
    let definition = match kind {
        Kind::Function => format!("function {name}({args}){returns} {{\n  {throw}\n}}"),
        Kind::Class => format!("class {name} {{\n  constructor({args}) {{\n    {throw}\n  }}\n}}"),
    };
    match module {
        ModuleKind::Esm => format!("export {definition}\n"),
        ModuleKind::CommonJs => format!("{definition}\nmodule.exports.{name} = {name};\n"),
    }
}

/// How a JavaScript class member is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsMember {
    Method,
    Static,
    Getter,
}

/// The methods of a JavaScript or TypeScript module's top-level classes (each member at the
/// first indentation of a class body that opens on its `class` line and closes with a `}` at the
/// first column), and the names of those classes.
fn js_methods_and_classes(source: &str) -> (Vec<(String, String, JsMember)>, Vec<String>) {
    static CLASS: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:export[ \t]+(?:default[ \t]+)?)?(?:abstract[ \t]+)?class[ \t]+([A-Za-z_$][\w$]*)[^{]*\{[ \t]*$")
            .expect("a constant regex")
    });
    static MEMBER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:(?:public|private|protected|override|abstract|readonly)[ \t]+)*(static[ \t]+)?(?:async[ \t]+)?(get[ \t]+)?\*?[ \t]*([A-Za-z_$][\w$]*)[ \t]*(?:<[^>]*>)?\(")
            .expect("a constant regex")
    });
    const NOT_METHODS: &[&str] = &[
        "constructor",
        "if",
        "for",
        "while",
        "switch",
        "catch",
        "function",
        "return",
        "set",
    ];
    let mut methods = Vec::new();
    let mut classes = Vec::new();
    let mut class: Option<(String, Option<String>)> = None;
    for line in source.lines() {
        let code = line.trim_start();
        if code.is_empty()
            || code.starts_with("//")
            || code.starts_with('*')
            || code.starts_with("/*")
        {
            continue;
        }
        let indent = &line[..line.len() - code.len()];
        if indent.is_empty() {
            class = CLASS
                .captures(line)
                .map(|found| (found[1].to_owned(), None));
            if let Some((name, _)) = &class {
                classes.push(name.clone());
            }
            continue;
        }
        let Some((name, body)) = &mut class else {
            continue;
        };
        if indent != body.get_or_insert_with(|| indent.to_owned()).as_str() {
            continue;
        }
        if let Some(found) = MEMBER.captures(code)
            && !NOT_METHODS.contains(&&found[3])
        {
            let member = match (found.get(1).is_some(), found.get(2).is_some()) {
                (true, _) => JsMember::Static,
                (false, true) => JsMember::Getter,
                (false, false) => JsMember::Method,
            };
            methods.push((name.clone(), found[3].to_owned(), member));
        }
    }
    (methods, classes)
}

/// A method stands in on its base class (`Object.defineProperty`, so a static `name` or a getter
/// is set too).
fn js_method_stand_in(class: &str, name: &str, member: JsMember) -> String {
    let throw = format!("throw new Error({:?});", format!("{class}.{name}: {WHY}"));
    let (target, descriptor) = match member {
        JsMember::Method => (
            "prototype",
            format!("value: function () {{ {throw} }}, writable: true"),
        ),
        JsMember::Static => (
            "",
            format!("value: function () {{ {throw} }}, writable: true"),
        ),
        JsMember::Getter => ("prototype", format!("get() {{ {throw} }}")),
    };
    let on = if target.is_empty() {
        class.to_owned()
    } else {
        format!("{class}.{target}")
    };
    format!("Object.defineProperty({on}, {name:?}, {{ {descriptor}, configurable: true }});\n")
}

/// The functions a Rust source defines at its top level, each with its signature (from its
/// visibility or `fn` to its body's `{`, attributes and comments before it left out). `None`
/// entries are skipped where the braces do not balance.
fn rust_functions(source: &str) -> Vec<(String, String)> {
    static FN: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r#"(?m)^[ \t]*((?:pub(?:\([^)\n]*\))?[ \t]+)?(?:const[ \t]+)?(?:async[ \t]+)?(?:unsafe[ \t]+)?(?:extern[ \t]+"[^"\n]*"[ \t]+)?fn[ \t]+([A-Za-z_][A-Za-z0-9_]*)[\s\S]*)\z"#,
        )
        .expect("a constant regex")
    });
    let mut out = Vec::new();
    let mut depth = 0i64;
    let mut item_start = 0usize;
    for (at, c) in super::inline::rust_structure(source) {
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
fn rust_signature_resolves(signature: &str, name: &str, base: &str) -> bool {
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
fn rust_stand_in(name: &str, signature: &str) -> String {
    let (qualifiers, rest) = signature.split_at(signature.find("fn ").unwrap_or(0));
    let signature = format!("{}{rest}", qualifiers.replace("const ", ""));
    format!(
        "/// {WHY}\n#[allow(unused_variables, dead_code, unreachable_code)]\n{signature} {{\n    let _ = ::std::io::Write::write_all(&mut ::std::io::stderr(), b\"{name}: {WHY}\\n\");\n    ::std::process::abort()\n}}\n\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_function_the_work_adds_stands_in_over_the_base_code() {
        let base = "\"\"\"Titles.\n\ndef not_code(x):\n\"\"\"\nimport re\n\n\ndef shout(s):\n    return s.upper()\n\nif __name__ == \"__main__\":\n    print(shout('hi'))\n";
        let result = format!(
            "{base}\n\ndef title_words(text: str) -> Title:\n    return text\n\n\nasync def fetch(url,\n          timeout=3):\n    pass\n\n\nclass Title(Base):\n    def method(self):\n        pass\n\n\ndef shout(s):\n    return s\n\ns = '''\ndef in_a_string():\n'''\n"
        );
        let shown = with_stand_ins("pkg/titles.py", Some(base), Some(base), &result).unwrap();
        assert!(shown.starts_with(base.trim_end()), "{shown}");
        assert!(shown.contains("def title_words(*args, **kwargs):\n    raise type(\"AutocodeStandIn\", (BaseException,)"), "{shown}");
        assert!(shown.contains("def fetch(*args, **kwargs):"), "{shown}");
        assert!(
            shown.contains("class Title:\n    def __init__(self, *args, **kwargs):"),
            "{shown}"
        );
        // Names the base has (or mentions), methods and names in strings stand in for nothing.
        assert_eq!(shown.matches("def shout").count(), 1, "{shown}");
        assert!(
            !shown.contains("def method") && !shown.contains("in_a_string():\n    raise"),
            "{shown}"
        );
        assert!(!shown.contains("not_code(*args"), "{shown}");
        // A method the result adds to a class of the base stands in on it, bound as the
        // result binds it; dunders, methods of new classes and names the base has do not.
        let cal = "class Cal:\n    \"\"\"Dates.\"\"\"\n\n    def leap(self, y):\n        return y % 4 == 0\n";
        let with_methods = "class Cal:\n    \"\"\"Dates.\"\"\"\n\n    def leap(self, y):\n        return y % 4 == 0\n\n    @property\n    def era(self):\n        return 'CE'\n\n    @staticmethod\n    def century(y):\n        return y // 100 + 1\n\n    async def fetch(self):\n        def inner():\n            pass\n\n    def __eq__(self, other):\n        return True\n\n\nclass Other:\n    def fresh(self):\n        pass\n";
        let shown = with_stand_ins("cal.py", Some(cal), Some(cal), with_methods).unwrap();
        assert!(
            shown.contains(
                "Cal.era = property(_autocode_stand_in_Cal_era)\ndel _autocode_stand_in_Cal_era"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("Cal.century = staticmethod(_autocode_stand_in_Cal_century)"),
            "{shown}"
        );
        assert!(
            shown.contains("Cal.fetch = _autocode_stand_in_Cal_fetch\n"),
            "{shown}"
        );
        assert!(
            !shown.contains("inner") && !shown.contains("__eq__") && !shown.contains("Cal.leap"),
            "{shown}"
        );
        assert!(
            shown.contains("class Other:\n    def __init__") && !shown.contains("Other.fresh"),
            "{shown}"
        );
        // A file the work adds is its stand-ins alone; nothing new gives `None`.
        let added = with_stand_ins(
            "titles.py",
            None,
            None,
            "import re\n\ndef title_words(t):\n    return t\n",
        )
        .unwrap();
        assert!(
            added.starts_with("# autocode witness replay")
                && added.contains("def title_words(*args, **kwargs):"),
            "{added}"
        );
        assert_eq!(
            with_stand_ins("titles.py", Some(base), Some(base), base),
            None
        );
        assert_eq!(with_stand_ins("titles.txt", None, None, "def f():\n"), None);
        // A star import may bring the name: no stand-in can be told from it.
        let starred = "from helpers import *\n";
        assert_eq!(
            with_stand_ins(
                "t.py",
                Some(starred),
                Some(starred),
                &format!("{starred}def title_words(t):\n    return t\n")
            ),
            None
        );
    }

    #[test]
    fn javascript_and_typescript_stand_ins_take_the_module_form_of_the_result() {
        let base = "import { a } from './a.js';\n\nexport function shout(s) {\n  return s.toUpperCase();\n}\n";
        let result = format!(
            "{base}\nexport function titleWords(text) {{\n  return text;\n}}\n\nexport async function fetchTitle() {{}}\n\nexport const slug = (s) => s;\nexport const LIMIT = 5;\nexport class Title {{}}\nfunction helper() {{}}\n"
        );
        let shown = with_stand_ins("src/title.mjs", Some(base), Some(base), &result).unwrap();
        assert!(shown.contains("// autocode witness replay"), "{shown}");
        for name in ["titleWords", "fetchTitle", "slug"] {
            assert!(
                shown.contains(&format!("export function {name}() {{\n  throw new Error(")),
                "{name}: {shown}"
            );
        }
        assert!(
            shown.contains("export class Title {\n  constructor() {"),
            "{shown}"
        );
        assert!(
            !shown.contains("LIMIT")
                && !shown.contains("function helper")
                && shown.matches("function shout").count() == 1,
            "{shown}"
        );
        let listed = with_stand_ins(
            "src/title.mjs",
            Some(base),
            Some(base),
            &format!(
                "{base}\nfunction titleCase(t) {{\n  return t;\n}}\n\nexport {{ titleCase }};\n"
            ),
        )
        .unwrap();
        assert!(listed.contains("export function titleCase() {"), "{listed}");
        let class_base = "export class Cal {\n  leap(y) {\n    return y % 4 === 0;\n  }\n}\n";
        let class_result = "export class Cal {\n  leap(y) {\n    return y % 4 === 0;\n  }\n\n  century(y) {\n    if (y) {\n      return 1;\n    }\n  }\n\n  static of(y) {\n    return new Cal();\n  }\n\n  get era() {\n    return 'CE';\n  }\n\n  async fetchYear() {}\n}\n";
        let methods =
            with_stand_ins("cal.mjs", Some(class_base), Some(class_base), class_result).unwrap();
        for expected in [
            "Object.defineProperty(Cal.prototype, \"century\", { value: function () { throw new Error(\"Cal.century: ",
            "Object.defineProperty(Cal, \"of\", { value: function ()",
            "Object.defineProperty(Cal.prototype, \"era\", { get() { throw",
            "Object.defineProperty(Cal.prototype, \"fetchYear\"",
        ] {
            assert!(methods.contains(expected), "{expected}: {methods}");
        }
        assert!(
            !methods.contains("\"leap\"") && !methods.contains("\"if\""),
            "{methods}"
        );
        let ts = with_stand_ins(
            "src/title.ts",
            Some(base),
            Some(base),
            &result.replace("(text)", "(text: string): string"),
        )
        .unwrap();
        assert!(
            ts.contains("export function titleWords(..._args: any[]): any {"),
            "{ts}"
        );

        let cjs_base =
            "function shout(s) {\n  return s.toUpperCase();\n}\n\nmodule.exports = { shout };\n";
        let cjs = "function shout(s) {\n  return s.toUpperCase();\n}\n\nfunction titleWords(t) {\n  return t;\n}\n\nconst slug = (s) => s;\nfunction hidden() {}\n\nmodule.exports = {\n  shout,\n  titleWords,\n  slug,\n};\n";
        let shown = with_stand_ins("title.js", Some(cjs_base), Some(cjs_base), cjs).unwrap();
        assert!(
            shown.contains("function titleWords() {\n  throw new Error(")
                && shown.contains("module.exports.titleWords = titleWords;"),
            "{shown}"
        );
        assert!(
            shown.contains("module.exports.slug = slug;") && !shown.contains("hidden"),
            "{shown}"
        );
        // A base of the other module kind, or a star re-export, gets none.
        assert_eq!(
            with_stand_ins("title.js", Some(base), Some(base), cjs),
            None
        );
        let star = "export * from './all.js';\n";
        assert_eq!(
            with_stand_ins(
                "t.mjs",
                Some(star),
                Some(star),
                &format!("{star}export function f() {{}}\n")
            ),
            None
        );
        assert_eq!(
            with_stand_ins("types.d.ts", None, None, "export function f(): void;\n"),
            None
        );
    }

    #[test]
    fn a_rust_function_stands_in_only_where_its_signature_resolves() {
        let base = "use std::fmt;\nuse std::collections::HashMap;\n\npub struct Config;\n\n/// Shouts.\npub fn shout(s: &str) -> String {\n    s.to_uppercase()\n}\n\nimpl Config {\n    pub fn new() -> Self { Config }\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn t() { assert_eq!(shout(\"a\"), \"A\"); }\n}\n";
        let result = format!(
            "{base}\n/// Title-cases. A brace in text: \"{{\" and a comment: // }}\n#[inline]\npub fn title_words(s: &str) -> String {{\n    s.split(' ').map(|w| w.to_owned()).collect::<Vec<_>>().join(\" \")\n}}\n\npub(crate) const fn twice<const N: usize>(x: u32) -> [u32; N] {{ [x; N] }}\n\npub fn count<'a, T: fmt::Display + Clone>(items: &'a [T], (a, mut b): (u8, u8)) -> HashMap<String, usize>\nwhere\n    T: PartialEq,\n{{\n    HashMap::new()\n}}\n\npub fn load(path: &std::path::Path) -> std::io::Result<Config> {{ todo!() }}\n\npub fn parse(s: &str) -> Settings {{ Settings }}\n\npub fn evens() -> impl Iterator<Item = u32> {{ (0..).step_by(2) }}\n\npub fn via(c: &crate::Config) {{}}\n"
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
