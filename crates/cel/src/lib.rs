//! `spec.healthCheckExprs`: CEL expressions judging custom resources, as fluxcd/pkg/runtime's
//! `cel.NewStatusReader` and `cel.StatusEvaluator` do.
//!
//! Each entry's expressions are parsed (not type-checked, as Flux does: custom resources need not
//! follow the usual top-level fields) when the Kustomization is read. An object is evaluated with
//! its top-level fields (`apiVersion`, `kind`, `metadata`, `spec`, `status`, ...) as the variables,
//! so an expression naming a field the object lacks fails only when evaluated.
//!
//! The environment is CEL's standard library with optional types, plus the extensions Flux enables
//! in cel-go: strings, encoders (`base64.encode`/`base64.decode`) and sets (`sets.contains`,
//! `sets.equivalent`, `sets.intersects`, written here).

#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod assess;
mod predicate;
mod spec;
mod walk;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use cel::common::types::{CelBool, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::objects::{Key, Map};
use cel::{Context, DeclarationError, Env, ExecutionError, Program, Value as CelValue};
use serde_json::Value;

use apply::kstatus::{Assessment, Status, nested_int64, parse_group, top_level_string};

pub use assess::assess;
pub use predicate::{CompileError, Predicate};
pub use spec::CustomHealthCheck;

/// Why `spec.healthCheckExprs` could not be compiled, or an expression not evaluated. The texts are
/// Flux's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CelError {
    /// The CEL environment could not be built (a bug, not a user error).
    #[error("failed to create CEL environment: {0}")]
    Environment(#[source] DeclarationError),
    /// Two entries cover the same group and kind (the version is not part of the key).
    #[error("duplicate custom health check for GroupKind {group_kind} at healthchecks[{index}]")]
    Duplicate {
        /// The group and kind as apimachinery prints them (`Kind.group`, `.group` for a
        /// group-only entry).
        group_kind: String,
        /// The index of the second entry.
        index: usize,
    },
    /// An entry has no `current` expression.
    #[error(
        "failed to create custom status evaluator for healthchecks[{index}]: expression Current \
         not specified"
    )]
    CurrentNotSpecified {
        /// The index of the entry.
        index: usize,
    },
    /// An expression does not parse.
    #[error(
        "failed to create custom status evaluator for healthchecks[{index}]: failed to parse the \
         expression {field}: failed to parse the CEL expression '{expression}': {issues}"
    )]
    Parse {
        /// The index of the entry.
        index: usize,
        /// Which expression: `Current`, `InProgress` or `Failed`.
        field: &'static str,
        /// The expression.
        expression: String,
        /// The parser's report.
        issues: String,
    },
    /// Evaluating an expression failed.
    #[error("failed to evaluate the CEL expression '{expression}': {reason}")]
    Evaluation {
        /// The expression.
        expression: String,
        /// Why, in cel-go's words where they are known (`no such key: x`,
        /// `no such attribute(s): status.conditions`).
        reason: String,
    },
    /// An expression evaluated to something other than a boolean.
    #[error("failed to evaluate CEL expression as boolean: '{expression}'")]
    NotBoolean {
        /// The expression.
        expression: String,
    },
}

/// `spec.healthCheckExprs` compiled: one evaluator per GroupKind (or per group when kind is empty), as
/// fluxcd/pkg/runtime/cel.NewStatusReader builds them.
#[derive(Clone)]
pub struct HealthCheckExprs {
    env: Arc<Env>,
    /// group -> kind ("" for a group-only entry) -> evaluator.
    evaluators: Arc<BTreeMap<String, BTreeMap<String, StatusEvaluator>>>,
}

impl fmt::Debug for HealthCheckExprs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (group, kinds) in self.evaluators.iter() {
            for kind in kinds.keys() {
                list.entry(&group_kind_string(group, kind));
            }
        }
        list.finish()
    }
}

impl HealthCheckExprs {
    /// Parses every expression. Errors carry Flux's wording and name the expression and its
    /// index, e.g. `failed to create custom status evaluator for healthchecks[0]: failed to
    /// parse the expression Current: failed to parse the CEL expression '<expr>': <issues>`,
    /// `duplicate custom health check for GroupKind ...`, `expression Current not specified`.
    pub fn new(checks: &[CustomHealthCheck]) -> Result<Self, CelError> {
        let env = shared_env()?;
        let mut evaluators: BTreeMap<String, BTreeMap<String, StatusEvaluator>> = BTreeMap::new();
        for (index, check) in checks.iter().enumerate() {
            let kind = check.kind.as_deref().unwrap_or("");
            // apimachinery's FromAPIVersionAndKind: an unparsable apiVersion is the core group.
            let group = parse_group(&check.api_version).unwrap_or("");
            let kinds = evaluators.entry(group.to_string()).or_default();
            if kinds.contains_key(kind) {
                return Err(CelError::Duplicate {
                    group_kind: group_kind_string(group, kind),
                    index,
                });
            }
            let evaluator = StatusEvaluator::new(&env, check, index)?;
            kinds.insert(kind.to_string(), evaluator);
        }
        Ok(HealthCheckExprs {
            env,
            evaluators: Arc::new(evaluators),
        })
    }

    /// True when there is no expression at all.
    pub fn is_empty(&self) -> bool {
        self.evaluators.values().all(BTreeMap::is_empty)
    }

    /// True when an expression covers this group/kind (by kind, or by group when the check's kind is empty).
    pub fn supports(&self, group: &str, kind: &str) -> bool {
        self.evaluator(group, kind).is_some()
    }

    /// Flux's StatusEvaluator.Evaluate: observedGeneration != generation -> InProgress (message empty, as Flux);
    /// then inProgress, failed, current in that order, first true wins; none true -> InProgress.
    /// A non-boolean result or an evaluation error is an Err (Flux: "failed to evaluate CEL expression as boolean: '<expr>'",
    /// "failed to evaluate the CEL expression '<expr>': <err>"). None when no expression covers the object.
    pub fn evaluate(&self, object: &Value) -> Option<Result<Assessment, CelError>> {
        // apimachinery's FromAPIVersionAndKind, as Flux's reader computes the GroupKind.
        let group = parse_group(top_level_string(object, "apiVersion")).unwrap_or("");
        let kind = top_level_string(object, "kind");
        let evaluator = self.evaluator(group, kind)?;
        Some(evaluator.evaluate(&self.env, object))
    }

    /// The evaluator for a kind, else the group-only one, as Flux's reader picks it.
    fn evaluator(&self, group: &str, kind: &str) -> Option<&StatusEvaluator> {
        let kinds = self.evaluators.get(group)?;
        kinds.get(kind).or_else(|| kinds.get(""))
    }
}

/// apimachinery's `GroupKind.String()`.
fn group_kind_string(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// One entry's expressions.
struct StatusEvaluator {
    current: Expression,
    failed: Option<Expression>,
    in_progress: Option<Expression>,
}

impl StatusEvaluator {
    fn new(env: &Env, check: &CustomHealthCheck, index: usize) -> Result<Self, CelError> {
        if check.current.is_empty() {
            return Err(CelError::CurrentNotSpecified { index });
        }
        let current = Expression::parse(env, &check.current, index, "Current")?;
        let optional = |source: &Option<String>, field: &'static str| match source
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            Some(source) => Expression::parse(env, source, index, field).map(Some),
            None => Ok(None),
        };
        let failed = optional(&check.failed, "Failed")?;
        let in_progress = optional(&check.in_progress, "InProgress")?;
        Ok(StatusEvaluator {
            current,
            failed,
            in_progress,
        })
    }

    fn evaluate(&self, env: &Arc<Env>, object: &Value) -> Result<Assessment, CelError> {
        // Flux skips this check when either field is absent or not an integer.
        let observed = nested_int64(object, &["status", "observedGeneration"]);
        let generation = nested_int64(object, &["metadata", "generation"]);
        if let (Ok(Some(observed)), Ok(Some(generation))) = (observed, generation)
            && observed != generation
        {
            return Ok(Assessment::new(Status::InProgress, ""));
        }

        let fields = object.as_object().into_iter().flatten();
        let context = context_with(env, fields.map(|(name, value)| (name.as_str(), value)));
        let ordered = [
            (self.in_progress.as_ref(), Status::InProgress),
            (self.failed.as_ref(), Status::Failed),
            (Some(&self.current), Status::Current),
        ];
        for (expression, status) in ordered {
            let Some(expression) = expression else {
                continue;
            };
            if expression.evaluate_bool(&context)? {
                return Ok(Assessment::new(status, ""));
            }
        }
        Ok(Assessment::new(Status::InProgress, ""))
    }
}

/// A parsed expression and its source: what `spec.healthCheckExprs` entries and
/// [`Predicate`]s both evaluate.
struct Expression {
    source: String,
    program: Program,
}

/// A parse error as cel-go prints it: the source line and the column marker under it are
/// indented by one space (` | `), where the `cel` crate prints `| `.
pub(crate) fn go_issues(issues: &impl std::fmt::Display) -> String {
    issues.to_string().replace("\n| ", "\n | ")
}

impl Expression {
    /// Parses `source`; `refuse` turns cel-go's report of a parse error into the caller's error.
    fn compile<E>(env: &Env, source: &str, refuse: impl FnOnce(String) -> E) -> Result<Self, E> {
        let program = env
            .compile(source)
            .map_err(|issues| refuse(go_issues(&issues)))?;
        Ok(Expression {
            source: source.to_string(),
            program,
        })
    }

    fn parse(env: &Env, source: &str, index: usize, field: &'static str) -> Result<Self, CelError> {
        Expression::compile(env, source, |issues| CelError::Parse {
            index,
            field,
            expression: source.to_string(),
            issues,
        })
    }

    /// The parsed expression.
    fn ast(&self) -> &IdedExpr {
        self.program.expression()
    }

    fn evaluate_bool(&self, context: &Context<'_, '_>) -> Result<bool, CelError> {
        match self.program.execute(context) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(_) => Err(CelError::NotBoolean {
                expression: self.source.clone(),
            }),
            Err(error) => {
                let (failing, error) = failing_operand(self.ast(), context, error);
                Err(CelError::Evaluation {
                    expression: self.source.clone(),
                    reason: describe(&error, failing),
                })
            }
        }
    }
}

/// An evaluation context with each variable bound to its JSON value.
fn context_with<'a>(
    env: &Arc<Env>,
    variables: impl IntoIterator<Item = (&'a str, &'a Value)>,
) -> Context<'static, 'static> {
    let mut context = Context::with_env(Arc::clone(env));
    for (name, value) in variables {
        context.add_variable_from_value(name.to_string(), to_cel(value));
    }
    context
}

/// The environment every Kustomization's expressions share: built once.
fn shared_env() -> Result<Arc<Env>, CelError> {
    static ENV: LazyLock<Result<Arc<Env>, DeclarationError>> =
        LazyLock::new(|| build_env().map(Arc::new));
    ENV.clone().map_err(CelError::Environment)
}

/// CEL's standard library with optional types (on by default), and the extensions Flux enables.
fn build_env() -> Result<Env, DeclarationError> {
    let mut env = Env::stdlib();
    // cel-go keeps the last of a map literal's repeated keys.
    env.set_error_on_duplicate_map_keys(false);
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::encoders)?;
    env.add_extension(sets)?;
    Ok(env)
}

/// cel-go's `ext.Sets()`.
fn sets(env: &mut Env) -> Result<(), DeclarationError> {
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        lists(),
        sets_contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        lists(),
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        lists(),
        sets_intersects,
    )?;
    Ok(())
}

/// The elements of a list argument.
fn elements<'b, 'v>(
    function: &str,
    list: &'b (dyn Val + 'v),
) -> Result<Elements<'b, 'v>, ExecutionError> {
    let iterable = list.as_iterable().ok_or_else(|| {
        ExecutionError::no_such_overload(function, vec![list.get_type().name().to_owned()])
    })?;
    let mut iter = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = iter.next() {
        out.push(item);
    }
    Ok(out)
}

/// A list argument's elements.
type Elements<'b, 'v> = Vec<&'b (dyn Val + 'v)>;

fn two_lists<'b, 'v>(
    function: &str,
    args: &'b [CowVal<'_, 'v>],
) -> Result<(Elements<'b, 'v>, Elements<'b, 'v>), ExecutionError> {
    match args {
        [a, b] => Ok((
            elements(function, a.as_ref())?,
            elements(function, b.as_ref())?,
        )),
        _ => Err(ExecutionError::invalid_argument_count(2, args.len())),
    }
}

/// Whether every element of `sub` is in `list`.
fn contains_all(list: &[&(dyn Val + '_)], sub: &[&(dyn Val + '_)]) -> bool {
    sub.iter()
        .all(|wanted| list.iter().any(|have| have.equals(*wanted)))
}

fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let result = {
        let (list, sub) = two_lists("sets.contains", &args)?;
        contains_all(&list, &sub)
    };
    Ok(CowVal::owned(CelBool::from(result)))
}

fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let result = {
        let (a, b) = two_lists("sets.equivalent", &args)?;
        contains_all(&a, &b) && contains_all(&b, &a)
    };
    Ok(CowVal::owned(CelBool::from(result)))
}

fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let result = {
        let (a, b) = two_lists("sets.intersects", &args)?;
        a.iter().any(|x| b.iter().any(|y| x.equals(*y)))
    };
    Ok(CowVal::owned(CelBool::from(result)))
}

/// A JSON value as CEL sees the Go unstructured value Flux passes: integers that fit an int64
/// are `int`, other numbers `double`.
pub fn to_cel(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => CelValue::Int(i),
            None => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(fields) => CelValue::Map(Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

/// The operand whose error cel-go reports, and that error, for an expression that failed with
/// `error`. When both operands of `&&` or `||` fail, cel-go reports the left one's error where the
/// interpreter reports the right one's; the operands of `&&`, `||`, `!` and `?:` are evaluated
/// again to find it.
fn failing_operand<'e>(
    expression: &'e IdedExpr,
    context: &Context<'_, '_>,
    error: ExecutionError,
) -> (&'e IdedExpr, ExecutionError) {
    let Expr::Call(call) = &expression.expr else {
        return (expression, error);
    };
    let failure = |operand: &'e IdedExpr| CelValue::resolve(operand, context).err();
    let operand = match (call.func_name.as_str(), call.args.as_slice()) {
        (operators::LOGICAL_AND | operators::LOGICAL_OR, [left, right]) => failure(left)
            .map(|e| (left, e))
            .or_else(|| failure(right).map(|e| (right, e))),
        (operators::LOGICAL_NOT, [operand]) => failure(operand).map(|e| (operand, e)),
        (operators::CONDITIONAL, [condition, yes, no]) => {
            match CelValue::resolve(condition, context) {
                Err(e) => Some((condition, e)),
                Ok(CelValue::Bool(true)) => failure(yes).map(|e| (yes, e)),
                Ok(CelValue::Bool(false)) => failure(no).map(|e| (no, e)),
                Ok(_) => None,
            }
        }
        _ => None,
    };
    match operand {
        Some((operand, error)) => failing_operand(operand, context, error),
        None => (expression, error),
    }
}

/// An evaluation error in cel-go's words where they differ, and without the interpreter's debug
/// renderings of values.
fn describe(error: &ExecutionError, expression: &IdedExpr) -> String {
    match error {
        ExecutionError::UndeclaredReference(name) => {
            let root = name.split('.').next().unwrap_or(name);
            match missing_attribute(expression, root) {
                Some(attribute) => format!("no such attribute(s): {attribute}"),
                None => format!("undeclared reference to '{name}'"),
            }
        }
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::UnsupportedTargetType { target } => {
            format!("unsupported target of type {}", target.type_of())
        }
        ExecutionError::NotSupportedAsMethod { method, target } => format!(
            "method '{method}' not supported on type '{}'",
            target.type_of()
        ),
        ExecutionError::UnsupportedKeyType(key) => {
            format!("unsupported key type: {}", key.type_of())
        }
        ExecutionError::ValuesNotComparable(a, b) => {
            format!("{} can not be compared to {}", a.type_of(), b.type_of())
        }
        ExecutionError::UnsupportedBinaryOperator(operator, a, b) => format!(
            "unsupported binary operator '{operator}' on {} and {}",
            a.type_of(),
            b.type_of()
        ),
        ExecutionError::UnsupportedIndex(index, target) => format!(
            "cannot use a value of type {} to index a {}",
            index.type_of(),
            target.type_of()
        ),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(index) => match index {
            CelValue::Int(i) => format!("index out of bounds: {i}"),
            CelValue::UInt(u) => format!("index out of bounds: {u}"),
            _ => "index out of bounds".to_string(),
        },
        ExecutionError::DuplicateKey(key) => {
            format!("duplicate map key of type {}", key.type_of())
        }
        ExecutionError::InternalError(message) => format!("internal error: {message}"),
        other => other.to_string(),
    }
}

/// The attribute cel-go names when the variable `root` is missing: the field selections (and
/// constant string indexes) applied to its first use, as `status.conditions` in
/// `status.conditions.exists(...)`.
fn missing_attribute(expression: &IdedExpr, root: &str) -> Option<String> {
    walk::find(expression, &mut Vec::new(), &mut |node, bound| {
        let segments = qualified_name(node)?;
        (segments.first() == Some(&root) && !bound.contains(&root)).then(|| segments.join("."))
    })
}

/// `a.b.c` (and `a['b']`) as its segments; None for anything else.
fn qualified_name(expression: &IdedExpr) -> Option<Vec<&str>> {
    match &expression.expr {
        Expr::Ident(name) => Some(vec![name.as_str()]),
        Expr::Select(select) => {
            let mut segments = qualified_name(&select.operand)?;
            segments.push(&select.field);
            Some(segments)
        }
        Expr::Call(call) if call.func_name == operators::INDEX && call.target.is_none() => {
            let [operand, index] = call.args.as_slice() else {
                return None;
            };
            let Expr::Literal(LiteralValue::String(key)) = &index.expr else {
                return None;
            };
            let mut segments = qualified_name(operand)?;
            segments.push(key.inner());
            Some(segments)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
