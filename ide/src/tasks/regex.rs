//! Regex generation from a comment that describes the pattern and gives examples. Candidates come from the
//! examples themselves (`regex_synth`) and from a few short model samples; each must compile in the user's
//! dialect, match (and refuse) every example, and generalise (`verify::regex`: not its examples spelled out,
//! no certain near miss matched). One is offered only when the examples decide it alone or two candidates
//! written independently agree on every probe Spark wrote.

use super::regex_describe::from_description;
use super::regex_synth::synthesise;
use super::*;
use crate::route::{PromptStyle, TaskPrompt};
use crate::verify::{check_generalises, check_regex, probes, Generalisation, RegexFlavor, Rejection};
use spark_engine::EngineError;
use spark_grammars::{smallest_capture, syntax_errors, tree_sitter::Tree, Lang};
use std::ops::Range;

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
    for segment in split_segments(&text) {
        let mut rest = segment.as_str().trim_start();
        let lower = rest.to_lowercase();
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
                rest = rest[keyword.len()..].trim_start();
                mode = next;
                break;
            }
        }
        // A quoted example is taken exactly as quoted: `"a, b"` or `` `a; b` `` (JSON escapes in double quotes).
        let example = match quoted(rest) {
            Some(example) => example,
            None => {
                let trimmed = rest.trim().trim_matches(|ch| ch == '`' || ch == '"' || ch == '\'');
                if trimmed.is_empty() {
                    continue;
                }
                trimmed.to_owned()
            }
        };
        match mode {
            Mode::Description => description.push(example),
            Mode::Positive => positives.push(example),
            Mode::Negative => negatives.push(example),
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

/// The comment's text cut at `,` and `;` outside quotes (a `"…"` with JSON escapes, or a `` `…` ``).
fn split_segments(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            ',' | ';' => segments.push(std::mem::take(&mut current)),
            '"' | '`' => {
                // Up to the closing quote (a `\` escapes the next character in double quotes); a quote that
                // never closes is a plain character.
                let mut span = String::from(ch);
                let mut closed = false;
                let mut lookahead = chars.clone();
                while let Some(next) = lookahead.next() {
                    span.push(next);
                    if ch == '"' && next == '\\' {
                        if let Some(escaped) = lookahead.next() {
                            span.push(escaped);
                        }
                    } else if next == ch {
                        closed = true;
                        break;
                    }
                }
                if closed {
                    chars = lookahead;
                    current.push_str(&span);
                } else {
                    current.push(ch);
                }
            }
            _ => current.push(ch),
        }
    }
    segments.push(current);
    segments
}

/// The example of a segment that is one quoted string and nothing else.
fn quoted(segment: &str) -> Option<String> {
    let segment = segment.trim_end();
    if segment.len() >= 2 && segment.starts_with('`') && segment.ends_with('`') {
        let inner = &segment[1..segment.len() - 1];
        return (!inner.contains('`')).then(|| inner.to_owned());
    }
    if segment.starts_with('"') && segment.ends_with('"') && segment.len() >= 2 {
        return serde_json::from_str::<String>(segment).ok();
    }
    None
}

/// An example as a comment carries it: bare when that reads back unchanged, else quoted as a JSON string.
pub fn quote_example(example: &str) -> String {
    let bare = !example.is_empty()
        && example.trim() == example
        && !example.contains([',', ';', '"', '`', '\'', '\n', '\r', '\\'])
        && ![
            "not ",
            "matches ",
            "match ",
            "but not ",
            "rejects ",
            "accepts ",
            "e.g. ",
            "doesn't match ",
            "does not match ",
        ]
        .iter()
        .any(|keyword| example.to_lowercase().starts_with(keyword));
    if bare {
        example.to_owned()
    } else {
        serde_json::Value::from(example).to_string()
    }
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

/// The model's share of a regex task: a pattern is a short answer, and the examples' own synthesis answers
/// most cases in milliseconds, so the model gets a few seconds, not the task's whole budget.
const MODEL_TIME: Duration = Duration::from_millis(2500);
/// The most model samples a regex task draws.
const MODEL_SAMPLES: usize = 8;
/// A pattern is one short line.
const MODEL_MAX_TOKENS: usize = 40;

/// The syntax every model sample keeps to (GBNF, llama.cpp's grammar format): the subset of regular expressions
/// the `regex` crate and ECMAScript read alike, after the prompt's `^` and up to the closing `$`.
pub const REGEX_GRAMMAR: &str = include_str!("regex.gbnf");

/// A candidate that passed every check, with how it treats the probes.
struct Passed {
    pattern: String,
    origin: Origin,
    generalisation: Generalisation,
}

/// The pattern to offer among those that passed every check, or `None`: a pattern is offered when the examples
/// decide it alone (a synthesised pattern with nothing ambiguous), or when two candidates written
/// independently (a synthesised one and a model's, or two different model samples) agree on every probe; the
/// simplest (shortest) of the agreeing ones is offered. One unconfirmed candidate is not enough: a wrong regex
/// that looks verified is worse than none.
fn choose(passed: &[Passed], decided: Option<(&str, Origin)>) -> Option<(String, Origin)> {
    if let Some((pattern, origin)) = decided {
        return Some((pattern.to_owned(), origin));
    }
    let mut best: Option<&Passed> = None;
    for (idx, one) in passed.iter().enumerate() {
        let agrees = passed.iter().enumerate().any(|(other_idx, other)| {
            other_idx != idx
                && other.pattern != one.pattern
                && !(other.origin == Origin::Examples && one.origin == Origin::Examples)
                && other.generalisation.signature == one.generalisation.signature
        });
        if agrees && best.is_none_or(|best| one.pattern.len() < best.pattern.len()) {
            best = Some(one);
        }
    }
    best.map(|one| (one.pattern.clone(), one.origin))
}

pub(super) async fn regex(task: &Task<'_>) -> Result<TaskOutcome, EngineError> {
    let Task { generator, document, target, budget, exec, cancel } = *task;
    let started = Instant::now();
    let Some((comment, spec)) = regex_comment_at(document, target.range.start) else {
        return Ok(nothing("Spark: no pattern description under the cursor"));
    };
    let title = "Spark: generate regex".to_owned();
    let flavor = match document.lang {
        Lang::Rust => RegexFlavor::Rust,
        Lang::TypeScript | Lang::Tsx => RegexFlavor::EcmaScript,
    };
    let line_end = document.text[comment.end..].find('\n').map(|idx| comment.end + idx).unwrap_or(document.text.len());
    let line_start = document.text[..comment.start].rfind('\n').map(|idx| idx + 1).unwrap_or(0);
    let indent: String = document.text[line_start..].chars().take_while(|ch| *ch == ' ' || *ch == '\t').collect();
    let in_body = inside_function_body(document, comment.start);
    let change_for = |pattern: &str| -> Result<FileChange, Rejection> {
        let statement = regex_statement(document.lang, pattern, in_body);
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
    };
    let probes = probes(&spec.description, &spec.positives, &spec.negatives);
    let judge = |pattern: &str| -> Result<Generalisation, Rejection> {
        if !pattern.starts_with('^') || !pattern.ends_with('$') || pattern.ends_with("\\$") {
            return Err(Rejection::RegexUnanchored);
        }
        check_regex(flavor, pattern, &spec.positives, &spec.negatives)?;
        let generalisation = check_generalises(flavor, pattern, &spec.description, &spec.positives, &probes)?;
        change_for(pattern)?;
        Ok(generalisation)
    };
    let mut rejections: Vec<String> = Vec::new();
    let mut passed: Vec<Passed> = Vec::new();
    let mut decided: Option<(String, Origin)> = None;
    // What needs no model first: the examples' own shape (the strong tier skips it: the fast one tried it).
    match synthesise(&spec.description, &spec.positives) {
        Ok(candidates) => {
            let mut survivors = Vec::new();
            for candidate in candidates {
                match judge(&candidate.pattern) {
                    Ok(generalisation) => {
                        survivors.push(candidate.clone());
                        passed.push(Passed { pattern: candidate.pattern, origin: Origin::Examples, generalisation });
                    }
                    Err(rejection) => {
                        rejections.push(format!("from the examples, /{}/ {rejection}", candidate.pattern))
                    }
                }
            }
            // Decided: nothing ambiguous in the shape, or the user's examples and the certain probes refused
            // every reading of it but one.
            if let [only] = survivors.as_slice() {
                if !budget.model_only && !only.guesses_kinds {
                    decided = Some((only.pattern.clone(), Origin::Examples));
                }
            }
        }
        Err(why) => rejections.push(format!("no pattern from the examples: {why}")),
    }
    // The description read word by word: a second source, independent of the examples, which then confirm it.
    if decided.is_none() {
        match from_description(&spec.description) {
            Err(why) => rejections.push(format!("no pattern from the description: {why}")),
            Ok(pattern) => match judge(&pattern) {
                Ok(generalisation) => {
                    if !budget.model_only {
                        decided = Some((pattern.clone(), Origin::Description));
                    }
                    passed.push(Passed { pattern, origin: Origin::Description, generalisation });
                }
                Err(rejection) => rejections.push(format!("from the description, /{pattern}/ {rejection}")),
            },
        }
    }
    let mut tried = 0;
    // The model's sample is offered only with a second, independent candidate that agrees with it: a reading
    // of the examples that survived the checks, or (on the strong tier, with its own budget) another sample.
    // With neither, the fast model's few seconds would be spent on a candidate that cannot be offered: the
    // default model writes about one short answer in `MODEL_TIME` on two cores.
    let model_can_confirm = !passed.is_empty() || budget.model_only;
    if decided.is_none() && model_can_confirm {
        let task = regex_prompt(document.lang, flavor, &spec);
        let time = budget.time.min(MODEL_TIME);
        let mut seen: Vec<String> = Vec::new();
        for sample_idx in 0..MODEL_SAMPLES {
            let left = time.saturating_sub(started.elapsed());
            if left.is_zero() || cancel.is_cancelled() || choose(&passed, None).is_some() {
                break;
            }
            let sampling = if sample_idx == 0 {
                Sampling::default()
            } else {
                Sampling { temperature: 0.5 + 0.1 * sample_idx as f32, seed: 17 + sample_idx as u32 }
            };
            let mut request = task_request(MODEL_MAX_TOKENS, Instant::now() + left, cancel, sampling);
            // Every answer the local model writes is then a pattern's rest after the prompt's `^`, closed by `$`
            // (remote endpoints ignore it; their answers are checked the same way).
            request.grammar = Some(REGEX_GRAMMAR.into());
            let generated = generator.generate_task(&task, request).await?;
            tried += 1;
            if generated.completion.stop == StopReason::Deadline {
                rejections.push(format!(
                    "cut by the time budget after {} generated tokens",
                    generated.completion.stats.n_generated
                ));
                break;
            }
            let text = match generated.style {
                PromptStyle::FewShot => generated.completion.text.clone(),
                PromptStyle::ChatPrefilled => strip_code_fences(&generated.completion.text),
                PromptStyle::Chat => first_code_block(&generated.completion.text),
            };
            let pattern = pattern_of_answer(&text, generated.style);
            if seen.contains(&pattern) {
                continue;
            }
            seen.push(pattern.clone());
            match judge(&pattern) {
                Ok(generalisation) => passed.push(Passed { pattern, origin: Origin::Model, generalisation }),
                Err(rejection) => {
                    tracing::debug!(sample = sample_idx, %rejection, "regex candidate refused");
                    rejections.push(format!("/{pattern}/ {rejection}"));
                }
            }
        }
    }
    let Some((pattern, origin)) =
        choose(&passed, decided.as_ref().map(|(pattern, origin)| (pattern.as_str(), *origin)))
    else {
        // First: the last rejection stays the last candidate's own (what a client shows as the reason).
        if !passed.is_empty() {
            rejections.insert(
                0,
                format!(
                    "{} candidate(s) passed every check but no two written independently agree on every probe",
                    passed.len()
                ),
            );
        }
        if !model_can_confirm && decided.is_none() {
            rejections
                .insert(0, "no reading of the examples survived the checks for a model's answer to confirm".into());
        }
        return Ok(sampled(&title, None, tried, rejections));
    };
    let change = match change_for(&pattern) {
        Ok(change) => change,
        Err(rejection) => {
            rejections.push(rejection.to_string());
            return Ok(sampled(&title, None, tried, rejections));
        }
    };
    if let Err(refusal) = exec.check(&change, cancel).await {
        rejections.push(refusal);
        return Ok(sampled(&title, None, tried, rejections));
    }
    Ok(TaskOutcome { origin, ..sampled(&title, Some(change), tried, rejections) })
}

/// The prompt: the description and examples, a short answer (one anchored pattern) asked for in the user's
/// dialect. Few-shot examples for base models are none of any evaluation's specs.
fn regex_prompt(lang: Lang, flavor: RegexFlavor, spec: &RegexSpec) -> TaskPrompt {
    let _ = lang;
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
    let dialect = match flavor {
        RegexFlavor::Rust => "Rust `regex` crate",
        RegexFlavor::EcmaScript => "JavaScript (ECMAScript)",
    };
    let quoted =
        |examples: &[String]| examples.iter().map(|example| format!("`{example}`")).collect::<Vec<_>>().join(", ");
    // What every regex task says comes first and the spec last: the task lane's KV slot keeps the common start
    // of the previous task's prompt, so only the spec's own tokens are evaluated.
    let mut instruction = format!(
        "Write a regular expression, anchored with ^ and $ so it matches a whole string. Cover the whole kind of \
         string described, not only the examples: use character classes and repetitions, never the examples \
         themselves.\nDialect: {dialect}.\nDescription: {}.",
        spec.description
    );
    if !spec.positives.is_empty() {
        instruction.push_str(&format!("\nIt must match each of: {}.", quoted(&spec.positives)));
    }
    if !spec.negatives.is_empty() {
        instruction.push_str(&format!("\nIt must not match any of: {}.", quoted(&spec.negatives)));
    }
    TaskPrompt {
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
            describe(spec)
        ),
        few_shot_stops: vec!["\n".to_owned()],
        chat_prefill: "```\n^".to_owned(),
        chat_stops: vec!["\n".to_owned(), "```".to_owned()],
    }
}

/// The pattern of a model's answer, as prompted.
fn pattern_of_answer(generated: &str, style: PromptStyle) -> String {
    let generated = generated.trim();
    match style {
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
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One row of a test table.
    type Case<'a> = (Vec<Passed>, Option<(&'a str, Origin)>, Option<(&'a str, Origin)>);

    fn passed(pattern: &str, origin: Origin, signature: &[bool]) -> Passed {
        let generalisation = Generalisation {
            variants_matched: 0,
            variants: 0,
            misses_refused: 0,
            misses: 0,
            signature: signature.to_vec(),
        };
        Passed { pattern: pattern.to_owned(), origin, generalisation }
    }

    /// What is offered among candidates that passed every check: a decided synthesis, else the shortest of two
    /// independent candidates that agree on every probe, else nothing.
    #[test]
    fn choice_table() {
        let (model, examples) = (Origin::Model, Origin::Examples);
        let cases: [Case; 6] = [
            (vec![], Some(("^a$", examples)), Some(("^a$", examples))),
            (vec![passed("^x+$", model, &[true, false])], None, None),
            (
                vec![passed("^[0-9]{2}$", examples, &[true, false]), passed("^[0-9][0-9]$", model, &[true, false])],
                None,
                Some(("^[0-9]{2}$", examples)),
            ),
            (
                vec![passed("^[0-9]{2}$", examples, &[true, false]), passed("^[0-9]+$", model, &[true, true])],
                None,
                None,
            ),
            // Two readings of the examples' shape are not independent of each other.
            (vec![passed("^[0-9]{2}$", examples, &[true]), passed("^[0-9]+$", examples, &[true])], None, None),
            (
                vec![passed("^[a-z]+x?$", model, &[false]), passed("^[a-z]+$", model, &[false])],
                None,
                Some(("^[a-z]+$", model)),
            ),
        ];
        for (candidates, decided, expected) in cases {
            let got = choose(&candidates, decided);
            assert_eq!(got.as_ref().map(|(pattern, origin)| (pattern.as_str(), *origin)), expected);
        }
    }
}
