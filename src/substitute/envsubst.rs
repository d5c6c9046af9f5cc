//! Expansion of a parsed template.

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
    let nodes = parse::parse(text).map_err(|e| SubstituteError::Syntax {
        line: e.line,
        kind: e.kind,
    })?;
    let context = Context { lookup, strict };
    let mut out = Vec::with_capacity(text.len());
    for node in &nodes {
        context.eval_node(node, &mut out)?;
    }
    String::from_utf8(out).map_err(|_| SubstituteError::InvalidUtf8)
}

struct Context<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    strict: bool,
}

impl Context<'_> {
    fn eval_node(&self, node: &Node, out: &mut Vec<u8>) -> Result<(), SubstituteError> {
        match node {
            Node::Text(text) => out.extend_from_slice(text),
            Node::Func(func) => out.extend(self.eval_func(func)?),
        }
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
                return Err(SubstituteError::VarNotSet(func.param.clone()));
            }
            None => String::new(),
        };
        funcs::apply(&func.name, &func.param, &value, &args)
    }
}
