//! Expansion of a parsed template.

use std::cell::Cell;

use super::SubstituteError;
use super::funcs;
use super::parse::{self, Func, Node};

/// Expands every `${...}` expression of `text` with Flux's post-build semantics.
///
/// `lookup` gives a variable's value, or `None` when it is not set. An unset variable reads
/// as the empty string, unless `strict` is true: then it is an error, except under an
/// operator that supplies a fallback (`=`, `:=`, `:-`, `:+`, `:?`). `$var` without braces is
/// left alone and `$${...}` gives a literal `${...}`. Values are used as they are: Flux strips
/// newlines when it loads the variables (see [`super::strip_newlines`]), not here.
///
/// Errors name the variable or the line of the template, never a value.
pub fn eval(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    strict: bool,
) -> Result<String, SubstituteError> {
    eval_limited(text, lookup, strict, usize::MAX)
}

/// [`eval`] with a byte budget: every byte the expansion writes (the output, and the
/// expanded arguments of operators) counts against `budget`, and the expansion stops with
/// [`SubstituteError::TooLarge`] as soon as it would go over, so memory stays bounded
/// whatever the template and values are.
pub fn eval_limited(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    strict: bool,
    budget: usize,
) -> Result<String, SubstituteError> {
    let nodes = parse::parse(text).map_err(|e| SubstituteError::Syntax {
        line: e.line,
        kind: e.kind,
    })?;
    let context = Context {
        lookup,
        strict,
        budget,
        remaining: Cell::new(budget),
    };
    let mut out = Vec::with_capacity(text.len());
    for node in &nodes {
        context.eval_node(node, &mut out)?;
    }
    String::from_utf8(out).map_err(|_| SubstituteError::InvalidUtf8)
}

struct Context<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    strict: bool,
    budget: usize,
    /// Bytes that may still be written.
    remaining: Cell<usize>,
}

impl Context<'_> {
    fn eval_node(&self, node: &Node, out: &mut Vec<u8>) -> Result<(), SubstituteError> {
        match node {
            Node::Text(text) => {
                self.spend(text.len())?;
                out.extend_from_slice(text);
            }
            Node::Func(func) => {
                let value = self.eval_func(func)?;
                self.spend(value.len())?;
                out.extend(value);
            }
        }
        Ok(())
    }

    /// Counts `bytes` written against the budget.
    fn spend(&self, bytes: usize) -> Result<(), SubstituteError> {
        let remaining = self.remaining.get();
        if bytes > remaining {
            return Err(SubstituteError::TooLarge { limit: self.budget });
        }
        self.remaining.set(remaining - bytes);
        Ok(())
    }

    /// Expands one expression. As in Flux, the arguments are expanded first, so an unset
    /// variable in a default is an error in strict mode even when the default is not needed.
    fn eval_func(&self, func: &Func) -> Result<Vec<u8>, SubstituteError> {
        let mut args = Vec::with_capacity(func.args.len());
        for arg in &func.args {
            let mut buf = Vec::new();
            self.eval_node(arg, &mut buf)?;
            args.push(buf);
        }
        let value = match (self.lookup)(&func.param) {
            Some(value) => value,
            None if self.strict && !funcs::is_default_op(&func.name) => {
                return Err(match super::unquotable_name(&func.param) {
                    Some(reason) => SubstituteError::VarNotSetUnquoted { reason },
                    None => SubstituteError::VarNotSet(func.param.clone()),
                });
            }
            None => String::new(),
        };
        let max = self.remaining.get();
        funcs::apply(&func.name, &func.param, &value, &args, max).map_err(|e| match e {
            SubstituteError::TooLarge { .. } => SubstituteError::TooLarge { limit: self.budget },
            other => other,
        })
    }
}
