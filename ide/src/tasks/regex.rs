//! Regex generation from a comment that describes the pattern and gives examples; a candidate is kept only when it compiles and matches (and refuses) every example.

use super::*;
use crate::exec_check::Gate;
use crate::route::{Generator, PromptStyle, TaskPrompt};
use crate::verify::{check_regex, RegexFlavor, Rejection};
use spark_engine::EngineError;
use spark_grammars::{smallest_capture, syntax_errors, tree_sitter::Tree, Lang};
use std::ops::Range;
use tokio_util::sync::CancellationToken;

/// A pattern description and its examples, read from a comment such as
/// `// regex: ISO date, matches 2024-01-31, 1999-12-01, not 2024-1-31`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexSpec {
    pub description: String,
    pub positives: Vec<String>,
    pub negatives: Vec<String>,
}

pub fn parse_regex_spec(comment: &str) -> Option<RegexSpec> {
    let text: String = comment
        .lines()
        .map(|line| line.trim().trim_start_matches("///").trim_start_matches("//").trim_start_matches("/*"))
        .map(|line| line.trim_start_matches('*').trim_end_matches("*/").trim())
        .collect::<Vec<_>>()
        .join(" ");
    let lower = text.to_lowercase();
    let has_keyword = ["regex", "regexp", "pattern", "matches", "match "].iter().any(|word| lower.contains(word));
    if !has_keyword {
        return None;
    }
    let mut description = Vec::new();
    let mut positives = Vec::new();
    let mut negatives = Vec::new();
    #[derive(PartialEq)]
    enum Mode {
        Description,
        Positive,
        Negative,
    }
    let mut mode = Mode::Description;
    for segment in text.split([',', ';']) {
        let mut segment = segment.trim();
        let lower = segment.to_lowercase();
        for (keyword, next) in [
            ("doesn't match ", Mode::Negative),
            ("does not match ", Mode::Negative),
            ("but not ", Mode::Negative),
            ("not ", Mode::Negative),
            ("rejects ", Mode::Negative),
            ("matches ", Mode::Positive),
            ("match ", Mode::Positive),
            ("e.g. ", Mode::Positive),
            ("accepts ", Mode::Positive),
        ] {
            if lower.starts_with(keyword) {
                segment = segment[keyword.len()..].trim();
                mode = next;
                break;
            }
        }
        let segment = segment.trim_matches(|ch| ch == '`' || ch == '"' || ch == '\'');
        if segment.is_empty() {
            continue;
        }
        match mode {
            Mode::Description => description.push(segment.to_owned()),
            Mode::Positive => positives.push(segment.to_owned()),
            Mode::Negative => negatives.push(segment.to_owned()),
        }
    }
    let mut description = description.join(", ");
    for prefix in ["regex:", "regexp:", "pattern:", "regex", "pattern"] {
        if description.to_lowercase().starts_with(prefix) {
            description = description[prefix.len()..].trim().to_owned();
            break;
        }
    }
    Some(RegexSpec { description, positives, negatives })
}

/// The comment at `at`, its byte range and its spec.
pub fn regex_comment_at(document: &TaskDocument, at: usize) -> Option<(Range<usize>, RegexSpec)> {
    let root = document.tree.root_node();
    let queries = document.lang.queries();
    let comment = smallest_capture(&queries.comments, "comment", root, document.text.as_bytes(), at, at)
        .map(|node| node.byte_range())
        .or_else(|| {
            // The cursor may be at the end of the comment's line, just past the node.
            let line = line_span(&document.text, at, at);
            let text = &document.text[line.clone()];
            text.starts_with("//").then_some(line)
        })?;
    let spec = parse_regex_spec(&document.text[comment.clone()])?;
    Some((comment, spec))
}

pub(super) async fn regex(
    generator: &Generator<'_>,
    document: &TaskDocument,
    target: &TaskTarget,
    budget: TaskBudget,
    exec: &Gate<'_>,
    cancel: &CancellationToken,
) -> Result<TaskOutcome, EngineError> {
    let Some((comment, spec)) = regex_comment_at(document, target.range.start) else {
        return Ok(nothing("Spark: no pattern description under the cursor"));
    };
    let title = "Spark: generate regex".to_owned();
    let describe = |spec: &RegexSpec| {
        let mut line = spec.description.clone();
        if !spec.positives.is_empty() {
            line.push_str(&format!(", matches {}", spec.positives.join(", ")));
        }
        if !spec.negatives.is_empty() {
            line.push_str(&format!(", not {}", spec.negatives.join(", ")));
        }
        line
    };
    let flavor = match document.lang {
        Lang::Rust => RegexFlavor::Rust,
        Lang::TypeScript | Lang::Tsx => RegexFlavor::EcmaScript,
    };
    let dialect = match flavor {
        RegexFlavor::Rust => "Rust `regex` crate",
        RegexFlavor::EcmaScript => "JavaScript (ECMAScript)",
    };
    let quoted =
        |examples: &[String]| examples.iter().map(|example| format!("`{example}`")).collect::<Vec<_>>().join(", ");
    let mut instruction = format!(
        "Write a {dialect} regular expression, anchored with ^ and $ so it matches a whole string: {}.",
        spec.description
    );
    if !spec.positives.is_empty() {
        instruction.push_str(&format!("\nIt must match each of: {}.", quoted(&spec.positives)));
    }
    if !spec.negatives.is_empty() {
        instruction.push_str(&format!("\nIt must not match any of: {}.", quoted(&spec.negatives)));
    }
    instruction.push_str("\nCover the whole kind of string described, not only these examples.");
    let task = TaskPrompt {
        system: "You write regular expressions. Answer with the pattern only, on one line in a code block, nothing \
                 else."
            .to_owned(),
        instruction,
        few_shot: format!(
            "Regular expressions that match a whole string, one per description.\n\n\
             Description: a US zip code, matches 12345, 12345-6789, not 1234\nRegex: ^\\d{{5}}(-\\d{{4}})?$\n\n\
             Description: a hex color, matches #fff, #a1b2c3, not #ggg\nRegex: ^#([0-9a-fA-F]{{3}}|[0-9a-fA-F]{{6}})$\n\n\
             Description: a lowercase word, matches hello, not Hello\nRegex: ^[a-z]+$\n\n\
             Description: {}\nRegex: ^",
            describe(&spec)
        ),
        few_shot_stops: vec!["\n".to_owned()],
        chat_prefill: "```\n^".to_owned(),
        chat_stops: vec!["\n".to_owned(), "```".to_owned()],
    };
    let line_end = document.text[comment.end..].find('\n').map(|idx| comment.end + idx).unwrap_or(document.text.len());
    let line_start = document.text[..comment.start].rfind('\n').map(|idx| idx + 1).unwrap_or(0);
    let indent: String = document.text[line_start..].chars().take_while(|ch| *ch == ' ' || *ch == '\t').collect();
    let in_body = inside_function_body(document, comment.start);
    let (found, tried, rejections) = sample_until(generator, &task, 64, budget, exec, cancel, |generated, style| {
        let generated = generated.trim();
        let pattern = match style {
            // The prompt ends with `^`: the answer goes on after it.
            PromptStyle::FewShot | PromptStyle::ChatPrefilled => format!("^{generated}"),
            PromptStyle::Chat => {
                let line = generated.lines().next().unwrap_or("").trim().trim_matches('`');
                let line = line.strip_prefix('/').and_then(|line| line.strip_suffix('/')).unwrap_or(line);
                if line.starts_with('^') {
                    line.to_owned()
                } else {
                    format!("^{line}")
                }
            }
        };
        check_regex(flavor, &pattern, &spec.positives, &spec.negatives)?;
        let statement = regex_statement(document.lang, &pattern, in_body);
        let change = FileChange {
            path: None,
            create: false,
            old_text: document.text.clone(),
            replace: line_end..line_end,
            insert: format!("\n{indent}{statement}"),
        };
        let before = crate::parse::text(document.lang, &document.text).map(|tree| count_all(&tree)).unwrap_or(0);
        let after =
            crate::parse::text(document.lang, &change.new_text()).map(|tree| count_all(&tree)).unwrap_or(usize::MAX);
        if after > before {
            return Err(Rejection::SyntaxErrors { in_edit: after - before, total_before: before, total_after: after });
        }
        Ok(change)
    })
    .await?;
    Ok(sampled(&title, found, tried, rejections))
}

pub(super) fn count_all(tree: &Tree) -> usize {
    syntax_errors(tree.root_node(), 10_000).len()
}

pub(super) fn inside_function_body(document: &TaskDocument, at: usize) -> bool {
    let root = document.tree.root_node();
    let source = document.text.as_bytes();
    smallest_capture(&document.lang.queries().functions, "function", root, source, at, at).is_some()
}

/// The pattern in the language's own syntax, as a statement to insert.
pub fn regex_statement(lang: Lang, pattern: &str, in_function_body: bool) -> String {
    match lang {
        Lang::Rust => {
            let mut hashes = String::new();
            while pattern.contains(&format!("\"{hashes}")) {
                hashes.push('#');
            }
            let literal = format!("r{hashes}\"{pattern}\"{hashes}");
            if in_function_body {
                format!("let re = regex::Regex::new({literal}).unwrap();")
            } else {
                format!("const PATTERN: &str = {literal};")
            }
        }
        Lang::TypeScript | Lang::Tsx => format!("const re = /{}/;", escape_slashes(pattern)),
    }
}

/// Escapes `/` not already escaped, for a regex literal.
pub(super) fn escape_slashes(pattern: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for ch in pattern.chars() {
        if ch == '/' && !escaped {
            out.push('\\');
        }
        escaped = ch == '\\' && !escaped;
        out.push(ch);
    }
    out
}
