//! Runs the cases through one server (one model) and scores every answer with [`super::check`] (next edits with
//! [`super::history::score`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::cases::{Cases, FixCase, GhostCase, RegexCase, TestsCase};
use super::check::{self, Scratch};
use super::corpus::{Lang, Package, Split};
use super::drive::{self, Answer, Server};
use super::eval_dir;
use super::history::{self, Edit, History, NextEditCase, Verdict};

pub const TASKS: [&str; 5] = ["ghost", "fix", "tests", "regex", "next-edit"];

/// Next-edit cases per package that `--quick` keeps.
pub const QUICK_NEXT_EDIT_PER_PACKAGE: usize = 3;

pub struct Options {
    pub quick: bool,
    pub tasks: Vec<String>,
    pub model: Option<PathBuf>,
    pub label: String,
    /// Settings for this run besides the model (`{}`: the server's defaults).
    pub settings: serde_json::Value,
    /// Only these case ids (empty: all).
    pub only: Vec<String>,
    /// Ghost text from llama-server driven as llama.vim drives it (with this run's model) instead of Spark.
    pub llama_vim: bool,
}

/// One task case: what Spark did and what the independent check said.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CaseResult {
    pub task: String,
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
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
    /// The edit Spark offered (the `WorkspaceEdit` as the server sent it), for reading a wrong answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_edit: Option<Value>,
    /// Where the offered edit came from, as the server says: "fast tier", "strong tier", "compiler", "grammar",
    /// "similar name".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// The title of the offered edit, as the editor shows it (tests: how many of Spark's own mutants it catches).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Fix cases: how the offered fix was judged (exact restore, same behaviour, unproven, wrong).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix_verdict: Option<check::FixVerdict>,
}

/// One ghost-text keystroke position.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Keystroke {
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub case: String,
    pub ms: u64,
    /// What the user sees: the suggestion's first non-empty line (empty: nothing shown). A suggestion that starts
    /// with a line break is shown (its text appears on the lines below) and is wrong: accepting it would break
    /// the line the user is typing.
    pub shown: String,
    pub correct: bool,
    pub breaks_parse: bool,
    pub crash_or_timeout: bool,
    /// The server answered the request with an error (its own column: neither shown nor nothing).
    #[serde(default)]
    pub error: bool,
    /// Typed after the span's first right answer: a user who pressed Tab there would not have typed it (the
    /// replay types every span through, as the issue's ruler does; `report` counts both ways).
    pub after_tab: bool,
}

/// One pause in the per-pause replay: the user typed a burst and stopped; what became visible within
/// [`PAUSE_WINDOW`] (the number closest to an acceptance rate: a user reads ghost text when they pause).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Pause {
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub case: String,
    /// Characters typed in the burst before the pause.
    pub burst: usize,
    /// The first line visible (empty: nothing within the window).
    pub shown: String,
    pub correct: bool,
    /// From the pause's start (the burst's last keystroke) to the first visible suggestion.
    pub ms: Option<u64>,
}

/// How long a pause lasts in the replay: a suggestion visible later is not counted (issue 33: within 2 s).
pub const PAUSE_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);
/// Time between keystrokes inside a burst (a quick typist: ~12 characters a second).
pub const KEY_INTERVAL: std::time::Duration = std::time::Duration::from_millis(80);

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Span {
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub case: String,
    pub chars: usize,
    /// Characters an accepted suggestion (Tab) supplied: the rest of the line at the first right answer.
    pub supplied: usize,
}

/// One predicted edit of a next-edit answer, with its byte range in the document after the user's edit.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Predicted {
    pub edit: Edit,
    pub label: String,
    pub source: String,
    pub verdict: Verdict,
    /// Wrong, but at a follow-up's place.
    pub at_follow_up: bool,
    /// Wrong, but doing in one edit what several atomic edits of a follow-up do together.
    pub joins_atomic_edits: bool,
}

/// One next-edit case: what Spark predicted after the user's edit and how it scored against the real next version.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct NextEditResult {
    /// Always set (an `Option` so that the struct has a `Default`).
    pub lang: Option<Lang>,
    #[serde(default)]
    pub split: Split,
    pub case: String,
    pub package: String,
    pub follow_ups: usize,
    /// Follow-up hunks whose every atomic edit was predicted correctly.
    pub hunks_predicted: usize,
    pub predictions: usize,
    /// Predictions equal to an atomic edit of a follow-up hunk.
    pub exact: usize,
    /// Predictions equal to one once blanks are ignored (or doing several of one hunk at once).
    pub normalised: usize,
    /// Predictions doing part of an atomic edit, the same way.
    pub partial: usize,
    pub wrong: usize,
    /// Of `wrong`, those at a follow-up's place (overlapping or touching one of its atomic edits).
    pub wrong_at_follow_up: usize,
    /// Of `wrong`, those doing in one edit what several atomic edits of a follow-up do together.
    pub wrong_joining_atomic_edits: usize,
    /// `spark/nextEdit` sent → its answer.
    pub ms: u64,
    /// The user's `didChange` sent → the answer.
    pub ms_from_change: u64,
    /// No answer in time, or the server died (restarted for the next case).
    pub crash_or_timeout: bool,
    /// The server answered with an error (its message).
    pub error: Option<String>,
    /// The harness itself failed on this case (counted in no column).
    pub harness_error: Option<String>,
    /// The document version the answer says its edits are for (the harness's is 2).
    pub answered_version: Option<i64>,
    pub edits: Vec<Predicted>,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Run {
    pub label: String,
    pub model: String,
    /// Where and when it ran (the report states both).
    #[serde(default)]
    pub machine: String,
    #[serde(default)]
    pub date: String,
    pub results: Vec<CaseResult>,
    pub keystrokes: Vec<Keystroke>,
    pub spans: Vec<Span>,
    /// The per-pause replay of the same spans (typed in bursts, not waiting for answers).
    #[serde(default)]
    pub pauses: Vec<Pause>,
    pub next_edits: Vec<NextEditResult>,
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

/// The cases of each language and split in turn (`--quick`: a slice of each, so that dev and test stay side by side).
fn by_lang<T: Clone + HasId>(items: &[T], lang_of: impl Fn(&T) -> (Lang, Split), quick: bool, keep: usize) -> Vec<T> {
    let mut out = Vec::new();
    for lang in [Lang::Rust, Lang::Ts] {
        for split in Split::BOTH {
            let in_lang: Vec<T> = items.iter().filter(|item| lang_of(item) == (lang, split)).cloned().collect();
            out.extend(slice(&in_lang, quick, keep));
        }
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
has_id!(GhostCase, FixCase, TestsCase, RegexCase, NextEditCase);

fn only<T: HasId + Clone>(items: Vec<T>, ids: &[String]) -> Vec<T> {
    if ids.is_empty() {
        return items;
    }
    items.into_iter().filter(|item| ids.iter().any(|id| id == item.id())).collect()
}

/// What a run draws from: the corpus's cases and packages, and the next-edit histories and their cases (each may be
/// empty when no task wants it).
pub struct Inputs<'a> {
    pub cases: &'a Cases,
    pub packages: &'a [Package],
    pub histories: &'a [History],
    pub next_edit: &'a [NextEditCase],
}

pub fn run(inputs: &Inputs, options: &Options, log: &mut dyn FnMut(&str)) -> Result<Run> {
    let (cases, packages) = (inputs.cases, inputs.packages);
    let started = std::time::Instant::now();
    let logs = eval_dir().join("logs");
    std::fs::create_dir_all(&logs)?;
    let file_label: String =
        options.label.chars().map(|ch| if ch.is_ascii_alphanumeric() || ch == '.' { ch } else { '-' }).collect();
    let mut run = Run {
        label: options.label.clone(),
        model: options.model.as_ref().map(|model| model.display().to_string()).unwrap_or_else(|| {
            let default = spark_engine::default_model_path();
            let name = default.as_ref().and_then(|path| path.file_name()).map(|name| name.to_string_lossy());
            format!("{} (the default)", name.unwrap_or_default())
        }),
        machine: machine(),
        date: today(),
        ..Default::default()
    };
    let wants = |task: &str| options.tasks.iter().any(|wanted| wanted == task);
    let package = |name: &str| packages.iter().find(|package| package.name == name).context("a corpus package");
    if options.llama_vim {
        // Ghost text only: llama.vim has no tasks.
        let mut client = super::llama_vim::LlamaVim::start(options.model.as_deref())?;
        let ghost = only(by_lang(&cases.ghost, |case| (case.lang, case.split), options.quick, 4), &options.only);
        for (idx, case) in ghost.iter().enumerate() {
            log(&format!("llama.vim ghost {}/{}: {} {}", idx + 1, ghost.len(), case.file, case.span));
            if let Err(error) = ghost_case(&mut client, package(&case.package)?, case, &mut run) {
                log(&format!("ghost {}: harness error, span skipped: {error:#}", case.id));
            }
        }
        log(&format!("llama.vim: {} requests, {} answers from its own cache", client.requests, client.cache_hits));
        run.wall_s = started.elapsed().as_secs_f64();
        return Ok(run);
    }
    let stderr = logs.join(format!("spark-lsp-{file_label}.log"));
    let mut server = Server::start(options.model.as_deref(), &options.settings, stderr)?;
    let scratches: HashMap<String, Scratch> = if wants("fix") || wants("tests") {
        packages.iter().map(|package| Ok((package.name.clone(), Scratch::new(package)?))).collect::<Result<_>>()?
    } else {
        HashMap::new()
    };
    if wants("ghost") {
        let ghost = only(by_lang(&cases.ghost, |case| (case.lang, case.split), options.quick, 4), &options.only);
        for (idx, case) in ghost.iter().enumerate() {
            log(&format!("ghost {}/{}: {} {}", idx + 1, ghost.len(), case.file, case.span));
            if let Err(error) = ghost_case(&mut server, package(&case.package)?, case, &mut run) {
                log(&format!("ghost {}: harness error, span skipped: {error:#}", case.id));
            }
        }
        // A fresh server for the pauses: the keystroke replay's answers (the suggestion cache, the warm KV cache)
        // are not left for them.
        server.shutdown();
        server = Server::start(
            options.model.as_deref(),
            &options.settings,
            logs.join(format!("spark-lsp-{file_label}-pauses.log")),
        )?;
        for (idx, case) in ghost.iter().enumerate() {
            log(&format!("ghost in bursts {}/{}: {} {}", idx + 1, ghost.len(), case.file, case.span));
            if let Err(error) = ghost_pause_case(&mut server, package(&case.package)?, case, &mut run) {
                log(&format!("ghost in bursts {}: harness error, span skipped: {error:#}", case.id));
            }
        }
    }
    if wants("fix") {
        let fix = only(by_lang(&cases.fix, |case| (case.lang, case.split), options.quick, 6), &options.only);
        for (idx, case) in fix.iter().enumerate() {
            let scratch = &scratches[&package(&case.package)?.name];
            let result = fix_case(&mut server, scratch, case)
                .unwrap_or_else(|error| harness_failed("fix", case.lang, case.split, &case.id, error));
            log(&format!("fix {}/{}: {} {} → {}", idx + 1, fix.len(), case.id, case.mutation, verdict(&result)));
            run.results.push(result);
        }
    }
    if wants("tests") {
        let tests = only(by_lang(&cases.tests, |case| (case.lang, case.split), options.quick, 4), &options.only);
        for (idx, case) in tests.iter().enumerate() {
            let scratch = &scratches[&package(&case.package)?.name];
            let result = tests_case(&mut server, scratch, case)
                .unwrap_or_else(|error| harness_failed("tests", case.lang, case.split, &case.id, error));
            log(&format!("tests {}/{}: {} → {}", idx + 1, tests.len(), case.id, verdict(&result)));
            run.results.push(result);
        }
    }
    if wants("regex") {
        let regex = only(by_lang(&cases.regex, |case| (case.lang, case.split), options.quick, 6), &options.only);
        for (idx, case) in regex.iter().enumerate() {
            let result = regex_case(&mut server, case)
                .unwrap_or_else(|error| harness_failed("regex", case.lang, case.split, &case.id, error));
            log(&format!("regex {}/{}: {} → {}", idx + 1, regex.len(), case.description, verdict(&result)));
            run.results.push(result);
        }
    }
    if wants("next-edit") {
        let per_package = options.quick.then_some(QUICK_NEXT_EDIT_PER_PACKAGE);
        let next = only(history::slice(inputs.next_edit, per_package), &options.only);
        for (idx, case) in next.iter().enumerate() {
            let history = inputs
                .histories
                .iter()
                .find(|history| history.name == case.package)
                .context("the case's history is in tests/eval/history.toml")?;
            let result = next_edit_case(&mut server, history, case).unwrap_or_else(|error| NextEditResult {
                lang: Some(case.lang),
                split: case.split,
                case: case.id.clone(),
                package: case.package.clone(),
                follow_ups: case.follow_ups.len(),
                harness_error: Some(format!("{error:#}")),
                ..Default::default()
            });
            log(&format!(
                "next-edit {}/{}: {} {} → {} of {} hunks, {} predicted ({} exact, {} blanks aside, {} wrong, {} of them at a follow-up){} ({} ms)",
                idx + 1,
                next.len(),
                case.id,
                case.file,
                result.hunks_predicted,
                result.follow_ups,
                result.predictions,
                result.exact,
                result.normalised,
                result.wrong,
                result.wrong_at_follow_up,
                match (&result.harness_error, &result.error, result.crash_or_timeout) {
                    (Some(error), _, _) => format!(", HARNESS ERROR {error}"),
                    (_, Some(error), _) => format!(", ERROR {error}"),
                    (_, _, true) => ", CRASH/TIMEOUT".to_owned(),
                    _ => String::new(),
                },
                result.ms
            ));
            run.next_edits.push(result);
        }
    }
    server.shutdown();
    run.wall_s = started.elapsed().as_secs_f64();
    Ok(run)
}

/// Opens the old file, makes the user's edit (one incremental `didChange`), asks `spark/nextEdit` at its end and
/// scores the answer.
pub fn next_edit_case(server: &mut Server, history: &History, case: &NextEditCase) -> Result<NextEditResult> {
    let uri = drive::file_uri(&case.path(history));
    let language_id = case.lang.language_id();
    let document = case.document();
    let mut result = NextEditResult {
        lang: Some(case.lang),
        split: case.split,
        case: case.id.clone(),
        package: case.package.clone(),
        follow_ups: case.follow_ups.len(),
        ..Default::default()
    };
    server.set_text(&uri, language_id, &case.before)?;
    let edit = &case.user_edit;
    let changed = std::time::Instant::now();
    server.change(&uri, &case.before, edit.start, edit.end, &edit.new_text)?;
    let (line, character) = drive::position(&document, case.cursor());
    let asked = std::time::Instant::now();
    let answer = server.next_edit(&uri, line, character)?;
    result.ms = asked.elapsed().as_millis() as u64;
    result.ms_from_change = changed.elapsed().as_millis() as u64;
    server.close(&uri)?;
    let response = match answer {
        Answer::CrashOrTimeout(why) => {
            result.crash_or_timeout = true;
            result.error = Some(why);
            return Ok(result);
        }
        Answer::Error(message) => {
            result.error = Some(message);
            return Ok(result);
        }
        Answer::Got(response) => response,
    };
    if let Some(error) = response.get("error") {
        result.error = Some(error["message"].as_str().unwrap_or("an error without a message").to_owned());
        return Ok(result);
    }
    let answer = &response["result"];
    result.answered_version = answer["version"].as_i64();
    let edits = answer["edits"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let predicted: Vec<Edit> = edits.iter().map(|edit| edit_in(&document, edit)).collect();
    let score = history::score(&document, &case.follow_ups, &predicted);
    result.predictions = predicted.len();
    result.hunks_predicted = score.hunks_predicted;
    result.exact = score.verdicts.iter().filter(|verdict| **verdict == Verdict::Exact).count();
    result.normalised = score.verdicts.iter().filter(|verdict| **verdict == Verdict::Normalised).count();
    result.partial = score.verdicts.iter().filter(|verdict| **verdict == Verdict::Partial).count();
    result.wrong = score.verdicts.iter().filter(|verdict| **verdict == Verdict::Wrong).count();
    result.wrong_at_follow_up = score.at_follow_up.iter().filter(|at| **at).count();
    result.wrong_joining_atomic_edits = score.joins_atomic_edits.iter().filter(|joins| **joins).count();
    result.edits = predicted
        .into_iter()
        .zip(edits)
        .enumerate()
        .map(|(idx, (edit, raw))| Predicted {
            edit,
            label: raw["label"].as_str().unwrap_or("").to_owned(),
            source: raw["source"].as_str().unwrap_or("").to_owned(),
            verdict: score.verdicts[idx],
            at_follow_up: score.at_follow_up[idx],
            joins_atomic_edits: score.joins_atomic_edits[idx],
        })
        .collect();
    Ok(result)
}

/// An LSP `TextEdit` (UTF-16 positions) as a byte range of `document`.
pub fn edit_in(document: &str, edit: &Value) -> Edit {
    let point = |key: &str| {
        let at = &edit["range"][key];
        drive::offset(document, at["line"].as_u64().unwrap_or(0) as u32, at["character"].as_u64().unwrap_or(0) as u32)
    };
    Edit { start: point("start"), end: point("end"), new_text: edit["newText"].as_str().unwrap_or("").to_owned() }
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

/// What the ghost-text replay types into: Spark over LSP, or llama.vim's client against llama-server
/// ([`super::llama_vim`]).
pub trait GhostClient {
    fn set_text(&mut self, uri: &str, language_id: &str, text: &str) -> Result<()>;
    /// The suggestion shown at the position (empty: nothing).
    fn inline(&mut self, uri: &str, line: u32, character: u32) -> Result<Answer<String>>;
    fn close(&mut self, uri: &str) -> Result<()>;
}

impl GhostClient for Server {
    fn set_text(&mut self, uri: &str, language_id: &str, text: &str) -> Result<()> {
        Server::set_text(self, uri, language_id, text)
    }

    fn inline(&mut self, uri: &str, line: u32, character: u32) -> Result<Answer<String>> {
        Server::inline(self, uri, line, character)
    }

    fn close(&mut self, uri: &str) -> Result<()> {
        Server::close(self, uri)
    }
}

fn ghost_case(server: &mut dyn GhostClient, package: &Package, case: &GhostCase, run: &mut Run) -> Result<()> {
    let real = package.read(&case.file)?;
    let uri = drive::file_uri(&package.dir().join(&case.file));
    let language_id = case.lang.language_id();
    let mut document = format!("{}{}", &real[..case.start], &real[case.start + case.span.len()..]);
    let mut typed = 0;
    // The rest of the line at the first right answer (Tab there would have supplied it).
    let mut supplied = None;
    server.set_text(&uri, language_id, &document)?;
    // Every span is typed through to its end, each keystroke waiting for its answer: a right answer does not end
    // the span (the user may not have looked), so later keystrokes are scored too, with `after_tab` set.
    while typed < case.span.len() {
        let cursor = case.start + typed;
        let (line, character) = drive::position(&document, cursor);
        let (answer, ms) = drive::timed(|| server.inline(&uri, line, character));
        let rest = &case.span[typed..];
        let after_tab = supplied.is_some();
        let mut keystroke = Keystroke {
            lang: case.lang,
            split: case.split,
            case: case.id.clone(),
            ms,
            shown: String::new(),
            correct: false,
            breaks_parse: false,
            crash_or_timeout: false,
            error: false,
            after_tab,
        };
        match answer? {
            Answer::CrashOrTimeout(_) => {
                keystroke.crash_or_timeout = true;
                server.set_text(&uri, language_id, &document)?;
            }
            Answer::Error(_) => keystroke.error = true,
            Answer::Got(suggestion) => {
                let shown = !suggestion.trim().is_empty();
                keystroke.correct = check::ghost_line_is_correct(rest, &suggestion);
                keystroke.breaks_parse =
                    shown && check::breaks_parse(case.lang, &document, cursor, &suggestion, &real)?;
                keystroke.shown = check::first_visible_line(&suggestion).to_owned();
                if keystroke.correct && supplied.is_none() {
                    supplied = Some(rest.len());
                }
            }
        }
        run.keystrokes.push(keystroke);
        // The next keystroke.
        let ch = case.span[typed..].chars().next().expect("not at the end");
        document.insert(cursor, ch);
        typed += ch.len_utf8();
        server.set_text(&uri, language_id, &document)?;
    }
    server.close(&uri)?;
    run.spans.push(Span {
        lang: case.lang,
        split: case.split,
        case: case.id.clone(),
        chars: case.span.len(),
        supplied: supplied.unwrap_or(0),
    });
    Ok(())
}

/// The same span typed as a person types: bursts of 2 to 6 characters ([`KEY_INTERVAL`] apart, an inline request
/// sent at each keystroke and cancelled by the next, nothing awaited), each followed by a pause in which the
/// first visible suggestion is scored ([`Pause`]). The bursts are drawn from the case's id: the same every run.
fn ghost_pause_case(server: &mut Server, package: &Package, case: &GhostCase, run: &mut Run) -> Result<()> {
    let real = package.read(&case.file)?;
    let uri = drive::file_uri(&package.dir().join(&case.file));
    let language_id = case.lang.language_id();
    let mut document = format!("{}{}", &real[..case.start], &real[case.start + case.span.len()..]);
    server.set_text(&uri, language_id, &document)?;
    let mut rng = super::Rng::new(u64::from_str_radix(&super::fingerprint(&[&case.id]), 16).unwrap_or(0));
    // Bytes of the span typed so far (the cursor is at `case.start + typed`).
    let mut typed = 0;
    let mut pending: Option<i64> = None;
    while typed < case.span.len() {
        let burst = (2 + rng.below(5)).min(case.span[typed..].chars().count());
        for key in 0..burst {
            let ch = case.span[typed..].chars().next().expect("not at the end");
            document.insert(case.start + typed, ch);
            typed += ch.len_utf8();
            if let Some(id) = pending.take() {
                server.cancel(id)?;
            }
            server.set_text(&uri, language_id, &document)?;
            let (line, character) = drive::position(&document, case.start + typed);
            pending = Some(server.send_inline(&uri, line, character)?);
            // Between keys of the burst (the answers to these requests are not awaited: the next key cancels
            // them); after its last key the pause begins and that request's answer is the one that counts.
            if key + 1 < burst {
                server.idle(KEY_INTERVAL)?;
            }
        }
        if typed == case.span.len() {
            break;
        }
        // The pause: the line's rest is what a right suggestion shows.
        let rest = &case.span[typed..];
        let cursor = case.start + typed;
        let position = drive::position(&document, cursor);
        let started = std::time::Instant::now();
        let id = pending.take().expect("a request at the burst's last keystroke");
        let visible = server.visible_by(&uri, id, position, started + PAUSE_WINDOW)?;
        let ms = visible.as_ref().map(|_| started.elapsed().as_millis() as u64);
        let suggestion = visible.unwrap_or_default();
        run.pauses.push(Pause {
            lang: case.lang,
            split: case.split,
            case: case.id.clone(),
            burst,
            shown: check::first_visible_line(&suggestion).to_owned(),
            correct: check::ghost_line_is_correct(rest, &suggestion),
            ms,
        });
        // The rest of the pause, so that the next burst starts after it as the user's would.
        let left = PAUSE_WINDOW.saturating_sub(started.elapsed());
        server.idle(left.min(std::time::Duration::from_millis(300)))?;
    }
    if let Some(id) = pending {
        server.cancel(id)?;
    }
    server.close(&uri)?;
    Ok(())
}

fn outcome(task: &str, lang: Lang, split: Split, id: &str) -> CaseResult {
    CaseResult {
        task: task.to_owned(),
        lang,
        split,
        id: id.to_owned(),
        offered: false,
        verified: false,
        correct: false,
        crash_or_timeout: false,
        harness_error: false,
        ms: 0,
        note: String::new(),
        offered_edit: None,
        source: String::new(),
        title: String::new(),
        fix_verdict: None,
    }
}

/// A case the harness could not finish: recorded as such, the run goes on.
fn harness_failed(task: &str, lang: Lang, split: Split, id: &str, error: anyhow::Error) -> CaseResult {
    let mut result = outcome(task, lang, split, id);
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
        Answer::Error(message) => {
            result.note = message;
            Ok(None)
        }
        Answer::Got((None, reply)) => {
            result.note = reply["reason"].as_str().unwrap_or("").to_owned();
            Ok(None)
        }
        Answer::Got((Some(edit), reply)) => {
            result.offered = true;
            result.verified = true;
            result.offered_edit = Some(edit.clone());
            result.source = reply["source"].as_str().unwrap_or("").to_owned();
            result.title = reply["title"].as_str().unwrap_or("").to_owned();
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
    let mut result = outcome("fix", case.lang, case.split, &case.id);
    let path = scratch.path(&case.file);
    let diag = &case.diag;
    let range = range_json((diag.line, diag.col), (diag.end_line, diag.end_col));
    let Some(files) = ask(server, &mut result, "spark.fix", &path, &case.text, range, Some(&diag.message))? else {
        return Ok(result);
    };
    let fixed = &files[&drive::file_uri(&path)];
    let verdict = check::judge_fix(scratch, &case.file, fixed, diag)?;
    result.correct = verdict.is_right();
    result.note = match &verdict {
        check::FixVerdict::ExactRestore => "exact restore".to_owned(),
        check::FixVerdict::SameBehaviour(why) | check::FixVerdict::Unproven(why) | check::FixVerdict::Wrong(why) => {
            why.clone()
        }
    };
    result.fix_verdict = Some(verdict);
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
    let mut result = outcome("tests", case.lang, case.split, &case.id);
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
    let mut result = outcome("regex", case.lang, case.split, &case.id);
    // Outside the repository: under `target/eval/` the nearest `Cargo.toml` is Spark's own workspace, whose
    // scratch copy the execution tier would type-check for every Rust case. A regex asked in a file of no project
    // is checked by the examples alone, as for a user's loose file.
    let dir = std::env::temp_dir().join(format!("spark-eval-regex-{}", std::process::id()));
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

/// The machine in a few words: CPU model and cores (and memory), for the report's header.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name").and_then(|rest| rest.split_once(':')).map(|(_, name)| name.trim())
        })
        .unwrap_or("unknown CPU")
        .to_owned();
    let cores = std::thread::available_parallelism().map(|cores| cores.get()).unwrap_or(1);
    let memory_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| text.lines().next()?.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|kib| (kib as f64 / 1024.0 / 1024.0).round() as u64);
    match memory_gib {
        Some(gib) => format!("{cores} cores of {cpu}, {gib} GiB"),
        None => format!("{cores} cores of {cpu}"),
    }
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
