//! Characterisation tests, the running half: the function is run on its inputs in the scratch copy (a probe
//! test that prints each result, built once with every mutant compiled in behind a run-time switch), twice on
//! the original and once per mutant; the assertions are written from the values observed, and a test is
//! offered only when it passes on the original (checked again by the execution gate, on the real file) and
//! catches at least one mutant.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};

use spark_engine::{EngineError, Sampling};
use spark_grammars::Lang;
use tokio_util::sync::CancellationToken;

use super::characterise::{self as pure, Input, Mutant, Observation};
use super::tests::{existing_test_module, rust_test_change, ts_export, ts_test_change, TsExport};
use super::{first_code_block, nothing, strip_code_fences, Task, TaskBudget, TaskDocument, TaskOutcome};
use crate::exec_check::{self, ScratchSession, Step};
use crate::kinds::TsFramework;
use crate::route::{Generator, PromptStyle, TaskPrompt};

/// At most this many inputs are probed, and this many mutants run.
const MAX_INPUTS: usize = 48;
const MAX_MUTANTS: usize = 24;
/// Fewer inputs than this from the project and the parameter types: the model proposes more.
const MODEL_BELOW: usize = 4;
/// At most this many assertions in the offered test.
const MAX_ASSERTIONS: usize = 10;
/// No further try at a test that type-checks after this long from the request (`tsc` without the resident
/// service costs seconds a try).
const TRIES_WITHIN: Duration = Duration::from_secs(10);
/// How long one run of the probe may take on the original, and on a mutant (a mutant that loops is killed).
const ORIGINAL_LIMIT: Duration = Duration::from_secs(3);
const MUTANT_LIMIT: Duration = Duration::from_secs(2);
/// All mutants' runs together.
const MUTANTS_TOTAL: Duration = Duration::from_secs(12);

/// The function a characterisation test is made for.
pub(super) struct Target<'a> {
    pub function: Range<usize>,
    pub name: &'a str,
    pub arity: Option<(usize, usize)>,
    pub title: &'a str,
    /// TypeScript: how the test file imports the function (`{ f }`, `f`), and the project's test framework.
    pub import: &'a str,
    pub framework: TsFramework,
}

/// Characterisation tests for the function, when code may run here (`verify.runTests` on, a project around
/// the file): `None` when it may not, and the caller falls back to tests the model writes whole.
pub(super) async fn characterise(task: &Task<'_>, target: &Target<'_>) -> Result<Option<TaskOutcome>, EngineError> {
    let Task { generator, document, budget, exec, cancel, .. } = *task;
    if !budget.verify.run_tests {
        return Ok(None);
    }
    let started = Instant::now();
    let name = target.name;
    let lang = document.lang;
    let root = document.tree.root_node();
    let source = document.text.as_str();
    let Some(outer) = root.descendant_for_byte_range(target.function.start, target.function.end) else {
        return Ok(None);
    };
    let function = match lang {
        Lang::Rust => Some(outer).filter(|node| node.kind() == "function_item"),
        Lang::TypeScript | Lang::Tsx => with_parameters(outer),
    };
    let Some(function) = function else { return Ok(None) };
    let refuse = |why: String| {
        tracing::info!(function = name, %why, "no characterisation test");
        Ok(Some(nothing(&format!("{}: {why}", target.title))))
    };
    let in_class = function.parent().is_some_and(|parent| matches!(parent.kind(), "declaration_list" | "class_body"));
    if lang != Lang::Rust && in_class {
        return refuse("a method is not run (exported functions are)".to_owned());
    }
    let Some(own_parameters) = pure::parameters(function, source) else {
        return refuse("its parameter list could not be read".to_owned());
    };
    let mut return_type = function.child_by_field_name("return_type").map(|node| source[node.byte_range()].to_owned());
    // A Rust function that returns nothing is asserted on through its one `&mut` argument, as it is after the call.
    let written = match return_type {
        None if lang == Lang::Rust => {
            // `&mut Vec<u8>` → `Vec<u8>` (`&mut [u8]` → `[u8]`, for the buffers the values give, which are arrays).
            let mut written =
                own_parameters.iter().filter_map(|parameter| match pure::split_reference(&parameter.ty) {
                    ("&mut ", referent) => Some(referent.to_owned()),
                    _ => None,
                });
            match (written.next(), written.next()) {
                (Some(ty), None) => Some(ty),
                _ => return refuse("it returns nothing to assert on, and writes into no one argument".to_owned()),
            }
        }
        _ => None,
    };
    // An iterator is asserted on as the vector of what it yields; a type parameter collected from an iterator
    // (`-> T` with `T: FromIterator<char>`) as a `String` or a `Vec`.
    let header_end = function.child_by_field_name("body").map_or(function.end_byte(), |body| body.start_byte());
    // A method's header is read with its `impl`'s (`impl<T: Into<ByteUnit>> Add<T> for ByteUnit`), where the
    // bounds of its type parameters may be.
    let impl_header = function
        .parent()
        .and_then(|list| list.parent())
        .filter(|item| lang == Lang::Rust && item.kind() == "impl_item")
        .and_then(|item| Some(&source[item.start_byte()..item.child_by_field_name("body")?.start_byte()]))
        .unwrap_or("");
    let header = format!("{impl_header}\n{}", &source[function.start_byte()..header_end]);
    let header = header.as_str();
    let writes_formatter = lang == Lang::Rust && own_parameters.iter().any(|p| pure::is_formatter(&p.ty));
    // `impl fmt::Display for T { fn fmt(&self, f) }` is called as its users call it, `format!("{}", t)`: its
    // inputs are the receivers alone.
    let format_spec = if writes_formatter { formatting_trait(function, source) } else { None };
    let shape = match return_type.as_deref() {
        Some(_) if writes_formatter => {
            return_type = Some("String".to_owned());
            pure::CallShape::Displayed
        }
        None if written.is_some() => {
            return_type = written;
            pure::CallShape::Written
        }
        Some(returned) if lang == Lang::Rust => {
            if let Some(item) = iterator_item(returned) {
                return_type = Some(format!("Vec<{item}>"));
                pure::CallShape::Collect
            } else if let Some(collected) = collected_type(returned, header) {
                return_type = Some(collected.clone());
                pure::CallShape::Typed(collected)
            } else {
                pure::CallShape::Plain
            }
        }
        _ => pure::CallShape::Plain,
    };
    let export = match lang {
        Lang::Rust => String::new(),
        Lang::TypeScript | Lang::Tsx => match ts_export(document, target.function.clone(), name) {
            TsExport::Named(exported) => exported,
            TsExport::Default => "default".to_owned(),
            TsExport::Member | TsExport::NotExported => return Ok(None),
        },
    };
    if let Some(why) = pure::side_effect(lang, &pure::with_callees(root, source, target.function.clone())) {
        return refuse(format!("not run, {why}"));
    }
    // Inputs: calls with literal arguments in the project and the doc comments, values of the parameter types
    // (the project's own types made as the project makes them), then the model's proposals.
    let (mut calls, sources) = project_calls(document, name, target.arity);
    // Rust: what goes before the argument list: the function's name, `Type::name`, or a receiver and `.name`.
    let callees = match sources.rust_callees(function, source, name) {
        _ if lang != Lang::Rust => vec![name.to_owned()],
        None => vec![name.to_owned()],
        Some(found) if found.is_empty() => {
            return refuse("a method whose crate shows no way to make its receiver".to_owned());
        }
        Some(found) => found,
    };
    let found = pure::literals(function, source);
    // Values of the parameter types, combined: a TypeScript function with overload signatures is called as they
    // say (its implementation's `any` would give calls the type checker refuses).
    let overloads = if lang == Lang::Rust { Vec::new() } else { ts_overloads(function, source, name) };
    // A TypeScript function that returns a function (composed, curried, bound) is asserted on through what that
    // function returns: its calls are also made with argument lists for the returned function.
    let returned_args =
        if lang == Lang::Rust { Vec::new() } else { returned_function_args(function, &overloads, source, &sources) };
    let signatures = if overloads.is_empty() { vec![function] } else { overloads };
    for signature in signatures {
        let parameters = pure::parameters(signature, source).unwrap_or_default();
        let type_parameters = pure::ts_type_parameters(signature, source);
        let constraints = pure::ts_type_constraints(signature, source);
        let mut values: Vec<Vec<String>> = parameters
            .iter()
            .map(|parameter| match lang {
                Lang::Rust => sources.rust_values(&parameter.ty, header),
                // `x: T` with `T extends QueryKey` takes values of `QueryKey` first.
                Lang::TypeScript | Lang::Tsx => match constraints.get(&parameter.ty) {
                    Some(constraint) => {
                        let values = sources.ts_values(constraint, &type_parameters);
                        if values.is_empty() {
                            sources.ts_values(&parameter.ty, &type_parameters)
                        } else {
                            values
                        }
                    }
                    None => sources.ts_values(&parameter.ty, &type_parameters),
                },
            })
            .collect();
        for (parameter, values) in parameters.iter().zip(values.iter_mut()) {
            // A TypeScript type Spark cannot make whole is stood in for by objects with the members the function
            // reads off the parameter.
            if lang != Lang::Rust && values.is_empty() {
                let used = members_read(function, source, &parameter.name);
                *values = sources.ts_partial_values(&parameter.ty, &used, &type_parameters);
            }
            pure::add_literals(lang, &parameter.ty, &found, values);
            if parameter.optional && !values.iter().any(|value| value == "undefined") {
                values.push("undefined".to_owned());
            }
        }
        push_new(&mut calls, if values.is_empty() { vec!["()".to_owned()] } else { pure::combine(&values, 32) });
    }
    // The model is asked only when the project and the types gave few inputs: its answer costs seconds.
    if calls.len() < MODEL_BELOW && format_spec.is_none() {
        let function_source = &source[target.function.clone()];
        let proposed = propose_inputs(generator, lang, function_source, name, target.arity, budget, cancel);
        push_new(&mut calls, proposed.await?);
    }
    if calls.is_empty() {
        return refuse("no inputs: no call with literal arguments, no values for its parameter types".to_owned());
    }
    // Inputs become whole expressions: Rust's callee varies with the receiver; a TypeScript function that returns
    // `void` is asserted on through the objects it was given, as they are after the call.
    let returns_void = lang != Lang::Rust
        && match return_type.as_deref() {
            Some(returned) => returned.trim_start_matches(':').trim() == "void",
            None => !returns_a_value(function),
        };
    let calls: Vec<String> = match (lang, format_spec) {
        (Lang::Rust, Some(spec)) => callees
            .iter()
            .filter_map(|callee| callee.strip_suffix(&format!(".{name}")))
            .map(|receiver| format!("format!(\"{spec}\", {receiver})"))
            .take(MAX_INPUTS)
            .collect(),
        (Lang::Rust, None) => pure::with_callees_and_args(&callees, &calls, &shape, MAX_INPUTS),
        (Lang::TypeScript | Lang::Tsx, _) => {
            let parameter_names: Vec<String> = own_parameters.iter().map(|p| p.name.clone()).collect();
            let mut whole = Vec::new();
            for call in &calls {
                let args = call.strip_prefix('(').and_then(|rest| rest.strip_suffix(')')).unwrap_or(call);
                let observed = returns_void.then(|| pure::observing_ts_arguments(name, args, &parameter_names));
                let plain = observed.flatten().unwrap_or_else(|| format!("{name}{call}"));
                let applied = returned_args.iter().map(|inner| format!("{plain}({inner})")).collect();
                push_new(&mut whole, vec![plain]);
                push_new(&mut whole, applied);
            }
            // One call that does not parse would stop the whole probe module from loading.
            let mut parser = lang.parser();
            whole
                .into_iter()
                .filter(|call| {
                    parser
                        .parse(format!("const probe = {call};\n"), None)
                        .is_some_and(|tree| !tree.root_node().has_error())
                })
                .take(MAX_INPUTS)
                .collect()
        }
    };
    let prepared_ms = started.elapsed().as_millis();

    let session = match exec.scratch_session().await {
        Ok(session) => session,
        Err(why) => {
            tracing::info!(%why, "characterisation tests not made: code may not run");
            return Ok(None);
        }
    };
    let limit = exec.time_limit();
    let no_std = lang == Lang::Rust && crate_is_no_std(document);
    let probed = match lang {
        Lang::Rust => probe_rust(&session, document, function.byte_range(), &calls, limit, no_std, cancel).await,
        Lang::TypeScript | Lang::Tsx => {
            probe_ts(&session, document, function.byte_range(), (&export, name), &calls, limit, cancel).await
        }
    };
    let probed = match probed {
        Ok(probed) => probed,
        Err(why) => return refuse(why),
    };
    drop(session);
    let Probed { inputs, mutants, build_ms, run_ms } = probed;
    if inputs.is_empty() {
        return refuse(format!("no input gave the same value twice without a panic ({} tried)", calls.len()));
    }
    let killed: BTreeSet<usize> = inputs.iter().flat_map(|input| input.kills.iter().copied()).collect();
    if killed.is_empty() {
        return refuse(format!(
            "its {} inputs catch none of {} mutants, so a test would assert nothing its code does",
            inputs.len(),
            mutants.len()
        ));
    }
    // Catching only the early return shows that the function returns something, not what it computes.
    if killed.iter().all(|id| *id == pure::EARLY_RETURN) && mutants.len() > 1 {
        return refuse(format!(
            "its {} inputs catch only the early return of {} mutants, so a test would assert little of what its \
             code does",
            inputs.len(),
            mutants.len()
        ));
    }
    let test_name = unused_test_name(source, target.name);
    // Each try writes the test and has the gate check it. An assertion the compiler refuses (a TypeScript
    // argument of the wrong type runs but does not type-check) is dropped and its input rejected, and the inputs
    // are chosen again from the rest. Rust tries the asserted values as literals, then as their Debug output;
    // TypeScript tries until one passes (the resident service answers in milliseconds).
    let tries = if lang == Lang::Rust { 2 } else { MAX_INPUTS };
    let mut rejected = BTreeSet::new();
    let mut chosen = Vec::new();
    let mut outcome = None;
    for attempt in 0..tries {
        chosen = pure::choose(&inputs, MAX_ASSERTIONS, &rejected);
        if chosen.is_empty() || (attempt > 0 && started.elapsed() > TRIES_WITHIN) {
            break;
        }
        let literal = lang != Lang::Rust || attempt == 0;
        let assertions: Vec<String> = chosen
            .iter()
            .map(|idx| {
                let input = &inputs[*idx];
                let call = &input.call;
                match lang {
                    Lang::Rust if literal => {
                        pure::rust_assertion(call, &input.value, return_type.as_deref().unwrap_or(""))
                    }
                    Lang::Rust => format!("assert_eq!(format!(\"{{:?}}\", {call}), {:?});", input.value),
                    Lang::TypeScript | Lang::Tsx => ts_assertion(target.framework, call, &input.value, input.partial),
                }
            })
            .collect();
        let change = match lang {
            Lang::Rust => {
                let mut body: String = assertions.iter().map(|line| format!("        {line}\n")).collect();
                if no_std {
                    body.insert_str(0, &format!("        {}\n", std_in_no_std_test(&body)));
                }
                let test_fn = format!("    #[test]\n    fn {test_name}() {{\n{body}    }}\n");
                rust_test_change(document, existing_test_module(document), &test_fn)
            }
            Lang::TypeScript | Lang::Tsx => {
                let body: String = assertions.iter().map(|line| format!("  {line}\n")).collect();
                ts_test_change(
                    document,
                    target.framework,
                    target.import,
                    &format!("test(\"{name} works\", () => {{\n{body}}});\n"),
                )
            }
        };
        match exec.check(&change, cancel).await {
            Ok(()) => {
                outcome = Some(change);
                break;
            }
            Err(refusal) => {
                tracing::info!(%refusal, literal, "characterisation test refused");
                let new_text = change.new_text();
                let refused = refused_line(&refusal)
                    .and_then(|line| new_text.lines().nth(line.saturating_sub(1)))
                    .and_then(|text| assertions.iter().position(|assertion| text.trim() == assertion.trim()));
                match refused {
                    Some(position) => {
                        rejected.insert(chosen[position]);
                    }
                    None if lang == Lang::Rust && literal => {}
                    None => break,
                }
            }
        }
    }
    let Some(change) = outcome else {
        return refuse("the test written from the observed values did not pass on the original".to_owned());
    };
    let caught: BTreeSet<usize> = chosen.iter().flat_map(|idx| inputs[*idx].kills.iter().copied()).collect();
    if caught.is_empty() {
        return refuse("what remains of the test catches no mutant".to_owned());
    }
    tracing::info!(
        prepared_ms,
        build_ms,
        run_ms,
        total_ms = started.elapsed().as_millis() as u64,
        inputs = inputs.len(),
        mutants = mutants.len(),
        caught = caught.len(),
        "characterisation test made"
    );
    let title = format!(
        "{}: {} assertions from observed values, catch {} of {} mutants",
        target.title,
        chosen.len(),
        caught.len(),
        mutants.len()
    );
    Ok(Some(TaskOutcome { changes: vec![change], samples_tried: 1, ..nothing(&title) }))
}

/// The line of a compiler error in the edit, from the gate's refusal (`tsc --noEmit: in the edit: f:12: …`).
fn refused_line(refusal: &str) -> Option<usize> {
    let rest = refusal.split_once("in the edit: ")?.1;
    let (_, after) = rest.split_once(':')?;
    after.split(':').next()?.trim().parse().ok()
}

/// The overload signatures declared just before a TypeScript function (`function f(a: string): T;` lines, exported
/// or not), first to last.
fn ts_overloads<'t>(
    function: spark_grammars::tree_sitter::Node<'t>,
    source: &str,
    name: &str,
) -> Vec<spark_grammars::tree_sitter::Node<'t>> {
    let declaration = function.parent().filter(|parent| parent.kind() == "export_statement").unwrap_or(function);
    let mut found = Vec::new();
    let mut previous = declaration.prev_named_sibling();
    while let Some(node) = previous {
        let signature = match node.kind() {
            "export_statement" => node.named_child(0).filter(|child| child.kind() == "function_signature"),
            "function_signature" => Some(node),
            "comment" => {
                previous = node.prev_named_sibling();
                continue;
            }
            _ => None,
        };
        let named = signature.filter(|signature| {
            signature.child_by_field_name("name").is_some_and(|found| &source[found.byte_range()] == name)
        });
        let Some(signature) = named else { break };
        found.push(signature);
        previous = node.prev_named_sibling();
    }
    found.reverse();
    found
}

/// Argument lists (without parentheses) for the function a TypeScript function returns, where its return type
/// (its own or an overload's) is a function type or it returns a function written in place (`return (x) => …`,
/// `(a) => (b) => …`); at most three. Empty for a function that returns no function.
fn returned_function_args(
    function: spark_grammars::tree_sitter::Node,
    overloads: &[spark_grammars::tree_sitter::Node],
    source: &str,
    sources: &pure::Sources,
) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for signature in std::iter::once(&function).chain(overloads) {
        let Some(returned) = signature.child_by_field_name("return_type") else { continue };
        let type_parameters = pure::ts_type_parameters(*signature, source);
        push_new(&mut found, sources.ts_returned_function_args(&source[returned.byte_range()], &type_parameters));
    }
    // Functions written where the value is returned: an arrow's expression body, or a `return`'s value.
    let mut returned_functions = Vec::new();
    match function.child_by_field_name("body") {
        Some(body) if body.kind() == "arrow_function" => returned_functions.push(body),
        Some(body) if body.kind() == "statement_block" => {
            let mut stack = vec![body];
            while let Some(node) = stack.pop() {
                let mut cursor = node.walk();
                let children: Vec<_> = node.named_children(&mut cursor).collect();
                if node.kind() == "return_statement" {
                    returned_functions.extend(
                        children.iter().filter(|child| {
                            matches!(child.kind(), "arrow_function" | "function_expression" | "function")
                        }),
                    );
                    continue;
                }
                stack.extend(children.into_iter().filter(|child| {
                    !matches!(
                        child.kind(),
                        "function_declaration" | "function_expression" | "function" | "arrow_function" | "class"
                    )
                }));
            }
        }
        _ => {}
    }
    let type_parameters = pure::ts_type_parameters(function, source);
    for returned in returned_functions {
        let parameters = match (returned.child_by_field_name("parameters"), returned.child_by_field_name("parameter")) {
            (Some(list), _) => source[list.byte_range()].to_owned(),
            (None, Some(one)) => format!("({})", &source[one.byte_range()]),
            (None, None) => continue,
        };
        let generics =
            returned.child_by_field_name("type_parameters").map_or("", |generics| &source[generics.byte_range()]);
        let ty = format!("{generics}{parameters} => unknown");
        push_new(&mut found, sources.ts_returned_function_args(&ty, &type_parameters));
    }
    found.truncate(3);
    found
}

/// The members a TypeScript function reads off its parameter `parameter`, as paths in the order first read:
/// `query.state.status` gives `state.status`, `options.retry` gives `retry`, `list.length` gives `length`.
fn members_read(function: spark_grammars::tree_sitter::Node, source: &str, parameter: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let Some(body) = function.child_by_field_name("body") else { return found };
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        let object = node.child_by_field_name("object");
        let starts_at_parameter = node.kind() == "member_expression"
            && object.is_some_and(|object| object.kind() == "identifier" && &source[object.byte_range()] == parameter);
        if starts_at_parameter {
            // Up the chain while each is the next member's object: `parameter.a.b`.
            let mut path: Vec<&str> = Vec::new();
            let mut at = Some(node);
            while let Some(member) = at.filter(|member| member.kind() == "member_expression") {
                let Some(property) = member.child_by_field_name("property") else { break };
                if property.kind() != "property_identifier" {
                    break;
                }
                path.push(&source[property.byte_range()]);
                at = member.parent().filter(|parent| {
                    parent.child_by_field_name("object").is_some_and(|object| object.id() == member.id())
                });
            }
            let path = path.join(".");
            if !path.is_empty() && !found.contains(&path) {
                found.push(path);
            }
        }
        let mut cursor = node.walk();
        let children: Vec<_> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    found
}

/// Whether a TypeScript function's body has a `return` with a value (nested functions' returns are theirs); an
/// arrow function with an expression body returns it.
fn returns_a_value(function: spark_grammars::tree_sitter::Node) -> bool {
    let Some(body) = function.child_by_field_name("body") else { return true };
    if body.kind() != "statement_block" {
        return true;
    }
    let nested = |child: &spark_grammars::tree_sitter::Node| {
        matches!(
            child.kind(),
            "function_declaration"
                | "function_expression"
                | "function"
                | "arrow_function"
                | "method_definition"
                | "class_declaration"
                | "class"
        ) || child.kind().starts_with("generator_function")
    };
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        if node.kind() == "return_statement" && node.named_child_count() > 0 {
            return true;
        }
        let mut cursor = node.walk();
        let children: Vec<_> = node.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().filter(|child| !nested(child)));
    }
    false
}

/// The TypeScript function node under a function's range: the node with a parameter list.
fn with_parameters(node: spark_grammars::tree_sitter::Node) -> Option<spark_grammars::tree_sitter::Node> {
    let mut stack = vec![node];
    while let Some(current) = stack.pop() {
        if current.child_by_field_name("parameters").is_some() {
            return Some(current);
        }
        let mut cursor = current.walk();
        let children: Vec<_> = current.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    None
}

/// The assertion of a TypeScript test in the project's framework that `call` is `value`; with `partial`, that it has `value`'s members (an object literal
/// whose keys are plain names: node's `assert` picks them out by destructuring).
fn ts_assertion(framework: TsFramework, call: &str, value: &str, partial: bool) -> String {
    match framework {
        TsFramework::NodeTest if partial => {
            let keys: Vec<&str> =
                pure::ts_object_members(value).unwrap_or_default().into_iter().map(|(key, _)| key).collect();
            let keys = keys.join(", ");
            format!("{{\n    const {{ {keys} }} = {call};\n    assert.deepStrictEqual({{ {keys} }}, {value});\n  }}")
        }
        TsFramework::NodeTest => format!("assert.deepStrictEqual({call}, {value});"),
        TsFramework::Vitest | TsFramework::Jest if partial => format!("expect({call}).toMatchObject({value});"),
        TsFramework::Vitest | TsFramework::Jest => format!("expect({call}).toStrictEqual({value});"),
    }
}

fn push_new(calls: &mut Vec<String>, more: Vec<String>) {
    for call in more {
        if !calls.contains(&call) {
            calls.push(call);
        }
    }
}

/// `<name>_works`, or another name when the file has that one.
fn unused_test_name(source: &str, name: &str) -> String {
    ["works", "characterised", "observed"]
        .iter()
        .map(|suffix| format!("{name}_{suffix}"))
        .find(|candidate| !source.contains(&format!("fn {candidate}(")))
        .unwrap_or_else(|| format!("{name}_spark"))
}

/// Calls of the function with literal arguments in the document (its doc comments too) and in the other source
/// files of its project (at most a few MB read), and those files parsed (the document first).
fn project_calls(document: &TaskDocument, name: &str, arity: Option<(usize, usize)>) -> (Vec<String>, pure::Sources) {
    let mut calls = pure::literal_calls(document.lang, &document.text, name, arity);
    let mut texts = vec![document.text.clone()];
    let Some(project) = document.path.as_deref().and_then(exec_check::find_project) else {
        return (calls, pure::Sources::new(document.lang, texts));
    };
    let extension = document.path.as_deref().and_then(Path::extension).map(|ext| ext.to_owned());
    let mut budget: u64 = 4 << 20;
    let mut stack = vec![project.root.join(&project.crate_dir)];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let file_name = entry.file_name();
            // Build output (`build`, `dist`: emitted JavaScript and declaration files) is not the project's source.
            if ["target", "node_modules", ".git", "build", "dist"].iter().any(|skip| file_name == *skip)
                || file_name.to_string_lossy().ends_with(".d.ts")
            {
                continue;
            }
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && path.extension().map(|ext| ext.to_owned()) == extension {
                let size = entry.metadata().map(|meta| meta.len()).unwrap_or(u64::MAX);
                if size > budget || files > 400 || Some(path.as_path()) == document.path.as_deref() {
                    continue;
                }
                budget -= size;
                files += 1;
                if let Ok(text) = std::fs::read_to_string(&path) {
                    push_new(&mut calls, pure::literal_calls(document.lang, &text, name, arity));
                    texts.push(text);
                }
            }
        }
    }
    (calls, pure::Sources::new(document.lang, texts))
}

/// The item type of a return type `impl Iterator<Item = X>` (or another iterator trait): `X`.
fn iterator_item(return_type: &str) -> Option<String> {
    let rest = return_type.trim().trim_start_matches("->").trim().strip_prefix("impl ")?;
    if !rest.contains("Iterator<") {
        return None;
    }
    let item = rest.split_once("Item")?.1.trim_start().strip_prefix('=')?.trim_start();
    let mut depth = 0i32;
    for (at, ch) in item.char_indices() {
        match ch {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '>' if depth == 0 => return Some(item[..at].trim().to_owned()),
            '>' => depth -= 1,
            ',' if depth == 0 => return Some(item[..at].trim().to_owned()),
            _ => {}
        }
    }
    None
}

/// The format spec that calls the `fmt` method at `function` when it implements one of `std::fmt`'s formatting
/// traits: `{}` for `Display`, `{:?}` for `Debug`, `{:x}` for `LowerHex`, …
fn formatting_trait(function: spark_grammars::tree_sitter::Node, source: &str) -> Option<&'static str> {
    let name = function.child_by_field_name("name")?;
    if &source[name.byte_range()] != "fmt" {
        return None;
    }
    let implementation = function.parent().filter(|list| list.kind() == "declaration_list")?.parent()?;
    let trait_path = &source[implementation.child_by_field_name("trait")?.byte_range()];
    let trait_name = trait_path.rsplit("::").next().unwrap_or(trait_path).trim();
    Some(match trait_name {
        "Display" => "{}",
        "Debug" => "{:?}",
        "LowerHex" => "{:x}",
        "UpperHex" => "{:X}",
        "Binary" => "{:b}",
        "Octal" => "{:o}",
        "LowerExp" => "{:e}",
        "UpperExp" => "{:E}",
        _ => return None,
    })
}

/// A return type with a type parameter collected from an iterator given a type the call can infer:
/// `-> T` with `T: FromIterator<char>` → `String`; `-> Result<T, E>` with `T: FromIterator<u8>` →
/// `Result<Vec<u8>, E>`.
fn collected_type(return_type: &str, header: &str) -> Option<String> {
    let returned = return_type.trim().trim_start_matches("->").trim();
    if let Some(whole) = collected_parameter(returned, header) {
        return Some(whole);
    }
    // A type parameter inside the type: each word replaced by its collection where it is one.
    let mut out = String::new();
    let mut replaced = false;
    let mut word = String::new();
    for ch in returned.chars().chain(std::iter::once(' ')) {
        if ch.is_alphanumeric() || ch == '_' {
            word.push(ch);
            continue;
        }
        if !word.is_empty() {
            match (
                word.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()),
                collected_parameter(&word, header),
            ) {
                (true, Some(collected)) => {
                    out.push_str(&collected);
                    replaced = true;
                }
                _ => out.push_str(&word),
            }
            word.clear();
        }
        out.push(ch);
    }
    replaced.then(|| out.trim_end().to_owned())
}

/// The type to collect into for a return type that is a type parameter bound by `FromIterator<X>` in `header`:
/// `String` for `char` (and `&str`, `String`), else `Vec<X>`.
fn collected_parameter(returned: &str, header: &str) -> Option<String> {
    let bounds = pure::type_bounds(returned, header);
    let item = bounds.split_once("FromIterator<")?.1;
    let mut depth = 0i32;
    let end = item.char_indices().find_map(|(at, ch)| match ch {
        '<' | '(' | '[' => {
            depth += 1;
            None
        }
        ')' | ']' => {
            depth -= 1;
            None
        }
        '>' if depth == 0 => Some(at),
        '>' => {
            depth -= 1;
            None
        }
        _ => None,
    });
    // (`type_bounds` ends a bound at its first `>`, so the closing one may be cut off.)
    let item = item[..end.unwrap_or(item.len())].trim();
    Some(match item {
        "char" | "&str" | "String" => "String".to_owned(),
        _ if item.contains('\'') => return None,
        _ => format!("Vec<{item}>"),
    })
}

/// Argument lists the model proposes for the function: a short answer, two samples.
async fn propose_inputs(
    generator: &Generator<'_>,
    lang: Lang,
    function_source: &str,
    name: &str,
    arity: Option<(usize, usize)>,
    budget: TaskBudget,
    cancel: &CancellationToken,
) -> Result<Vec<String>, EngineError> {
    let tag = super::fence_tag(lang);
    let (example, example_calls) = match lang {
        Lang::Rust => (
            "fn clamp(x: i32, lo: i32, hi: i32) -> i32 {\n    if x < lo { lo } else if x > hi { hi } else { x }\n}",
            "clamp(5, 0, 10)\nclamp(-3, 0, 10)\nclamp(12, 0, 10)\nclamp(0, 0, 0)\nclamp(10, 0, 10)",
        ),
        Lang::TypeScript | Lang::Tsx => (
            "export function clamp(x: number, lo: number, hi: number): number {\n  return x < lo ? lo : x > hi ? hi : x;\n}",
            "clamp(5, 0, 10)\nclamp(-3, 0, 10)\nclamp(12, 0, 10)\nclamp(0, 0, 0)\nclamp(10, 0, 10)",
        ),
    };
    let kinds = match lang {
        Lang::Rust => "numbers, strings, booleans, arrays of them",
        Lang::TypeScript | Lang::Tsx => {
            "numbers, strings, booleans, arrays and objects of them, small arrow functions that use only their \
             parameters"
        }
    };
    let task = TaskPrompt {
        system: "You propose inputs for unit tests. Answer with function calls only, one per line.".to_owned(),
        instruction: format!(
            "```{tag}\n{function_source}\n```\n\nWrite 8 different calls of `{name}` with literal arguments \
             ({kinds}) that reach each branch and edge case: empty, zero, one, boundaries, typical values. One call \
             per line, nothing else."
        ),
        few_shot: format!(
            "{example}\n// Calls of clamp with literal arguments:\n{example_calls}\n\n{function_source}\n// Calls of \
             {name} with literal arguments:\n{name}("
        ),
        few_shot_stops: vec!["\n\n".to_owned()],
        chat_prefill: format!("```{tag}\n{name}("),
        chat_stops: vec!["```".to_owned()],
    };
    let started = Instant::now();
    let time = budget.time.min(Duration::from_secs(4));
    let mut calls = Vec::new();
    for sample_idx in 0..2u32 {
        let left = time.saturating_sub(started.elapsed());
        if left.is_zero() || cancel.is_cancelled() {
            break;
        }
        let sampling =
            if sample_idx == 0 { Sampling::default() } else { Sampling { temperature: 0.7, seed: 31 + sample_idx } };
        let request = super::task_request(160, Instant::now() + left, cancel, sampling);
        let generated = match generator.generate_task(&task, request).await {
            Ok(generated) => generated,
            Err(error) if cancel.is_cancelled() => return Err(error),
            Err(error) => {
                tracing::info!(%error, "no inputs from the model");
                break;
            }
        };
        let text = match generated.style {
            PromptStyle::FewShot => format!("{name}({}", generated.completion.text),
            PromptStyle::ChatPrefilled => format!("{name}({}", strip_code_fences(&generated.completion.text)),
            PromptStyle::Chat => first_code_block(&generated.completion.text),
        };
        tracing::debug!(function = name, answer = %text, "inputs the model proposed");
        push_new(&mut calls, pure::literal_calls(lang, &text, name, arity));
        // A second, sampled answer only when the first gave few inputs.
        if calls.len() >= 4 {
            break;
        }
    }
    Ok(calls)
}

/// What probing gave: the inputs kept (same value twice on the original, no panic) with the mutants each
/// kills, the mutants run, and where the time went.
struct Probed {
    inputs: Vec<Input>,
    mutants: Vec<Mutant>,
    build_ms: u64,
    run_ms: u64,
}

/// Builds the probe (the file with the mutant schemata and a test printing each call's Debug output) in the
/// scratch copy, dropping the calls and mutants the compiler rejects, then runs it.
async fn probe_rust(
    session: &ScratchSession,
    document: &TaskDocument,
    function: Range<usize>,
    calls: &[String],
    build_limit: Duration,
    no_std: bool,
    cancel: &CancellationToken,
) -> Result<Probed, String> {
    let project = session.project().clone();
    let root = document.tree.root_node();
    // A `#![no_std]` crate gets `std` at its root in the copy, for the mutants' switch (`::std::env::var`) and
    // the probe's printing; the document's own root gets it with the probe.
    let mut std_for_root = None;
    if no_std {
        let src = project.crate_dir.join("src");
        let crate_root = ["lib.rs", "main.rs"]
            .map(|name| src.join(name))
            .into_iter()
            .find(|candidate| *candidate == project.file || session.copy_dir().join(candidate).is_file());
        if let Some(crate_root) = crate_root {
            if crate_root == project.file {
                std_for_root = (!document.text.contains("extern crate std")).then_some(ROOT_STD);
            } else if let Ok(text) = std::fs::read_to_string(session.copy_dir().join(&crate_root)) {
                if !text.contains("extern crate std") {
                    session.write(&crate_root, &format!("{text}{ROOT_STD}"))?;
                }
            }
        }
    }
    let mut skip_mutants = BTreeSet::new();
    let mut live: Vec<usize> = (0..calls.len()).collect();
    let mut build_ms = 0;
    let build = exec_check::cargo_build_tests_step(&project);
    let file_in_project = project.file.clone();
    let file_name = file_in_project.to_string_lossy().into_owned();
    for attempt in 0..4 {
        let (text, mutants) =
            pure::schemata(document.lang, root, &document.text, function.clone(), &skip_mutants, MAX_MUTANTS);
        let (mut probe, first_line) = rust_probe_module(&text, calls, &live, no_std);
        probe.push_str(std_for_root.unwrap_or(""));
        session.write(&file_in_project, &probe)?;
        let built = session.run(&build, &[], build_limit, cancel).await?;
        build_ms += built.ms;
        if built.timed_out {
            return Err(format!("building the probe took longer than {} ms", build_limit.as_millis()));
        }
        let errors = exec_check::parse_cargo_json(&built.stdout);
        if errors.is_empty() {
            let executable = exec_check::test_executable(&built.stdout)
                .ok_or_else(|| format!("cargo test --no-run built no test binary: {}", last_line(&built.stderr)))?;
            let step = Step {
                program: executable,
                args: ["spark_probe::__spark_probe", "--nocapture", "--test-threads=1", "-q"]
                    .map(str::to_owned)
                    .to_vec(),
                dir: project.crate_dir.clone(),
                label: "the probe",
            };
            let started = Instant::now();
            let inputs = run_probe(session, &step, calls, &live, &mutants, cancel).await?;
            return Ok(Probed { inputs, mutants, build_ms, run_ms: started.elapsed().as_millis() as u64 });
        }
        let mut progressed = false;
        // The inputs' lines are those of this build: dropped together once all errors are read (removing one at
        // a time would shift the next error onto its neighbour).
        let mut dropped = BTreeSet::new();
        for error in &errors {
            let line = (error.line as usize).saturating_sub(1);
            if error.file != file_name {
                return Err(format!("the probe does not build: {error}"));
            }
            if line >= first_line {
                let position = line - first_line;
                if position < live.len() {
                    if dropped.insert(position) {
                        tracing::debug!(call = %calls[live[position]], %error, "probe input dropped");
                    }
                    progressed = true;
                    continue;
                }
            }
            let on_line: Vec<usize> =
                mutants.iter().filter(|mutant| mutant.line == line).map(|mutant| mutant.id).collect();
            if !on_line.is_empty() {
                skip_mutants.extend(on_line);
                progressed = true;
            }
        }
        for position in dropped.into_iter().rev() {
            live.remove(position);
        }
        if !progressed {
            return Err(format!("the probe does not build: {}", errors[0]));
        }
        if live.is_empty() {
            return Err("no input compiles as arguments of the function".to_owned());
        }
        tracing::debug!(attempt, inputs = live.len(), skipped = skip_mutants.len(), "probe rebuilt");
    }
    Err("the probe still does not build after dropping the inputs and mutants the compiler rejected".to_owned())
}

/// Probes a TypeScript function: the schemata in the copy, every TypeScript file of the package transpiled
/// to CommonJS (the TypeScript compiler's transpile API, through node), then node runs the probe script on the
/// calls, whole expressions that name the function `name` (the module exports it as `export`).
async fn probe_ts(
    session: &ScratchSession,
    document: &TaskDocument,
    function: Range<usize>,
    (export, name): (&str, &str),
    calls: &[String],
    build_limit: Duration,
    cancel: &CancellationToken,
) -> Result<Probed, String> {
    let project = session.project().clone();
    let tsc =
        exec_check::project_tsc(&project).ok_or("no TypeScript compiler (tsc) in node_modules/.bin or on PATH")?;
    let tsc = std::fs::canonicalize(&tsc).map_err(|error| format!("{}: {error}", tsc.display()))?;
    // `…/typescript/bin/tsc` → `…/typescript/lib/typescript.js`.
    let library = tsc
        .parent()
        .and_then(Path::parent)
        .map(|package| package.join("lib/typescript.js"))
        .filter(|library| library.is_file())
        .ok_or_else(|| format!("no lib/typescript.js beside {}", tsc.display()))?;
    let root = document.tree.root_node();
    let (text, mutants) = pure::schemata(document.lang, root, &document.text, function, &BTreeSet::new(), MAX_MUTANTS);
    session.write(&project.file, &text)?;
    // Inside the copy (whose `node_modules` links the project's), so that the package's dependencies resolve
    // from the transpiled files as they do from the sources; the transpiler's walk skips `.spark-probe`.
    let out_dir = session.copy_dir().join(".spark-probe/js");
    let _ = std::fs::remove_dir_all(&out_dir);
    let module = project.file.with_extension("js").to_string_lossy().into_owned();
    let script =
        pure::ts_probe_script(&library.to_string_lossy(), &out_dir.to_string_lossy(), &module, export, name, calls);
    let script_path = Path::new(".spark-probe/probe.cjs");
    session.write(script_path, &script)?;
    let build = Step {
        program: "node".into(),
        args: vec![script_path.to_string_lossy().into_owned(), "build".to_owned()],
        dir: Default::default(),
        label: "transpiling the probe",
    };
    let built = session.run(&build, &[], build_limit, cancel).await?;
    if built.status != Some(0) {
        return Err(format!("transpiling the package failed: {}", last_line(&built.stderr)));
    }
    let step = Step {
        program: "node".into(),
        args: vec![script_path.to_string_lossy().into_owned()],
        dir: Default::default(),
        label: "the probe",
    };
    let live: Vec<usize> = (0..calls.len()).collect();
    let started = Instant::now();
    let inputs = run_probe(session, &step, calls, &live, &mutants, cancel).await?;
    Ok(Probed { inputs, mutants, build_ms: built.ms, run_ms: started.elapsed().as_millis() as u64 })
}

/// What the root of a `#![no_std]` crate gets in the copy while it is probed: `std` for the tests, its macros too.
const ROOT_STD: &str = "\n#[cfg(test)]\n#[macro_use]\nextern crate std;\n";

/// What the probe module declares in a `#![no_std]` crate (whose tests may still use `std`): the crate, and
/// the macros, types and traits the standard prelude would give.
const STD_IN_NO_STD: &str = "extern crate std; use std::{borrow::ToOwned, boxed::Box, format, println, \
                             string::{String, ToString}, vec, vec::Vec};";

/// What a test's body declares in a `#![no_std]` crate to use what it uses of the standard library: `std`
/// itself and those of the prelude's names it spells (`format!`, `vec!`, `.to_string()`, …).
fn std_in_no_std_test(body: &str) -> String {
    let names: Vec<&str> = [
        ("format!(", "format"),
        ("vec![", "vec"),
        (".to_string()", "string::ToString"),
        ("String", "string::String"),
        (".to_owned()", "borrow::ToOwned"),
        ("Box", "boxed::Box"),
        ("Vec<", "vec::Vec"),
        ("Vec::", "vec::Vec"),
    ]
    .iter()
    .filter(|(spelled, _)| body.contains(spelled))
    .map(|(_, name)| *name)
    .fold(Vec::new(), |mut names, name| {
        if !names.contains(&name) {
            names.push(name);
        }
        names
    });
    match names.as_slice() {
        [] => "extern crate std;".to_owned(),
        [one] => format!("extern crate std; use std::{one};"),
        several => format!("extern crate std; use std::{{{}}};", several.join(", ")),
    }
}

/// Whether the crate of the document is `#![no_std]`, by its root file (a `cfg_attr(not(feature = "std"),
/// no_std)` crate is taken to build with `std`, as its default features usually do).
fn crate_is_no_std(document: &TaskDocument) -> bool {
    let Some(path) = document.path.as_deref() else { return false };
    let Some(project) = exec_check::find_project(path) else { return false };
    let src = project.root.join(&project.crate_dir).join("src");
    ["lib.rs", "main.rs"].iter().any(|root| {
        let root = src.join(root);
        let text = if root == path { Some(document.text.clone()) } else { std::fs::read_to_string(&root).ok() };
        text.is_some_and(|text| {
            text.lines().any(|line| line.split_whitespace().collect::<String>().starts_with("#![no_std]"))
        })
    })
}

/// The file with a probe module appended: one line per call (the compiler's errors are mapped back to calls by
/// line), each printing `SPARK_PROBE <idx> start`, then the call's Debug output or `panic`. Returns the text and
/// the 0-based line of the first call.
fn rust_probe_module(text: &str, calls: &[String], live: &[usize], no_std: bool) -> (String, usize) {
    let mut out = text.to_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    let mark = pure::PROBE_MARK;
    out.push_str(&format!(
        "#[cfg(test)]\n#[allow(warnings, clippy::all)]\nmod spark_probe {{\n    use super::*;\n    {std}\n    \
         fn __spark_report(idx: usize, result: std::thread::Result<String>) {{\n        match result {{\n            \
         Ok(debug) if debug.len() <= {max} => println!(\"{mark} {{idx}} ok {{debug:?}}\"),\n            \
         Ok(_) => println!(\"{mark} {{idx}} big\"),\n            Err(_) => println!(\"{mark} {{idx}} panic\"),\n        \
         }}\n    }}\n    #[test]\n    fn __spark_probe() {{\n        std::panic::set_hook(Box::new(|_| {{}}));\n        \
         let __spark_from: usize = std::env::var(\"{from}\").ok().and_then(|v| v.parse().ok()).unwrap_or(0);\n",
        std = if no_std { STD_IN_NO_STD } else { "" },
        max = pure::MAX_DEBUG_LEN,
        from = pure::FROM_VAR,
    ));
    let first_line = out.matches('\n').count();
    for idx in live {
        let call = &calls[*idx];
        out.push_str(&format!(
            "        if __spark_from <= {idx} {{ println!(\"{mark} {idx} start\"); __spark_report({idx}, std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| format!(\"{{:?}}\", {call})))); }}\n"
        ));
    }
    out.push_str("    }\n}\n");
    (out, first_line)
}

/// Runs the probe: twice on the original (an input whose value differs between the runs, or that panics or
/// crashes, is dropped), then once per mutant.
async fn run_probe(
    session: &ScratchSession,
    step: &Step,
    calls: &[String],
    live: &[usize],
    mutants: &[Mutant],
    cancel: &CancellationToken,
) -> Result<Vec<Input>, String> {
    let first = observe(session, step, live, None, ORIGINAL_LIMIT, cancel).await?;
    let second = observe(session, step, live, None, ORIGINAL_LIMIT, cancel).await?;
    let mut inputs: Vec<(usize, Input)> = live
        .iter()
        .filter_map(|idx| match (first.get(idx), second.get(idx)) {
            (Some(Observation::Value(one)), Some(Observation::Value(two))) if one == two => Some((
                *idx,
                Input { call: calls[*idx].clone(), value: one.clone(), kills: BTreeSet::new(), partial: false },
            )),
            // An object with a random key or a time in it: what the two runs agree on.
            (Some(Observation::Value(one)), Some(Observation::Value(two))) => {
                pure::stable_members(one, two).map(|stable| {
                    (*idx, Input { call: calls[*idx].clone(), value: stable, kills: BTreeSet::new(), partial: true })
                })
            }
            _ => None,
        })
        .collect();
    let kept: Vec<usize> = inputs.iter().map(|(idx, _)| *idx).collect();
    let started = Instant::now();
    for mutant in mutants {
        if started.elapsed() > MUTANTS_TOTAL || kept.is_empty() {
            break;
        }
        let observed = observe(session, step, &kept, Some(mutant.id), MUTANT_LIMIT, cancel).await?;
        for (idx, input) in &mut inputs {
            let differs = match observed.get(idx) {
                Some(Observation::Value(value)) if input.partial => !pure::has_members(value, &input.value),
                Some(Observation::Value(value)) => *value != input.value,
                Some(Observation::Panic | Observation::Crashed | Observation::Big) => true,
                None => false,
            };
            if differs {
                input.kills.insert(mutant.id);
            }
        }
    }
    Ok(inputs.into_iter().map(|(_, input)| input).collect())
}

/// One pass of the probe over `inputs` (the original, or a mutant): an input that crashes or hangs the process
/// is recorded as such and the rest run again from the next one (on the original; a mutant's pass ends there).
async fn observe(
    session: &ScratchSession,
    step: &Step,
    inputs: &[usize],
    mutant: Option<usize>,
    limit: Duration,
    cancel: &CancellationToken,
) -> Result<HashMap<usize, Observation>, String> {
    let mut observed = HashMap::new();
    let mut from = 0;
    for _ in 0..4 {
        let mut env = vec![(pure::FROM_VAR, from.to_string())];
        if let Some(id) = mutant {
            env.push((pure::MUTANT_VAR, id.to_string()));
        }
        let ran = session.run(step, &env, limit, cancel).await?;
        let (found, started) = pure::parse_probe(&ran.stdout);
        if mutant.is_none() && from == 0 && found.is_empty() && started.is_none() && ran.status != Some(0) {
            // Nothing ran: the module did not load (a dependency not installed, an error at its top level).
            let said = ran.stderr.lines().rev().find(|line| line.contains("Error")).or(ran.stderr.lines().last());
            return Err(format!("the probe stopped before any input: {}", said.unwrap_or("no output").trim()));
        }
        observed.extend(found);
        let finished = ran.status == Some(0) && !ran.timed_out && !ran.truncated;
        if finished {
            break;
        }
        // The input that started last and said nothing crashed or hung the process.
        let Some(culprit) = started.filter(|idx| !observed.contains_key(idx)) else { break };
        observed.insert(culprit, Observation::Crashed);
        if mutant.is_some() {
            break;
        }
        match inputs.iter().position(|idx| *idx == culprit).and_then(|at| inputs.get(at + 1)) {
            Some(next) => from = *next,
            None => break,
        }
    }
    Ok(observed)
}

/// What a failed run said: node's error line (`Error: …`, `TypeError: …`) where there is one, else the last line
/// (node ends its report with its version).
fn last_line(text: &str) -> &str {
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let error = lines
        .clone()
        .find(|line| line.split_once(": ").is_some_and(|(head, _)| head.ends_with("Error") && !head.contains(' ')));
    error.or_else(|| lines.next_back()).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_lines_and_test_names() {
        let cases = [
            ("tsc --noEmit: in the edit: src/a.test.ts:7: error[TS2345]: Argument of type", Some(7)),
            ("node --test: the generated test fails", None),
        ];
        for (refusal, expected) in cases {
            assert_eq!(refused_line(refusal), expected, "{refusal}");
        }
        assert_eq!(unused_test_name("fn f() {}", "f"), "f_works");
        assert_eq!(unused_test_name("fn f_works() {}", "f"), "f_characterised");
    }

    #[test]
    fn a_return_type_collected_from_an_iterator_is_given_one() {
        let header = "fn spell_digits<T: iter::FromIterator<char>>(names: &'static [u8; 10], input: &[u8]) -> T";
        assert_eq!(collected_type("T", header).as_deref(), Some("String"));
        let header = "fn f<C>(n: u8) -> C where C: FromIterator<Option<u8>>";
        assert_eq!(collected_type("C", header).as_deref(), Some("Vec<Option<u8>>"));
        assert_eq!(collected_type("T", "fn g<T: Default>() -> T"), None);
        let header = "fn read_bytes<T: FromIterator<u8>>(&self) -> Result<T, ReadError>";
        assert_eq!(collected_type("Result<T, ReadError>", header).as_deref(), Some("Result<Vec<u8>, ReadError>"));
        assert_eq!(collected_type("Result<u8, ReadError>", header), None);
        let calls = pure::with_callees_and_args(
            &["f".to_owned()],
            &["(1)".to_owned()],
            &pure::CallShape::Typed("String".to_owned()),
            9,
        );
        assert_eq!(calls, ["{ let value: String = f(1); value }"]);
    }

    #[test]
    fn a_no_std_test_declares_what_it_uses_of_std() {
        assert_eq!(std_in_no_std_test("assert_eq!(f(1), 2);"), "extern crate std;");
        assert_eq!(
            std_in_no_std_test("assert_eq!(g(1).to_string(), \"a\"); assert_eq!(format!(\"{:?}\", h()), \"[]\");"),
            "extern crate std; use std::{format, string::ToString};"
        );
        assert_eq!(std_in_no_std_test("assert_eq!(v(), vec![1]);"), "extern crate std; use std::vec;");
    }

    #[test]
    fn the_probe_module_has_one_line_per_input() {
        let calls = ["f(1)".to_owned(), "f(\"a\")".to_owned(), "f(2)".to_owned()];
        let (text, first) = rust_probe_module("pub fn f() {}", &calls, &[0, 2], false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[first].contains("report(0,") && lines[first].contains("f(1)"), "{text}");
        assert!(lines[first + 1].contains("report(2,") && lines[first + 1].contains("f(2)"), "{text}");
        assert!(!text.contains("f(\"a\")"), "{text}");
        assert!(crate::parse::text(Lang::Rust, &text).is_some_and(|tree| !tree.root_node().has_error()), "{text}");
    }
}
