//! Python's stand-ins (`verify::standins`): the functions and classes a module defines at its
//! top level, the methods of its top-level classes, and what stands in for each.

use std::sync::LazyLock;

use regex::Regex;

use super::{Kind, WHY};

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
            b'\'' | b'"' => i = crate::verify::inline::python_string_end(source, i).0,
            _ => i += 1,
        }
    }
    out.retain(|&at| at < b.len());
    out
}

/// The functions and classes a Python module defines at its top level (`def`, `async def`,
/// `class` at the first column, outside string literals).
pub(super) fn python_definitions(source: &str) -> Vec<(Kind, String)> {
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
pub(super) struct PythonMethod {
    pub(super) class: String,
    pub(super) name: String,
    /// `property`, `staticmethod` or `classmethod` when so decorated.
    pub(super) wrapper: Option<&'static str>,
}

/// The methods of a Python module's top-level classes: each `def` at the first indentation of a
/// class body, with the decorator that binds it (`@property`, `@staticmethod`, `@classmethod`).
pub(super) fn python_methods(source: &str) -> Vec<PythonMethod> {
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
pub(super) fn python_method_stand_in(method: &PythonMethod) -> String {
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

pub(super) fn python_stand_in(kind: Kind, name: &str) -> String {
    let raise =
        format!("raise type(\"AutocodeStandIn\", (BaseException,), {{}})(\"{name}: {WHY}\")");
    match kind {
        Kind::Function => format!("def {name}(*args, **kwargs):\n    {raise}\n\n\n"),
        Kind::Class => format!(
            "class {name}:\n    def __init__(self, *args, **kwargs):\n        {raise}\n\n\n"
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::verify::standins::with_stand_ins;

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
}
