//! The one walk over a parsed expression that the compile-time checks and the evaluation error
//! messages share: depth-first, each node before its operands, with the names the macros'
//! comprehensions bind in scope at that node.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// Calls `visit` on every node of `expression` with the names bound around it (starting from
/// `bound`), and returns the first `Some` it gives.
pub(crate) fn find<'e, T>(
    expression: &'e IdedExpr,
    bound: &mut Vec<&'e str>,
    visit: &mut impl FnMut(&'e IdedExpr, &[&'e str]) -> Option<T>,
) -> Option<T> {
    if let Some(found) = visit(expression, bound) {
        return Some(found);
    }
    match &expression.expr {
        Expr::Select(select) => find(&select.operand, bound, visit),
        Expr::Call(call) => call
            .target
            .iter()
            .map(|target| target.as_ref())
            .chain(call.args.iter())
            .find_map(|operand| find(operand, bound, visit)),
        Expr::List(list) => list
            .elements
            .iter()
            .find_map(|element| find(element, bound, visit)),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => {
                find(&entry.key, bound, visit).or_else(|| find(&entry.value, bound, visit))
            }
            EntryExpr::StructField(field) => find(&field.value, bound, visit),
        }),
        Expr::Struct(fields) => fields.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => find(&entry.value, bound, visit),
            EntryExpr::StructField(field) => find(&field.value, bound, visit),
        }),
        Expr::Comprehension(comprehension) => {
            if let Some(found) = find(&comprehension.iter_range, bound, visit)
                .or_else(|| find(&comprehension.accu_init, bound, visit))
            {
                return Some(found);
            }
            let depth = bound.len();
            bound.push(&comprehension.iter_var);
            if let Some(second) = &comprehension.iter_var2 {
                bound.push(second);
            }
            bound.push(&comprehension.accu_var);
            let found = [
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ]
            .into_iter()
            .find_map(|part| find(part, bound, visit));
            bound.truncate(depth);
            found
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => None,
    }
}
