//! `mcp-bench`: tool-call latency of `spark-lsp mcp` (one resident server, the model loaded once) against the
//! cold path an agent would otherwise take, one `spark-lsp fix` process per call, on the same fix cases in one
//! run; and p50/p95 of every other tool through the same server. Fix cases come from the evaluation corpus when
//! its cases are drawn (`target/eval/cases.json`, `make eval`), else from syntax mutations of this repository's
//! own Rust files (the table says which); regex cases are `tests/eval/regex.toml`'s. Both paths run with the
//! strong tier off and the same samples and budget. Prints a markdown table; timings on a shared machine are noisy.
//!
//! Usage: mcp-bench [--cases N] (default 12 fix cases).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use spark_tests::{server_binary, workspace_root};

const CALL_LIMIT: Duration = Duration::from_secs(300);
const SAMPLES: &str = "4";
const BUDGET_MS: &str = "20000";

struct FixCase {
    /// Relative to the bench root.
    file: String,
    line: u32,
    column: u32,
    message: Option<String>,
    /// The broken line and the original (for `check`), when known.
    check: Option<(String, String)>,
}

struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: i64,
}

impl Mcp {
    fn start(root: &Path, log: &Path) -> Result<Mcp> {
        let mut child = Command::new(server_binary())
            .args(["mcp", "--strong-model", "none", "--samples", SAMPLES, "--budget-ms", BUDGET_MS, "--root"])
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .context("starting spark-lsp mcp")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut mcp = Mcp { child, stdin, lines, next_id: 0 };
        mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcp-bench", "version": "0"}}),
        )?;
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(mcp)
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        writeln!(self.stdin, "{message}")?;
        Ok(self.stdin.flush()?)
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + CALL_LIMIT;
        loop {
            let line = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .with_context(|| format!("no answer to {method}"))?;
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == id {
                return Ok(message);
            }
        }
    }

    /// A tool call: (milliseconds, structured result or the tool error's text).
    fn call(&mut self, tool: &str, arguments: Value) -> Result<(f64, std::result::Result<Value, String>)> {
        let started = Instant::now();
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let result = &answer["result"];
        if result["isError"] == true || result.is_null() {
            let text = result["content"][0]["text"].as_str().map(str::to_owned).unwrap_or_else(|| answer.to_string());
            return Ok((ms, Err(text)));
        }
        Ok((ms, Ok(result["structuredContent"].clone())))
    }
}

/// The changed lines of a unified diff, without headers: what two diffs of the same edit share.
fn edit_lines(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter(|line| {
            (line.starts_with('+') || line.starts_with('-')) && !line.starts_with("+++") && !line.starts_with("---")
        })
        .collect()
}

fn diffs(result: &Value) -> String {
    result["changes"]
        .as_array()
        .map(|changes| changes.iter().filter_map(|c| c["diff"].as_str()).collect())
        .unwrap_or_default()
}

fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Fix cases from the evaluation's drawn cases, when present.
fn corpus_cases(root: &Path, limit: usize) -> Option<Vec<FixCase>> {
    let text = std::fs::read_to_string(spark_tests::eval::eval_dir().join("cases.json")).ok()?;
    let cases: spark_tests::eval::cases::Cases = serde_json::from_str(&text).ok()?;
    let mut out = Vec::new();
    for (idx, case) in
        cases.fix.iter().filter(|case| case.lang == spark_tests::eval::corpus::Lang::Rust).take(limit).enumerate()
    {
        let file = format!("corpus-{idx:02}/{}", Path::new(&case.file).file_name()?.to_string_lossy());
        std::fs::create_dir_all(root.join(&file).parent()?).ok()?;
        std::fs::write(root.join(&file), &case.text).ok()?;
        let line_text = case.text.lines().nth(case.diag.line as usize).unwrap_or("");
        let column =
            line_text.get(..case.diag.col as usize).map(|prefix| prefix.chars().count()).unwrap_or(0) as u32 + 1;
        out.push(FixCase {
            file,
            line: case.diag.line + 1,
            column,
            message: Some(case.diag.message.clone()),
            check: None,
        });
    }
    (!out.is_empty()).then_some(out)
}

/// Syntax mutations of this repository's Rust files: a `let` statement loses its `;`.
fn repository_cases(root: &Path, limit: usize) -> Result<Vec<FixCase>> {
    let sources = [
        "examples/demo.rs",
        "tests/fixtures/inventory.rs",
        "ide/src/verify/insertion.rs",
        "ide/src/suggest.rs",
        "ide/src/ring.rs",
        "ide/src/tiers.rs",
    ];
    let mut sites = Vec::new();
    for source in sources {
        let text = std::fs::read_to_string(workspace_root().join(source)).with_context(|| source.to_owned())?;
        let lines: Vec<&str> = text.lines().collect();
        for (idx, line) in lines.iter().enumerate() {
            if line.trim_start().starts_with("let ") && line.ends_with(';') && !line.contains("//") {
                sites.push((source, text.clone(), idx));
            }
        }
    }
    // Spread the cases over the files: every k-th site.
    let step = (sites.len() / limit.max(1)).max(1);
    let mut cases = Vec::new();
    for (case_idx, (source, text, line_idx)) in sites.into_iter().step_by(step).take(limit).enumerate() {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let original = lines[line_idx].clone();
        let broken = original.trim_end_matches(';').to_owned();
        lines[line_idx] = broken.clone();
        let file = format!("repo-{case_idx:02}/{}", Path::new(source).file_name().unwrap().to_string_lossy());
        std::fs::create_dir_all(root.join(&file).parent().unwrap())?;
        std::fs::write(root.join(&file), lines.join("\n") + "\n")?;
        cases.push(FixCase {
            file,
            line: line_idx as u32 + 1,
            column: broken.chars().count() as u32 + 1,
            message: None,
            check: Some((broken, original)),
        });
    }
    Ok(cases)
}

struct Row {
    tool: String,
    path: String,
    ms: Vec<f64>,
    answered: String,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let limit: usize = args
        .iter()
        .position(|arg| arg == "--cases")
        .and_then(|idx| args.get(idx + 1))
        .map(|value| value.parse())
        .transpose()?
        .unwrap_or(12);
    let binary = server_binary();
    if !binary.exists() {
        bail!("{} is missing: cargo build --release -p spark-lsp", binary.display());
    }
    let base = workspace_root().canonicalize()?.join("target/mcp-bench");
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("ws");
    std::fs::create_dir_all(&root)?;
    let (cases, source) = match corpus_cases(&root, limit) {
        Some(cases) => (cases, "the evaluation corpus (target/eval/cases.json), Rust fix cases"),
        None => (
            repository_cases(&root, limit)?,
            "syntax mutations of this repository's Rust files (the evaluation's cases are not drawn here: `make eval` draws them)",
        ),
    };
    println!("mcp-bench: {} fix cases from {source}", cases.len());

    let mut mcp = Mcp::start(&root, &base.join("server.log"))?;
    // Not timed: the first call waits for the model to load, once for the server's life.
    let started = Instant::now();
    let (_, warm) = mcp.call("complete", json!({"file": "warm.rs", "text": "fn main() {\n    $0\n}\n"}))?;
    warm.map_err(|error| anyhow::anyhow!("the server is not usable: {error}"))?;
    println!("mcp-bench: server started, model loaded and first call answered in {} ms", started.elapsed().as_millis());

    let mut rows = Vec::new();
    let (mut mcp_ms, mut cli_ms) = (Vec::new(), Vec::new());
    let (mut mcp_verified, mut cli_verified, mut agree) = (0, 0, 0);
    // Cases the model sampled for (the grammar's missing-token repair did not answer them without the model).
    let mut sampled = Vec::new();
    for case in &cases {
        let mut arguments = json!({"file": case.file, "line": case.line, "column": case.column});
        if let Some(message) = &case.message {
            arguments["message"] = json!(message);
        }
        let (ms, mcp_result) = mcp.call("fix", arguments)?;
        mcp_ms.push(ms);
        let mcp_result = mcp_result.unwrap_or_else(|error| json!({"verified": false, "error": error}));

        let mut command = Command::new(&binary);
        command
            .current_dir(&root)
            .args(["fix", &case.file, "--at", &format!("{}:{}", case.line, case.column), "--json"])
            .args(["--strong-model", "none", "--samples", SAMPLES, "--budget-ms", BUDGET_MS]);
        if let Some(message) = &case.message {
            command.args(["--message", message]);
        }
        let started = Instant::now();
        let output = command.stderr(Stdio::null()).output()?;
        cli_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        let cli_result: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);

        sampled.push(mcp_result["samples_tried"].as_u64().unwrap_or(0) > 0);
        let (mcp_ok, cli_ok) = (mcp_result["verified"] == true, cli_result["verified"] == true);
        mcp_verified += usize::from(mcp_ok);
        cli_verified += usize::from(cli_ok);
        agree += usize::from(mcp_ok == cli_ok && edit_lines(&diffs(&mcp_result)) == edit_lines(&diffs(&cli_result)));
    }
    let n = cases.len();
    let of_sampled =
        |ms: &[f64]| -> Vec<f64> { ms.iter().zip(&sampled).filter(|(_, s)| **s).map(|(ms, _)| *ms).collect() };
    let (mcp_sampled, cli_sampled) = (of_sampled(&mcp_ms), of_sampled(&cli_ms));
    rows.push(Row {
        tool: "fix".into(),
        path: "MCP, resident server".into(),
        ms: mcp_ms.clone(),
        answered: format!("{mcp_verified}/{n} verified"),
    });
    rows.push(Row {
        tool: "fix".into(),
        path: "one `spark-lsp fix` process per call".into(),
        ms: cli_ms.clone(),
        answered: format!("{cli_verified}/{n} verified"),
    });

    rows.push(Row {
        tool: "fix, model-sampled cases only".into(),
        path: "MCP, resident server".into(),
        answered: "(no grammar repair: the model ran)".into(),
        ms: mcp_sampled.clone(),
    });
    rows.push(Row {
        tool: "fix, model-sampled cases only".into(),
        path: "one `spark-lsp fix` process per call".into(),
        answered: String::new(),
        ms: cli_sampled.clone(),
    });

    let mut complete_ms = Vec::new();
    let mut offered = 0;
    for case in &cases {
        let (ms, result) = mcp.call("complete", json!({"file": case.file, "line": case.line + 1, "column": 1}))?;
        complete_ms.push(ms);
        offered += usize::from(result.is_ok_and(|value| value["suggestion"].is_string()));
    }
    rows.push(Row {
        tool: "complete".into(),
        path: "MCP".into(),
        answered: format!("{offered}/{} offered", complete_ms.len()),
        ms: complete_ms,
    });

    let mut check_ms = Vec::new();
    let mut passed = 0;
    for case in &cases {
        let Some((broken, original)) = &case.check else { continue };
        let (ms, result) = mcp.call(
            "check",
            json!({"file": case.file, "old_text": format!("{broken}\n"), "new_text": format!("{original}\n")}),
        )?;
        check_ms.push(ms);
        passed += usize::from(result.is_ok_and(|value| value["ok"] == true));
    }
    rows.push(Row {
        tool: "check".into(),
        path: "MCP".into(),
        answered: format!("{passed}/{} passed", check_ms.len()),
        ms: check_ms,
    });

    let mut regex_ms = Vec::new();
    let (mut regex_verified, mut regex_refused) = (0, 0);
    for case in spark_tests::eval::cases::regex_cases()?.iter().take(limit) {
        let dialect = if case.lang == spark_tests::eval::corpus::Lang::Rust { "rust" } else { "ecmascript" };
        let (ms, result) = mcp.call(
            "generate_regex",
            json!({"description": case.description, "must_match": case.shown, "must_not_match": case.shown_not, "dialect": dialect}),
        )?;
        match result {
            Ok(value) => {
                regex_ms.push(ms);
                regex_verified += usize::from(value["verified"] == true);
            }
            Err(_) => regex_refused += 1,
        }
    }
    rows.push(Row {
        tool: "generate_regex".into(),
        path: "MCP".into(),
        answered: format!("{regex_verified}/{} verified ({regex_refused} refused as input)", regex_ms.len()),
        ms: regex_ms,
    });

    let mut tests_ms = Vec::new();
    let mut tests_verified = 0;
    for case in cases.iter().take(limit.min(6)) {
        let (ms, result) = mcp.call("generate_tests", json!({"file": case.file, "line": case.line, "column": 5}))?;
        tests_ms.push(ms);
        tests_verified += usize::from(result.is_ok_and(|value| value["verified"] == true));
    }
    rows.push(Row {
        tool: "generate_tests".into(),
        path: "MCP".into(),
        answered: format!("{tests_verified}/{} verified", tests_ms.len()),
        ms: tests_ms,
    });

    drop(mcp.stdin);
    let _ = mcp.child.wait();

    println!("\n| tool | path | calls | p50 ms | p95 ms | answers |\n|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {} |",
            row.tool,
            row.path,
            row.ms.len(),
            percentile(&row.ms, 50.0),
            percentile(&row.ms, 95.0),
            row.answered
        );
    }
    println!(
        "\nfix, one process per call / MCP: p50 {:.1}x, p95 {:.1}x (target: p50 ≥ 5x). MCP and the CLI gave the same \
         answer (same edit, or both nothing) in {agree}/{n} cases: the same verifiers on both paths.",
        percentile(&cli_ms, 50.0) / percentile(&mcp_ms, 50.0),
        percentile(&cli_ms, 95.0) / percentile(&mcp_ms, 95.0),
    );
    println!(
        "Model-sampled cases only ({} of {n}): p50 {:.1}x, p95 {:.1}x. The other cases are answered by the grammar's \
         missing-token repair without a model call: there the CLI pays the model load for nothing.",
        mcp_sampled.len(),
        percentile(&cli_sampled, 50.0) / percentile(&mcp_sampled, 50.0),
        percentile(&cli_sampled, 95.0) / percentile(&mcp_sampled, 95.0),
    );
    println!(
        "Timings come from a shared machine (another build or test may run meanwhile): read the ratio, not the digits."
    );
    Ok(())
}
