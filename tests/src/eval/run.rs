//! Runs the cases through one server (one model) and scores every answer with [`super::check`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::cases::{Cases, FixCase, GhostCase, RegexCase, TestsCase};
use super::check::{self, Scratch};
use super::corpus::{Lang, Package};
use super::drive::{self, Answer, Server};
use super::eval_dir;

pub const TASKS: [&str; 4] = ["ghost", "fix", "tests", "regex"];

pub struct Options {
    pub quick: bool,
    pub tasks: Vec<String>,
    pub model: Option<PathBuf>,
    pub label: String,
    /// Settings for this run besides the model (`{}`: the server's defaults).
    pub settings: serde_json::Value,
    /// Only these case ids (empty: all).
    pub only: Vec<String>,
}

/// One task case: what Spark did and what the independent check said.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CaseResult {
    pub task: String,
    pub lang: Lang,
    pub id: String,
    /// Spark applied an edit.
    pub offered: bool,
    /// Spark's own check passed (Spark offers only what it verified, so this equals `offered`).
    pub verified: bool,
    /// The independent check passed.
    pub correct: bool,
    pub crash_or_timeout: bool,
    /// The harness itself failed on this case (reported, never counted as right or wrong).
    pub harness_error: bool,
    pub ms: u64,
    pub note: String,
}

/// One ghost-text keystroke position.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Keystroke {
    pub lang: Lang,
    pub case: String,
    pub ms: u64,
    /// The first line shown (empty: nothing shown).
    pub shown: String,
    pub correct: bool,
    pub breaks_parse: bool,
    pub crash_or_timeout: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Span {
    pub lang: Lang,
    pub case: String,
    pub chars: usize,
    /// Characters an accepted suggestion (Tab) supplied.
    pub supplied: usize,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Run {
    pub label: String,
    pub model: String,
    pub results: Vec<CaseResult>,
    pub keystrokes: Vec<Keystroke>,
    pub spans: Vec<Span>,
    pub wall_s: f64,
}

/// The slice `--quick` takes of each kind: every n-th case.
fn slice<T: Clone>(items: &[T], quick: bool, keep: usize) -> Vec<T> {
    if !quick || items.len() <= keep {
        return items.to_vec();
    }
    let step = items.len() as f64 / keep as f64;
    (0..keep).map(|idx| items[((idx as f64 + 0.5) * step) as usize].clone()).collect()
}

fn by_lang<T: Clone + HasId>(items: &[T], lang_of: impl Fn(&T) -> Lang, quick: bool, keep: usize) -> Vec<T> {
    let mut out = Vec::new();
    for lang in [Lang::Rust, Lang::Ts] {
        let in_lang: Vec<T> = items.iter().filter(|item| lang_of(item) == lang).cloned().collect();
        out.extend(slice(&in_lang, quick, keep));
    }
    out
}

/// Case ids, for `--only`.
pub trait HasId {
    fn id(&self) -> &str;
}

macro_rules! has_id {
    ($($kind:ty),*) => {$(impl HasId for $kind { fn id(&self) -> &str { &self.id } })*};
}
has_id!(GhostCase, FixCase, TestsCase, RegexCase);

fn only<T: HasId + Clone>(items: Vec<T>, ids: &[String]) -> Vec<T> {
    if ids.is_empty() {
        return items;
    }
    items.into_iter().filter(|item| ids.iter().any(|id| id == item.id())).collect()
}

pub fn run(cases: &Cases, packages: &[Package], options: &Options, log: &mut dyn FnMut(&str)) -> Result<Run> {
    let started = std::time::Instant::now();
    let logs = eval_dir().join("logs");
    std::fs::create_dir_all(&logs)?;
    let file_label: String =
        options.label.chars().map(|ch| if ch.is_ascii_alphanumeric() || ch == '.' { ch } else { '-' }).collect();
    let stderr = logs.join(format!("spark-lsp-{file_label}.log"));
    let mut server = Server::start(options.model.as_deref(), &options.settings, stderr)?;
    let mut run = Run {
        label: options.label.clone(),
        model: options.model.as_ref().map(|model| model.display().to_string()).unwrap_or_else(|| "default".into()),
        ..Default::default()
    };
    let wants = |task: &str| options.tasks.iter().any(|wanted| wanted == task);
    let package = |name: &str| packages.iter().find(|package| package.name == name).context("a corpus package");
    let scratches: HashMap<String, Scratch> =
        packages.iter().map(|package| Ok((package.name.clone(), Scratch::new(package)?))).collect::<Result<_>>()?;
    if wants("ghost") {
        let ghost = only(by_lang(&cases.ghost, |case| case.lang, options.quick, 4), &options.only);
        for (idx, case) in ghost.iter().enumerate() {
            log(&format!("ghost {}/{}: {} {}", idx + 1, ghost.len(), case.file, case.span));
            if let Err(error) = ghost_case(&mut server, package(&case.package)?, case, &mut run) {
                log(&format!("ghost {}: harness error, span skipped: {error:#}", case.id));
            }
        }
    }
    if wants("fix") {
        let fix = only(by_lang(&cases.fix, |case| case.lang, options.quick, 6), &options.only);
        for (idx, case) in fix.iter().enumerate() {
            let scratch = &scratches[&package(&case.package)?.name];
            let result = fix_case(&mut server, scratch, case)
                .unwrap_or_else(|error| harness_failed("fix", case.lang, &case.id, error));
            log(&format!("fix {}/{}: {} {} → {}", idx + 1, fix.len(), case.id, case.mutation, verdict(&result)));
            run.results.push(result);
        }
    }
    if wants("tests") {
        let tests = only(by_lang(&cases.tests, |case| case.lang, options.quick, 4), &options.only);
        for (idx, case) in tests.iter().enumerate() {
            let scratch = &scratches[&package(&case.package)?.name];
            let result = tests_case(&mut server, scratch, case)
                .unwrap_or_else(|error| harness_failed("tests", case.lang, &case.id, error));
            log(&format!("tests {}/{}: {} → {}", idx + 1, tests.len(), case.id, verdict(&result)));
            run.results.push(result);
        }
    }
    if wants("regex") {
        let regex = only(by_lang(&cases.regex, |case| case.lang, options.quick, 6), &options.only);
        for (idx, case) in regex.iter().enumerate() {
            let result = regex_case(&mut server, case)
                .unwrap_or_else(|error| harness_failed("regex", case.lang, &case.id, error));
            log(&format!("regex {}/{}: {} → {}", idx + 1, regex.len(), case.description, verdict(&result)));
            run.results.push(result);
        }
    }
    server.shutdown();
    run.wall_s = started.elapsed().as_secs_f64();
    Ok(run)
}

fn verdict(result: &CaseResult) -> String {
    let word = match (result.crash_or_timeout, result.offered, result.correct) {
        _ if result.harness_error => "HARNESS ERROR",
        (true, _, _) => "CRASH/TIMEOUT",
        (_, false, _) => "not offered",
        (_, true, true) => "correct",
        (_, true, false) => "OFFERED BUT WRONG",
    };
    format!("{word} ({} ms) {}", result.ms, result.note.chars().take(120).collect::<String>())
}

fn ghost_case(server: &mut Server, package: &Package, case: &GhostCase, run: &mut Run) -> Result<()> {
    let real = package.read(&case.file)?;
    let uri = drive::file_uri(&package.dir().join(&case.file));
    let language_id = case.lang.language_id();
    let mut document = format!("{}{}", &real[..case.start], &real[case.start + case.span.len()..]);
    let mut typed = 0;
    let mut supplied = 0;
    server.set_text(&uri, language_id, &document)?;
    while typed < case.span.len() {
        let cursor = case.start + typed;
        let (line, character) = drive::position(&document, cursor);
        let (answer, ms) = drive::timed(|| server.inline(&uri, line, character));
        let rest = &case.span[typed..];
        match answer? {
            Answer::CrashOrTimeout(_) => {
                run.keystrokes.push(Keystroke {
                    lang: case.lang,
                    case: case.id.clone(),
                    ms,
                    shown: String::new(),
                    correct: false,
                    breaks_parse: false,
                    crash_or_timeout: true,
                });
                server.set_text(&uri, language_id, &document)?;
            }
            Answer::Got(suggestion) => {
                let first = suggestion.split('\n').next().unwrap_or("").to_owned();
                let shown = !suggestion.trim().is_empty();
                let correct = check::ghost_line_is_correct(rest, &suggestion);
                let breaks_parse = shown && check::breaks_parse(case.lang, &document, cursor, &suggestion, &real);
                run.keystrokes.push(Keystroke {
                    lang: case.lang,
                    case: case.id.clone(),
                    ms,
                    shown: if shown { first } else { String::new() },
                    correct,
                    breaks_parse,
                    crash_or_timeout: false,
                });
                if correct {
                    // Tab: the rest of the line comes from the suggestion.
                    supplied += rest.len();
                    break;
                }
            }
        }
        // The next keystroke.
        let ch = case.span[typed..].chars().next().expect("not at the end");
        document.insert(cursor, ch);
        typed += ch.len_utf8();
        server.set_text(&uri, language_id, &document)?;
    }
    server.close(&uri)?;
    run.spans.push(Span { lang: case.lang, case: case.id.clone(), chars: case.span.len(), supplied });
    Ok(())
}

fn outcome(task: &str, lang: Lang, id: &str) -> CaseResult {
    CaseResult {
        task: task.to_owned(),
        lang,
        id: id.to_owned(),
        offered: false,
        verified: false,
        correct: false,
        crash_or_timeout: false,
        harness_error: false,
        ms: 0,
        note: String::new(),
    }
}

/// A case the harness could not finish: recorded as such, the run goes on.
fn harness_failed(task: &str, lang: Lang, id: &str, error: anyhow::Error) -> CaseResult {
    let mut result = outcome(task, lang, id);
    result.harness_error = true;
    result.note = format!("harness error: {error:#}");
    result
}

/// Runs `command` on `text` open at `path`; the applied edit's files, or the outcome when nothing came.
fn ask(
    server: &mut Server,
    result: &mut CaseResult,
    command: &str,
    path: &Path,
    text: &str,
    range: Value,
    message: Option<&str>,
) -> Result<Option<HashMap<String, String>>> {
    let uri = drive::file_uri(path);
    server.set_text(&uri, result.lang.language_id(), text)?;
    let mut argument = json!({"uri": uri, "version": server.version(&uri), "range": range});
    if let Some(message) = message {
        argument["message"] = json!(message);
    }
    let (answer, ms) = drive::timed(|| server.command(command, argument));
    result.ms = ms;
    let answer = answer?;
    server.close(&uri)?;
    match answer {
        Answer::CrashOrTimeout(why) => {
            result.crash_or_timeout = true;
            result.note = why;
            Ok(None)
        }
        Answer::Got((None, reply)) => {
            result.note = reply["reason"].as_str().unwrap_or("").to_owned();
            Ok(None)
        }
        Answer::Got((Some(edit), _)) => {
            result.offered = true;
            result.verified = true;
            let mut files = HashMap::from([(uri, text.to_owned())]);
            drive::apply_edit(&edit, &mut files)?;
            Ok(Some(files))
        }
    }
}

fn range_json(start: (u32, u32), end: (u32, u32)) -> Value {
    json!({"start": {"line": start.0, "character": start.1}, "end": {"line": end.0, "character": end.1}})
}

fn fix_case(server: &mut Server, scratch: &Scratch, case: &FixCase) -> Result<CaseResult> {
    let mut result = outcome("fix", case.lang, &case.id);
    let path = scratch.path(&case.file);
    let diag = &case.diag;
    let range = range_json((diag.line, diag.col), (diag.end_line, diag.end_col));
    let Some(files) = ask(server, &mut result, "spark.fix", &path, &case.text, range, Some(&diag.message))? else {
        return Ok(result);
    };
    let fixed = &files[&drive::file_uri(&path)];
    match check::fix_is_correct(scratch, &case.file, fixed, diag)? {
        Ok(()) => result.correct = true,
        Err(why) => result.note = why,
    }
    Ok(result)
}

/// Test function names in `with_tests` that `original` does not have.
fn new_test_names(original: &str, with_tests: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = with_tests;
    while let Some(at) = rest.find("fn ") {
        rest = &rest[at + 3..];
        let name: String = rest.chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect();
        if !name.is_empty() && !original.contains(&format!("fn {name}(")) && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// `text` with one mutant applied; `inserted_at..+inserted_len` is where generated code went in (after it, the
/// mutant's offsets shift).
fn apply_mutant(text: &str, mutant: &(usize, usize, String), inserted_at: usize, inserted_len: usize) -> String {
    let (mut start, mut end, replacement) = (mutant.0, mutant.1, &mutant.2);
    if start >= inserted_at {
        start += inserted_len;
        end += inserted_len;
    }
    let mut out = text.to_owned();
    out.replace_range(start..end, replacement);
    out
}

fn tests_case(server: &mut Server, scratch: &Scratch, case: &TestsCase) -> Result<CaseResult> {
    let mut result = outcome("tests", case.lang, &case.id);
    let path = scratch.path(&case.file);
    let position = (case.line, case.character);
    let Some(files) =
        ask(server, &mut result, "spark.generateTests", &path, &case.text, range_json(position, position), None)?
    else {
        return Ok(result);
    };
    let uri = drive::file_uri(&path);
    let module = files[&uri].clone();
    let prefix = case.text.bytes().zip(module.bytes()).take_while(|(a, b)| a == b).count();
    let inserted_len = module.len().saturating_sub(case.text.len());
    let mutants: Vec<String> =
        case.mutants.iter().map(|mutant| apply_mutant(&module, mutant, prefix, inserted_len)).collect();
    let verdict = match case.lang {
        Lang::Rust => {
            let names = new_test_names(&case.text, &module);
            check::tests_are_correct(scratch, &case.file, &module, &mutants, &names, None)?
        }
        Lang::Ts => {
            let created = files.iter().find(|(other, _)| **other != uri);
            match created {
                None => Err("no test file was written".to_owned()),
                Some((test_uri, test_text)) => {
                    let test_path = drive::uri_path(test_uri);
                    let relative = test_path.strip_prefix(&scratch.dir).with_context(|| {
                        format!("{} is not in the scratch copy {}", test_path.display(), scratch.dir.display())
                    })?;
                    let relative = relative.to_string_lossy().into_owned();
                    check::tests_are_correct(scratch, &case.file, &module, &mutants, &[], Some((&relative, test_text)))?
                }
            }
        }
    };
    match verdict {
        Ok(()) => result.correct = true,
        Err(why) => result.note = why,
    }
    Ok(result)
}

/// The pattern inside the statement Spark inserted (`r"…"`, `r#"…"#` or `/…/`).
pub fn inserted_pattern(lang: Lang, line: &str) -> Option<String> {
    match lang {
        Lang::Rust => {
            let start = line.find("r\"").or_else(|| line.find("r#"))?;
            let body = &line[start + 1..];
            let hashes = body.chars().take_while(|ch| *ch == '#').count();
            let body = body.get(hashes + 1..)?;
            let end = body.rfind(&format!("\"{}", "#".repeat(hashes)))?;
            Some(body[..end].to_owned())
        }
        Lang::Ts => {
            let start = line.find('/')?;
            let end = line.rfind('/')?;
            (end > start).then(|| line[start + 1..end].to_owned())
        }
    }
}

fn regex_case(server: &mut Server, case: &RegexCase) -> Result<CaseResult> {
    let mut result = outcome("regex", case.lang, &case.id);
    let dir = eval_dir().join("scratch/regex");
    std::fs::create_dir_all(&dir)?;
    let extension = if case.lang == Lang::Rust { "rs" } else { "ts" };
    let path = dir.join(format!("{}.{extension}", case.id.replace('-', "_")));
    let comment = case.comment();
    let text = format!("{comment}\n");
    let end = (0, comment.encode_utf16().count() as u32);
    let Some(files) = ask(server, &mut result, "spark.generateRegex", &path, &text, range_json(end, end), None)? else {
        return Ok(result);
    };
    let written = &files[&drive::file_uri(&path)];
    let inserted = written.lines().find(|line| !line.trim().is_empty() && !line.starts_with("//")).unwrap_or("");
    let Some(pattern) = inserted_pattern(case.lang, inserted) else {
        result.note = format!("no pattern in {inserted:?}");
        return Ok(result);
    };
    match check::regex_is_correct(case.lang, &pattern, &case.held, &case.held_not)? {
        Ok(()) => result.correct = true,
        Err(why) => result.note = format!("/{pattern}/ {why}"),
    }
    Ok(result)
}
