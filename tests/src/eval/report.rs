//! The numbers: per task and language, as a markdown table, JSON and a PNG under `target/eval/`.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use super::corpus::{Lang, Split};
use super::run::{Run, TASKS};

fn percentile(values: &mut [u64], p: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    values[((values.len() - 1) as f64 * p).round() as usize]
}

fn pct(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "–".into();
    }
    format!("{part} ({:.0}%)", 100.0 * part as f64 / whole as f64)
}

/// One row of the task table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaskRow {
    pub task: String,
    pub lang: Lang,
    pub split: Split,
    pub cases: usize,
    pub offered: usize,
    pub verified: usize,
    pub correct: usize,
    pub offered_but_wrong: usize,
    pub crash_or_timeout: usize,
    pub harness_errors: usize,
    pub p50_ms: u64,
    pub p95_ms: u64,
    /// Seconds Spark took over these cases (the user's waiting time).
    pub spark_s: f64,
    pub correct_per_s: f64,
}

/// The ghost-text row of one language.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GhostRow {
    pub lang: Lang,
    pub split: Split,
    pub spans: usize,
    pub keystrokes: usize,
    pub shown: usize,
    pub correct_first_line: usize,
    pub shown_wrong: usize,
    pub breaks_parse: usize,
    pub crash_or_timeout: usize,
    /// Keystrokes the server answered with an error.
    pub errors: usize,
    pub chars: usize,
    pub supplied_chars: usize,
    /// Spans with a right first line at some keystroke.
    pub spans_right: usize,
    /// Counted as if each span ended at its first right answer (Tab): keystrokes, right, shown wrong.
    pub until_tab: (usize, usize, usize),
    pub p50_ms: u64,
    pub p95_ms: u64,
    pub spark_s: f64,
    pub correct_per_s: f64,
    /// The per-pause replay: pauses, those with a suggestion visible within the window, those right, and the
    /// median and 95th percentile time to the first visible suggestion.
    pub pauses: usize,
    pub pauses_shown: usize,
    pub pauses_right: usize,
    pub pause_p50_ms: u64,
    pub pause_p95_ms: u64,
}

/// The next-edit row of one language (judged against the real next version: docs/eval.md).
#[derive(Debug, Clone, serde::Serialize)]
pub struct NextEditRow {
    pub lang: Lang,
    pub split: Split,
    pub cases: usize,
    pub follow_up_hunks: usize,
    pub hunks_predicted: usize,
    pub predictions: usize,
    pub correct: usize,
    /// Of `correct`, those equal only once blanks are ignored.
    pub correct_normalised: usize,
    /// Of `correct`, those doing part of an atomic edit.
    pub correct_partial: usize,
    pub wrong: usize,
    /// Of `wrong`, those at a follow-up's place (the right place, not the right text).
    pub wrong_at_follow_up: usize,
    /// Of those, the ones doing in one edit what several atomic edits of the follow-up do together.
    pub wrong_joining_atomic_edits: usize,
    /// Cases answered with an error (not a crash or time-out).
    pub errors: usize,
    pub crash_or_timeout: usize,
    pub harness_errors: usize,
    pub p50_ms: u64,
    pub p95_ms: u64,
    pub p50_ms_from_change: u64,
    pub p95_ms_from_change: u64,
}

pub fn next_edit_rows(run: &Run) -> Vec<NextEditRow> {
    let mut rows = Vec::new();
    for (lang, split) in langs_and_splits() {
        let all: Vec<_> = run.next_edits.iter().filter(|r| r.lang == Some(lang) && r.split == split).collect();
        if all.is_empty() {
            continue;
        }
        let results: Vec<_> = all.iter().filter(|r| r.harness_error.is_none()).collect();
        let answered: Vec<_> = results.iter().filter(|r| !r.crash_or_timeout).collect();
        let mut ms: Vec<u64> = answered.iter().map(|r| r.ms).collect();
        let mut ms_from_change: Vec<u64> = answered.iter().map(|r| r.ms_from_change).collect();
        let sum = |f: fn(&crate::eval::run::NextEditResult) -> usize| results.iter().map(|r| f(r)).sum::<usize>();
        rows.push(NextEditRow {
            lang,
            split,
            cases: results.len(),
            follow_up_hunks: sum(|r| r.follow_ups),
            hunks_predicted: sum(|r| r.hunks_predicted),
            predictions: sum(|r| r.predictions),
            correct: sum(|r| r.exact + r.normalised + r.partial),
            correct_normalised: sum(|r| r.normalised),
            correct_partial: sum(|r| r.partial),
            wrong: sum(|r| r.wrong),
            wrong_at_follow_up: sum(|r| r.wrong_at_follow_up),
            wrong_joining_atomic_edits: sum(|r| r.wrong_joining_atomic_edits),
            errors: results.iter().filter(|r| r.error.is_some() && !r.crash_or_timeout).count(),
            crash_or_timeout: results.iter().filter(|r| r.crash_or_timeout).count(),
            harness_errors: all.len() - results.len(),
            p50_ms: percentile(&mut ms, 0.5),
            p95_ms: percentile(&mut ms, 0.95),
            p50_ms_from_change: percentile(&mut ms_from_change, 0.5),
            p95_ms_from_change: percentile(&mut ms_from_change, 0.95),
        });
    }
    rows
}

/// Rust before TypeScript, dev before test within each: the rows of one language side by side.
fn langs_and_splits() -> impl Iterator<Item = (Lang, Split)> {
    [Lang::Rust, Lang::Ts].into_iter().flat_map(|lang| Split::BOTH.into_iter().map(move |split| (lang, split)))
}

/// One row per task, language and split. A case the harness could not finish is in no column and no
/// denominator (its count is given beside the table).
pub fn task_rows(run: &Run) -> Vec<TaskRow> {
    let mut rows = Vec::new();
    for task in TASKS.iter().filter(|task| **task != "ghost" && **task != "next-edit") {
        for (lang, split) in langs_and_splits() {
            let all: Vec<_> =
                run.results.iter().filter(|r| r.task == *task && r.lang == lang && r.split == split).collect();
            if all.is_empty() {
                continue;
            }
            let results: Vec<_> = all.iter().filter(|r| !r.harness_error).collect();
            let mut ms: Vec<u64> = results.iter().map(|r| r.ms).collect();
            let spark_s = ms.iter().sum::<u64>() as f64 / 1000.0;
            let correct = results.iter().filter(|r| r.correct).count();
            rows.push(TaskRow {
                task: (*task).to_owned(),
                lang,
                split,
                cases: results.len(),
                offered: results.iter().filter(|r| r.offered).count(),
                verified: results.iter().filter(|r| r.verified).count(),
                correct,
                offered_but_wrong: results.iter().filter(|r| r.offered && !r.correct).count(),
                harness_errors: all.len() - results.len(),
                crash_or_timeout: results.iter().filter(|r| r.crash_or_timeout).count(),
                p50_ms: percentile(&mut ms, 0.5),
                p95_ms: percentile(&mut ms, 0.95),
                spark_s,
                correct_per_s: if spark_s > 0.0 { correct as f64 / spark_s } else { 0.0 },
            });
        }
    }
    rows
}

pub fn ghost_rows(run: &Run) -> Vec<GhostRow> {
    let mut rows = Vec::new();
    for (lang, split) in langs_and_splits() {
        let keys: Vec<_> = run.keystrokes.iter().filter(|k| k.lang == lang && k.split == split).collect();
        let spans: Vec<_> = run.spans.iter().filter(|s| s.lang == lang && s.split == split).collect();
        let pauses: Vec<_> = run.pauses.iter().filter(|p| p.lang == lang && p.split == split).collect();
        let mut pause_ms: Vec<u64> = pauses.iter().filter_map(|p| p.ms).collect();
        if keys.is_empty() {
            continue;
        }
        let mut ms: Vec<u64> = keys.iter().map(|k| k.ms).collect();
        let spark_s = ms.iter().sum::<u64>() as f64 / 1000.0;
        let correct = keys.iter().filter(|k| k.correct).count();
        rows.push(GhostRow {
            lang,
            split,
            spans: spans.len(),
            keystrokes: keys.len(),
            shown: keys.iter().filter(|k| !k.shown.is_empty()).count(),
            correct_first_line: correct,
            shown_wrong: keys.iter().filter(|k| !k.shown.is_empty() && !k.correct).count(),
            breaks_parse: keys.iter().filter(|k| k.breaks_parse).count(),
            crash_or_timeout: keys.iter().filter(|k| k.crash_or_timeout).count(),
            errors: keys.iter().filter(|k| k.error).count(),
            chars: spans.iter().map(|s| s.chars).sum(),
            supplied_chars: spans.iter().map(|s| s.supplied).sum(),
            spans_right: spans.iter().filter(|s| keys.iter().any(|k| k.case == s.case && k.correct)).count(),
            until_tab: {
                let before: Vec<_> = keys.iter().filter(|k| !k.after_tab).collect();
                (
                    before.len(),
                    before.iter().filter(|k| k.correct).count(),
                    before.iter().filter(|k| !k.shown.is_empty() && !k.correct).count(),
                )
            },
            p50_ms: percentile(&mut ms, 0.5),
            p95_ms: percentile(&mut ms, 0.95),
            spark_s,
            correct_per_s: if spark_s > 0.0 { correct as f64 / spark_s } else { 0.0 },
            pauses: pauses.len(),
            pauses_shown: pauses.iter().filter(|p| !p.shown.is_empty()).count(),
            pauses_right: pauses.iter().filter(|p| p.correct).count(),
            pause_p50_ms: percentile(&mut pause_ms, 0.5),
            pause_p95_ms: percentile(&mut pause_ms, 0.95),
        });
    }
    rows
}

/// The fix cases per language and class (syntactic, semantic: the class is in the case's id), with where each
/// right and each wrong edit came from (the server's `source`: a model tier, the compiler's suggestion, the
/// grammar's repair, a similar name).
fn fix_by_class(run: &Run) -> String {
    use super::check::FixVerdict;
    let mut out = String::new();
    for (lang, split) in langs_and_splits() {
        for class in ["syntactic", "semantic"] {
            let results: Vec<_> = run
                .results
                .iter()
                .filter(|r| {
                    r.task == "fix"
                        && r.lang == lang
                        && r.split == split
                        && !r.harness_error
                        && r.id.contains(&format!("-{class}-"))
                })
                .collect();
            if results.is_empty() {
                continue;
            }
            let by_source = |right: bool| {
                let mut counts: Vec<(String, usize)> = Vec::new();
                for result in results.iter().filter(|r| r.offered && r.correct == right) {
                    let source = if result.source.is_empty() { "?".to_owned() } else { result.source.clone() };
                    match counts.iter_mut().find(|(seen, _)| *seen == source) {
                        Some((_, count)) => *count += 1,
                        None => counts.push((source, 1)),
                    }
                }
                counts.sort();
                counts.iter().map(|(source, count)| format!("{source} {count}")).collect::<Vec<_>>().join(", ")
            };
            let verdicts =
                |f: fn(&FixVerdict) -> bool| results.iter().filter(|r| r.fix_verdict.as_ref().is_some_and(f)).count();
            let correct = results.iter().filter(|r| r.correct).count();
            let exact = verdicts(|v| matches!(v, FixVerdict::ExactRestore));
            let unproven = verdicts(|v| matches!(v, FixVerdict::Unproven(_)));
            let wrong = results.iter().filter(|r| r.offered && !r.correct).count();
            if out.is_empty() {
                out.push_str(
                    "\n| fix | split | class | cases | correct (same behaviour) | of which exact restore | correct by source | **offered but wrong** | of which compiles, behaviour unproven | wrong by source |\n\
                     |---|---|---|---|---|---|---|---|---|---|\n",
                );
            }
            out.push_str(&format!(
                "| {} | {} | {class} | {} | {} | {exact} | {} | **{wrong}** | {unproven} | {} |\n",
                lang.name(),
                split.name(),
                results.len(),
                pct(correct, results.len()),
                by_source(true),
                by_source(false)
            ));
        }
    }
    out
}

pub fn markdown(run: &Run) -> String {
    let mut splits: Vec<&str> = Split::BOTH
        .into_iter()
        .filter(|split| {
            run.results.iter().any(|r| r.split == *split)
                || run.keystrokes.iter().any(|k| k.split == *split)
                || run.next_edits.iter().any(|r| r.split == *split)
        })
        .map(Split::name)
        .collect();
    if splits.is_empty() {
        splits.push("none");
    }
    let mut out = format!(
        "### {} (model: {}; split: {}; {}; {}; {:.0} s wall)\n\n",
        run.label,
        run.model,
        splits.join(" and "),
        if run.machine.is_empty() { "machine not recorded" } else { &run.machine },
        if run.date.is_empty() { "date not recorded" } else { &run.date },
        run.wall_s
    );
    let tasks = task_rows(run);
    if !tasks.is_empty() {
        out.push_str(
            "| task | lang | split | cases | offered | verified (Spark) | correct (independent) | **offered but wrong** | crash/timeout | p50 ms | p95 ms | correct/s |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for row in &tasks {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | **{}** | {} | {} | {} | {:.3} |\n",
                row.task,
                row.lang.name(),
                row.split.name(),
                row.cases,
                pct(row.offered, row.cases),
                pct(row.verified, row.cases),
                pct(row.correct, row.cases),
                row.offered_but_wrong,
                row.crash_or_timeout,
                row.p50_ms,
                row.p95_ms,
                row.correct_per_s
            ));
        }
        out.push_str(&fix_by_class(run));
        let harness_errors: usize = tasks.iter().map(|row| row.harness_errors).sum();
        if harness_errors > 0 {
            out.push_str(&format!(
                "\n{harness_errors} case(s) hit a harness error (see report.json); they count in no column.\n"
            ));
        }
        out.push('\n');
    }
    let ghost = ghost_rows(run);
    if !ghost.is_empty() {
        out.push_str(
            "| ghost text (typed through) | split | spans | keystrokes | shown | correct first line | **shown wrong** | breaks the parse | server error | crash/timeout | spans with a right line | chars by Tab | until Tab: keystrokes / right / wrong | p50 ms | p95 ms | correct/s |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for row in &ghost {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | **{}** | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} | {:.3} |\n",
                row.lang.name(),
                row.split.name(),
                row.spans,
                row.keystrokes,
                pct(row.shown, row.keystrokes),
                pct(row.correct_first_line, row.keystrokes),
                pct(row.shown_wrong, row.keystrokes),
                pct(row.breaks_parse, row.shown),
                row.errors,
                row.crash_or_timeout,
                pct(row.spans_right, row.spans),
                pct(row.supplied_chars, row.chars),
                row.until_tab.0,
                pct(row.until_tab.1, row.until_tab.0),
                pct(row.until_tab.2, row.until_tab.0),
                row.p50_ms,
                row.p95_ms,
                row.correct_per_s
            ));
        }
        if ghost.iter().any(|row| row.pauses > 0) {
            out.push_str(&format!(
                "\n| ghost text per pause (bursts of 2–6 keys, {} ms apart; a pause lasts {} s) | split | pauses | visible in the pause | **right** | shown wrong | p50 / p95 ms to visible |\n\
                 |---|---|---|---|---|---|---|\n",
                super::run::KEY_INTERVAL.as_millis(),
                super::run::PAUSE_WINDOW.as_secs()
            ));
            for row in ghost.iter().filter(|row| row.pauses > 0) {
                out.push_str(&format!(
                    "| {} | {} | {} | {} | **{}** | {} | {} / {} |\n",
                    row.lang.name(),
                    row.split.name(),
                    row.pauses,
                    pct(row.pauses_shown, row.pauses),
                    pct(row.pauses_right, row.pauses),
                    pct(row.pauses_shown - row.pauses_right, row.pauses),
                    row.pause_p50_ms,
                    row.pause_p95_ms
                ));
            }
        }
        out.push('\n');
    }
    let next = next_edit_rows(run);
    if !next.is_empty() {
        out.push_str(
            "| next edit | split | cases | follow-up hunks | hunks predicted (≥ 30%) | predictions | correct (of which blanks aside, part of a change) | **wrong** (≤ 10%) | wrong at a follow-up (of which several atomic edits in one) | errors | crash/timeout | p50 ms | p95 ms | p50/p95 ms from didChange |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for row in &next {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} ({}, {}) | **{}** | {} ({}) | {} | {} | {} | {} | {}/{} |\n",
                row.lang.name(),
                row.split.name(),
                row.cases,
                row.follow_up_hunks,
                pct(row.hunks_predicted, row.follow_up_hunks),
                row.predictions,
                row.correct,
                row.correct_normalised,
                row.correct_partial,
                pct(row.wrong, row.predictions),
                row.wrong_at_follow_up,
                row.wrong_joining_atomic_edits,
                row.errors,
                row.crash_or_timeout,
                row.p50_ms,
                row.p95_ms,
                row.p50_ms_from_change,
                row.p95_ms_from_change
            ));
        }
        let harness_errors: usize = next.iter().map(|row| row.harness_errors).sum();
        if harness_errors > 0 {
            out.push_str(&format!(
                "\n{harness_errors} next-edit case(s) hit a harness error (see report.json); they count in no column.\n"
            ));
        }
        out.push('\n');
    }
    out
}

/// The short table the README quotes (`spark-eval --tables FILE --summary`): per task, language and split, how
/// many were right and how many offered but wrong, with latency. Made from the same rows as [`markdown`].
pub fn summary(run: &Run) -> String {
    let mut out = format!(
        "Model: {}; {}; {}.\n\n| task | lang | split | cases | right | **offered but wrong** | p50 / p95 ms |\n|---|---|---|---|---|---|---|\n",
        run.model,
        if run.machine.is_empty() { "machine not recorded" } else { &run.machine },
        if run.date.is_empty() { "date not recorded" } else { &run.date },
    );
    for row in ghost_rows(run) {
        out.push_str(&format!(
            "| ghost text, each keystroke | {} | {} | {} keystrokes | {} | **{}** | {} / {} |\n",
            row.lang.name(),
            row.split.name(),
            row.keystrokes,
            pct(row.correct_first_line, row.keystrokes),
            pct(row.shown_wrong, row.keystrokes),
            row.p50_ms,
            row.p95_ms
        ));
        if row.pauses > 0 {
            out.push_str(&format!(
                "| ghost text, each pause (within 2 s) | {} | {} | {} pauses | {} | **{}** | {} |\n",
                row.lang.name(),
                row.split.name(),
                row.pauses,
                pct(row.pauses_right, row.pauses),
                pct(row.pauses_shown - row.pauses_right, row.pauses),
                if row.pauses_shown == 0 {
                    "nothing visible".to_owned()
                } else {
                    format!("{} / {} to visible", row.pause_p50_ms, row.pause_p95_ms)
                }
            ));
        }
    }
    for row in task_rows(run) {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | **{}** | {} / {} |\n",
            row.task,
            row.lang.name(),
            row.split.name(),
            row.cases,
            pct(row.correct, row.cases),
            row.offered_but_wrong,
            row.p50_ms,
            row.p95_ms
        ));
    }
    for row in next_edit_rows(run) {
        out.push_str(&format!(
            "| next edit (of predictions) | {} | {} | {} cases | {} | **{}** | {} / {} |\n",
            row.lang.name(),
            row.split.name(),
            row.cases,
            pct(row.correct, row.predictions),
            row.wrong,
            row.p50_ms,
            row.p95_ms
        ));
    }
    out
}

/// The runs of a `report.json` (or `report-quick.json`, ...) as they were: the tables are made again from them
/// (`spark-eval --tables FILE`), never typed by hand.
pub fn from_json(value: &serde_json::Value) -> Result<Vec<Run>> {
    let runs = value.as_array().context("a report is a JSON array of runs")?;
    runs.iter()
        .map(|run| {
            let field = |key: &str| run.get(key).cloned().unwrap_or(serde_json::Value::Null);
            let list = |key: &str| match run.get(key) {
                Some(value) => value.clone(),
                None => json!([]),
            };
            Ok(Run {
                label: serde_json::from_value(field("label")).context("label")?,
                model: serde_json::from_value(field("model")).context("model")?,
                machine: serde_json::from_value(field("machine")).unwrap_or_default(),
                date: serde_json::from_value(field("date")).unwrap_or_default(),
                wall_s: serde_json::from_value(field("wall_s")).unwrap_or_default(),
                results: serde_json::from_value(list("cases")).context("cases")?,
                keystrokes: serde_json::from_value(list("keystrokes")).context("keystrokes")?,
                spans: serde_json::from_value(list("spans")).context("spans")?,
                pauses: serde_json::from_value(list("pauses")).context("pauses")?,
                next_edits: serde_json::from_value(list("next_edits")).context("next_edits")?,
            })
        })
        .collect()
}

pub fn to_json(run: &Run) -> serde_json::Value {
    json!({"label": run.label, "model": run.model, "machine": run.machine, "date": run.date, "wall_s": run.wall_s, "tasks": task_rows(run),
           "ghost": ghost_rows(run), "next_edit": next_edit_rows(run), "cases": run.results,
           "keystrokes": run.keystrokes, "spans": run.spans, "pauses": run.pauses, "next_edits": run.next_edits})
}

/// Bars per task and language (and per model): correct, offered but wrong, crash/timeout, as % of cases
/// (keystrokes for ghost text, predictions for next edits, whose crash/timeout bar is % of cases).
pub fn plot(runs: &[Run], path: &Path) -> Result<()> {
    use plotters::prelude::*;
    let font = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ]
    .iter()
    .find_map(|candidate| std::fs::read(candidate).ok())
    .context("no DejaVu or Liberation font for the plot's labels (apt-get install fonts-dejavu-core)")?;
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(font.into_boxed_slice()));
    // (group label, correct %, wrong %, crash %)
    let mut bars: Vec<(String, f64, f64, f64)> = Vec::new();
    for run in runs {
        let short = run.label.chars().take(14).collect::<String>();
        for row in ghost_rows(run) {
            let n = row.keystrokes.max(1) as f64;
            bars.push((
                format!("{short} ghost {}", row.lang.name()),
                100.0 * row.correct_first_line as f64 / n,
                100.0 * row.shown_wrong as f64 / n,
                100.0 * row.crash_or_timeout as f64 / n,
            ));
        }
        for row in next_edit_rows(run) {
            let n = row.predictions.max(1) as f64;
            bars.push((
                format!("{short} next-edit {}", row.lang.name()),
                100.0 * row.correct as f64 / n,
                100.0 * row.wrong as f64 / n,
                100.0 * row.crash_or_timeout as f64 / row.cases.max(1) as f64,
            ));
        }
        for row in task_rows(run) {
            let n = row.cases.max(1) as f64;
            bars.push((
                format!("{short} {} {}", row.task, row.lang.name()),
                100.0 * row.correct as f64 / n,
                100.0 * row.offered_but_wrong as f64 / n,
                100.0 * row.crash_or_timeout as f64 / n,
            ));
        }
    }
    let width = (120 + bars.len() * 60).max(900) as u32;
    let root = BitMapBackend::new(path, (width, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "spark-eval: correct / offered but wrong / crash-timeout (% of cases, keystrokes or next edits)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(10)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..bars.len().max(1) as f64, 0f64..100f64)?;
    chart.configure_mesh().disable_x_mesh().disable_x_axis().y_desc("%").draw()?;
    // Each group's name, written upwards along its left edge (plotters' tick labels skip groups).
    let style = ("sans-serif", 13).into_font().transform(FontTransform::Rotate270).color(&BLACK);
    chart.draw_series(
        bars.iter().enumerate().map(|(idx, bar)| Text::new(bar.0.clone(), (idx as f64 + 0.02, 2.0), style.clone())),
    )?;
    let series = [
        (1usize, GREEN.mix(0.8), "correct"),
        (2, RED.mix(0.8), "offered but wrong"),
        (3, BLACK.mix(0.6), "crash/timeout"),
    ];
    for (which, color, name) in series {
        let offset = (which - 1) as f64 * 0.28 + 0.08;
        chart
            .draw_series(bars.iter().enumerate().map(|(idx, bar)| {
                let value = match which {
                    1 => bar.1,
                    2 => bar.2,
                    _ => bar.3,
                };
                Rectangle::new([(idx as f64 + offset, 0.0), (idx as f64 + offset + 0.26, value)], color.filled())
            }))?
            .label(name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
