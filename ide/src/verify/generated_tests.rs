//! Checks of generated tests, pure functions over text and trees: the tests parse in their file, assert on a
//! call of the function, call only names the test file has, and expect literals of the declared return type's
//! kind.

use spark_grammars::{tree_sitter::Tree, Lang};

use super::edit::*;

/// Generated tests parse in their file (`new_file_text`, the whole test file or module after the insertion, with
/// no new syntax error) and contain an assertion that calls `function_name`.
pub fn check_tests(
    lang: Lang,
    old_file_text: &str,
    new_file_text: &str,
    test_code: &str,
    function_name: &str,
    arity: Option<(usize, usize)>,
) -> Result<(), Rejection> {
    if let Some((min, max)) = arity {
        for found in call_arities(test_code, function_name) {
            if found < min || found > max {
                return Err(Rejection::WrongArity { expected: (min, max), found });
            }
        }
    }
    let before = crate::parse::text(lang, old_file_text).map(|tree| count_errors(&tree, None)).unwrap_or(0);
    let tree = crate::parse::text(lang, new_file_text).ok_or(Rejection::SyntaxErrors {
        in_edit: 1,
        total_before: before,
        total_after: 1,
    })?;
    let total_after = count_errors(&tree, None);
    if total_after > before {
        return Err(Rejection::SyntaxErrors { in_edit: total_after - before, total_before: before, total_after });
    }
    // The test code alone (it parses by itself: a `#[test]` function, a `test(…)` call).
    let test_tree = crate::parse::text(lang, test_code);
    if let Some(name) = test_tree.as_ref().and_then(|tree| unknown_callee(lang, new_file_text, test_code, tree)) {
        return Err(Rejection::UnknownCall(name));
    }
    if let Some(test_tree) = test_tree.as_ref().filter(|_| lang == Lang::Rust) {
        let in_macros = assertion_syntax_errors(test_code, test_tree);
        if in_macros > 0 {
            return Err(Rejection::SyntaxErrors {
                in_edit: in_macros,
                total_before: before,
                total_after: before + in_macros,
            });
        }
    }
    let call = format!("{function_name}(");
    let asserts = test_code.lines().any(|line| {
        let line = line.trim();
        (line.contains("assert") || line.contains("expect(")) && line.contains(&call)
    });
    let calls_then_asserts =
        test_code.contains(&call) && test_code.lines().any(|line| line.contains("assert") || line.contains("expect("));
    if asserts || calls_then_asserts {
        Ok(())
    } else {
        Err(Rejection::NoAssertion)
    }
}

/// What kind of value a function's declared return type is, when it is a plain boolean, number or string.
pub(super) fn return_kind(lang: Lang, function_source: &str) -> Option<&'static str> {
    let body_at = function_source.find('{').unwrap_or(function_source.len());
    let signature = &function_source[..body_at];
    let declared = if lang == Lang::Rust {
        // No `->`: the function returns `()`, so no literal is what a call of it equals.
        let Some((_, returned)) = signature.rsplit_once("->") else {
            return signature.contains("fn ").then_some("nothing");
        };
        returned.split(" where").next()?.trim()
    } else {
        let (_, after) = signature.rsplit_once(')')?;
        after.trim_start().strip_prefix(':')?.split("=>").next()?.trim()
    };
    let numbers = [
        "number", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64",
    ];
    let is_predicate = declared.split_whitespace().nth(1) == Some("is");
    match declared {
        "boolean" | "bool" => Some("a boolean"),
        _ if is_predicate => Some("a boolean"),
        "string" | "String" | "&str" | "&'static str" => Some("a string"),
        _ if numbers.contains(&declared) => Some("a number"),
        _ => None,
    }
}

/// The kind of a literal expected value: `true`, `2`, `"a"`.
pub(super) fn literal_kind(literal: &str) -> Option<&'static str> {
    let literal = literal.trim();
    if literal == "true" || literal == "false" {
        return Some("a boolean");
    }
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    if digits.starts_with(|ch: char| ch.is_ascii_digit())
        && digits.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '.' || ch == '_')
    {
        return Some("a number");
    }
    let quoted = |q: char| literal.len() >= 2 && literal.starts_with(q) && literal.ends_with(q);
    if quoted('"') || quoted('\'') || quoted('`') {
        return Some("a string");
    }
    None
}

/// Each one-line assertion on a call of `name` whose expected value is a literal must expect the kind of value
/// the function's declared return type is (`assert.equal(name(…), X)`, `assert_eq!(name(…), X)`,
/// `expect(name(…)).toBe(X)`): a small model copies its prompt's example (`add(2, 3) → 5`) onto any function.
pub fn check_expected_values(lang: Lang, function_source: &str, test_code: &str, name: &str) -> Result<(), Rejection> {
    let Some(returns) = return_kind(lang, function_source) else { return Ok(()) };
    let call = format!("{name}(");
    for line in test_code.lines().map(str::trim) {
        let Some(at) = line.find(&call) else { continue };
        let starts_with_call = |prefix: &str| line.starts_with(prefix) && line[prefix.len()..].starts_with(&call);
        let direct = [
            "assert.equal(",
            "assert.strictEqual(",
            "assert.deepEqual(",
            "assert.deepStrictEqual(",
            "assert_eq!(",
            "expect(",
        ]
        .iter()
        .any(|prefix| starts_with_call(prefix));
        if !direct || line.contains("?.") {
            continue;
        }
        // The call's own closing parenthesis, then `, X)` or `).toBe(X)` / `).toEqual(X)` to the end of the line.
        let mut depth = 0usize;
        let mut close = None;
        for (idx, ch) in line[at + call.len() - 1..].char_indices() {
            match ch {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        close = Some(at + call.len() - 1 + idx + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        let rest = line[close..].trim_end_matches(';').trim_end();
        let expected = if let Some(value) = rest.strip_prefix(',') {
            value.trim().strip_suffix(')')
        } else {
            rest.strip_prefix(").toBe(")
                .or_else(|| rest.strip_prefix(").toEqual("))
                .and_then(|value| value.strip_suffix(')'))
        };
        let Some(expected) = expected.map(str::trim) else { continue };
        if let Some(kind) = literal_kind(expected) {
            if kind != returns {
                return Err(Rejection::WrongExpectedKind { returns, expected: expected.to_owned() });
            }
        }
    }
    Ok(())
}

/// Syntax errors inside Rust assertion macros, which tree-sitter reads as bare token trees: each
/// `assert!(…)`, `assert_eq!(…)`, `assert_ne!(…)` is parsed again as the expression `(…)`.
pub(super) fn assertion_syntax_errors(test_code: &str, tree: &Tree) -> usize {
    let mut errors = 0;
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.kind() == "macro_invocation" {
            let name = node.child_by_field_name("macro").and_then(|name| test_code.get(name.byte_range()));
            let mut cursor = node.walk();
            let arguments = node.children(&mut cursor).find(|child| child.kind() == "token_tree");
            let text = arguments.and_then(|arguments| test_code.get(arguments.byte_range())).unwrap_or("");
            if matches!(name, Some("assert" | "assert_eq" | "assert_ne")) && text.starts_with('(') {
                let expression = format!("fn __spark() {{\n    let _ = {text};\n}}\n");
                errors += crate::parse::text(Lang::Rust, &expression).map_or(1, |tree| count_errors(&tree, None));
            }
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    errors
}

/// Functions every test file may call by a bare name: the test frameworks' and the language's own.
pub(super) const TS_GLOBAL_CALLS: &[&str] = &[
    "test",
    "it",
    "describe",
    "expect",
    "assert",
    "beforeEach",
    "afterEach",
    "beforeAll",
    "afterAll",
    "Number",
    "String",
    "Boolean",
    "Symbol",
    "BigInt",
    "Array",
    "Object",
    "Date",
    "Error",
    "TypeError",
    "RangeError",
    "Promise",
    "parseInt",
    "parseFloat",
    "isNaN",
    "isFinite",
    "setTimeout",
    "clearTimeout",
    "setInterval",
    "clearInterval",
    "queueMicrotask",
    "structuredClone",
    "encodeURIComponent",
    "decodeURIComponent",
    "encodeURI",
    "decodeURI",
    "require",
    "fetch",
    "fail",
    "Math",
    "JSON",
    "console",
    "globalThis",
    "window",
    "document",
    "process",
    "Buffer",
    "Map",
    "Set",
    "WeakMap",
    "WeakSet",
    "Reflect",
    "Proxy",
    "Intl",
    "RegExp",
    "NaN",
    "Infinity",
    "Uint8Array",
    "Int32Array",
    "Float64Array",
    "ArrayBuffer",
    "TextEncoder",
    "TextDecoder",
    "URL",
    "URLSearchParams",
    "AbortController",
    "arguments",
    "vi",
    "jest",
];
pub(super) const RUST_KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in",
    "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait",
    "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn", "_",
];
pub(super) const RUST_GLOBAL_CALLS: &[&str] = &["Some", "Ok", "Err", "drop", "Box", "Vec", "String"];

/// The first function `test_code` calls by a bare name (`add(2, 3)`, not `x.add()` or `m::add()`), or in
/// TypeScript the first name it reads at all (`RetryPolicy.OPEN`), that `file_text` (the test file with the tests
/// in it) neither declares nor names in an import, and that is not a global or a prelude function; `None` when
/// every name resolves (or the code does not parse).
pub(super) fn unknown_callee(lang: Lang, file_text: &str, test_code: &str, tree: &Tree) -> Option<String> {
    let globals = if lang == Lang::Rust { RUST_GLOBAL_CALLS } else { TS_GLOBAL_CALLS };
    let mut callees = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        // TypeScript: every name read in an expression (`identifier`; properties, types and shorthand keys are
        // other kinds). Names declared in the test code itself are found by `declared` below.
        if lang != Lang::Rust && node.kind() == "identifier" {
            if let Some(name) = test_code.get(node.byte_range()) {
                callees.push(name);
                // The framework's `test` read as a value (`test.retryPolicy`, `f(test)`): a model that mistook it
                // for the code under test. Only its modifiers are members.
                let parent = node.parent();
                let as_value = parent.is_some_and(|parent| match parent.kind() {
                    "arguments" => true,
                    "member_expression" => {
                        let property = parent.child_by_field_name("property");
                        let property = property.and_then(|property| test_code.get(property.byte_range()));
                        !matches!(property, Some("skip" | "only" | "todo" | "each" | "concurrent"))
                    }
                    _ => false,
                });
                if matches!(name, "test" | "it") && as_value {
                    let used = parent.filter(|parent| parent.kind() == "member_expression");
                    return Some(used.and_then(|used| test_code.get(used.byte_range())).unwrap_or(name).to_owned());
                }
            }
        }
        if node.kind() == "call_expression" {
            let callee = node.child_by_field_name("function").filter(|callee| callee.kind() == "identifier");
            if let Some(name) = callee.and_then(|callee| test_code.get(callee.byte_range())) {
                callees.push(name);
            }
        }
        let mut cursor = node.walk();
        let children: Vec<_> = node.children(&mut cursor).collect();
        // Inside a Rust macro (`assert_eq!(add(1, 2), 3)`) a call is a name and a `(…)` token tree.
        if node.kind() == "token_tree" {
            for (idx, pair) in children.windows(2).enumerate() {
                let after_path = idx > 0 && matches!(children[idx - 1].kind(), "." | "::");
                let opens = test_code.get(pair[1].byte_range()).is_some_and(|text| text.starts_with('('));
                if pair[0].kind() == "identifier" && pair[1].kind() == "token_tree" && opens && !after_path {
                    if let Some(name) = test_code.get(pair[0].byte_range()) {
                        callees.push(name);
                    }
                }
            }
            // A value read inside the macro (`assert_eq!(f(a), 1)` with no `a` anywhere): a lowercase name that is
            // neither a path segment, a field, a macro, a call, a struct literal nor a field of one.
            for (idx, child) in children.iter().enumerate() {
                let previous = idx.checked_sub(1).map(|at| children[at].kind());
                let next = children.get(idx + 1);
                let next_text = next.and_then(|next| test_code.get(next.byte_range())).unwrap_or("");
                let qualified = matches!(previous, Some("." | "::" | "'" | "$"));
                let followed = matches!(next.map(|next| next.kind()), Some("!" | "::" | ":"))
                    || next_text.starts_with('(')
                    || next_text.starts_with('{');
                let Some(name) = test_code.get(child.byte_range()) else { continue };
                let lowercase = name.starts_with(|ch: char| ch.is_ascii_lowercase() || ch == '_');
                if child.kind() == "identifier"
                    && lowercase
                    && !qualified
                    && !followed
                    && !RUST_KEYWORDS.contains(&name)
                {
                    callees.push(name);
                }
            }
        }
        stack.extend(children);
    }
    // Identifiers of a line (TypeScript's may hold `$`).
    fn idents(line: &str) -> impl Iterator<Item = &str> {
        line.split(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == '$')).filter(|token| !token.is_empty())
    }
    // Items anywhere in the file (the Rust tests see them through `use super::*`) and imports; local bindings
    // (`let`, `for`) only in the test code itself: a `let a` in another function of the file is not in scope.
    let binds = |text: &str, name: &str, keywords: &[&str]| {
        text.lines().any(|line| {
            let mut previous = "";
            idents(line).any(|token| {
                let declares = keywords.contains(&previous);
                previous = token;
                declares && token == name
            })
        })
    };
    let declared = |name: &str| {
        let imported = file_text.lines().map(str::trim_start).any(|line| {
            (line.starts_with("use ") || line.starts_with("import ") || line.starts_with("pub use "))
                && idents(line).any(|token| token == name)
        });
        let item_keywords: &[&str] = if lang == Lang::Rust {
            &["fn", "struct", "enum", "const", "static", "type"]
        } else {
            &["function", "const", "let", "var", "class"]
        };
        imported
            || binds(file_text, name, item_keywords)
            || binds(test_code, name, &["let", "mut", "for", "const", "var", "function", "fn"])
    };
    // Parameters of closures and functions inside the test code (`(f) => f(1)`, `|f| f(1)`) are declared there.
    // (In Rust only closures' `|a, b|` and typed `(a: T)`: `f(a, b)` is a call, not a parameter list.)
    let parameter = |name: &str| {
        let (opens, closes): (&[&str], &[&str]) = if lang == Lang::Rust {
            (&["(", ", ", "|"], &[":", "|"])
        } else {
            (&["(", ", ", "|"], &[")", ",", ":", "?", "|"])
        };
        let closure_list = lang == Lang::Rust && test_code.contains(&format!("|{name},"));
        test_code.contains(&format!("{name} =>"))
            || closure_list
            || opens.iter().any(|open| closes.iter().any(|close| test_code.contains(&format!("{open}{name}{close}"))))
    };
    callees.into_iter().find(|name| !globals.contains(name) && !declared(name) && !parameter(name)).map(str::to_owned)
}
