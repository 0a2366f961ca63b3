//! `make eval`: the execution-checked evaluation (issue 11). Fetches the pinned corpus, draws (or loads) the
//! cases, drives `spark-lsp` over stdio with each model and scores every answer independently; writes
//! `target/eval/report.md`, `report.json` and `report.png`.
//!
//! Usage: spark-eval [--quick] [--split dev|test] [--tasks ghost,fix,tests,regex,next-edit] [--model PATH]...
//!        [--all-models] [--only ID,...] [--settings JSON]... [--min-confidence X]...
//!        spark-eval --fetch-only
//!        spark-eval --tables target/eval/report.json [--summary]
//! (`--split dev` is what tuning and sweeps read; `--split test` is held out: what the README reports. Without it
//! both run, side by side in every table. `--tables` prints the tables of a report's JSON again.)
//! (`--fetch-only` fetches the pinned corpus into target/eval/corpus/ and stops: the real-editor pause tests type
//! into its files. `--only` reruns the named cases of target/eval/cases.json, e.g. after a harness fix. Each `--settings` runs
//! every model again with those Spark settings, e.g. `{"inline":{"deadlineMs":500}}`; `--min-confidence X` is
//! `--settings {"inline":{"minConfidence":X}}`: the sweeps defaults are chosen from.)

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use spark_tests::eval::{self, cases, corpus, history, report, run};

fn model_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SPARK_MODEL_DIR").filter(|value| !value.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    spark_engine::default_model_path()?.parent().map(PathBuf::from)
}

fn main() -> Result<()> {
    let mut quick = false;
    let mut tasks: Vec<String> = run::TASKS.iter().map(|task| (*task).to_owned()).collect();
    let mut models: Vec<Option<PathBuf>> = Vec::new();
    let mut only: Vec<String> = Vec::new();
    let mut variants: Vec<serde_json::Value> = Vec::new();
    let mut llama_vim = false;
    let mut split: Option<corpus::Split> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--split" => split = Some(corpus::Split::parse(&args.next().context("--split needs dev or test")?)?),
            "--tables" => {
                // The tables again from a report's JSON: what the README and docs quote is made by this, not typed.
                let path = args.next().context("--tables needs a report JSON, e.g. target/eval/report.json")?;
                let short = args.next().as_deref() == Some("--summary");
                let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
                let value: serde_json::Value =
                    serde_json::from_str(&text).with_context(|| format!("parsing {path}"))?;
                for run in report::from_json(&value)? {
                    println!("{}", if short { report::summary(&run) } else { report::markdown(&run) });
                }
                return Ok(());
            }
            "--llama-vim" => llama_vim = true,
            "--tasks" => {
                let list = args.next().context("--tasks needs a list, e.g. ghost,fix")?;
                tasks = list.split(',').map(|task| task.trim().to_owned()).collect();
                if let Some(unknown) = tasks.iter().find(|task| !run::TASKS.contains(&task.as_str())) {
                    bail!("unknown task {unknown:?} (known: {})", run::TASKS.join(","));
                }
            }
            "--only" => only.extend(args.next().context("--only needs case ids")?.split(',').map(str::to_owned)),
            "--min-confidence" => {
                let value = args.next().context("--min-confidence needs a probability, e.g. 0.3")?;
                let value: f64 = value.parse().with_context(|| format!("--min-confidence {value:?}"))?;
                if !(0.0..=1.0).contains(&value) {
                    bail!("--min-confidence must be between 0 and 1");
                }
                variants.push(serde_json::json!({"inline": {"minConfidence": value}}));
            }
            "--settings" => {
                let value = args.next().context("--settings needs a JSON object")?;
                let value: serde_json::Value =
                    serde_json::from_str(&value).with_context(|| format!("--settings {value:?}"))?;
                if !value.is_object() {
                    bail!("--settings needs a JSON object, e.g. '{{\"inline\":{{\"deadlineMs\":500}}}}'");
                }
                variants.push(value);
            }
            "--model" => models.push(Some(PathBuf::from(args.next().context("--model needs a path")?))),
            "--all-models" => {
                let dir = model_dir().context("no model directory (SPARK_MODEL_DIR, XDG_DATA_HOME or HOME)")?;
                let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .with_context(|| format!("reading {}", dir.display()))?
                    .flatten()
                    .map(|entry| entry.path())
                    .filter(|path| path.extension().is_some_and(|ext| ext == "gguf"))
                    .collect();
                found.sort();
                models.extend(found.into_iter().map(Some));
            }
            "--fetch-only" => {
                let packages = corpus::manifest()?;
                corpus::fetch(&packages)?;
                for package in &packages {
                    println!("{}", package.dir().display());
                }
                return Ok(());
            }
            "-h" | "--help" => {
                println!(
                    "spark-eval [--quick] [--split dev|test] [--tasks ghost,fix,tests,regex,next-edit] [--model PATH]... \
                     [--all-models] [--only ID,...] [--settings JSON]... [--min-confidence X]... [--llama-vim] \
                     | --fetch-only | --tables REPORT.json [--summary]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    if models.is_empty() {
        models.push(None);
    }
    let started = std::time::Instant::now();
    let mut log = |line: &str| eprintln!("[{:>6.1}s] {line}", started.elapsed().as_secs_f64());
    // The corpus (and its compiler-checked cases) only when a task needs it: `--tasks next-edit` alone does not,
    // nor does `--tasks regex` (its specs are `tests/eval/regex.toml`, judged by the regex crate and node).
    let (packages, cases) = if tasks.iter().all(|task| task == "next-edit" || task == "regex") {
        let cases = cases::Cases { regex: cases::regex_cases()?, ..Default::default() };
        (Vec::new(), cases)
    } else if tasks.iter().any(|task| task != "next-edit") {
        let packages = corpus::prepare()?;
        // The servers run with the eval's TypeScript compiler on PATH, as a real package has its own in
        // node_modules/.bin (the corpus packages are unpacked without their dependencies): Spark's execution checks
        // (`verify.compile`, on by default) find it there.
        corpus::put_tools_on_path();
        let cases = cases::load_or_generate(&packages, &mut log)?;
        log(&format!(
            "cases: {} ghost spans ({} keystroke positions), {} fix, {} tests, {} regex",
            cases.ghost.len(),
            cases.ghost.iter().map(|case| case.span.len()).sum::<usize>(),
            cases.fix.len(),
            cases.tests.len(),
            cases.regex.len()
        ));
        (packages, cases)
    } else {
        (Vec::new(), cases::Cases::default())
    };
    let (histories, next_edit) = if tasks.iter().any(|task| task == "next-edit") {
        let histories = history::prepare()?;
        let next_edit = history::cases(&histories)?;
        let written = history::write_cases(&next_edit)?;
        let per_package: Vec<String> = histories
            .iter()
            .map(|history| {
                let count = next_edit.iter().filter(|case| case.package == history.name).count();
                format!("{} {count}", history.name)
            })
            .collect();
        log(&format!(
            "next-edit cases ({}): {} with {} follow-up hunks ({}), in {}",
            history::GENERATOR,
            next_edit.len(),
            next_edit.iter().map(|case| case.follow_ups.len()).sum::<usize>(),
            per_package.join(", "),
            written.display()
        ));
        (histories, next_edit)
    } else {
        (Vec::new(), Vec::new())
    };
    let (mut cases, mut next_edit) = (cases, next_edit);
    if let Some(split) = split {
        cases.ghost.retain(|case| case.split == split);
        cases.fix.retain(|case| case.split == split);
        cases.tests.retain(|case| case.split == split);
        cases.regex.retain(|case| case.split == split);
        next_edit.retain(|case| case.split == split);
        log(&format!("--split {}: only its cases", split.name()));
    }
    let inputs = run::Inputs { cases: &cases, packages: &packages, histories: &histories, next_edit: &next_edit };
    if variants.is_empty() {
        variants.push(serde_json::json!({}));
    }
    let mut runs = Vec::new();
    for model in &models {
        for settings in &variants {
            let mut label = model
                .as_ref()
                .and_then(|path| path.file_stem())
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_else(|| "default model".into());
            if settings.as_object().is_some_and(|settings| !settings.is_empty()) {
                label.push_str(&format!(", {settings}"));
            }
            let options = run::Options {
                quick,
                tasks: tasks.clone(),
                model: model.clone(),
                label,
                settings: settings.clone(),
                only: only.clone(),
                llama_vim: false,
            };
            runs.push(run::run(&inputs, &options, &mut log)?);
        }
        if llama_vim && tasks.iter().any(|task| task == "ghost") {
            let name = model
                .as_ref()
                .and_then(|path| path.file_stem())
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_else(|| "default model".into());
            let options = run::Options {
                quick,
                tasks: vec!["ghost".into()],
                model: model.clone(),
                label: format!("llama.vim → llama-server, {name}"),
                settings: serde_json::json!({}),
                only: only.clone(),
                llama_vim: true,
            };
            // llama.vim needs a model with fill-in-the-middle tokens: without them the run is skipped, not the
            // evaluation.
            match run::run(&inputs, &options, &mut log) {
                Ok(run) => runs.push(run),
                Err(error) => log(&format!("llama.vim with {name}: skipped: {error:#}")),
            }
        }
    }
    let out = eval::eval_dir();
    // Each kind of run keeps its own files: a quick or partial run does not overwrite the full report (nor does
    // a next-edit run, which takes seconds, overwrite the others').
    let next_edit_only = tasks.iter().all(|task| task == "next-edit");
    let stem = match (quick, only.is_empty()) {
        _ if split.is_some() => match (quick, split) {
            (true, Some(corpus::Split::Dev)) => "report-dev-quick",
            (true, _) => "report-test-quick",
            (false, Some(corpus::Split::Dev)) => "report-dev",
            (false, _) => "report-test",
        },
        (_, false) => "report-only",
        (true, _) if next_edit_only => "report-next-edit-quick",
        (true, _) => "report-quick",
        _ if next_edit_only => "report-next-edit",
        _ => "report",
    };
    let mut markdown =
        format!("## spark-eval{} ({} s)\n\n", if quick { " --quick" } else { "" }, started.elapsed().as_secs());
    for run in &runs {
        markdown.push_str(&report::markdown(run));
    }
    println!("{markdown}");
    std::fs::write(out.join(format!("{stem}.md")), &markdown)?;
    let json: Vec<_> = runs.iter().map(report::to_json).collect();
    std::fs::write(out.join(format!("{stem}.json")), serde_json::to_string_pretty(&json)?)?;
    if let Err(error) = report::plot(&runs, &out.join(format!("{stem}.png"))) {
        eprintln!("no plot: {error:#}");
    }
    eprintln!("wrote {}/{stem}.{{md,json,png}}", out.display());
    Ok(())
}
