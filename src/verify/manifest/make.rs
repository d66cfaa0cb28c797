//! A `Makefile`'s change as a test change: the recipes a check's `make` reaches are how it runs
//! the tests (`test: test_calc` / `./test_calc`), while its variables of sources and flags are
//! how the code is built. Putting the whole base `Makefile` back for the replay of the base
//! tests would take away the rules an honest change adds for its new sources, and the code
//! would no longer build; leaving it all to the work would let a builder make `make test` print
//! a pass. What counts: a recipe of a reached target (a target a check names or the default
//! goal, their prerequisites, and targets their recipes run through `$(MAKE)`) that the base
//! had and the work changed or removed, a reached recipe of the work that cannot fail
//! (`@echo all tests passed`: `verify::vacuous_check`), any pattern or suffix rule's recipe,
//! the variables the base's named targets' own recipes use (`./$(TEST_BIN)`), and `-DNDEBUG`
//! (it turns C's `assert` off) appearing in a reached recipe. A new rule for a new file, and
//! the source lists and other flags the compile recipes use, do not; a prerequisite's recipe
//! that only gained arguments does not either. Other compile flags that change what a test
//! means are not seen.

use std::collections::{BTreeMap, BTreeSet};

use crate::verify::shellwords::{split_list, words};

/// A `Makefile` read well enough to judge a change: explicit rules and variables.
#[derive(Debug, Default)]
struct Makefile {
    /// Each explicit target's prerequisites and recipe lines (prefixes `@`, `-`, `+` kept).
    rules: BTreeMap<String, Rule>,
    /// Pattern (`%.o: %.c`) and suffix (`.c.o:`) rules' recipes, by their target text.
    patterns: BTreeMap<String, Vec<String>>,
    /// Each variable's definitions, in order (`=`, `:=`, `?=`, `+=`).
    variables: BTreeMap<String, Vec<String>>,
    /// The first explicit target that is not special (`.PHONY`): what `make` alone builds.
    default_goal: Option<String>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Rule {
    prerequisites: Vec<String>,
    recipe: Vec<String>,
}

/// Whether changing a `Makefile` from `old` (`None`: the base had none) to `new` changes how
/// `checks` run the tests (the module's comment).
pub(super) fn changes_tests(old: Option<&str>, new: &str, checks: &[String]) -> bool {
    let new = parse(new);
    let named = goals_named(checks);
    let Some(old_text) = old else {
        // A new project's Makefile: no base test ran through it; only a recipe that cannot
        // fail is a test change.
        let goals = named.clone().unwrap_or_default();
        return reached(&new, &goals)
            .iter()
            .any(|t| new.rules.get(t).is_some_and(|r| vacuous(&r.recipe)));
    };
    let old = parse(old_text);
    if old.patterns != new.patterns {
        return true;
    }
    let goals = named.unwrap_or_default();
    let old_goals = with_default(&old, &goals);
    let new_goals = with_default(&new, &goals);
    if old_goals != new_goals {
        return true;
    }
    let old_reached = reached(&old, &old_goals);
    let new_reached = reached(&new, &new_goals);
    for target in &old_reached {
        let Some(before) = old.rules.get(target).map(|r| &r.recipe) else {
            continue;
        };
        let after = new.rules.get(target).map(|r| &r.recipe);
        if before.is_empty() || Some(before) == after {
            continue;
        }
        // The named targets' recipes run the tests: any change counts. A prerequisite's recipe
        // builds them: giving its commands more flags, files or libraries is how the code's
        // build grows; anything else (another command, an operator, a redirection) counts.
        let grows = !old_goals.contains(target)
            && after.is_some_and(|a| only_adds_arguments(before, a, &new));
        if !grows {
            return true;
        }
    }
    // `-DNDEBUG` turns C's `assert` off in what a reached recipe builds.
    let ndebug = |m: &Makefile, reached: &BTreeSet<String>| {
        reached.iter().any(|t| {
            m.rules
                .get(t)
                .is_some_and(|r| r.recipe.iter().any(|l| expand(m, l, 0).contains("NDEBUG")))
        })
    };
    if ndebug(&new, &new_reached) && !ndebug(&old, &old_reached) {
        return true;
    }
    if new_reached
        .iter()
        .any(|t| new.rules.get(t).is_some_and(|r| vacuous(&r.recipe)))
    {
        return true;
    }
    // The variables the named targets' recipes use, and those their values use: of the goals
    // the base could run (a goal the work added ran no base test).
    let base_goals: BTreeSet<&String> = old_goals
        .iter()
        .filter(|g| old.rules.get(*g).is_some_and(|r| !r.recipe.is_empty()))
        .collect();
    let used = |m: &Makefile| -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for &goal in &base_goals {
            for line in m
                .rules
                .get(goal)
                .map(|r| r.recipe.as_slice())
                .unwrap_or(&[])
            {
                names.extend(references(line));
            }
        }
        let mut todo: Vec<String> = names.iter().cloned().collect();
        while let Some(name) = todo.pop() {
            for value in m.variables.get(&name).map(Vec::as_slice).unwrap_or(&[]) {
                for r in references(value) {
                    if names.insert(r.clone()) {
                        todo.push(r);
                    }
                }
            }
        }
        names
    };
    let names: BTreeSet<String> = used(&old).into_iter().chain(used(&new)).collect();
    names
        .iter()
        .any(|n| old.variables.get(n) != new.variables.get(n))
}

/// The goals `checks` give `make`: `Some(empty)` when one runs `make` with none (the default
/// goal), `None` when no check runs `make`.
fn goals_named(checks: &[String]) -> Option<BTreeSet<String>> {
    let mut goals: Option<BTreeSet<String>> = None;
    for check in checks {
        for (_, part, _) in split_list(check) {
            let w = words(&part);
            let Some(start) = w
                .iter()
                .position(|x| !x.contains('=') || x.starts_with('-'))
            else {
                continue;
            };
            let program = w[start].rsplit('/').next().unwrap_or(&w[start]);
            if !matches!(program, "make" | "gmake") {
                continue;
            }
            let set = goals.get_or_insert_with(BTreeSet::new);
            let mut args = w[start + 1..].iter();
            while let Some(a) = args.next() {
                match a.as_str() {
                    "-C" | "-f" | "-j" | "-l" | "-o" | "-W" | "-I" | "--file" | "--directory" => {
                        args.next();
                    }
                    _ if a.starts_with('-') || a.contains('=') => {}
                    _ => {
                        set.insert(a.clone());
                    }
                }
            }
        }
    }
    goals
}

/// `goals`, or the default goal when a check names none.
fn with_default(m: &Makefile, goals: &BTreeSet<String>) -> BTreeSet<String> {
    if goals.is_empty() {
        m.default_goal.iter().cloned().collect()
    } else {
        goals.clone()
    }
}

/// The targets `goals` reach: themselves, their prerequisites (variables expanded) and the
/// targets their recipes run through `$(MAKE)`, transitively.
fn reached(m: &Makefile, goals: &BTreeSet<String>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = with_default(m, goals).into_iter().collect();
    while let Some(target) = todo.pop() {
        if !seen.insert(target.clone()) {
            continue;
        }
        let Some(rule) = m.rules.get(&target) else {
            continue;
        };
        for p in &rule.prerequisites {
            todo.extend(expand(m, p, 0).split_whitespace().map(str::to_owned));
        }
        for line in &rule.recipe {
            let w = words(line);
            if let Some(i) = w
                .iter()
                .position(|x| x == "$(MAKE)" || x == "${MAKE}" || x == "make")
            {
                todo.extend(
                    w[i + 1..]
                        .iter()
                        .filter(|x| !x.starts_with('-') && !x.contains('='))
                        .cloned(),
                );
            }
        }
    }
    seen
}

/// `text` with `$(NAME)` and `${NAME}` replaced by the variable's last definition, a few levels
/// deep; anything else is kept as written.
fn expand(m: &Makefile, text: &str, depth: usize) -> String {
    if depth > 8 || !text.contains('$') {
        return text.to_owned();
    }
    let mut out = text.to_owned();
    for name in references(text) {
        // A definition is kept with its operator (`= x`, `:= x`, `+= x`): the value follows it.
        let value = m
            .variables
            .get(&name)
            .map(|defs| {
                defs.iter()
                    .map(|d| {
                        let d = d.trim_start_matches([':', '?', '+', '!']);
                        d.strip_prefix('=').unwrap_or(d).trim()
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let value = expand(m, &value, depth + 1);
        out = out
            .replace(&format!("$({name})"), &value)
            .replace(&format!("${{{name}}}"), &value);
    }
    out
}

/// The variable names `text` refers to as `$(NAME)` or `${NAME}` (not functions such as
/// `$(shell …)` nor automatic variables).
fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'$' && matches!(bytes[i + 1], b'(' | b'{') {
            let close = if bytes[i + 1] == b'(' { ')' } else { '}' };
            if let Some(end) = text[i + 2..].find(close) {
                let name = &text[i + 2..i + 2 + end];
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                {
                    out.push(name.to_owned());
                }
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// Whether `after` is `before` with words added to its lines and nothing else: as many lines,
/// each holding the old line's words in order, every added word (variables expanded in `m`)
/// free of shell operators, redirections and substitutions.
fn only_adds_arguments(before: &[String], after: &[String], m: &Makefile) -> bool {
    before.len() == after.len()
        && before.iter().zip(after).all(|(b, a)| {
            let (old, new) = (words(b), words(a));
            let mut old_words = old.iter().peekable();
            for word in &new {
                if old_words.peek() == Some(&word) {
                    old_words.next();
                    continue;
                }
                let expanded = expand(m, word, 0);
                if expanded.contains(['`', ';', '&', '|', '<', '>']) || expanded.contains("$(") {
                    return false;
                }
            }
            old_words.peek().is_none()
        })
}

/// Whether a recipe cannot fail: its lines, prefixes taken off, are one check that
/// `verify::vacuous_check` finds vacuous.
fn vacuous(recipe: &[String]) -> bool {
    if recipe.is_empty() {
        return false;
    }
    let lines: Vec<&str> = recipe
        .iter()
        .map(|l| l.trim_start_matches(['@', '-', '+']).trim())
        .filter(|l| !l.is_empty())
        .collect();
    !lines.is_empty() && crate::verify::vacuous_check(&lines.join("\n")).is_some()
}

/// Reads explicit rules, pattern and suffix rules, and variables; conditionals are read as if
/// every branch held (a variable defined in two branches has both definitions).
fn parse(text: &str) -> Makefile {
    let mut m = Makefile::default();
    // Logical lines: a trailing backslash joins the next line.
    let mut lines: Vec<String> = Vec::new();
    let mut pending = String::new();
    for raw in text.lines() {
        if let Some(head) = raw.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        lines.push(std::mem::take(&mut pending));
    }
    if !pending.is_empty() {
        lines.push(pending);
    }
    let mut current: Vec<String> = Vec::new();
    let mut pattern: Option<String> = None;
    for line in lines {
        if let Some(recipe) = line.strip_prefix('\t') {
            let recipe = recipe.trim().to_owned();
            if recipe.is_empty() || recipe.starts_with('#') {
                continue;
            }
            if let Some(p) = &pattern {
                m.patterns.entry(p.clone()).or_default().push(recipe);
            } else {
                for t in &current {
                    m.rules
                        .entry(t.clone())
                        .or_default()
                        .recipe
                        .push(recipe.clone());
                }
            }
            continue;
        }
        let code = strip_comment(&line);
        let trimmed = code.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some((name, value)) = assignment(trimmed) {
            m.variables.entry(name).or_default().push(value);
            current.clear();
            pattern = None;
            continue;
        }
        let Some((targets, rest)) = trimmed.split_once(':') else {
            // A directive (`ifeq`, `include`, `export`): recipes do not continue past it.
            current.clear();
            pattern = None;
            continue;
        };
        let rest = rest.trim_start_matches(':');
        let (prerequisites, inline) = match rest.split_once(';') {
            Some((p, r)) => (p, Some(r.trim().to_owned())),
            None => (rest, None),
        };
        let targets: Vec<String> = targets.split_whitespace().map(str::to_owned).collect();
        let is_pattern = targets.iter().any(|t| t.contains('%'))
            || (targets.len() == 1 && is_suffix_rule(&targets[0]));
        if is_pattern {
            let key = targets.join(" ");
            m.patterns.entry(key.clone()).or_default();
            if let Some(r) = inline.filter(|r| !r.is_empty()) {
                m.patterns.entry(key.clone()).or_default().push(r);
            }
            pattern = Some(key);
            current.clear();
            continue;
        }
        pattern = None;
        for t in &targets {
            let rule = m.rules.entry(t.clone()).or_default();
            rule.prerequisites
                .extend(prerequisites.split_whitespace().map(str::to_owned));
            if let Some(r) = inline.as_ref().filter(|r| !r.is_empty()) {
                rule.recipe.push(r.clone());
            }
            if m.default_goal.is_none() && !t.starts_with('.') {
                m.default_goal = Some(t.clone());
            }
        }
        current = targets;
    }
    // Targets written through a variable (`$(TEST_BIN): …`) are the names it expands to.
    let written: Vec<String> = m
        .rules
        .keys()
        .filter(|t| t.contains('$'))
        .cloned()
        .collect();
    for key in written {
        let Some(rule) = m.rules.remove(&key) else {
            continue;
        };
        for target in expand(&m, &key, 0).split_whitespace() {
            let entry = m.rules.entry(target.to_owned()).or_default();
            entry
                .prerequisites
                .extend(rule.prerequisites.iter().cloned());
            entry.recipe.extend(rule.recipe.iter().cloned());
        }
    }
    m
}

/// `.c.o`, `.c`: a suffix rule's target.
fn is_suffix_rule(target: &str) -> bool {
    target.starts_with('.')
        && target[1..].split('.').all(|s| !s.is_empty())
        && target[1..].split('.').count() <= 2
        && target
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        && !target[1..]
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_')
}

/// The line before a `#` comment (a `\#` is kept).
fn strip_comment(line: &str) -> String {
    let mut out = String::new();
    let mut prev = '\0';
    for c in line.chars() {
        if c == '#' && prev != '\\' {
            break;
        }
        out.push(c);
        prev = c;
    }
    out
}

/// `NAME = value` (also `:=`, `::=`, `?=`, `+=`, `!=`, after `override`/`export`), as the name
/// and the value with its operator.
fn assignment(line: &str) -> Option<(String, String)> {
    let line = line
        .strip_prefix("override ")
        .or_else(|| line.strip_prefix("export "))
        .unwrap_or(line)
        .trim_start();
    let eq = line.find('=')?;
    let colon = line.find(':');
    // `target: VAR = value` is a target-specific variable: read as a rule.
    if colon.is_some_and(|c| c < eq && !line[c..eq].chars().all(|x| x == ':')) {
        return None;
    }
    let head = line[..eq].trim_end_matches([':', '?', '+', '!']);
    let name = head.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    Some((name.to_owned(), line[name.len()..].trim().to_owned()))
}

#[cfg(test)]
mod tests;
