//! Cases drawn from the corpus with [`SEED`]: ghost-text spans to type, compiler-rejected mutations of real
//! functions to fix, functions (with mutants) to test, and the regex specs of `tests/eval/regex.toml`. Drawing
//! fix cases runs the compiler, so the set is cached in `target/eval/cases.json`, keyed by the corpus, the specs
//! and [`GENERATOR`].

use std::collections::HashMap;

use anyhow::{Context, Result};
use spark_grammars::tree_sitter::Node;

use super::check::{Diag, Scratch};
use super::corpus::{Lang, Package, Split};
use super::{eval_dir, fingerprint, Rng, SEED};
use crate::workspace_root;

/// Bump when the way cases are drawn changes (invalidates the cache).
pub const GENERATOR: &str = "cases-v6";

/// Mixed into [`SEED`] for the test split: its draws do not shift the dev split's (dev cases are drawn exactly as
/// before the split existed).
const TEST_SALT: u64 = 0x7e57_0000_0000_0001;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GhostCase {
    pub id: String,
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub package: String,
    pub file: String,
    /// Byte offset in the file where the span to type starts (after the line's indentation).
    pub start: usize,
    /// What is still to type: the rest of that line.
    pub span: String,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FixCase {
    pub id: String,
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub package: String,
    pub file: String,
    /// "syntactic" or "semantic".
    pub class: String,
    pub mutation: String,
    /// The whole mutated file.
    pub text: String,
    /// The compiler's first error in the file for this mutation.
    pub diag: Diag,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TestsCase {
    pub id: String,
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub package: String,
    pub file: String,
    pub function: String,
    /// The file as the user has it (Rust: without its own `#[cfg(test)]` modules, so only generated tests run).
    pub text: String,
    /// 0-based line and character of the function's name.
    pub line: u32,
    pub character: u32,
    /// Mutants of the function: (byte range in `text`, replacement), each one small change.
    pub mutants: Vec<(usize, usize, String)>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RegexCase {
    pub id: String,
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub description: String,
    pub shown: Vec<String>,
    pub shown_not: Vec<String>,
    pub held: Vec<String>,
    pub held_not: Vec<String>,
    pub reference: String,
}

impl RegexCase {
    /// The comment Spark is asked on: the description and the shown examples only.
    pub fn comment(&self) -> String {
        let mut comment = format!("// regex: {}", self.description);
        if !self.shown.is_empty() {
            comment.push_str(&format!(", matches {}", self.shown.join(", ")));
        }
        if !self.shown_not.is_empty() {
            comment.push_str(&format!(", not {}", self.shown_not.join(", ")));
        }
        comment
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Cases {
    pub key: String,
    pub ghost: Vec<GhostCase>,
    pub fix: Vec<FixCase>,
    pub tests: Vec<TestsCase>,
    pub regex: Vec<RegexCase>,
}

/// How many cases of each kind are drawn (the minimums of issue 11, with some room).
pub struct Sizes {
    /// Characters of spans to type per language (each typed character is one keystroke position, plus one
    /// before the first).
    pub ghost_chars: usize,
    pub fix_per_class_and_lang: usize,
    pub tests_per_lang: usize,
}

pub const FULL: Sizes = Sizes { ghost_chars: 480, fix_per_class_and_lang: 16, tests_per_lang: 21 };

/// The regex spec files: the dev split's (`regex.toml`, tuned on) and the held-out test split's
/// (`regex-test.toml`).
pub const REGEX_SPECS: [(&str, Split); 2] =
    [("tests/eval/regex.toml", Split::Dev), ("tests/eval/regex-test.toml", Split::Test)];

pub fn regex_specs_text() -> Result<String> {
    let mut text = String::new();
    for (relative, _) in REGEX_SPECS {
        text.push_str(
            &std::fs::read_to_string(workspace_root().join(relative)).with_context(|| format!("reading {relative}"))?,
        );
    }
    Ok(text)
}

/// The regex specs of both files (test ids start with `test-`).
pub fn regex_cases() -> Result<Vec<RegexCase>> {
    let mut cases = Vec::new();
    for (relative, split) in REGEX_SPECS {
        let text =
            std::fs::read_to_string(workspace_root().join(relative)).with_context(|| format!("reading {relative}"))?;
        let document: toml_edit::DocumentMut = text.parse().context(relative)?;
        let tables = document.get("spec").and_then(|item| item.as_array_of_tables()).context("[[spec]] tables")?;
        for (idx, table) in tables.iter().enumerate() {
            let text =
                |key: &str| table.get(key).and_then(|item| item.as_str()).map(str::to_owned).context(key.to_owned());
            let list = |key: &str| -> Vec<String> {
                table
                    .get(key)
                    .and_then(|item| item.as_array())
                    .map(|array| array.iter().filter_map(|value| value.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default()
            };
            let lang = if text("lang")? == "rust" { Lang::Rust } else { Lang::Ts };
            cases.push(RegexCase {
                id: with_split(split, format!("regex-{idx:02}")),
                lang,
                split,
                description: text("description")?,
                shown: list("shown"),
                shown_not: list("shown_not"),
                held: list("held"),
                held_not: list("held_not"),
                reference: text("reference")?,
            });
        }
    }
    Ok(cases)
}

/// A case id on its split: dev ids are as they always were, test ids start with `test-`.
pub fn with_split(split: Split, id: String) -> String {
    match split {
        Split::Dev => id,
        Split::Test => format!("test-{id}"),
    }
}

/// The cases: from the cache when corpus, specs and generator are unchanged, else drawn again (minutes: every
/// candidate fix mutation goes through the compiler).
pub fn load_or_generate(packages: &[Package], log: &mut dyn FnMut(&str)) -> Result<Cases> {
    let key = fingerprint(&[GENERATOR, &super::corpus::manifest_text()?, &regex_specs_text()?]);
    let path = eval_dir().join("cases.json");
    if let Ok(text) = std::fs::read_to_string(&path) {
        if let Ok(cases) = serde_json::from_str::<Cases>(&text) {
            if cases.key == key {
                return Ok(cases);
            }
        }
    }
    log("drawing the cases from the corpus (compiler runs; cached in target/eval/cases.json)");
    let mut cases = Cases { key, regex: regex_cases()?, ..Default::default() };
    for split in Split::BOTH {
        // Each split draws from its own packages with its own generator, so the dev cases are the ones drawn
        // before the test split existed.
        let mut rng = Rng::new(match split {
            Split::Dev => SEED,
            Split::Test => SEED ^ TEST_SALT,
        });
        for lang in [Lang::Rust, Lang::Ts] {
            let in_lang: Vec<&Package> =
                packages.iter().filter(|package| package.lang == lang && package.split == split).collect();
            if in_lang.is_empty() {
                continue;
            }
            let files = functions_by_file(&in_lang)?;
            let mut ghost = ghost_cases(lang, &files, FULL.ghost_chars, &mut rng);
            let mut tests = tests_cases(lang, &files, FULL.tests_per_lang, &mut rng);
            let mut fix = fix_cases(lang, &in_lang, &files, FULL.fix_per_class_and_lang, &mut rng, log)?;
            macro_rules! on_split {
                ($($list:ident),*) => {$(for case in $list.iter_mut() {
                    case.split = split;
                    case.id = with_split(split, std::mem::take(&mut case.id));
                })*};
            }
            on_split!(ghost, tests, fix);
            cases.ghost.extend(ghost);
            cases.tests.extend(tests);
            cases.fix.extend(fix);
        }
    }
    std::fs::create_dir_all(eval_dir())?;
    std::fs::write(&path, serde_json::to_string_pretty(&cases)?)?;
    Ok(cases)
}

/// One source file of the corpus and its functions.
pub struct SourceFile {
    pub package: String,
    pub file: String,
    pub text: String,
    /// Byte ranges of function items (Rust `fn`, TypeScript functions and methods), outside test modules.
    pub functions: Vec<std::ops::Range<usize>>,
}

fn functions_by_file(packages: &[&Package]) -> Result<Vec<SourceFile>> {
    let mut files = Vec::new();
    for package in packages {
        for file in package.sources() {
            let text = package.read(&file)?;
            if text.len() > 60_000 {
                continue;
            }
            let functions = function_ranges(package.lang, &text);
            files.push(SourceFile { package: package.name.clone(), file, text, functions });
        }
    }
    Ok(files)
}

fn parse(lang: Lang, text: &str) -> spark_grammars::tree_sitter::Tree {
    lang.grammar().parser().parse(text, None).expect("tree-sitter parses any text")
}

fn error_count(lang: Lang, text: &str) -> usize {
    spark_grammars::syntax_errors(parse(lang, text).root_node(), 1000).len()
}

fn visit<'t>(node: Node<'t>, f: &mut dyn FnMut(Node<'t>)) {
    f(node);
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        visit(child, f);
    }
}

fn test_module_start(text: &str) -> usize {
    text.find("#[cfg(test)]").unwrap_or(text.len())
}

pub fn function_ranges(lang: Lang, text: &str) -> Vec<std::ops::Range<usize>> {
    let tree = parse(lang, text);
    let tests_at = test_module_start(text);
    let mut ranges = Vec::new();
    visit(tree.root_node(), &mut |node| {
        let kinds: &[&str] = match lang {
            Lang::Rust => &["function_item"],
            Lang::Ts => &["function_declaration", "method_definition"],
        };
        if kinds.contains(&node.kind()) && node.child_by_field_name("body").is_some() && node.start_byte() < tests_at {
            ranges.push(node.byte_range());
        }
    });
    ranges
}

fn ghost_cases(lang: Lang, files: &[SourceFile], chars: usize, rng: &mut Rng) -> Vec<GhostCase> {
    let mut candidates = Vec::new();
    for (file_idx, file) in files.iter().enumerate() {
        for function in &file.functions {
            let body = &file.text[function.clone()];
            let mut lines = body.split_inclusive('\n');
            // The function's own first line (its signature) is not a place to type; the offset still counts it
            // (left out, every span started one signature's length too early: the replay typed in the wrong line).
            let mut offset = function.start + lines.next().map_or(0, str::len);
            for line in lines {
                let content = line.trim_end_matches('\n');
                let trimmed = content.trim_start();
                let start = offset + (content.len() - trimmed.len());
                offset += line.len();
                let trimmed = trimmed.trim_end();
                let comment = ["//", "/*", "*", "#["].iter().any(|prefix| trimmed.starts_with(prefix));
                if (6..=36).contains(&trimmed.len()) && !comment && trimmed.is_ascii() {
                    candidates.push((file_idx, start, trimmed.to_owned()));
                }
            }
        }
    }
    rng.shuffle(&mut candidates);
    let mut seen_files: HashMap<usize, usize> = HashMap::new();
    let mut cases = Vec::new();
    let mut total = 0;
    for (file_idx, start, span) in candidates {
        if total >= chars {
            break;
        }
        // Spread over files: at most two spans per file.
        let count = seen_files.entry(file_idx).or_default();
        if *count >= 2 {
            continue;
        }
        *count += 1;
        total += span.len();
        let file = &files[file_idx];
        cases.push(GhostCase {
            id: format!("ghost-{}-{:02}", lang.name(), cases.len()),
            lang,
            split: Split::Dev,
            package: file.package.clone(),
            file: file.file.clone(),
            start,
            span,
        });
    }
    cases
}

/// Small behaviour changes inside `range`: an operator swapped, a number off by one, a boolean flipped.
pub fn mutation_sites(lang: Lang, text: &str, range: std::ops::Range<usize>) -> Vec<(usize, usize, String)> {
    let tree = parse(lang, text);
    let mut sites = Vec::new();
    visit(tree.root_node(), &mut |node| {
        if node.start_byte() < range.start || node.end_byte() > range.end {
            return;
        }
        let token = &text[node.byte_range()];
        let replacement = match node.kind() {
            "binary_expression" => {
                let Some(operator) = node.child_by_field_name("operator") else { return };
                let swapped = match &text[operator.byte_range()] {
                    "+" => "-",
                    "-" => "+",
                    "*" => "+",
                    "<" => "<=",
                    "<=" => "<",
                    ">" => ">=",
                    ">=" => ">",
                    "==" => "!=",
                    "!=" => "==",
                    "===" => "!==",
                    "!==" => "===",
                    "&&" => "||",
                    "||" => "&&",
                    _ => return,
                };
                sites.push((operator.start_byte(), operator.end_byte(), swapped.to_owned()));
                return;
            }
            "integer_literal" | "number" => match token.parse::<u64>() {
                Ok(value) => (value + 1).to_string(),
                Err(_) => return,
            },
            "true" => "false".to_owned(),
            "false" => "true".to_owned(),
            _ => return,
        };
        sites.push((node.start_byte(), node.end_byte(), replacement));
    });
    sites
}

/// `text` without its tests: each `#[cfg(test)]` module loses its test functions (`#[test]`, `#[bench]`,
/// `#[quickcheck]`, `#[tokio::test]`, …) and the macros that declare tests (`quickcheck! { … }`,
/// `proptest! { … }`); a module left with nothing but `use` items goes entirely. Helpers stay: other modules'
/// tests may use them (bytesize's `impl Arbitrary`), and without them the crate's tests would not build.
pub fn without_test_modules(lang: Lang, text: &str) -> String {
    if lang != Lang::Rust {
        return text.to_owned();
    }
    let tree = parse(lang, text);
    let root = tree.root_node();
    let mut cut = Vec::new();
    let mut cursor = root.walk();
    let children: Vec<Node> = root.children(&mut cursor).collect();
    for pair in children.windows(2) {
        if pair[0].kind() == "attribute_item"
            && text[pair[0].byte_range()].contains("cfg(test)")
            && pair[1].kind() == "mod_item"
        {
            let whole = pair[0].start_byte()..pair[1].end_byte();
            match pair[1].child_by_field_name("body").map(|body| test_items(body, text)) {
                Some((tests, true)) => cut.extend(tests),
                _ => cut.push(whole),
            }
        }
    }
    let mut out = text.to_owned();
    for range in cut.into_iter().rev() {
        out.replace_range(range, "");
    }
    out
}

/// The byte ranges of a test module's tests (each with the attributes before it), and whether anything but
/// `use` items, attributes and comments is left besides them.
fn test_items(body: Node, text: &str) -> (Vec<std::ops::Range<usize>>, bool) {
    const TEST_ATTRIBUTES: [&str; 4] = ["test", "bench", "quickcheck", "rstest"];
    let mut tests = Vec::new();
    let mut helpers = false;
    let mut attributes: Vec<Node> = Vec::new();
    let mut cursor = body.walk();
    for item in body.named_children(&mut cursor) {
        match item.kind() {
            "attribute_item" => {
                attributes.push(item);
                continue;
            }
            "line_comment" | "block_comment" => continue,
            "use_declaration" => {}
            "macro_invocation" => {
                let name = item.child_by_field_name("macro").map_or("", |name| &text[name.byte_range()]);
                if name.ends_with("quickcheck") || name.ends_with("proptest") {
                    tests.push(attributes.first().unwrap_or(&item).start_byte()..item.end_byte());
                } else {
                    helpers = true;
                }
            }
            _ => {
                let is_test = attributes.iter().any(|attribute| {
                    let inner = text[attribute.byte_range()].trim_start_matches("#[").trim_end_matches(']');
                    let path = inner.split(['(', ' ']).next().unwrap_or("");
                    TEST_ATTRIBUTES.contains(&path.rsplit("::").next().unwrap_or(path))
                });
                if is_test {
                    tests.push(attributes.first().unwrap_or(&item).start_byte()..item.end_byte());
                } else {
                    helpers = true;
                }
            }
        }
        attributes.clear();
    }
    (tests, helpers)
}

fn tests_cases(lang: Lang, files: &[SourceFile], count: usize, rng: &mut Rng) -> Vec<TestsCase> {
    let mut candidates = Vec::new();
    for file in files {
        let text = without_test_modules(lang, &file.text);
        let tree = parse(lang, &text);
        visit(tree.root_node(), &mut |node| {
            let eligible = match lang {
                Lang::Rust => {
                    node.kind() == "function_item"
                        && node.parent().is_some_and(|parent| parent.kind() == "source_file")
                        && node.child_by_field_name("return_type").is_some()
                }
                Lang::Ts => {
                    node.kind() == "function_declaration"
                        && node.parent().is_some_and(|parent| parent.kind() == "export_statement")
                }
            };
            let Some(parameters) = node.child_by_field_name("parameters") else { return };
            let Some(name) = node.child_by_field_name("name") else { return };
            let lines = text[node.byte_range()].lines().count();
            if !eligible || parameters.named_child_count() == 0 || lines > 40 {
                return;
            }
            let mut mutants = mutation_sites(lang, &text, node.byte_range());
            if mutants.is_empty() {
                return;
            }
            rng.shuffle(&mut mutants);
            mutants.truncate(3);
            let position = name.start_position();
            candidates.push(TestsCase {
                id: String::new(),
                lang,
                split: Split::Dev,
                package: file.package.clone(),
                file: file.file.clone(),
                function: text[name.byte_range()].to_owned(),
                text: text.clone(),
                line: position.row as u32,
                character: position.column as u32,
                mutants,
            });
        });
    }
    rng.shuffle(&mut candidates);
    candidates.truncate(count);
    for (idx, case) in candidates.iter_mut().enumerate() {
        case.id = format!("tests-{}-{idx:02}-{}", lang.name(), case.function);
    }
    candidates
}

const SYNTACTIC: [&str; 4] = ["deleted `;`", "deleted `)`", "deleted `}`", "stray token"];
const SEMANTIC: [&str; 5] =
    ["misspelled name", "wrong argument count", "wrong type", "missing use/import", "wrong method name"];

fn fix_cases(
    lang: Lang,
    packages: &[&Package],
    files: &[SourceFile],
    per_class: usize,
    rng: &mut Rng,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<FixCase>> {
    // Only files that compile cleanly as they are: the diagnostic then belongs to the mutation.
    let mut scratches = HashMap::new();
    let mut clean: Vec<usize> = Vec::new();
    for package in packages {
        let scratch = Scratch::new(package)?;
        let errors = scratch.baseline()?;
        log(&format!("baseline {}: {} compiler errors", package.name, errors.len()));
        for (idx, file) in files.iter().enumerate() {
            if file.package == package.name && !file.functions.is_empty() && !errors.iter().any(|e| e.file == file.file)
            {
                if lang == Lang::Rust && !errors.is_empty() {
                    continue;
                }
                clean.push(idx);
            }
        }
        scratches.insert(package.name.clone(), scratch);
    }
    let mut functions: Vec<(usize, std::ops::Range<usize>)> =
        clean.iter().flat_map(|&idx| files[idx].functions.iter().map(move |range| (idx, range.clone()))).collect();
    rng.shuffle(&mut functions);
    let mut cases = Vec::new();
    for (class, kinds) in [("syntactic", &SYNTACTIC[..]), ("semantic", &SEMANTIC[..])] {
        let mut made = 0;
        let mut attempts = 0;
        let mut kind_idx = 0;
        let mut next_function = 0;
        while made < per_class && attempts < per_class * 4 && next_function < functions.len() * 2 {
            let kind = kinds[kind_idx % kinds.len()];
            let (file_idx, range) = functions[next_function % functions.len()].clone();
            next_function += 1;
            let file = &files[file_idx];
            let Some((mutated, description)) = mutate(lang, &file.text, range, kind, rng) else { continue };
            attempts += 1;
            let errors_before = error_count(lang, &file.text);
            let errors_after = error_count(lang, &mutated);
            let parse_ok =
                if class == "syntactic" { errors_after > errors_before } else { errors_after == errors_before };
            if !parse_ok {
                continue;
            }
            let scratch = &scratches[&file.package];
            let errors = scratch.check(&[(&file.file, &mutated)])?;
            let Some(diag) = errors.into_iter().find(|error| error.file == file.file) else { continue };
            kind_idx += 1;
            made += 1;
            log(&format!("fix {} {class}: {description} in {} → {}", lang.name(), file.file, diag.message));
            cases.push(FixCase {
                id: format!("fix-{}-{class}-{made:02}", lang.name()),
                lang,
                split: Split::Dev,
                package: file.package.clone(),
                file: file.file.clone(),
                class: class.to_owned(),
                mutation: description,
                text: mutated,
                diag,
            });
        }
    }
    Ok(cases)
}

/// One mutation of `kind` inside the function at `range` (or, for a missing import, of the file's imports).
fn mutate(
    lang: Lang,
    text: &str,
    range: std::ops::Range<usize>,
    kind: &str,
    rng: &mut Rng,
) -> Option<(String, String)> {
    let tree = parse(lang, text);
    let mut nodes: Vec<Node> = Vec::new();
    let body = range.clone();
    visit(tree.root_node(), &mut |node| nodes.push(node));
    let inside = |node: &Node| node.start_byte() >= body.start && node.end_byte() <= body.end;
    let pick = |candidates: Vec<Node<'_>>, rng: &mut Rng| -> Option<(usize, usize, String)> {
        if candidates.is_empty() {
            return None;
        }
        let node = candidates[rng.below(candidates.len())];
        Some((node.start_byte(), node.end_byte(), text[node.byte_range()].to_owned()))
    };
    let leaves = |kind: &str| -> Vec<Node> {
        nodes.iter().copied().filter(|node| inside(node) && node.kind() == kind && node.child_count() == 0).collect()
    };
    let (start, end, replacement, description) = match kind {
        "deleted `;`" | "deleted `)`" => {
            let token = if kind.contains(';') { ";" } else { ")" };
            let (start, end, _) = pick(leaves(token), rng)?;
            (start, end, String::new(), kind.to_owned())
        }
        "deleted `}`" => {
            let candidates: Vec<Node> = leaves("}").into_iter().filter(|node| node.end_byte() != body.end).collect();
            let (start, end, _) = pick(candidates, rng)?;
            (start, end, String::new(), kind.to_owned())
        }
        "stray token" => {
            let (_, end, _) = pick(leaves(";"), rng)?;
            let token = [" let", " )", " ,", " =", " ]"][rng.below(5)];
            (end, end, token.to_owned(), format!("stray `{}`", token.trim()))
        }
        "misspelled name" => {
            let name = text.get(range.clone()).unwrap_or("");
            let candidates: Vec<Node> = leaves("identifier")
                .into_iter()
                .filter(|node| node.end_byte() - node.start_byte() >= 4)
                .filter(|node| {
                    node.parent().is_some_and(|parent| {
                        parent.kind() != "parameter"
                            && !parent.kind().contains("declarator")
                            && parent.kind() != "let_declaration"
                            && parent.kind() != "required_parameter"
                    })
                })
                .filter(|node| name.matches(&text[node.byte_range()]).count() >= 1)
                .collect();
            let (start, end, old) = pick(candidates, rng)?;
            let mut chars: Vec<char> = old.chars().collect();
            let at = 1 + rng.below(chars.len() - 2);
            chars.swap(at, at + 1);
            let new: String = chars.into_iter().collect();
            if new == old {
                return None;
            }
            (start, end, new.clone(), format!("misspelled `{old}` as `{new}`"))
        }
        "wrong argument count" => {
            let calls: Vec<Node> = nodes
                .iter()
                .copied()
                .filter(|node| inside(node) && node.kind() == "call_expression")
                .filter(|node| {
                    node.child_by_field_name("arguments").is_some_and(|arguments| arguments.named_child_count() > 0)
                })
                .collect();
            let call = *calls.get(rng.below(calls.len().max(1)))?;
            let arguments = call.child_by_field_name("arguments")?;
            let count = arguments.named_child_count();
            let last = arguments.named_child(count - 1)?;
            let start = if count > 1 { arguments.named_child(count - 2)?.end_byte() } else { last.start_byte() };
            (
                start,
                last.end_byte(),
                String::new(),
                format!("dropped the last argument of `{}`", first_line(&text[call.byte_range()])),
            )
        }
        "wrong type" => {
            let types: Vec<Node> = nodes
                .iter()
                .copied()
                .filter(|node| inside(node))
                .filter(|node| match lang {
                    Lang::Rust => node.kind() == "let_declaration",
                    Lang::Ts => node.kind() == "variable_declarator" || node.kind() == "required_parameter",
                })
                .filter_map(|node| node.child_by_field_name("type"))
                .collect();
            if let Some((start, end, old)) = pick(types, rng) {
                let (old_inner, prefix) = match lang {
                    Lang::Rust => (old.as_str(), ""),
                    Lang::Ts => (old.trim_start_matches(':').trim(), ": "),
                };
                let new = match (lang, old_inner) {
                    (Lang::Rust, "String") => "u64",
                    (Lang::Rust, _) => "String",
                    (Lang::Ts, "string") => "number",
                    (Lang::Ts, _) => "string",
                };
                (start, end, format!("{prefix}{new}"), format!("type `{old_inner}` changed to `{new}`"))
            } else {
                let literal_kind = if lang == Lang::Rust { "integer_literal" } else { "number" };
                let (start, end, old) = pick(leaves(literal_kind), rng)?;
                (start, end, format!("\"{old}\""), format!("number {old} made the string \"{old}\""))
            }
        }
        "missing use/import" => {
            let kind = if lang == Lang::Rust { "use_declaration" } else { "import_statement" };
            let imports: Vec<Node> =
                tree.root_node().children(&mut tree.root_node().walk()).filter(|node| node.kind() == kind).collect();
            let (start, end, old) = pick(imports, rng)?;
            let end = if text[end..].starts_with('\n') { end + 1 } else { end };
            (start, end, String::new(), format!("removed `{}`", first_line(&old)))
        }
        "wrong method name" => {
            let property = if lang == Lang::Rust { "field_identifier" } else { "property_identifier" };
            let candidates: Vec<Node> = leaves(property)
                .into_iter()
                .filter(|node| {
                    node.parent().is_some_and(|parent| {
                        parent.parent().is_some_and(|call| {
                            call.kind() == "call_expression" && call.child_by_field_name("function") == Some(parent)
                        })
                    })
                })
                .collect();
            let (start, end, old) = pick(candidates, rng)?;
            let new = match old.as_str() {
                "len" => "length".to_owned(),
                "push" => "push_back".to_owned(),
                "iter" => "iterate".to_owned(),
                "to_string" => "to_str".to_owned(),
                "is_empty" => "empty".to_owned(),
                "unwrap" => "unwrap_value".to_owned(),
                "chars" => "characters".to_owned(),
                "forEach" => "foreach".to_owned(),
                "indexOf" => "indexof".to_owned(),
                "includes" => "contains".to_owned(),
                "toLowerCase" => "toLowercase".to_owned(),
                other if other.ends_with('s') => other[..other.len() - 1].to_owned(),
                other => format!("{other}s"),
            };
            (start, end, new.clone(), format!("method `{old}` renamed `{new}`"))
        }
        _ => return None,
    };
    let mut mutated = text.to_owned();
    mutated.replace_range(start..end, &replacement);
    (mutated != text).then_some((mutated, description))
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").chars().take(50).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_module_keeps_its_helpers_and_loses_its_tests() {
        let text = "pub fn f() -> u8 { 1 }\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    \
                    impl Helper for u8 {}\n\n    #[test]\n    #[should_panic]\n    fn f_is_one() {\n        \
                    assert_eq!(f(), 1);\n    }\n\n    quickcheck! {\n        fn prop(x: u8) -> bool { true }\n    \
                    }\n}\n";
        let out = without_test_modules(Lang::Rust, text);
        assert!(out.contains("impl Helper for u8 {}") && out.contains("mod tests"), "{out}");
        assert!(!out.contains("f_is_one") && !out.contains("should_panic") && !out.contains("prop("), "{out}");
        let only_tests = "pub fn f() -> u8 { 1 }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    \
                          fn t() { assert_eq!(f(), 1); }\n}\n";
        assert_eq!(without_test_modules(Lang::Rust, only_tests), "pub fn f() -> u8 { 1 }\n\n");
    }

    #[test]
    fn each_ghost_span_is_the_text_at_its_offset() {
        let text = "// head\nfn first(a: u32) -> u32 {\n    let doubled = a * 2;\n    doubled + 1\n}\n\n\
                    fn second() {\n    println!(\"second one\");\n}\n";
        let function = |start: &str, end: &str| {
            let from = text.find(start).unwrap();
            from..text[from..].find(end).unwrap() + from + end.len()
        };
        let file = SourceFile {
            package: "p".into(),
            file: "src/lib.rs".into(),
            text: text.into(),
            functions: vec![function("fn first", "}\n"), function("fn second", "}\n")],
        };
        let cases = ghost_cases(Lang::Rust, &[file], 1000, &mut crate::eval::Rng::new(1));
        assert!(!cases.is_empty());
        for case in &cases {
            assert_eq!(&text[case.start..case.start + case.span.len()], case.span, "{case:?}");
        }
    }
}
