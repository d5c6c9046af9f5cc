//! Key/value sources of ConfigMap and Secret generators: env files, literals and files,
//! read in that order as kustomize does.

use std::path::Path;

use super::GeneratorError;
use crate::loader::Loader;

/// One key and its raw value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pair {
    pub key: String,
    pub value: Vec<u8>,
}

/// The sources of one generator.
pub(crate) struct Sources<'a> {
    pub envs: &'a [String],
    pub literals: &'a [String],
    pub files: &'a [String],
}

/// The longest line Go's line scanner (and so kustomize) reads from an env file.
const MAX_ENV_LINE: usize = 64 * 1024 - 1;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads every pair, in kustomize's order: env files, then literals, then files.
pub(crate) fn load_pairs(
    generator: &str,
    sources: &Sources<'_>,
    loader: &Loader,
    dir: &Path,
) -> Result<Vec<Pair>, GeneratorError> {
    let mut pairs = Vec::new();
    for env in sources.envs {
        let content = loader
            .read(dir, env)
            .map_err(|source| GeneratorError::Load {
                generator: generator.to_string(),
                source,
            })?;
        pairs.extend(parse_env_file(generator, env, &content)?);
    }
    for (index, literal) in sources.literals.iter().enumerate() {
        pairs.push(parse_literal(generator, index, literal)?);
    }
    for source in sources.files {
        let (key, path) = parse_file_source(generator, source)?;
        let value = loader
            .read(dir, path)
            .map_err(|source| GeneratorError::Load {
                generator: generator.to_string(),
                source,
            })?;
        pairs.push(Pair { key, value });
    }
    Ok(pairs)
}

/// `KEY=VALUE` lines of a dotenv file. Blank lines and `#` comments are skipped, a UTF-8
/// BOM on the first line is dropped, leading whitespace is trimmed, values are taken
/// verbatim (no quote processing), and a line without `=` yields an empty value (the
/// process environment is never consulted).
fn parse_env_file(
    generator: &str,
    file: &str,
    content: &[u8],
) -> Result<Vec<Pair>, GeneratorError> {
    let mut pairs = Vec::new();
    for (number, line) in scan_lines(content).enumerate() {
        if line.len() > MAX_ENV_LINE {
            return Err(GeneratorError::EnvLine {
                generator: generator.to_string(),
                file: file.to_string(),
                line: number + 1,
                reason: "is longer than 64 KiB".to_string(),
            });
        }
        let line = if number == 0 {
            line.strip_prefix(UTF8_BOM).unwrap_or(line)
        } else {
            line
        };
        let text = std::str::from_utf8(line).map_err(|_| GeneratorError::EnvLine {
            generator: generator.to_string(),
            file: file.to_string(),
            line: number + 1,
            reason: "is not valid UTF-8".to_string(),
        })?;
        let text = text.trim_start();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let (key, value) = text.split_once('=').unwrap_or((text, ""));
        if key.is_empty() {
            // kustomize treats a line starting with `=` like a blank line.
            continue;
        }
        pairs.push(Pair {
            key: key.to_string(),
            value: value.as_bytes().to_vec(),
        });
    }
    Ok(pairs)
}

/// Lines as Go's `bufio.ScanLines` yields them: split at `\n`, one trailing `\r` dropped,
/// no empty final line after a trailing newline.
fn scan_lines(content: &[u8]) -> impl Iterator<Item = &[u8]> {
    let body = content.strip_suffix(b"\n").unwrap_or(content);
    let lines = if content.is_empty() {
        None
    } else {
        Some(body.split(|b| *b == b'\n'))
    };
    lines
        .into_iter()
        .flatten()
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

/// `KEY=VALUE`, split at the first `=`; a value wrapped in matching single or double
/// quotes loses them.
fn parse_literal(generator: &str, index: usize, literal: &str) -> Result<Pair, GeneratorError> {
    match literal.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok(Pair {
            key: key.to_string(),
            value: remove_quotes(value).as_bytes().to_vec(),
        }),
        _ => Err(GeneratorError::InvalidLiteral {
            generator: generator.to_string(),
            index,
        }),
    }
}

fn remove_quotes(value: &str) -> &str {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last))
            if bytes.len() >= 2 && first == last && (first == b'"' || first == b'\'') =>
        {
            &value[1..value.len() - 1]
        }
        _ => value,
    }
}

/// `path` (the key is the path's base name) or `key=path`.
fn parse_file_source<'a>(
    generator: &str,
    source: &'a str,
) -> Result<(String, &'a str), GeneratorError> {
    let invalid = |reason: &str| GeneratorError::InvalidFileSource {
        generator: generator.to_string(),
        entry: source.to_string(),
        reason: reason.to_string(),
    };
    match source.matches('=').count() {
        0 => Ok((base_name(source), source)),
        1 => match source.split_once('=') {
            Some(("", _)) => Err(invalid("missing key name before '='")),
            Some((_, "")) => Err(invalid("missing file path after '='")),
            Some((key, path)) => Ok((key.to_string(), path)),
            None => Err(invalid("expected [key=]path")),
        },
        _ => Err(invalid("key name or file path contains '='")),
    }
}

/// The last element of a slash-separated path, as Go's `path.Base` computes it.
fn base_name(path: &str) -> String {
    if path.is_empty() {
        return ".".to_string();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_string();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(text: &[u8]) -> Vec<(String, String)> {
        parse_env_file("g", "f.env", text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, String::from_utf8(p.value).unwrap()))
            .collect()
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn env_files_skip_comments_blank_lines_and_bom() {
        let text = b"\xEF\xBB\xBFA=1\r\n\n  # comment\n  B = \"quoted\" \nC\n=skipped\nD=x=y";
        assert_eq!(
            env(text),
            kv(&[("A", "1"), ("B ", " \"quoted\" "), ("C", ""), ("D", "x=y")])
        );
        assert!(env(b"").is_empty());
        // A BOM on a later line is kept as part of the key.
        assert_eq!(env(b"A=1\n\xEF\xBB\xBFB=2")[1].0, "\u{feff}B");
    }

    #[test]
    fn env_files_reject_invalid_utf8_naming_the_line() {
        let err = parse_env_file("configMapGenerator x", "f.env", b"A=1\nB=\xff\n").unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("f.env") && message.contains("line 2"),
            "{message}"
        );
    }

    #[test]
    fn literals_split_at_first_equals_and_strip_matching_quotes() {
        let value = |s: &str| String::from_utf8(parse_literal("g", 0, s).unwrap().value).unwrap();
        assert_eq!(value("a=b=c"), "b=c");
        assert_eq!(value("a=\"x\""), "x");
        assert_eq!(value("a='x'"), "x");
        assert_eq!(value("a='x\""), "'x\"");
        assert_eq!(value("a='"), "'");
        assert_eq!(value("a=this is a 'test'"), "this is a 'test'");
        assert_eq!(value("a="), "");
        assert!(parse_literal("g", 0, "=b").is_err());
        let err = parse_literal("secretGenerator s", 3, "hunter2").unwrap_err();
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn file_sources() {
        assert_eq!(
            parse_file_source("g", "a/b.txt").unwrap(),
            ("b.txt".into(), "a/b.txt")
        );
        assert_eq!(
            parse_file_source("g", "k=a/b.txt").unwrap(),
            ("k".into(), "a/b.txt")
        );
        assert!(parse_file_source("g", "=a").is_err());
        assert!(parse_file_source("g", "k=").is_err());
        assert!(parse_file_source("g", "k=a=b").is_err());
        assert_eq!(base_name("dir/"), "dir");
    }
}
