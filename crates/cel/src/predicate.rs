//! Boolean CEL expressions over named objects, compiled the way fluxcd/pkg/runtime's
//! `cel.NewExpression` does with `WithCompile`, `WithOutputType(BoolType)` and
//! `WithStructVariables`: before anything is evaluated, the expression must parse, name no
//! variable but the declared ones, and have a boolean result type. Flux uses it for
//! `spec.dependsOn[].readyExpr` (variables `self` and `dep`).
//!
//! cel-go type-checks the whole expression; this checks what decides the outcome for
//! expressions over unstructured objects, where every field is `dyn`: undeclared references,
//! and a result type that is not `bool` (a field selection such as `dep.status.ready` is `dyn`
//! to cel-go, so it is refused; `dep.status.ready == true` is accepted).

use std::sync::Arc;

use cel::Env;
use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value;

use super::{CelError, Expression, context_with, shared_env, walk};

/// Why an expression was refused before evaluation, in cel-go's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The CEL environment could not be built (a bug, not a user error).
    #[error("failed to create CEL environment: {0}")]
    Environment(String),
    /// The expression does not parse, or names an undeclared variable.
    #[error("failed to parse the CEL expression '{expression}': {issues}")]
    Parse {
        /// The expression.
        expression: String,
        /// What is wrong with it.
        issues: String,
    },
    /// The expression's result is not a boolean.
    #[error("CEL expression output type mismatch: expected bool, got {found}")]
    OutputType {
        /// The result type, as cel-go names it (`dyn`, `int`, `string`, ...).
        found: String,
    },
}

/// A compiled boolean expression over the declared object variables.
pub struct Predicate {
    env: Arc<Env>,
    expression: Expression,
}

/// Names that are types, not variables (`type(x) == int`).
const TYPE_NAMES: [&str; 13] = [
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "timestamp",
    "type",
    "uint",
];

impl Predicate {
    /// Compiles `source` with `variables` declared as objects.
    pub fn compile(source: &str, variables: &[&str]) -> Result<Self, CompileError> {
        let env = shared_env().map_err(|e| CompileError::Environment(e.to_string()))?;
        let expression = Expression::compile(&env, source, |issues| CompileError::Parse {
            expression: source.to_string(),
            issues,
        })?;
        if let Some(name) = undeclared_reference(expression.ast(), variables) {
            return Err(CompileError::Parse {
                expression: source.to_string(),
                issues: format!(
                    "ERROR: <input>: undeclared reference to '{name}' (in container '')"
                ),
            });
        }
        match result_type(expression.ast()) {
            Some(found) if found != "bool" => {
                return Err(CompileError::OutputType {
                    found: found.to_string(),
                });
            }
            _ => {}
        }
        Ok(Predicate { env, expression })
    }

    /// Evaluates the expression with each variable bound to its JSON value.
    pub fn evaluate(&self, variables: &[(&str, &Value)]) -> Result<bool, CelError> {
        let context = context_with(&self.env, variables.iter().copied());
        self.expression.evaluate_bool(&context)
    }
}

/// The first identifier that is neither declared nor bound by a macro nor a type name.
fn undeclared_reference(expression: &IdedExpr, variables: &[&str]) -> Option<String> {
    walk::find(
        expression,
        &mut Vec::new(),
        &mut |node, bound| match &node.expr {
            Expr::Ident(name) => {
                let name = name.as_str();
                let known = variables.contains(&name) || bound.contains(&name);
                (!known && !TYPE_NAMES.contains(&name)).then(|| name.to_string())
            }
            _ => None,
        },
    )
}

/// The result type of `expression` as cel-go would infer it over object variables, when it
/// can be told without a full type checker; `None` when it cannot (the result is then checked
/// at evaluation).
fn result_type(expression: &IdedExpr) -> Option<&'static str> {
    match &expression.expr {
        Expr::Literal(literal) => Some(match literal {
            LiteralValue::Boolean(_) => "bool",
            LiteralValue::Bytes(_) => "bytes",
            LiteralValue::Double(_) => "double",
            LiteralValue::Int(_) => "int",
            LiteralValue::Null => "null_type",
            LiteralValue::String(_) => "string",
            LiteralValue::UInt(_) => "uint",
        }),
        Expr::Ident(_) => Some("dyn"),
        Expr::Select(select) if select.test => Some("bool"),
        Expr::Select(_) => Some("dyn"),
        Expr::List(_) => Some("list(dyn)"),
        Expr::Map(_) => Some("map(dyn, dyn)"),
        Expr::Comprehension(comprehension) => match &comprehension.result.expr {
            Expr::Ident(name) if *name == comprehension.accu_var => {
                result_type(&comprehension.accu_init)
            }
            _ => result_type(&comprehension.result),
        },
        Expr::Call(call) => match call.func_name.as_str() {
            operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::LOGICAL_AND
            | operators::LOGICAL_OR
            | operators::LOGICAL_NOT
            | operators::IN
            | operators::NOT_STRICTLY_FALSE
            | operators::HAS
            | operators::ALL
            | operators::EXISTS
            | operators::EXISTS_ONE
            | "startsWith"
            | "endsWith"
            | "contains"
            | "matches"
            | "sets.contains"
            | "sets.equivalent"
            | "sets.intersects" => Some("bool"),
            operators::INDEX | operators::OPT_INDEX => Some("dyn"),
            operators::CONDITIONAL => match call.args.as_slice() {
                [_, yes, no] => match (result_type(yes), result_type(no)) {
                    (Some(a), Some(b)) if a == b => Some(a),
                    (Some(_), Some(_)) => Some("dyn"),
                    _ => None,
                },
                _ => None,
            },
            "size" => Some("int"),
            _ => None,
        },
        Expr::Struct(_) | Expr::Unspecified => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VARIABLES: [&str; 2] = ["self", "dep"];

    fn compile(source: &str) -> Result<Predicate, CompileError> {
        Predicate::compile(source, &VARIABLES)
    }

    fn dep(ready: &str, generation: i64, observed: i64) -> Value {
        json!({
            "metadata": {"name": "infra", "generation": generation, "labels": {"app/version": "v1"}},
            "status": {"observedGeneration": observed,
                "conditions": [{"type": "Ready", "status": ready}]}
        })
    }

    #[test]
    fn the_documented_expression_evaluates_over_self_and_dep() {
        let predicate = compile(
            "dep.metadata.labels['app/version'] == self.metadata.labels['app/version'] && \
             dep.status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True') && \
             dep.metadata.generation == dep.status.observedGeneration",
        )
        .expect("compiles");
        let this = json!({"metadata": {"labels": {"app/version": "v1"}}});
        let ready = dep("True", 2, 2);
        assert_eq!(
            predicate.evaluate(&[("self", &this), ("dep", &ready)]),
            Ok(true)
        );
        let stale = dep("True", 3, 2);
        assert_eq!(
            predicate.evaluate(&[("self", &this), ("dep", &stale)]),
            Ok(false)
        );
    }

    #[test]
    fn non_boolean_results_are_refused_before_evaluation() {
        assert_eq!(
            compile("dep.status.ready").err(),
            Some(CompileError::OutputType {
                found: "dyn".into()
            })
        );
        assert_eq!(
            compile("1 + 1").ok().map(|_| ()),
            Some(()),
            "an arithmetic result is left to evaluation"
        );
        assert_eq!(
            compile("'yes'").err().map(|e| e.to_string()),
            Some("CEL expression output type mismatch: expected bool, got string".into())
        );
        assert!(compile("has(dep.status.ready)").is_ok());
        assert!(compile("dep.status.ready == true ? true : false").is_ok());
        assert!(compile("dep.status.conditions.exists(c, c.type == 'Ready')").is_ok());
    }

    #[test]
    fn undeclared_variables_and_syntax_errors_are_parse_errors() {
        let error = compile("other.status.ready == true")
            .err()
            .expect("refused");
        assert!(
            error
                .to_string()
                .starts_with("failed to parse the CEL expression 'other.status.ready == true': ")
        );
        assert!(
            error
                .to_string()
                .contains("undeclared reference to 'other'")
        );
        assert!(matches!(
            compile("dep.status.(").err(),
            Some(CompileError::Parse { .. })
        ));
        // Variables bound by macros are declared inside them only.
        assert!(compile("dep.status.conditions.all(c, c.status == 'True')").is_ok());
        assert!(compile("dep.status.conditions.all(c, c.status == 'True') && c == 1").is_err());
        assert!(compile("type(dep.spec) == map").is_ok());
    }

    #[test]
    fn evaluation_errors_name_the_missing_field() {
        let predicate = compile("dep.status.missing == 'x'").expect("compiles");
        let value = dep("True", 1, 1);
        let error = predicate
            .evaluate(&[("self", &json!({})), ("dep", &value)])
            .expect_err("no such key");
        assert!(
            error
                .to_string()
                .starts_with("failed to evaluate the CEL expression 'dep.status.missing == 'x'': "),
            "{error}"
        );
    }
}
