//! JavaScript's and TypeScript's stand-ins (`verify::standins`): how a module exports (ES or
//! CommonJS), the functions and classes it exports, the methods of its top-level classes, and
//! what stands in for each.

use std::sync::LazyLock;

use regex::Regex;

use super::{Kind, Language, WHY, mentions};

/// How a JavaScript or TypeScript file exports: the stand-ins use the result's form, and only
/// where the base file (when there is one) has it too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ModuleKind {
    Esm,
    CommonJs,
}

impl ModuleKind {
    pub(super) fn of(base: &str, result: &str) -> Option<ModuleKind> {
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
pub(super) fn js_definitions(source: &str, module: ModuleKind) -> Vec<(Kind, String)> {
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

pub(super) fn js_stand_in(
    language: Language,
    module: ModuleKind,
    kind: Kind,
    name: &str,
) -> String {
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
pub(super) enum JsMember {
    Method,
    Static,
    Getter,
}

/// The methods of a JavaScript or TypeScript module's top-level classes (each member at the
/// first indentation of a class body that opens on its `class` line and closes with a `}` at the
/// first column), and the names of those classes.
pub(super) fn js_methods_and_classes(
    source: &str,
) -> (Vec<(String, String, JsMember)>, Vec<String>) {
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
pub(super) fn js_method_stand_in(class: &str, name: &str, member: JsMember) -> String {
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

#[cfg(test)]
mod tests {
    use crate::verify::standins::with_stand_ins;

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
}
