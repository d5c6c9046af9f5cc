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

use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use cel::{Context, Env, Program, Value as CelValue};
use serde_json::Value;

use super::{CelError, describe, failing_operand, go_issues, shared_env, to_cel};

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
    source: String,
    program: Program,
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
        let program = env.compile(source).map_err(|issues| CompileError::Parse {
            expression: source.to_string(),
            issues: go_issues(&issues),
        })?;
        let expression = program.expression();
        let mut bound: Vec<&str> = variables.to_vec();
        if let Some(name) = undeclared_reference(expression, &mut bound) {
            return Err(CompileError::Parse {
                expression: source.to_string(),
                issues: format!(
                    "ERROR: <input>: undeclared reference to '{name}' (in container '')"
                ),
            });
        }
        match result_type(expression) {
            Some(found) if found != "bool" => {
                return Err(CompileError::OutputType {
                    found: found.to_string(),
                });
            }
            _ => {}
        }
        Ok(Predicate {
            env,
            source: source.to_string(),
            program,
        })
    }

    /// Evaluates the expression with each variable bound to its JSON value.
    pub fn evaluate(&self, variables: &[(&str, &Value)]) -> Result<bool, CelError> {
        let mut context = Context::with_env(Arc::clone(&self.env));
        for (name, value) in variables {
            context.add_variable_from_value(name.to_string(), to_cel(value));
        }
        match self.program.execute(&context) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(_) => Err(CelError::NotBoolean {
                expression: self.source.clone(),
            }),
            Err(error) => {
                let (failing, error) = failing_operand(self.program.expression(), &context, error);
                Err(CelError::Evaluation {
                    expression: self.source.clone(),
                    reason: describe(&error, failing),
                })
            }
        }
    }
}

/// The first identifier that is neither declared nor bound by a macro nor a type name.
fn undeclared_reference<'e>(expression: &'e IdedExpr, bound: &mut Vec<&'e str>) -> Option<String> {
    match &expression.expr {
        Expr::Ident(name) => (!bound.contains(&name.as_str())
            && !TYPE_NAMES.contains(&name.as_str()))
        .then(|| name.clone()),
        Expr::Select(select) => undeclared_reference(&select.operand, bound),
        Expr::Call(call) => call
            .target
            .iter()
            .map(|target| target.as_ref())
            .chain(call.args.iter())
            .find_map(|operand| undeclared_reference(operand, bound)),
        Expr::List(list) => list
            .elements
            .iter()
            .find_map(|element| undeclared_reference(element, bound)),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            cel::common::ast::EntryExpr::MapEntry(entry) => undeclared_reference(&entry.key, bound)
                .or_else(|| undeclared_reference(&entry.value, bound)),
            cel::common::ast::EntryExpr::StructField(field) => {
                undeclared_reference(&field.value, bound)
            }
        }),
        Expr::Comprehension(comprehension) => {
            if let Some(name) = undeclared_reference(&comprehension.iter_range, bound)
                .or_else(|| undeclared_reference(&comprehension.accu_init, bound))
            {
                return Some(name);
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
            .find_map(|part| undeclared_reference(part, bound));
            bound.truncate(depth);
            found
        }
        Expr::Struct(_) | Expr::Literal(_) | Expr::Unspecified => None,
    }
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
