//! The task evaluation: every case of the corpus under `tests/eval/{fix,tests,regex}` (plain files with a `$0`
//! cursor) through `spark-lsp fix|tests|regex --json --write` on a scratch copy, and each offered edit checked
//! again here, independently of the server: the written files parse cleanly, tests call the function and
//! assert, a regex compiles and matches its examples.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::{scratch_dir, server_binary, workspace_root};

#[derive(Debug, Clone)]
pub struct CaseResult {
    pub task: &'static str,
    pub case: String,
    pub offered: bool,
    /// `Some(true)` when an offered edit passed the independent checks; `None` when nothing was offered.
    pub verified: Option<bool>,
    pub ms: u64,
    pub note: String,
}

/// Runs every case; `model` overrides the default model.
pub fn run_corpus(model: Option<&Path>) -> Vec<CaseResult> {
    let mut results = Vec::new();
    for (task, command) in [("fix", "fix"), ("tests", "tests"), ("regex", "regex")] {
        let dir = workspace_root().join("tests/eval").join(task);
        let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|entry| entry.unwrap().path()).collect();
        cases.sort();
        for case in cases {
            results.push(run_case(task, command, &case, model));
        }
    }
    results
}

fn run_case(task: &'static str, command: &str, case: &Path, model: Option<&Path>) -> CaseResult {
    let name = case.file_name().unwrap().to_string_lossy().into_owned();
    let source = std::fs::read_to_string(case).unwrap();
    let cursor = source.find("$0").expect("each eval case has a $0 cursor");
    let text = source.replace("$0", "");
    let line = text[..cursor].matches('\n').count() + 1;
    let column = text[..cursor].rsplit('\n').next().unwrap().chars().count() + 1;
    let dir = scratch_dir(&format!("eval-{task}-{}", name.replace('.', "-")));
    let file = dir.join(&name);
    std::fs::write(&file, &text).unwrap();
    let mut process = Command::new(server_binary());
    process.arg(command).arg(&file).args(["--at", &format!("{line}:{column}"), "--json", "--write"]);
    process.args(["--samples", "3", "--budget-ms", "15000"]);
    if let Some(model) = model {
        process.arg("--model").arg(model);
    }
    let _lock = crate::model_lock();
    let output = process.output().unwrap();
    let json: Value = match serde_json::from_slice(&output.stdout) {
        Ok(json) => json,
        Err(_) => {
            let note = format!("no JSON: {}", String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or(""));
            return CaseResult { task, case: name, offered: false, verified: None, ms: 0, note };
        }
    };
    let offered = json["verified"] == true;
    let ms = json["ms"].as_u64().unwrap_or(0);
    let verified = offered.then(|| independent_check(task, &file, &text));
    let note = match (&verified, json["rejections"].as_array()) {
        (Some(Err(reason)), _) => reason.clone(),
        (None, Some(rejections)) => rejections.last().and_then(Value::as_str).unwrap_or("").to_owned(),
        _ => String::new(),
    };
    CaseResult { task, case: name, offered, verified: verified.map(|result| result.is_ok()), ms, note }
}

fn independent_check(task: &str, file: &Path, original: &str) -> Result<(), String> {
    let written = std::fs::read_to_string(file).map_err(|error| error.to_string())?;
    let lang = spark_grammars::Lang::from_path(file).ok_or("no grammar")?;
    let parses_cleanly = |text: &str| lang.parser().parse(text, None).is_some_and(|tree| !tree.root_node().has_error());
    match task {
        "fix" => {
            if written == original {
                return Err("the file did not change".into());
            }
            parses_cleanly(&written).then_some(()).ok_or_else(|| "the fixed file does not parse cleanly".into())
        }
        "tests" => {
            let name = function_name(original).ok_or("no function in the case")?;
            let test_text = if lang == spark_grammars::Lang::Rust {
                written
            } else {
                let stem = file.file_stem().unwrap().to_string_lossy();
                let extension = file.extension().unwrap().to_string_lossy();
                std::fs::read_to_string(file.with_file_name(format!("{stem}.test.{extension}")))
                    .map_err(|_| "no sibling test file was written".to_owned())?
            };
            if !parses_cleanly(&test_text) {
                return Err("the tests do not parse cleanly".into());
            }
            let calls = test_text.contains(&format!("{name}("));
            let asserts = test_text.contains("assert") || test_text.contains("expect(");
            (calls && asserts).then_some(()).ok_or_else(|| "no assertion calling the function".into())
        }
        "regex" => {
            if !parses_cleanly(&written) {
                return Err("the file does not parse cleanly".into());
            }
            let comment = original.lines().find(|line| line.contains("regex:")).ok_or("no regex comment")?;
            let spec = spark_lsp::tasks::parse_regex_spec(comment).ok_or("unreadable spec")?;
            let inserted = written
                .lines()
                .find(|line| !original.contains(line.trim()) && !line.trim().is_empty())
                .ok_or("nothing inserted")?;
            check_inserted_regex(lang, inserted, &spec.positives, &spec.negatives)
        }
        _ => Err(format!("unknown task {task}")),
    }
}

fn check_inserted_regex(
    lang: spark_grammars::Lang,
    line: &str,
    positives: &[String],
    negatives: &[String],
) -> Result<(), String> {
    let matcher: Box<dyn Fn(&str) -> bool> = if lang == spark_grammars::Lang::Rust {
        let start = line.find("r\"").or_else(|| line.find("r#\"")).ok_or("no raw string")?;
        let body = &line[start + 1..];
        let hashes = body.chars().take_while(|ch| *ch == '#').count();
        let body = &body[hashes + 1..];
        let end = body.rfind(&format!("\"{}", "#".repeat(hashes))).ok_or("unterminated string")?;
        let pattern = format!("^(?:{})$", &body[..end]);
        let compiled = regex::Regex::new(&pattern).map_err(|error| error.to_string())?;
        Box::new(move |text| compiled.is_match(text))
    } else {
        let start = line.find('/').ok_or("no regex literal")?;
        let end = line.rfind('/').ok_or("no regex literal")?;
        let pattern = line[start + 1..end].replace("\\/", "/");
        let compiled = regress::Regex::new(&format!("^(?:{pattern})$")).map_err(|error| error.to_string())?;
        Box::new(move |text| compiled.find(text).is_some())
    };
    if let Some(missed) = positives.iter().find(|example| !matcher(example)) {
        return Err(format!("misses {missed:?}"));
    }
    if let Some(matched) = negatives.iter().find(|example| matcher(example)) {
        return Err(format!("matches {matched:?}"));
    }
    Ok(())
}

fn function_name(source: &str) -> Option<String> {
    for keyword in ["fn ", "function "] {
        if let Some(at) = source.find(keyword) {
            let rest = &source[at + keyword.len()..];
            let name: String = rest.chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect();
            if !name.is_empty() {
                return Some(name);
            }
        }
    }
    None
}

/// The table: per task, offered and verified rates and latencies.
pub fn table(label: &str, results: &[CaseResult]) -> String {
    let mut out = format!("{label}\n\n| task | cases | offered | offered and verified | median ms | p95 ms |\n|---|---|---|---|---|---|\n");
    for task in ["fix", "tests", "regex"] {
        let rows: Vec<&CaseResult> = results.iter().filter(|result| result.task == task).collect();
        let mut ms: Vec<u64> = rows.iter().map(|result| result.ms).collect();
        ms.sort_unstable();
        let pct = |p: f64| ms.get(((ms.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or(0);
        let offered = rows.iter().filter(|result| result.offered).count();
        let verified = rows.iter().filter(|result| result.verified == Some(true)).count();
        out.push_str(&format!(
            "| {task} | {} | {offered} | {verified} of {offered} | {} | {} |\n",
            rows.len(),
            pct(0.5),
            pct(0.95)
        ));
    }
    out.push_str("\n| case | offered | note |\n|---|---|---|\n");
    for result in results {
        out.push_str(&format!(
            "| {}/{} | {} | {} |\n",
            result.task,
            result.case,
            if result.offered { "yes" } else { "no" },
            result.note.replace('|', "/")
        ));
    }
    out
}
