//! Test generation for the function under the cursor: a `#[test]` in the file's test module for Rust, a sibling `<name>.test.ts` (read from the editor's buffer when open) for TypeScript.

use super::*;
use crate::route::{PromptStyle, TaskPrompt};
use crate::verify::{check_expected_values, check_tests};
use spark_engine::EngineError;
use spark_grammars::{smallest_capture, Lang};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The function under the cursor: its byte range and name.
pub fn function_at(document: &TaskDocument, at: usize) -> Option<(Range<usize>, String)> {
    let root = document.tree.root_node();
    let queries = document.lang.queries();
    let source = document.text.as_bytes();
    let function = smallest_capture(&queries.functions, "function", root, source, at, at)?;
    let mut cursor = spark_grammars::tree_sitter::QueryCursor::new();
    let name_idx = queries.functions.capture_index_for_name("name")?;
    use spark_grammars::tree_sitter::StreamingIterator;
    let mut matches = cursor.matches(&queries.functions, function, source);
    while let Some(found) = matches.next() {
        for capture in found.captures {
            if capture.index == name_idx && function.byte_range().contains(&capture.node.start_byte()) {
                let name = capture.node.utf8_text(source).ok()?.to_owned();
                return Some((function.byte_range(), name));
            }
        }
    }
    None
}

pub(super) async fn tests(task: &Task<'_>) -> Result<TaskOutcome, EngineError> {
    let Task { document, target, .. } = *task;
    let Some((function, name)) = function_at(document, target.range.start) else {
        return Ok(nothing("Spark: no function under the cursor"));
    };
    let title = format!("Spark: generate tests for `{name}`");
    let arity = function_arity(document, function.clone());
    // A TypeScript test file imports the function: one that is not exported (or a class member) cannot be
    // reached from there, and tests that import it anyway do not compile.
    let import = match document.lang {
        Lang::Rust => String::new(),
        Lang::TypeScript | Lang::Tsx => match ts_export(document, function.clone(), &name) {
            TsExport::Named(exported) if exported == name => format!("{{ {name} }}"),
            TsExport::Named(exported) => format!("{{ {exported} as {name} }}"),
            TsExport::Default => name.clone(),
            TsExport::Member => {
                return Ok(nothing(&format!(
                    "Spark: `{name}` is a class member; tests are generated for exported functions"
                )))
            }
            TsExport::NotExported => {
                return Ok(nothing(&format!("Spark: `{name}` is not exported, so a test file cannot import it")))
            }
        },
    };
    // Where code may run, the test asserts what the function was seen to return (characterisation); else the
    // model writes it whole.
    let framework = ts_framework(document.path.as_deref());
    let probe_target = super::probe::Target {
        function: function.clone(),
        name: &name,
        arity,
        title: &title,
        import: &import,
        framework,
    };
    if let Some(outcome) = super::probe::characterise(task, &probe_target).await? {
        return Ok(outcome);
    }
    let source = &document.text[function];
    match document.lang {
        Lang::Rust => rust_tests(task, FunctionTarget { source, name: &name, arity }, &title).await,
        Lang::TypeScript | Lang::Tsx => {
            let target = FunctionTarget { source, name: &name, arity };
            ts_tests(task, target, &import, &title).await
        }
    }
}

pub(super) async fn rust_tests(
    task: &Task<'_>,
    target: FunctionTarget<'_>,
    title: &str,
) -> Result<TaskOutcome, EngineError> {
    let Task { generator, document, budget, exec, cancel, .. } = *task;
    let FunctionTarget { source: function_source, name, arity } = target;
    let header = format!("    #[test]\n    fn {name}_works() {{\n");
    let task = TaskPrompt {
        system: TESTS_SYSTEM.to_owned(),
        instruction: format!(
            "```rust\n{function_source}\n```\n\nWrite one test function for `{name}`, named `{name}_works`, marked \
             `#[test]`. It goes inside `mod tests` with `use super::*;`, so `{name}` is in scope. Call `{name}` with a \
             few concrete inputs and check each exact result with `assert_eq!` or `assert!`; work every expected \
             value out from the code above, step by step, before you write it."
        ),
        few_shot: format!(
            "pub fn add(a: i32, b: i32) -> i32 {{\n    a + b\n}}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    \
             #[test]\n    fn add_works() {{\n        assert_eq!(add(2, 3), 5);\n        assert_eq!(add(-1, 1), 0);\n    }}\n}}\n\n\
             {function_source}\n\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{header}"
        ),
        few_shot_stops: vec!["\n    }\n".to_owned(), "\n}\n".to_owned()],
        chat_prefill: format!("```rust\n#[test]\nfn {name}_works() {{\n"),
        chat_stops: vec!["```".to_owned()],
    };
    let existing = existing_test_module(document);
    let (found, tried, rejections) = sample_until(generator, &task, 240, budget, exec, cancel, |body, style| {
        let test_fn = match style {
            PromptStyle::FewShot => format!("{header}{}\n    }}\n", body.trim_end()),
            // Prefilled up to the body: the answer is the body and the closing brace, at the top level.
            PromptStyle::ChatPrefilled => {
                indent_block(&format!("#[test]\nfn {name}_works() {{\n{}\n", body.trim_end()), "    ")
            }
            PromptStyle::Chat => indent_block(&format!("{}\n", body.trim()), "    "),
        };
        let change = rust_test_change(document, existing, &test_fn);
        check_tests(Lang::Rust, &document.text, &change.new_text(), &test_fn, name, arity)?;
        check_expected_values(Lang::Rust, function_source, &test_fn, name)?;
        Ok(change)
    })
    .await?;
    Ok(sampled(title, found, tried, rejections))
}

pub(super) const TESTS_SYSTEM: &str =
    "You write unit tests. Every expected value in an assertion is what the code really \
    returns for that input: trace the code by hand before you write it. Answer with code only, in one code block.";

/// `text` with `indent` before every non-empty line.
pub(super) fn indent_block(text: &str, indent: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16 * indent.len());
    for line in text.split_inclusive('\n') {
        if !line.trim().is_empty() {
            out.push_str(indent);
        }
        out.push_str(line);
    }
    out
}

/// The function tests are generated for.
#[derive(Clone, Copy)]
pub(super) struct FunctionTarget<'a> {
    source: &'a str,
    name: &'a str,
    arity: Option<(usize, usize)>,
}

/// How many arguments the function takes (required ..= all), from its parameter list; `self` does not count.
pub(super) fn function_arity(document: &TaskDocument, function: Range<usize>) -> Option<(usize, usize)> {
    let root = document.tree.root_node();
    let node = root.descendant_for_byte_range(function.start, function.end)?;
    let mut stack = vec![node];
    while let Some(current) = stack.pop() {
        if let Some(parameters) = current.child_by_field_name("parameters") {
            let mut cursor = parameters.walk();
            let mut required = 0;
            let mut all = 0;
            for parameter in parameters.named_children(&mut cursor) {
                let is_rest = parameter.kind() == "rest_pattern"
                    || parameter.child_by_field_name("pattern").is_some_and(|pattern| pattern.kind() == "rest_pattern");
                if is_rest {
                    return Some((required, usize::MAX));
                }
                match parameter.kind() {
                    "self_parameter" | "comment" => {}
                    "optional_parameter" => all += 1,
                    "required_parameter" if parameter.child_by_field_name("value").is_some() => all += 1,
                    _ => {
                        required += 1;
                        all += 1;
                    }
                }
            }
            return Some((required, all));
        }
        let mut cursor = current.walk();
        let children: Vec<_> = current.named_children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    None
}

/// The byte offset just before the closing brace of the file's `#[cfg(test)] mod tests`, if there is one.
pub(super) fn existing_test_module(document: &TaskDocument) -> Option<usize> {
    let queries = document.lang.queries();
    let root = document.tree.root_node();
    let mut cursor = spark_grammars::tree_sitter::QueryCursor::new();
    let index = queries.tests.capture_index_for_name("test_module")?;
    use spark_grammars::tree_sitter::StreamingIterator;
    let mut matches = cursor.matches(&queries.tests, root, document.text.as_bytes());
    while let Some(found) = matches.next() {
        for capture in found.captures {
            if capture.index == index {
                let end = capture.node.end_byte();
                if document.text[..end].ends_with('}') {
                    return Some(end - 1);
                }
            }
        }
    }
    None
}

pub(super) fn rust_test_change(document: &TaskDocument, module_end: Option<usize>, test_fn: &str) -> FileChange {
    match module_end {
        Some(at) => FileChange {
            path: None,
            create: false,
            old_text: document.text.clone(),
            replace: at..at,
            insert: format!("\n{}", seeing_the_parent(document, at, test_fn)),
        },
        None => {
            let end = document.text.len();
            let separator = if document.text.ends_with('\n') { "\n" } else { "\n\n" };
            FileChange {
                path: None,
                create: false,
                old_text: document.text.clone(),
                replace: end..end,
                insert: format!("{separator}#[cfg(test)]\nmod tests {{\n    use super::*;\n\n{test_fn}}}\n"),
            }
        }
    }
}

/// `test_fn` as it goes into the test module ending at `module_end`: where the module does not glob-import its
/// parent (`use super::RenameRule::*;` only, say), the function does, first thing in its body, so that what it
/// calls is in scope as it was in the probe (`super` in a function body is still the module's parent).
fn seeing_the_parent(document: &TaskDocument, module_end: usize, test_fn: &str) -> String {
    let root = document.tree.root_node();
    let module = root.descendant_for_byte_range(module_end, module_end + 1).and_then(|node| {
        std::iter::successors(Some(node), |node| node.parent()).find(|node| node.kind() == "mod_item")
    });
    let Some(module) = module else { return test_fn.to_owned() };
    let sees_parent = document.text[module.byte_range()]
        .lines()
        .any(|line| line.trim().trim_start_matches("pub ").starts_with("use super::*;"));
    match test_fn.find("{\n") {
        Some(open) if !sees_parent => {
            format!("{}        use super::*;\n{}", &test_fn[..open + 2], &test_fn[open + 2..])
        }
        _ => test_fn.to_owned(),
    }
}

/// The files besides the document itself that a task on `path` reads (and may edit).
pub fn files_read(kind: TaskKind, lang: Lang, path: &Path) -> Vec<PathBuf> {
    match (kind, lang) {
        (TaskKind::Tests, Lang::TypeScript | Lang::Tsx) => vec![ts_test_path(path)],
        _ => Vec::new(),
    }
}

/// `src/math.ts` → `src/math.test.ts`.
pub fn ts_test_path(file: &Path) -> PathBuf {
    let stem = file.file_stem().and_then(|stem| stem.to_str()).unwrap_or("module");
    let extension = file.extension().and_then(|ext| ext.to_str()).unwrap_or("ts");
    file.with_file_name(format!("{stem}.test.{extension}"))
}

/// How a TypeScript function can be imported from another module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TsExport {
    /// `export function f`, `export const f = …`, or `export { f }` / `export { f as g }` (the exported name).
    Named(String),
    /// `export default function f`, or `export default f;`.
    Default,
    /// A method or a field of a class: not importable by itself.
    Member,
    NotExported,
}

/// How the function at `function` (a byte range from [`function_at`]) named `name` is exported.
pub fn ts_export(document: &TaskDocument, function: Range<usize>, name: &str) -> TsExport {
    let root = document.tree.root_node();
    let source = document.text.as_bytes();
    let Some(node) = root.descendant_for_byte_range(function.start, function.end) else {
        return TsExport::NotExported;
    };
    if matches!(node.kind(), "method_definition" | "public_field_definition") {
        return TsExport::Member;
    }
    let is_default = |statement: spark_grammars::tree_sitter::Node| {
        let mut cursor = statement.walk();
        let default = statement.children(&mut cursor).any(|child| child.kind() == "default");
        default
    };
    if let Some(parent) = node.parent().filter(|parent| parent.kind() == "export_statement") {
        return if is_default(parent) { TsExport::Default } else { TsExport::Named(name.to_owned()) };
    }
    // `export { f }`, `export { f as g }`, `export default f;` elsewhere in the module.
    let mut cursor = root.walk();
    for statement in root.children(&mut cursor).filter(|child| child.kind() == "export_statement") {
        if statement.child_by_field_name("source").is_some() {
            continue;
        }
        if is_default(statement) {
            let value = statement.child_by_field_name("value").and_then(|value| value.utf8_text(source).ok());
            if value == Some(name) {
                return TsExport::Default;
            }
            continue;
        }
        let mut walk = statement.walk();
        let clause = statement.children(&mut walk).find(|child| child.kind() == "export_clause");
        let Some(clause) = clause else { continue };
        let mut specifiers = clause.walk();
        for specifier in clause.children(&mut specifiers).filter(|child| child.kind() == "export_specifier") {
            let text = |field: &str| specifier.child_by_field_name(field).and_then(|node| node.utf8_text(source).ok());
            if text("name") == Some(name) {
                return match text("alias") {
                    Some("default") => TsExport::Default,
                    Some(alias) => TsExport::Named(alias.to_owned()),
                    None => TsExport::Named(name.to_owned()),
                };
            }
        }
    }
    TsExport::NotExported
}

pub(super) async fn ts_tests(
    task: &Task<'_>,
    target: FunctionTarget<'_>,
    import: &str,
    title: &str,
) -> Result<TaskOutcome, EngineError> {
    let Task { generator, document, budget, exec, cancel, .. } = *task;
    let FunctionTarget { source: function_source, name, arity } = target;
    let framework = ts_framework(document.path.as_deref());
    let (imports, example_assert) = match framework {
        TsFramework::Vitest => ("import { test, expect } from \"vitest\";\n", "expect(add(2, 3)).toBe(5);"),
        TsFramework::Jest => ("", "expect(add(2, 3)).toBe(5);"),
        TsFramework::NodeTest => (
            "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\n",
            "assert.equal(add(2, 3), 5);",
        ),
    };
    let header = format!("test(\"{name} works\", () => {{\n");
    let assert_style = match framework {
        TsFramework::Vitest | TsFramework::Jest => "`expect(...).toBe(...)` / `toEqual(...)`",
        TsFramework::NodeTest => "`assert.equal` / `assert.deepEqual` from `node:assert/strict`",
    };
    let task = TaskPrompt {
        system: TESTS_SYSTEM.to_owned(),
        instruction: format!(
            "```typescript\n{function_source}\n```\n\nWrite one test for `{name}`: a call \
             `test(\"{name} works\", () => {{ ... }});`. The test file already starts with:\n```typescript\n\
             {imports}import {import} from \"./module\";\n```\nCall `{name}` with a few concrete inputs and \
             check each exact result with {assert_style}; work every expected value out from the code above, step \
             by step, before you write it."
        ),
        few_shot: format!(
            "export function add(a: number, b: number): number {{\n  return a + b;\n}}\n\n// add.test.ts\n{imports}\
             test(\"add works\", () => {{\n  {example_assert}\n}});\n\n{function_source}\n\n// {name}.test.ts\n{imports}{header}"
        ),
        few_shot_stops: vec!["\n});".to_owned(), "\n}\n".to_owned()],
        chat_prefill: format!("```typescript\n{header}"),
        chat_stops: vec!["```".to_owned()],
    };
    let (found, tried, rejections) = sample_until(generator, &task, 240, budget, exec, cancel, |body, style| {
        let test_code = match style {
            PromptStyle::FewShot => format!("{header}{}\n}});\n", body.trim_end()),
            PromptStyle::ChatPrefilled => format!("{header}{}\n", body.trim_end()),
            PromptStyle::Chat => format!("{}\n", without_imports(body).trim()),
        };
        let change = ts_test_change(document, framework, import, &test_code);
        check_tests(document.lang, &change.old_text, &change.new_text(), &test_code, name, arity)?;
        check_expected_values(document.lang, function_source, &test_code, name)?;
        Ok(change)
    })
    .await?;
    Ok(sampled(title, found, tried, rejections))
}

/// The change that adds `test_code` to the sibling test file: appended (with the import when the file lacks it)
/// to the editor's buffer when the file is open there, else to the file on disk, else a new file with the
/// framework's imports.
pub(super) fn ts_test_change(
    document: &TaskDocument,
    framework: TsFramework,
    import: &str,
    test_code: &str,
) -> FileChange {
    let imports = ts_framework_imports(framework);
    let path = document.path.clone().unwrap_or_else(|| PathBuf::from("module.ts"));
    let test_path = ts_test_path(&path);
    // In the style of the file's own relative imports (`./m`, `./m.js`).
    let module = super::suggested::ts_specifier(&test_path, &path, &document.text);
    let existing = match document.open_file(&test_path) {
        Some(open) => Some(open.text.clone()),
        None => std::fs::read_to_string(&test_path).ok(),
    };
    match existing {
        Some(old_text) => {
            let end = old_text.len();
            let import = format!("import {import} from \"{module}\";\n");
            let needs_import = !old_text.contains(&import);
            FileChange {
                path: Some(test_path),
                create: false,
                replace: end..end,
                insert: format!("\n{}{test_code}", if needs_import { import } else { String::new() }),
                old_text,
            }
        }
        None => FileChange {
            path: Some(test_path),
            create: true,
            old_text: String::new(),
            replace: 0..0,
            insert: format!("{imports}import {import} from \"{module}\";\n\n{test_code}"),
        },
    }
}

/// The lines a new test file starts with for the framework.
fn ts_framework_imports(framework: TsFramework) -> &'static str {
    match framework {
        TsFramework::Vitest => "import { test, expect } from \"vitest\";\n",
        TsFramework::Jest => "",
        TsFramework::NodeTest => "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\n",
    }
}

/// A chat answer's test code without the import lines it may repeat (the test file has its own).
pub(super) fn without_imports(code: &str) -> String {
    code.lines().filter(|line| !line.trim_start().starts_with("import ")).collect::<Vec<_>>().join("\n")
}
