//! The parser: turns a template into text and `${...}` function nodes, following the
//! grammar of Flux's fork of drone/envsubst production by production.

use super::SyntaxError;
use super::scan::{self, Accept, Scanner, Token};

/// How deeply `${...}` may nest inside the arguments of another `${...}`. Flux has no limit;
/// this one keeps a hostile template from exhausting the stack.
pub(super) const MAX_NESTING: usize = 64;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Node {
    /// Literal text, escapes already resolved.
    Text(Vec<u8>),
    /// A `${...}` expression.
    Func(Func),
}

/// A `${param<name>args}` expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Func {
    /// The variable.
    pub(super) param: String,
    /// The operator (`""` for a plain `${var}`, `"#"` also for `${#var}`, `":-"`, `"//"`...).
    pub(super) name: String,
    /// The operator's arguments; each is a text or a nested expression.
    pub(super) args: Vec<Node>,
}

/// A parse failure and the 1-based line of the template where the scanner stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ParseError {
    pub(super) line: usize,
    pub(super) kind: SyntaxError,
}

type Parsed<T> = Result<T, SyntaxError>;

/// Parses a whole template into its top-level nodes.
pub(super) fn parse(text: &str) -> Result<Vec<Node>, ParseError> {
    let mut parser = Parser {
        scanner: Scanner::new(text),
        depth: 0,
    };
    parser.parse_any().map_err(|kind| ParseError {
        line: parser.scanner.line(),
        kind,
    })
}

struct Parser {
    scanner: Scanner,
    depth: usize,
}

impl Parser {
    fn set(&mut self, accept: Accept, mode: u8) {
        self.scanner.accept = accept;
        self.scanner.mode = mode;
    }

    /// Text and expressions up to the end of the template.
    fn parse_any(&mut self) -> Parsed<Vec<Node>> {
        let mut nodes = Vec::new();
        loop {
            self.set(scan::accept_rune, scan::IDENT | scan::LBRACK | scan::ESCAPE);
            self.scanner.escapes = scan::ESC_DOLLAR;
            match self.scanner.scan() {
                Token::Ident => nodes.push(Node::Text(self.scanner.text())),
                Token::Eof => return Ok(nodes),
                Token::Lbrack => nodes.push(self.parse_func()?),
                _ => return Err(SyntaxError::BadSubstitution),
            }
        }
    }

    /// The inside of `${...}`, the `${` already consumed.
    fn parse_func(&mut self) -> Parsed<Node> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(SyntaxError::TooDeep);
        }
        let node = self.parse_func_body();
        self.depth -= 1;
        node.map(Node::Func)
    }

    fn parse_func_body(&mut self) -> Parsed<Func> {
        self.scanner.escapes = scan::ESC_DOLLAR | scan::ESC_BACKSLASH;
        if self.scanner.peek() == '#' {
            return self.parse_len_func();
        }
        self.set(scan::accept_ident, scan::IDENT);
        let param = match self.scanner.scan() {
            Token::Ident => self.text(),
            _ => return Err(SyntaxError::VariableName),
        };
        match self.scanner.peek() {
            ':' => return self.parse_default_or_substr(param),
            '=' => return self.parse_default_func(param),
            ',' | '^' => return self.parse_casing_func(param),
            '/' => return self.parse_replace_func(param),
            '#' => return self.parse_remove_func(param, scan::accept_hash_func),
            '%' => return self.parse_remove_func(param, scan::accept_percent_func),
            _ => {}
        }
        self.set(scan::accept_ident, scan::RBRACK);
        match self.scanner.scan() {
            Token::Rbrack => Ok(Func {
                param,
                name: String::new(),
                args: Vec::new(),
            }),
            _ => Err(SyntaxError::MissingClosingBrace),
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.scanner.text()).into_owned()
    }

    /// An operator such as `:-` or `//`: one identifier token of `accept`ed characters.
    fn operator(&mut self, accept: Accept, err: SyntaxError) -> Parsed<String> {
        self.set(accept, scan::IDENT);
        match self.scanner.scan() {
            Token::Ident => Ok(self.text()),
            _ => Err(err),
        }
    }

    /// One argument: a nested expression or a run of `accept`ed characters.
    fn parse_param(&mut self, accept: Accept, mode: u8) -> Parsed<Node> {
        self.set(accept, mode | scan::LBRACK);
        match self.scanner.scan() {
            Token::Lbrack => self.parse_func(),
            Token::Ident | Token::Rbrack => Ok(Node::Text(self.scanner.text())),
            _ => Err(SyntaxError::FuncSubstitution),
        }
    }

    fn consume_rbrack(&mut self) -> Parsed<()> {
        self.scanner.mode = scan::RBRACK;
        match self.scanner.scan() {
            Token::Rbrack => Ok(()),
            _ => Err(SyntaxError::BadSubstitution),
        }
    }

    /// After `${name:`, looks at the next character to tell `:-` (and friends) from `:offset`.
    fn parse_default_or_substr(&mut self, param: String) -> Parsed<Func> {
        self.scanner.advance();
        let next = self.scanner.peek();
        // This steps back by the width of `next`, not of the colon, exactly as Flux's scanner
        // does: an offset starting with a multi-byte character is therefore a syntax error.
        self.scanner.back();
        match next {
            '=' | '-' | '?' | '+' => self.parse_default_func(param),
            _ => self.parse_substr_func(param),
        }
    }

    /// `${name:offset}` and `${name:offset:length}`.
    fn parse_substr_func(&mut self, param: String) -> Parsed<Func> {
        let name = self.operator(scan::accept_one_colon, SyntaxError::BadSubstitution)?;
        let mut args = vec![self.parse_param(scan::reject_colon_close, scan::IDENT)?];
        self.set(scan::accept_colon, scan::IDENT | scan::RBRACK);
        match self.scanner.scan() {
            Token::Rbrack => return Ok(Func { param, name, args }),
            Token::Ident => {}
            _ => return Err(SyntaxError::BadSubstitution),
        }
        args.push(self.parse_param(scan::accept_not_closing, scan::IDENT)?);
        self.consume_rbrack()?;
        Ok(Func { param, name, args })
    }

    /// `${name#pattern}`, `${name##pattern}`, `${name%pattern}`, `${name%%pattern}`.
    fn parse_remove_func(&mut self, param: String, accept: Accept) -> Parsed<Func> {
        let name = self.operator(accept, SyntaxError::BadSubstitution)?;
        let args = vec![self.parse_param(scan::accept_not_closing, scan::IDENT)?];
        self.consume_rbrack()?;
        Ok(Func { param, name, args })
    }

    /// `${name/old/new}`, `${name//old/new}`, `${name/#old/new}`, `${name/%old/new}`.
    fn parse_replace_func(&mut self, param: String) -> Parsed<Func> {
        let name = self.operator(scan::accept_replace_func, SyntaxError::BadSubstitution)?;
        let mut args = vec![self.parse_param(scan::accept_not_slash, scan::IDENT | scan::ESCAPE)?];
        self.operator(scan::accept_slash, SyntaxError::BadSubstitution)?;
        if self.scanner.peek() != '}' {
            args.push(self.parse_param(scan::accept_not_closing, scan::IDENT | scan::ESCAPE)?);
        }
        self.consume_rbrack()?;
        Ok(Func { param, name, args })
    }

    /// `${name=word}`, `${name:=word}`, `${name:-word}`, `${name:?word}`, `${name:+word}`;
    /// the word may mix text and nested expressions.
    fn parse_default_func(&mut self, param: String) -> Parsed<Func> {
        let accept: Accept = if self.scanner.peek() == '=' {
            scan::accept_one_equal
        } else {
            scan::accept_default_func
        };
        let name = self.operator(accept, SyntaxError::DefaultFunction)?;
        let mut args = Vec::new();
        while self.scanner.peek() != '}' {
            args.push(self.parse_param(scan::accept_not_closing, scan::IDENT)?);
        }
        self.consume_rbrack()?;
        Ok(Func { param, name, args })
    }

    /// `${name,}`, `${name,,}`, `${name^}`, `${name^^}` (and the mixed `,^`, `^,`).
    fn parse_casing_func(&mut self, param: String) -> Parsed<Func> {
        let name = self.operator(scan::accept_casing_func, SyntaxError::BadSubstitution)?;
        self.consume_rbrack()?;
        Ok(Func {
            param,
            name,
            args: Vec::new(),
        })
    }

    /// `${#name}`.
    fn parse_len_func(&mut self) -> Parsed<Func> {
        let name = self.operator(scan::accept_one_hash, SyntaxError::BadSubstitution)?;
        let param = self.operator(scan::accept_ident, SyntaxError::BadSubstitution)?;
        self.consume_rbrack()?;
        Ok(Func {
            param,
            name,
            args: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Node {
        Node::Text(s.as_bytes().to_vec())
    }

    fn func(param: &str, name: &str, args: Vec<Node>) -> Node {
        Node::Func(Func {
            param: param.into(),
            name: name.into(),
            args,
        })
    }

    #[test]
    fn parses_operators_and_arguments() {
        assert_eq!(parse("${a}").unwrap(), vec![func("a", "", vec![])]);
        assert_eq!(parse("${#a}").unwrap(), vec![func("a", "#", vec![])]);
        assert_eq!(
            parse("${a:1:2}").unwrap(),
            vec![func("a", ":", vec![text("1"), text("2")])]
        );
        assert_eq!(
            parse("${a//x/y}").unwrap(),
            vec![func("a", "//", vec![text("x"), text("y")])]
        );
        assert_eq!(
            parse("x${a:-p${b}s}y").unwrap(),
            vec![
                text("x"),
                func("a", ":-", vec![text("p"), func("b", "", vec![]), text("s")]),
                text("y"),
            ]
        );
    }

    #[test]
    fn reports_the_line_of_a_syntax_error() {
        let err = parse("a: 1\nb: ${x\n").unwrap_err();
        assert_eq!(err.kind, SyntaxError::MissingClosingBrace);
        assert_eq!(err.line, 2);
    }

    #[test]
    fn limits_nesting() {
        let deep = "${a:-".repeat(MAX_NESTING + 1) + &"}".repeat(MAX_NESTING + 1);
        assert_eq!(parse(&deep).unwrap_err().kind, SyntaxError::TooDeep);
        let ok = "${a:-".repeat(MAX_NESTING) + &"}".repeat(MAX_NESTING);
        assert!(parse(&ok).is_ok());
    }
}
