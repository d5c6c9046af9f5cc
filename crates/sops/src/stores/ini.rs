//! sops' INI store, read and written as `gopkg.in/ini.v1` (with `AllowNonUniqueSections`)
//! does it for sops: every section (the unnamed `DEFAULT` one first) is a top-level key whose
//! value is a branch of string values; a comment above a key (or after its value) is kept as
//! a comment item after that key; the metadata is the `[sops]` section, flattened.

use zeroize::Zeroizing;

use super::{StoreError, flatten, key_text, split_metadata as split_nested, value_to_string};
use crate::tree::{Branch, Branches, Comment, Item, Key, Value};

const DEFAULT_SECTION: &str = "DEFAULT";

/// One section as ini.v1 holds it.
struct Section {
    name: String,
    comment: String,
    /// Keys in first-seen order; a repeated key keeps its place and takes the later value.
    keys: Vec<(String, String, String)>,
}

impl Section {
    fn new(name: String) -> Section {
        Section {
            name,
            comment: String::new(),
            keys: Vec::new(),
        }
    }

    fn set(&mut self, name: String, value: String, comment: String) {
        if let Some(entry) = self.keys.iter_mut().find(|(k, _, _)| *k == name) {
            entry.1 = value;
            entry.2 = comment;
        } else {
            self.keys.push((name, value, comment));
        }
    }
}

fn syntax(line: usize, reason: &str) -> StoreError {
    StoreError::Syntax {
        format: "INI",
        line,
        column: 1,
        reason: reason.to_string(),
    }
}

/// Lines as ini.v1 reads them: each with its `\n` (the last may lack it), and its number.
struct Lines<'a> {
    rest: &'a str,
    number: usize,
}

impl<'a> Lines<'a> {
    fn next_line(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        let end = self.rest.find('\n').map_or(self.rest.len(), |i| i + 1);
        let (line, rest) = self.rest.split_at(end);
        self.rest = rest;
        self.number += 1;
        Some(line)
    }
}

/// Loads an INI file: one branch whose items are the sections.
pub(super) fn load(data: &[u8]) -> Result<Branches, StoreError> {
    let text = std::str::from_utf8(data).map_err(|_| StoreError::NotUtf8 { format: "INI" })?;
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let sections = parse(text)?;
    let branch = sections.into_iter().map(section_item).collect();
    Ok(Branches(vec![branch]))
}

fn parse(text: &str) -> Result<Vec<Section>, StoreError> {
    let mut sections = vec![Section::new(DEFAULT_SECTION.to_string())];
    let mut comment = String::new();
    let mut lines = Lines {
        rest: text,
        number: 0,
    };
    while let Some(raw) = lines.next_line() {
        let line = raw.trim_start();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') || line.starts_with(';') {
            comment.push_str(line);
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let close = header
                .rfind(']')
                .ok_or_else(|| syntax(lines.number, "unclosed section"))?;
            let mut section = Section::new(header[..close].to_string());
            if let Some(i) = header[close + 1..].find(['#', ';']) {
                comment.push_str(&header[close + 1 + i..]);
            }
            section.comment = comment.trim().to_string();
            comment.clear();
            sections.push(section);
            continue;
        }
        let (name, offset) = key_name(line).map_err(|reason| syntax(lines.number, reason))?;
        let value = read_value(&line[offset..], &mut lines, &mut comment)
            .map_err(|reason| syntax(lines.number, reason))?;
        let key_comment = comment.trim().to_string();
        comment.clear();
        if let Some(section) = sections.last_mut() {
            section.set(name, value, key_comment);
        }
    }
    Ok(sections)
}

/// The key of a `key = value` line and where its value starts (after the delimiter).
fn key_name(line: &str) -> Result<(String, usize), &'static str> {
    let quote = if line.starts_with("\"\"\"") && line.len() > 6 {
        "\"\"\""
    } else if line.starts_with('"') {
        "\""
    } else if line.starts_with('`') {
        "`"
    } else {
        ""
    };
    if !quote.is_empty() {
        let start = quote.len();
        let pos = line[start..]
            .find(quote)
            .ok_or("missing closing key quote")?
            + start;
        let i = line
            .get(pos + start..)
            .and_then(|rest| rest.find(['=', ':']))
            .ok_or("key-value delimiter not found")?;
        return Ok((line[start..pos].trim().to_string(), pos + i + start + 1));
    }
    let end = line
        .find(['=', ':'])
        .ok_or("key-value delimiter not found")?;
    if end == 0 {
        return Err("empty key name");
    }
    Ok((line[..end].trim().to_string(), end + 1))
}

/// ini.v1's `readValue` with its defaults: `"""`/`` ` `` quoting (possibly over several
/// lines), `\` continuation lines, inline `#`/`;` comments, one pair of surrounding quotes
/// removed.
fn read_value(
    input: &str,
    lines: &mut Lines<'_>,
    comment: &mut String,
) -> Result<String, &'static str> {
    let line = input.trim_start();
    if line.is_empty() {
        return Ok(String::new());
    }
    let quote = if line.len() > 3 && line.starts_with("\"\"\"") {
        "\"\"\""
    } else if line.starts_with('`') {
        "`"
    } else {
        ""
    };
    if !quote.is_empty() {
        let start = quote.len();
        return match line[start..].rfind(quote) {
            Some(pos) => Ok(line[start..start + pos].to_string()),
            None => read_multilines(&line[start..], quote, lines, comment),
        };
    }
    let mut line = line.trim();
    if let Some(stripped) = line.strip_suffix('\\') {
        return Ok(read_continuation(stripped, lines));
    }
    if let Some(i) = line.find(['#', ';']) {
        comment.push_str(&line[i..]);
        line = line[..i].trim();
    }
    if surrounded(line, '\'') || surrounded(line, '"') {
        line = &line[1..line.len() - 1];
    }
    Ok(line.to_string())
}

fn surrounded(s: &str, quote: char) -> bool {
    s.len() >= 2
        && s.starts_with(quote)
        && s.ends_with(quote)
        && s[1..].find(quote) == Some(s.len() - 2)
}

fn read_multilines(
    first: &str,
    quote: &str,
    lines: &mut Lines<'_>,
    comment: &mut String,
) -> Result<String, &'static str> {
    let mut value = first.to_string();
    loop {
        let Some(next) = lines.next_line() else {
            return Err("missing closing value quote");
        };
        if let Some(pos) = next.rfind(quote) {
            let rest = next[pos + quote.len()..].trim_end_matches(['\r', '\n']);
            if rest.trim().ends_with('\\') {
                value.push_str(next);
                continue;
            }
            value.push_str(&next[..pos]);
            if let Some(i) = next[pos..].find(['#', ';']) {
                comment.push_str(next[pos + i..].trim());
            }
            return Ok(value);
        }
        value.push_str(next);
        if lines.rest.is_empty() {
            return Err("missing closing value quote");
        }
    }
}

fn read_continuation(first: &str, lines: &mut Lines<'_>) -> String {
    let mut value = first.to_string();
    while let Some(next) = lines.next_line() {
        let next = next.trim();
        if next.is_empty() {
            break;
        }
        value.push_str(next);
        match value.strip_suffix('\\') {
            Some(stripped) => value = stripped.to_string(),
            None => break,
        }
    }
    value
}

/// sops' `stripCommentChar`.
fn strip_comment_char(comment: &str) -> String {
    if comment.starts_with(';') {
        comment.trim_start_matches([';', ' ']).to_string()
    } else if comment.starts_with('#') {
        comment.trim_start_matches(['#', ' ']).to_string()
    } else {
        comment.to_string()
    }
}

fn comment_item(text: &str) -> Item {
    Item {
        key: Key::Comment(Comment {
            text: strip_comment_char(text),
            inline: false,
        }),
        value: Value::Null,
    }
}

fn section_item(section: Section) -> Item {
    let mut items = Branch::new();
    if !section.comment.is_empty() {
        items.push(comment_item(&section.comment));
    }
    for (name, value, comment) in section.keys {
        items.push(Item {
            key: Key::Name(name),
            value: Value::String(value),
        });
        if !comment.is_empty() {
            items.push(comment_item(&comment));
        }
    }
    Item {
        key: Key::Name(section.name),
        value: Value::Map(items),
    }
}

/// The `[sops]` section, its `\n` escapes undone, unflattened.
pub(super) fn split_metadata(branches: Branches) -> Result<(Branches, Branch), StoreError> {
    let (branches, mut flat) = split_nested(branches)?;
    for item in &mut flat {
        if let Value::String(s) = &mut item.value {
            *s = s.replace("\\n", "\n");
        }
    }
    Ok((branches, flatten::unflatten(flat)?))
}

/// Writes the sections as ini.v1's `WriteTo` does with sops' settings.
pub(super) fn emit(branches: &Branches) -> Result<Zeroizing<Vec<u8>>, StoreError> {
    let mut sections = Vec::new();
    for item in branches.0.iter().flatten() {
        let name = match &item.key {
            Key::Comment(_) => continue,
            key => key_text(key),
        };
        let Value::Map(tree) = &item.value else {
            return Err(StoreError::IniSection { section: name });
        };
        sections.push(section_from_tree(name, tree)?);
    }
    let mut out = Zeroizing::new(String::new());
    let last = sections.len().saturating_sub(1);
    for (i, section) in sections.iter().enumerate() {
        write_comment(&mut out, &section.comment, false);
        if i > 0 || !section.name.eq_ignore_ascii_case(DEFAULT_SECTION) {
            out.push('[');
            out.push_str(&section.name);
            out.push_str("]\n");
        } else if section.keys.is_empty() {
            continue;
        }
        write_keys(&mut out, section);
        if i != last {
            out.push('\n');
        }
    }
    Ok(Zeroizing::new(out.as_bytes().to_vec()))
}

fn section_from_tree(name: String, tree: &[Item]) -> Result<Section, StoreError> {
    let mut section = Section::new(name);
    let mut rest = tree;
    if let Some(Item {
        key: Key::Comment(c),
        ..
    }) = tree.first()
    {
        section.comment = c.text.clone();
        rest = &tree[1..];
    }
    for item in rest {
        match &item.key {
            Key::Comment(c) => {
                if let Some(last) = section.keys.last_mut() {
                    last.2 = c.text.clone();
                }
            }
            key => {
                if matches!(item.value, Value::Map(_) | Value::Seq(_)) {
                    return Err(StoreError::ComplexValue {
                        format: "INI",
                        key: key_text(key),
                    });
                }
                let value = value_to_string(&item.value);
                let comment = String::new();
                section.set(key_text(key), value, comment);
            }
        }
    }
    Ok(section)
}

/// Comment lines, each prefixed with `; ` unless it starts with `#` or `;` (then one space
/// after that character, the rest trimmed).
fn write_comment(out: &mut String, comment: &str, trim_plain: bool) {
    if comment.is_empty() {
        return;
    }
    for line in comment.split('\n') {
        match line.chars().next() {
            Some(c @ ('#' | ';')) => {
                out.push(c);
                out.push(' ');
                out.push_str(line[1..].trim());
            }
            _ => {
                out.push_str("; ");
                out.push_str(if trim_plain { line.trim() } else { line });
            }
        }
        out.push('\n');
    }
}

fn quoted_key(name: &str) -> String {
    if name.contains('"') || name.contains(['=', ':']) {
        format!("`{name}`")
    } else if name.contains('`') {
        format!("\"\"\"{name}\"\"\"")
    } else {
        name.to_string()
    }
}

fn write_keys(out: &mut String, section: &Section) {
    let align = section
        .keys
        .iter()
        .map(|(k, _, _)| quoted_key(k).len())
        .max()
        .unwrap_or(0);
    for (name, value, comment) in &section.keys {
        write_comment(out, comment, true);
        let name = quoted_key(name);
        out.push_str(&name);
        out.push_str(&" ".repeat(align - name.len()));
        out.push_str(" = ");
        if value.contains(['\n', '`']) {
            out.push_str("\"\"\"");
            out.push_str(value);
            out.push_str("\"\"\"");
        } else if value.contains(['#', ';']) {
            out.push('`');
            out.push_str(value);
            out.push('`');
        } else if value.trim().len() != value.len() {
            out.push('"');
            out.push_str(value);
            out.push('"');
        } else {
            out.push_str(value);
        }
        out.push('\n');
    }
}
