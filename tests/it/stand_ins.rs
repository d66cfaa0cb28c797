//! The stand-ins of the witness replay (`autocode::verify::standins`) run as their languages
//! run them: Python raises past `except Exception` (a method too), node loads them as ES and
//! CommonJS modules and they throw when called (a method set on its class too), rustc builds
//! the Rust ones into the base file and a `#[should_panic]` test of one fails (it aborts).

use autocode::verify::standins::with_stand_ins;

#[test]
fn the_stand_in_runs_as_python_and_raises_past_except_exception() {
    let shown = with_stand_ins(
        "m.py",
        None,
        None,
        "def title_words(t):\n    return t\n\nclass Title:\n    pass\n",
    )
    .unwrap();
    let program = format!(
        "{shown}\nassert callable(title_words)\nfor f in (title_words, Title):\n    try:\n        try:\n            f('a b')\n        except Exception:\n            print('caught')\n    except BaseException as e:\n        print(type(e).__name__)\n"
    );
    assert_eq!(
        python_prints(&program),
        "AutocodeStandIn\nAutocodeStandIn\n"
    );
}

#[test]
fn python_methods_stand_in_on_their_base_class() {
    let base = "class Cal:\n    def leap(self, y):\n        return y % 4 == 0\n";
    let result = "class Cal:\n    def leap(self, y):\n        return y % 4 == 0\n\n    @property\n    def era(self):\n        return 'CE'\n\n    @staticmethod\n    def century(y):\n        return y // 100 + 1\n\n    def name(self, y):\n        return str(y)\n";
    let shown = with_stand_ins("cal.py", Some(base), Some(base), result).unwrap();
    let program = format!(
        "{shown}\nassert hasattr(Cal, 'century') and callable(Cal().name) and Cal().leap(4)\nfor f in (lambda: Cal().era, lambda: Cal.century(1900), lambda: Cal().name(1)):\n    try:\n        try:\n            f()\n        except Exception:\n            print('caught')\n    except BaseException as e:\n        print(str(e).split(':')[0])\n"
    );
    assert_eq!(python_prints(&program), "Cal.era\nCal.century\nCal.name\n");
}

#[test]
fn the_stand_ins_load_as_modules_under_node_and_throw_when_called() {
    let dir = tempfile::tempdir().unwrap();
    let esm = with_stand_ins(
        "t.mjs",
        None,
        None,
        "export function titleWords(t) {\n  return t;\n}\nexport class Title {}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("t.mjs"), esm).unwrap();
    let cjs_base = "module.exports = { shout: (s) => s };\n";
    let cjs = with_stand_ins(
        "c.js",
        Some(cjs_base),
        Some(cjs_base),
        "function titleWords(t) { return t; }\nmodule.exports = { shout: (s) => s, titleWords };\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("c.js"), cjs).unwrap();
    assert_eq!(
        node_prints(
            dir.path(),
            "import { titleWords, Title } from './t.mjs';\nimport { createRequire } from 'node:module';\nconst c = createRequire(import.meta.url)('./c.js');\nfor (const f of [() => titleWords('a'), () => new Title(), () => c.titleWords('a')]) {\n  try { f(); console.log('ran'); } catch (e) { console.log(e.message.split(':')[0]); }\n}\nconsole.log(c.shout('x'));\n"
        ),
        "titleWords\nTitle\ntitleWords\nx\n"
    );
}

#[test]
fn javascript_methods_stand_in_on_their_base_class() {
    let dir = tempfile::tempdir().unwrap();
    let base = "export class Cal {\n  leap(y) {\n    return y % 4 === 0;\n  }\n}\n";
    let result = "export class Cal {\n  leap(y) {\n    return y % 4 === 0;\n  }\n\n  century(y) {\n    return Math.floor(y / 100) + 1;\n  }\n\n  static name() {\n    return 'cal';\n  }\n\n  get era() {\n    return 'CE';\n  }\n}\n";
    let shown = with_stand_ins("cal.mjs", Some(base), Some(base), result).unwrap();
    std::fs::write(dir.path().join("cal.mjs"), shown).unwrap();
    assert_eq!(
        node_prints(
            dir.path(),
            "import { Cal } from './cal.mjs';\nconsole.log(typeof Cal.prototype.century, new Cal().leap(4));\nfor (const f of [() => new Cal().century(1900), () => Cal.name(), () => new Cal().era]) {\n  try { f(); console.log('ran'); } catch (e) { console.log(e.message.split(':')[0]); }\n}\n"
        ),
        "function true\nCal.century\nCal.name\nCal.era\n"
    );
}

#[test]
fn the_rust_stand_ins_build_and_abort_past_should_panic() {
    let base = "use std::collections::HashMap;\n\n/// Shouts.\npub fn shout(s: &str) -> String {\n    s.to_uppercase()\n}\n";
    let result = format!(
        "{base}\n/// Title-cases.\npub fn title_words(s: &str) -> String {{\n    s.to_owned()\n}}\n\npub fn count(words: &[&str]) -> HashMap<String, usize> {{\n    HashMap::new()\n}}\n"
    );
    let shown = with_stand_ins("src/lib.rs", Some(base), Some(base), &result).unwrap();
    // The base builds with them (rustc), and a `#[should_panic]` test of a stand-in fails.
    let dir = tempfile::tempdir().unwrap();
    let test = "\n#[cfg(test)]\nmod standin_tests {\n    #[test]\n    #[should_panic]\n    fn expects_a_panic() { super::title_words(\"a b\"); }\n    #[test]\n    fn only_names_it() { let _f: fn(&str) -> String = super::title_words; }\n}\n";
    std::fs::write(dir.path().join("lib.rs"), format!("{shown}{test}")).unwrap();
    let built = std::process::Command::new("rustc")
        .args(["--edition", "2021", "--test", "-o"])
        .arg(dir.path().join("t"))
        .arg(dir.path().join("lib.rs"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let named = std::process::Command::new(dir.path().join("t"))
        .arg("only_names_it")
        .output()
        .unwrap();
    assert!(
        named.status.success(),
        "{}",
        String::from_utf8_lossy(&named.stdout)
    );
    let called = std::process::Command::new(dir.path().join("t"))
        .arg("expects_a_panic")
        .output()
        .unwrap();
    assert!(
        !called.status.success(),
        "{}",
        String::from_utf8_lossy(&called.stdout)
    );
    assert!(
        String::from_utf8_lossy(&called.stderr).contains("title_words: autocode witness replay")
    );
}

/// What `python3 -c program` prints, which must exit 0.
fn python_prints(program: &str) -> String {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(program)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What `node main.mjs` prints in `dir` with `main` written there, which must exit 0.
fn node_prints(dir: &std::path::Path, main: &str) -> String {
    std::fs::write(dir.join("main.mjs"), main).unwrap();
    let out = std::process::Command::new("node")
        .arg("main.mjs")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
