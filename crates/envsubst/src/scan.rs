//! The lexical scanner behind the substitution parser.
//!
//! Flux's parser drives a small stateful scanner: the parser sets which tokens may be
//! recognised (`mode`), which characters may appear in the next identifier (`accept`) and
//! which escapes are live, then asks for one token. The scanner works on the bytes of the
//! template, decodes characters the way Go does (an invalid byte reads as U+FFFD, one byte
//! wide) and, like Flux's, deletes the first character of an escape pair from its buffer so
//! that the token text holds the unescaped character. Several of Flux's quirks follow from
//! these mechanics, so they are reproduced as they are rather than tidied.

use std::sync::LazyLock;

/// Recognise identifier characters (as chosen by `accept`).
pub(super) const IDENT: u8 = 1;
/// Recognise `${`.
pub(super) const LBRACK: u8 = 1 << 1;
/// Recognise `}`.
pub(super) const RBRACK: u8 = 1 << 2;
/// Honour the live escapes inside identifiers.
pub(super) const ESCAPE: u8 = 1 << 3;

/// `$$` escapes a dollar.
pub(super) const ESC_DOLLAR: u8 = 1;
/// `\/` and `\\` escape a slash and a backslash.
pub(super) const ESC_BACKSLASH: u8 = 1 << 1;

/// Decides whether a character joins the identifier being scanned; the second argument is
/// the identifier's length in bytes including that character.
pub(super) type Accept = fn(char, usize) -> bool;

/// What `read` returns at the end of the buffer. As in Flux, a NUL character in the text
/// reads the same way and so ends the text.
const EOF: char = '\0';

/// One scanned token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token {
    Illegal,
    Eof,
    Ident,
    Lbrack,
    Rbrack,
}

/// The scanner's state; see the module docs.
pub(super) struct Scanner {
    buf: Vec<u8>,
    pos: usize,
    start: usize,
    width: usize,
    pub(super) mode: u8,
    pub(super) escapes: u8,
    pub(super) accept: Accept,
}

impl Scanner {
    /// A scanner at the start of `text`.
    pub(super) fn new(text: &str) -> Self {
        Scanner {
            buf: text.as_bytes().to_vec(),
            pos: 0,
            start: 0,
            width: 0,
            mode: 0,
            escapes: 0,
            accept: accept_rune,
        }
    }

    /// The 1-based line where the last token starts (escapes never remove a newline, so this
    /// is also the line in the original text).
    pub(super) fn line(&self) -> usize {
        let end = self.start.min(self.buf.len());
        1 + self.buf[..end].iter().filter(|b| **b == b'\n').count()
    }

    fn read(&mut self) -> char {
        match self.buf.get(self.pos..) {
            Some(rest) if !rest.is_empty() => {
                let (c, width) = decode_rune(rest);
                self.width = width;
                self.pos += width;
                c
            }
            _ => {
                self.width = 0;
                EOF
            }
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(self.width);
    }

    /// Drops the character just read (the first of an escape pair) from the buffer, so that
    /// the character after it now sits just before the position and joins the token.
    fn skip(&mut self) {
        if self.pos >= 1 && self.pos - 1 < self.buf.len() {
            self.buf.remove(self.pos - 1);
        }
    }

    /// The next character, without consuming it. Note that this leaves `width` at that
    /// character's width, which a later `unread` uses (as in Flux).
    pub(super) fn peek(&mut self) -> char {
        let c = self.read();
        self.unread();
        c
    }

    /// Consumes one character (used by the parser to look two characters ahead).
    pub(super) fn advance(&mut self) {
        self.read();
    }

    /// Steps back over the last character read.
    pub(super) fn back(&mut self) {
        self.unread();
    }

    /// The text of the last token.
    pub(super) fn text(&self) -> Vec<u8> {
        self.buf
            .get(self.start..self.pos)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    }

    /// Scans the next token under the current mode.
    pub(super) fn scan(&mut self) -> Token {
        self.start = self.pos;
        let r = self.read();
        if r == EOF {
            Token::Eof
        } else if self.scan_lbrack(r) {
            Token::Lbrack
        } else if self.scan_rbrack(r) {
            Token::Rbrack
        } else if self.scan_ident(r) {
            Token::Ident
        } else {
            Token::Illegal
        }
    }

    fn scan_ident(&mut self, first: char) -> bool {
        if self.mode & IDENT == 0 {
            return false;
        }
        if self.scan_escaped(first) {
            self.skip();
        } else if !(self.accept)(first, self.pos - self.start) {
            return false;
        }
        loop {
            let r = self.read();
            if r == EOF {
                self.unread();
                break;
            }
            if self.scan_lbrack(r) {
                self.unread();
                self.unread();
                break;
            }
            if self.scan_escaped(r) {
                self.skip();
                continue;
            }
            if !(self.accept)(r, self.pos - self.start) {
                self.unread();
                break;
            }
        }
        true
    }

    fn scan_lbrack(&mut self, r: char) -> bool {
        if self.mode & LBRACK == 0 || r != '$' {
            return false;
        }
        if self.read() == '{' {
            return true;
        }
        self.unread();
        false
    }

    fn scan_rbrack(&self, r: char) -> bool {
        self.mode & RBRACK != 0 && r == '}'
    }

    fn scan_escaped(&mut self, r: char) -> bool {
        if self.mode & ESCAPE == 0 {
            return false;
        }
        if r == '$' && self.escapes & ESC_DOLLAR != 0 && self.peek() == '$' {
            return true;
        }
        if r == '\\' && self.escapes & ESC_BACKSLASH != 0 {
            return matches!(self.peek(), '/' | '\\');
        }
        false
    }
}

/// Decodes the first character of `bytes` as Go's `utf8.DecodeRune` does: an invalid or
/// truncated sequence reads as U+FFFD one byte wide. `bytes` must not be empty.
pub(super) fn decode_rune(bytes: &[u8]) -> (char, usize) {
    let head = &bytes[..bytes.len().min(4)];
    let valid = match std::str::from_utf8(head) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""),
    };
    match valid.chars().next() {
        Some(c) => (c, c.len_utf8()),
        None => (char::REPLACEMENT_CHARACTER, 1),
    }
}

/// Decodes all of `bytes` into characters the way Go's `[]rune(s)` does.
pub(super) fn go_runes(mut bytes: &[u8]) -> Vec<char> {
    let mut out = Vec::with_capacity(bytes.len());
    while !bytes.is_empty() {
        let (c, width) = decode_rune(bytes);
        out.push(c);
        bytes = &bytes[width..];
    }
    out
}

pub(super) fn accept_rune(_: char, _: usize) -> bool {
    true
}

/// Go's `unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_'`: general categories L and Nd.
pub(super) fn accept_ident(r: char, _: usize) -> bool {
    static LETTER_OR_DIGIT: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"^[\p{L}\p{Nd}]$").ok());
    if r.is_ascii() {
        return r.is_ascii_alphanumeric() || r == '_';
    }
    let mut utf8 = [0u8; 4];
    match LETTER_OR_DIGIT.as_ref() {
        Some(re) => re.is_match(r.encode_utf8(&mut utf8)),
        None => r.is_alphanumeric(),
    }
}

pub(super) fn accept_colon(r: char, _: usize) -> bool {
    r == ':'
}

pub(super) fn accept_one_hash(r: char, i: usize) -> bool {
    r == '#' && i == 1
}

pub(super) fn accept_not_closing(r: char, _: usize) -> bool {
    r != '}'
}

pub(super) fn accept_hash_func(r: char, i: usize) -> bool {
    r == '#' && i < 3
}

pub(super) fn accept_percent_func(r: char, i: usize) -> bool {
    r == '%' && i < 3
}

pub(super) fn accept_default_func(r: char, i: usize) -> bool {
    (i == 1 && r == ':') || (i == 2 && matches!(r, '=' | '-' | '?' | '+'))
}

pub(super) fn accept_replace_func(r: char, i: usize) -> bool {
    (i == 1 && r == '/') || (i == 2 && matches!(r, '/' | '#' | '%'))
}

pub(super) fn accept_one_equal(r: char, i: usize) -> bool {
    i == 1 && r == '='
}

pub(super) fn accept_one_colon(r: char, i: usize) -> bool {
    i == 1 && r == ':'
}

pub(super) fn reject_colon_close(r: char, _: usize) -> bool {
    r != ':' && r != '}'
}

pub(super) fn accept_slash(r: char, _: usize) -> bool {
    r == '/'
}

pub(super) fn accept_not_slash(r: char, _: usize) -> bool {
    r != '/'
}

pub(super) fn accept_casing_func(r: char, i: usize) -> bool {
    (r == ',' || r == '^') && i < 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_go() {
        assert_eq!(decode_rune("é!".as_bytes()), ('é', 2));
        assert_eq!(decode_rune(&[0xc3]), (char::REPLACEMENT_CHARACTER, 1));
        assert_eq!(
            decode_rune(&[0xe2, 0x82, b'a']),
            (char::REPLACEMENT_CHARACTER, 1)
        );
        assert_eq!(
            go_runes(&[0xe2, 0x82, b'a']),
            vec!['\u{fffd}', '\u{fffd}', 'a']
        );
    }

    #[test]
    fn identifiers_are_letters_digits_and_underscore() {
        assert!(accept_ident('a', 1) && accept_ident('_', 1) && accept_ident('7', 1));
        assert!(accept_ident('é', 2) && accept_ident('名', 3) && accept_ident('٣', 2));
        // Letter numbers and combining marks are not Go letters.
        assert!(!accept_ident('Ⅻ', 3) && !accept_ident('\u{93e}', 3));
        assert!(!accept_ident('-', 1) && !accept_ident('}', 1));
    }

    #[test]
    fn escaped_dollar_joins_the_token() {
        let mut s = Scanner::new("$${x}");
        s.mode = IDENT | LBRACK | ESCAPE;
        s.escapes = ESC_DOLLAR;
        s.accept = accept_rune;
        assert_eq!(s.scan(), Token::Ident);
        assert_eq!(s.text(), b"${x}");
        assert_eq!(s.scan(), Token::Eof);
    }
}
