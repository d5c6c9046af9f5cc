#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    fn new(
        key: String,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Requirement, RequirementError> {
        if let Some(reason) = label_key_error(&key) {
            return Err(RequirementError::Key { key, reason });
        }
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err(RequirementError::EmptyValueSet);
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                return Err(RequirementError::NotOneValue);
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                return Err(RequirementError::ValuesForExists);
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    return Err(RequirementError::NotOneNumber);
                }
                if let Some(value) = values.iter().find(|value| value.parse::<i64>().is_err()) {
                    return Err(RequirementError::NotAnInteger {
                        value: value.clone(),
                    });
                }
            }
            _ => {}
        }
        if let Some(value) = values.iter().find(|value| !is_label_value(value)) {
            return Err(RequirementError::Value {
                value: value.clone(),
                key,
            });
        }
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }

    fn matches<'a>(&self, lookup: &impl Fn(&str) -> Option<&'a str>) -> bool {
        let value = lookup(&self.key);
        let listed = |value: &str| self.values.iter().any(|candidate| candidate == value);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(listed),
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(listed),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(Ok(actual)) = value.map(|value| value.parse::<i64>()) else {
                    return false;
                };
                let [bound] = self.values.as_slice() else {
                    return false;
                };
                let Ok(bound) = bound.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }
}

/// Why a selector does not parse, as `labels.Parse` words it (`unable to parse
/// requirement: found '', expected: identifier`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A requirement is malformed.
    #[error("unable to parse requirement: {0}")]
    Requirement(#[source] RequirementError),
    /// An unexpected token between requirements.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
}

/// Why a requirement (`key op values`) is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// An unexpected token.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// The key, as read, is not a label key.
    #[error("Invalid value: {key:?}: {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// Why, as apimachinery's validation says.
        reason: String,
    },
    /// The requirement's key is not a label key.
    #[error("key: Invalid value: {key:?}: {reason}")]
    Key {
        /// The key.
        key: String,
        /// Why, as apimachinery's validation says.
        reason: String,
    },
    /// `in` or `notin` with no values.
    #[error("values: for 'in', 'notin' operators, values set can't be empty")]
    EmptyValueSet,
    /// `=`, `==` or `!=` with other than one value.
    #[error("values: exact-match compatibility requires one single value")]
    NotOneValue,
    /// An existence test with values.
    #[error("values: values set must be empty for exists and does not exist")]
    ValuesForExists,
    /// `gt` or `lt` with other than one value.
    #[error("values: for 'Gt', 'Lt' operators, exactly one value is required")]
    NotOneNumber,
    /// `gt` or `lt` with a value that is not an integer.
    #[error(
        "values: Invalid value: {value:?}: for 'Gt', 'Lt' operators, the value must be an integer"
    )]
    NotAnInteger {
        /// The value.
        value: String,
    },
    /// A value that is not a label value.
    #[error(
        "values[{key}]: Invalid value: {value:?}: a valid label must be an empty string or \
         consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
         alphanumeric character"
    )]
    Value {
        /// The requirement's key.
        key: String,
        /// The value.
        value: String,
    },
}

/// A token where the grammar wants another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    /// Another token than expected.
    #[error("found '{found}', expected: {expected}")]
    Unexpected {
        /// The token's text.
        found: String,
        /// What was expected.
        expected: Expected,
    },
    /// A value set that does not start with `(` (worded without the comma, as in Go).
    #[error("found '{found}' expected: '('")]
    NoOpenParen {
        /// The token's text.
        found: String,
    },
}

/// What the grammar expected where a token did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Expected {
    /// A key after a comma.
    #[error("identifier after ','")]
    IdentifierAfterComma,
    /// The end of a requirement.
    #[error("',' or 'end of string'")]
    CommaOrEnd,
    /// The start of a requirement.
    #[error("!, identifier, or 'end of string'")]
    RequirementStart,
    /// A key or value.
    #[error("identifier")]
    Identifier,
    /// An operator.
    #[error("in, notin, =, ==, !=, gt, lt")]
    Operator,
    /// The end of a value set.
    #[error("')'")]
    CloseParen,
    /// The start of a value set's contents.
    #[error("',', ')' or identifier")]
    ValueSetStart,
    /// What follows a value in a set.
    #[error("',' or ')'")]
    CommaOrCloseParen,
    /// A value in a set.
    #[error("',', or identifier")]
    CommaOrIdentifier,
}

/// A [`SyntaxError::Unexpected`].
fn unexpected(found: String, expected: Expected) -> SyntaxError {
    SyntaxError::Unexpected { found, expected }
}

/// A parsed label selector: every requirement must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `expression` as `labels.Parse` does; the error is its reason, such as
    /// `found '', expected: identifier`. An empty expression selects everything.
    pub fn parse(expression: &str) -> Result<LabelSelector, ParseError> {
        let mut parser = SelectorParser {
            items: lex_selector(expression),
            position: 0,
        };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// Whether the labels that `lookup` finds by key meet every requirement; for labels
    /// held as something other than a map, such as pairs in an object's order.
    pub fn matches_with<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements
            .iter()
            .all(|requirement| requirement.matches(&lookup))
    }

    /// Whether the selector has no requirement, and so selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn symbol_token(literal: &[u8]) -> Option<Token> {
    Some(match literal {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_selector_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_selector_symbol(byte: u8) -> bool {
    matches!(byte, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits a selector into tokens. A NUL byte reads as the end of the input, as in Go.
fn lex_selector(input: &str) -> Vec<(Token, String)> {
    let bytes = input.as_bytes();
    let mut position = 0;
    let read = |position: &mut usize| -> u8 {
        match bytes.get(*position) {
            Some(&byte) => {
                *position += 1;
                byte
            }
            None => 0,
        }
    };
    let mut items = Vec::new();
    loop {
        let mut byte = read(&mut position);
        while is_selector_space(byte) {
            byte = read(&mut position);
        }
        if byte == 0 {
            items.push((Token::End, String::new()));
            return items;
        }
        position -= 1;
        let mut buffer: Vec<u8> = Vec::new();
        if is_selector_symbol(byte) {
            let mut last: Option<Token> = None;
            let mut literal_len = 0;
            loop {
                let byte = read(&mut position);
                if byte == 0 {
                    break;
                }
                if !is_selector_symbol(byte) {
                    position -= 1;
                    break;
                }
                buffer.push(byte);
                if let Some(token) = symbol_token(&buffer) {
                    last = Some(token);
                    literal_len = buffer.len();
                } else if last.is_some() {
                    position -= 1;
                    break;
                }
            }
            // Every single symbol is a token, so `last` is always set.
            let token = last.unwrap_or(Token::End);
            buffer.truncate(literal_len);
            items.push((token, String::from_utf8_lossy(&buffer).into_owned()));
        } else {
            loop {
                let byte = read(&mut position);
                if byte == 0 {
                    break;
                }
                if is_selector_symbol(byte) || is_selector_space(byte) {
                    position -= 1;
                    break;
                }
                buffer.push(byte);
            }
            let literal = String::from_utf8_lossy(&buffer).into_owned();
            let token = match literal.as_str() {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            };
            items.push((token, literal));
        }
    }
}

/// Whether `in` and `notin` are keywords (after a key) or plain identifiers (elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct SelectorParser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl SelectorParser {
    fn lookahead(&self, context: Context) -> (Token, String) {
        let (token, literal) = self
            .items
            .get(self.position)
            .cloned()
            .unwrap_or((Token::End, String::new()));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, ParseError> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self.requirement().map_err(ParseError::Requirement)?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(
                                    unexpected(literal, Expected::IdentifierAfterComma).into()
                                );
                            }
                        }
                        _ => {
                            return Err(unexpected(literal, Expected::CommaOrEnd).into());
                        }
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(unexpected(literal, Expected::RequirementStart).into());
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, RequirementError> {
        let (key, operator) = self.key_and_inferred_operator()?;
        if let Some(operator @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return Requirement::new(key, operator, Vec::new());
        }
        let operator = self.operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        Requirement::new(key, operator, values)
    }

    fn key_and_inferred_operator(
        &mut self,
    ) -> Result<(String, Option<Operator>), RequirementError> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(unexpected(literal, Expected::Identifier).into());
        }
        if let Some(reason) = label_key_error(&literal) {
            return Err(RequirementError::InvalidKey {
                key: literal,
                reason,
            });
        }
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::End | Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn operator(&mut self) -> Result<Operator, SyntaxError> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(unexpected(literal, Expected::Operator));
            }
        })
    }

    /// `( value, ... )`; the values come back sorted and de-duplicated.
    fn value_set(&mut self) -> Result<Vec<String>, SyntaxError> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(SyntaxError::NoOpenParen { found: literal });
        }
        let (token, literal) = self.lookahead(Context::Values);
        let values = match token {
            Token::Identifier | Token::Comma => {
                let values = self.identifier_list()?;
                let (token, _) = self.consume(Context::Values);
                if token != Token::ClosedPar {
                    return Err(unexpected(literal, Expected::CloseParen));
                }
                values
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                vec![String::new()]
            }
            _ => {
                return Err(unexpected(literal, Expected::ValueSetStart));
            }
        };
        let mut values = values;
        values.sort();
        values.dedup();
        Ok(values)
    }

    fn identifier_list(&mut self) -> Result<Vec<String>, SyntaxError> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.push(literal);
                    let (next, literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(unexpected(literal, Expected::CommaOrCloseParen)),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    let (next, _) = self.lookahead(Context::Values);
                    if next == Token::ClosedPar {
                        values.push(String::new());
                        return Ok(values);
                    }
                    if next == Token::Comma {
                        values.push(String::new());
                    }
                }
                _ => return Err(unexpected(literal, Expected::CommaOrIdentifier)),
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, SyntaxError> {
        let (token, _) = self.lookahead(Context::Values);
        if matches!(token, Token::End | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(vec![literal])
        } else {
            Err(unexpected(literal, Expected::Identifier))
        }
    }
}

/// Why `key` is not a label key (`[prefix/]name`), if it is not one.
fn label_key_error(key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return Some("prefix part must be non-empty".into());
            }
            if !is_dns1123_subdomain(prefix) {
                return Some(
                    "prefix part a lowercase RFC 1123 subdomain must consist of lower case \
                     alphanumeric characters, '-' or '.', and must start and end with an \
                     alphanumeric character"
                        .into(),
                );
            }
            *name
        }
        _ => {
            return Some(
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', \
                 and must start and end with an alphanumeric character, with an optional DNS \
                 subdomain prefix and '/'"
                    .into(),
            );
        }
    };
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    if !is_qualified_name_part(name) {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
             start and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// An empty string, or a qualified name part of at most 63 characters.
fn is_label_value(value: &str) -> bool {
    value.is_empty() || (value.len() <= 63 && is_qualified_name_part(value))
}

/// Lower-case RFC 1123 subdomain of at most 253 characters.
fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= 253
        && value.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(first), Some(last)) => {
                    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
                    alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
                }
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn selects(expression: &str, pairs: &[(&str, &str)]) -> bool {
        match LabelSelector::parse(expression) {
            Ok(selector) => selector.matches(&labels(pairs)),
            Err(error) => panic!("{expression:?} does not parse: {error}"),
        }
    }

    #[test]
    fn every_operator_matches_as_in_apimachinery() {
        let web = [("app", "web"), ("tier", "front"), ("replicas", "3")];
        assert!(selects("app=web", &web));
        assert!(selects("app==web", &web));
        assert!(!selects("app!=web", &web));
        assert!(selects("missing!=web", &web));
        assert!(selects("tier in (front,back)", &web));
        assert!(!selects("tier notin (front)", &web));
        assert!(selects("missing notin (front)", &web));
        assert!(selects("app", &web));
        assert!(!selects("!app", &web));
        assert!(selects("!missing", &web));
        assert!(selects("replicas>2", &web));
        assert!(!selects("replicas<3", &web));
        assert!(!selects("app>1", &web));
        assert!(!selects("missing>1", &web));
        assert!(selects("app=web, tier in (front), !legacy", &web));
        assert!(!selects("app=web,tier=back", &web));
    }

    #[test]
    fn an_empty_selector_selects_everything() {
        let selector = LabelSelector::parse("").expect("parses");
        assert!(selector.is_empty());
        assert!(selector.matches(&BTreeMap::new()));
        assert!(selects("  ", &[]));
    }

    #[test]
    fn in_and_notin_are_keywords_only_after_a_key() {
        assert!(selects("in=notin", &[("in", "notin")]));
        assert!(selects("x in (in,notin)", &[("x", "notin")]));
    }

    #[test]
    fn a_nul_byte_where_a_token_starts_ends_the_input() {
        assert!(selects("app=web \0,this is ignored", &[("app", "web")]));
    }

    #[test]
    fn lookups_match_labels_held_as_pairs() {
        let selector = LabelSelector::parse("app=web,!legacy").expect("parses");
        let pairs = [("app", "web")];
        assert!(
            selector.matches_with(|key| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v))
        );
        assert!(!selector.matches_with(|_| Some("web")));
    }

    #[test]
    fn invalid_selectors_are_refused_with_apimachinery_reasons() {
        let reason = |expression: &str| match LabelSelector::parse(expression) {
            Ok(_) => panic!("{expression:?} parsed"),
            Err(error) => error.to_string(),
        };
        assert_eq!(
            reason("a in b"),
            "unable to parse requirement: found 'b' expected: '('"
        );
        assert!(reason("a,,b").contains("expected: identifier after ','"));
        assert!(reason("=a").contains("expected: !, identifier, or 'end of string'"));
        assert!(reason("a>b").contains("the value must be an integer"));
        assert!(reason("a=hello world").contains("expected: ',' or 'end of string'"));
        assert!(reason("a=-b").contains("a valid label must be an empty string"));
        assert!(reason("a/b/c").contains("a valid label key must consist of"));
        assert!(reason(&format!("{}=x", "k".repeat(64))).contains("no more than 63 characters"));
        assert!(reason(&format!("k={}", "v".repeat(64))).contains("Invalid value"));
    }

    #[test]
    fn errors_carry_the_token_and_what_was_expected() {
        assert_eq!(
            LabelSelector::parse("a in b"),
            Err(ParseError::Requirement(RequirementError::Syntax(
                SyntaxError::NoOpenParen {
                    found: "b".to_string()
                }
            )))
        );
        assert_eq!(
            LabelSelector::parse("a,,b"),
            Err(ParseError::Syntax(SyntaxError::Unexpected {
                found: ",".to_string(),
                expected: Expected::IdentifierAfterComma,
            }))
        );
        assert_eq!(
            LabelSelector::parse("a>b"),
            Err(ParseError::Requirement(RequirementError::NotAnInteger {
                value: "b".to_string()
            }))
        );
    }
}
