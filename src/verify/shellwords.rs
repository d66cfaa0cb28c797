//! Reading shell command text well enough to judge checks: a list split at its top-level
//! operators (`;`, `&&`, `||`, `|`, `&`, newlines) and the words of a simple command, quotes
//! removed. Used by the vacuous-check rule (`verify`), the objective's commands (`objective`) and
//! the test-file rules (`testfiles`).

/// The operator before an item of a shell list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Start,
    Seq,
    And,
    Or,
    Pipe,
}

/// Splits a shell list at top level into `(operator before, command text, backgrounded)`.
pub fn split_list(command: &str) -> Vec<(Op, String, bool)> {
    let chars: Vec<char> = command.chars().collect();
    let mut out: Vec<(Op, String, bool)> = Vec::new();
    let mut current = String::new();
    let mut op = Op::Start;
    let mut depth = 0i32;
    let mut i = 0;
    let mut at_word_start = true;
    let push = |out: &mut Vec<(Op, String, bool)>, current: &mut String, op: Op, bg: bool| {
        let text = current.trim().to_owned();
        if !text.is_empty() {
            out.push((op, text, bg));
        }
        current.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '\'')
                    .map(|p| i + 1 + p)
                    .unwrap_or(chars.len() - 1);
                current.extend(&chars[i..=end]);
                i = end + 1;
                at_word_start = false;
                continue;
            }
            '"' | '`' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != c {
                    if chars[j] == '\\' {
                        j += 1;
                    }
                    j += 1;
                }
                let end = j.min(chars.len() - 1);
                current.extend(&chars[i..=end]);
                i = end + 1;
                at_word_start = false;
                continue;
            }
            '\\' => {
                current.push(c);
                if let Some(&n) = chars.get(i + 1) {
                    current.push(n);
                }
                i += 2;
                continue;
            }
            '#' if at_word_start && depth == 0 => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '(' | '{' => depth += 1,
            ')' | '}' => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            let next = chars.get(i + 1).copied();
            let sep = match (c, next) {
                ('|', Some('|')) => Some((Op::Or, 2, false)),
                ('&', Some('&')) => Some((Op::And, 2, false)),
                ('|', _) => Some((Op::Pipe, 1, false)),
                ('&', Some('>')) => None,
                ('&', _) if !current.ends_with('>') && !current.ends_with('<') => {
                    Some((Op::Seq, 1, true))
                }
                (';', _) | ('\n', _) => Some((Op::Seq, 1, false)),
                _ => None,
            };
            if let Some((next_op, width, bg)) = sep {
                push(&mut out, &mut current, op, bg);
                op = next_op;
                i += width;
                at_word_start = true;
                continue;
            }
        }
        current.push(c);
        at_word_start = c.is_whitespace() || matches!(c, '(' | '{');
        i += 1;
    }
    push(&mut out, &mut current, op, false);
    out
}

/// Words of a simple command, quotes removed (enough to recognise the command name).
pub fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut has = false;
    for c in command.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                has = true;
            }
            None if c.is_whitespace() => {
                if has || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                has = false;
            }
            None => word.push(c),
        }
    }
    if has || !word.is_empty() {
        out.push(word);
    }
    out
}
