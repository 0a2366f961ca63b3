//! The comparison for ghost text (issue 12): llama.cpp's `llama-server` driven the way llama.vim drives it, on the
//! same model and the same typing replay as Spark. Per keystroke llama.vim (autoload/llama.vim, read for this; its
//! defaults) sends one `/infill` request on a new connection (curl): the 256 lines above the cursor's line as
//! `input_prefix`, the typed part of the line as `prompt`, the rest of the line and the 64 lines below as
//! `input_suffix`, `n_predict` 128, `top_k` 40, `top_p` 0.90, samplers top_k/top_p/infill, `cache_prompt`, and
//! `t_max_predict_ms` 250 for a position's first request. Before asking, it looks in its own cache of answers: one for
//! exactly this context, or one made up to 128 characters earlier whose text starts with what was typed since (its
//! typed-ahead cache); a hit is shown at once and no request is sent (a favour to llama.vim: the real plugin sends one
//! anyway). Of the answer it shows what it would show: trailing empty lines dropped, nothing when the first line
//! repeats the rest of the line or the next non-blank line. Not modelled: the ring buffer of extra chunks from other
//! files (the replay opens one file at a time) and the speculative request after a shown hint.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::drive::{self, Answer};
use super::run::GhostClient;

#[path = "../../../engine/tests/support/llama_server.rs"]
mod llama_server;

/// llama.vim's defaults.
const N_PREFIX: usize = 256;
const N_SUFFIX: usize = 64;
const N_PREDICT: u32 = 128;
const FIRST_REQUEST_MAX_PREDICT_MS: u32 = 250;
const T_MAX_PROMPT_MS: u32 = 500;
/// How far back (characters) its cache looks for an answer made before the last keystrokes.
const CACHE_LOOKBACK: usize = 128;

/// The context size llama-server gets: Spark's default (`model.contextSize`).
const CONTEXT_SIZE: &str = "4096";

pub struct LlamaVim {
    server: llama_server::LlamaServer,
    runtime: tokio::runtime::Runtime,
    documents: HashMap<String, String>,
    /// llama.vim's cache: the answer (content) per (prefix + middle, suffix) context.
    cache: HashMap<(String, String), String>,
    pub requests: usize,
    pub cache_hits: usize,
}

impl LlamaVim {
    /// Starts llama-server with `model` (the default model when `None`), as llama.vim's README starts it
    /// (`--cache-reuse 256`), with Spark's thread count and context size.
    pub fn start(model: Option<&Path>) -> Result<LlamaVim> {
        let model = match model {
            Some(model) => model.to_path_buf(),
            None => llama_server::ensure_model().map_err(anyhow::Error::msg)?,
        };
        let model = model.to_string_lossy().into_owned();
        let server = llama_server::LlamaServer::start(&[
            "-m",
            &model,
            "-t",
            "2",
            "-tb",
            "2",
            "-c",
            CONTEXT_SIZE,
            "-b",
            "1024",
            "-ub",
            "512",
            "--cache-reuse",
            "256",
        ])
        .map_err(anyhow::Error::msg)
        .context("starting llama-server")?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let mut client =
            LlamaVim { server, runtime, documents: HashMap::new(), cache: HashMap::new(), requests: 0, cache_hits: 0 };
        // llama.vim only speaks /infill, which needs the model's fill-in-the-middle tokens (else HTTP 501).
        let probe = json!({"input_prefix": "fn main() {\n", "input_suffix": "}\n", "prompt": "", "n_predict": 1});
        client
            .infill(&probe)
            .context("llama.vim needs a model with fill-in-the-middle tokens")?
            .map_err(anyhow::Error::msg)?;
        client.requests = 0;
        Ok(client)
    }

    /// The cached answer for this context, or for one up to [`CACHE_LOOKBACK`] characters earlier whose text starts
    /// with what was typed since (the rest of it).
    fn cached(&self, before: &str, suffix: &str) -> Option<String> {
        if let Some(content) = self.cache.get(&(before.to_owned(), suffix.to_owned())) {
            return Some(content.clone());
        }
        let mut best: Option<String> = None;
        for (cut, _) in before.char_indices().rev().take(CACHE_LOOKBACK) {
            let Some(content) = self.cache.get(&(before[..cut].to_owned(), suffix.to_owned())) else {
                continue;
            };
            let removed = &before[cut..];
            if let Some(rest) = content.strip_prefix(removed) {
                if !rest.is_empty() && best.as_ref().is_none_or(|best| rest.len() > best.len()) {
                    best = Some(rest.to_owned());
                }
            }
        }
        best
    }

    fn infill(&mut self, body: &Value) -> Result<std::result::Result<String, String>> {
        let url = format!("{}/infill", self.server.url);
        self.requests += 1;
        self.runtime.block_on(async {
            // A new connection per request, as curl makes one.
            let client = reqwest::Client::builder().pool_max_idle_per_host(0).no_proxy().build()?;
            let response = client
                .post(&url)
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .timeout(drive::KEYSTROKE_TIMEOUT)
                .send()
                .await;
            let response = match response {
                Ok(response) => response,
                Err(error) => return Ok(Err(format!("llama-server: {error}"))),
            };
            let status = response.status();
            let answer: Value = match response.bytes().await.map(|bytes| serde_json::from_slice(&bytes)) {
                Ok(Ok(answer)) => answer,
                Ok(Err(error)) => return Ok(Err(format!("llama-server's answer is not JSON: {error}"))),
                Err(error) => return Ok(Err(format!("llama-server's answer: {error}"))),
            };
            if !status.is_success() {
                anyhow::bail!("/infill answered {status}: {answer}\n{}", self.server.log_tail());
            }
            Ok(Ok(answer["content"].as_str().unwrap_or("").to_owned()))
        })
    }
}

/// What llama.vim shows of `content` at the cursor: on a blank line, without the indentation the line already has;
/// nothing when it repeats the rest of the line or the next non-blank line.
fn shown(content: &str, line_text: &str, line_prefix: &str, line_suffix: &str, lines_below: &[&str]) -> String {
    let mut lines: Vec<&str> = content.split('\n').collect();
    while lines.len() > 1 && lines.last() == Some(&"") {
        lines.pop();
    }
    if line_text.trim().is_empty() {
        let lead = (lines[0].len() - lines[0].trim_start().len()).min(line_text.len());
        lines[0] = &lines[0][lead..];
    }
    let first = lines[0];
    if lines.len() == 1 && (first.is_empty() || first == line_suffix) {
        return String::new();
    }
    let next = lines_below.iter().find(|line| !line.trim().is_empty());
    if lines.len() == 1 && next.is_some_and(|next| format!("{line_prefix}{first}") == *next) {
        return String::new();
    }
    lines.join("\n")
}

impl GhostClient for LlamaVim {
    fn set_text(&mut self, uri: &str, _language_id: &str, text: &str) -> Result<()> {
        self.documents.insert(uri.to_owned(), text.to_owned());
        Ok(())
    }

    fn inline(&mut self, uri: &str, line: u32, character: u32) -> Result<Answer<String>> {
        let text = self.documents.get(uri).context("the document is open")?.clone();
        let text = text.as_str();
        let lines: Vec<&str> = text.split('\n').collect();
        let row = line as usize;
        let line_text = lines.get(row).copied().unwrap_or("");
        let at = drive::offset(text, line, character) - drive::offset(text, line, 0);
        let blank_line = line_text.trim().is_empty();
        // On a blank line llama.vim asks from the line's start (its indentation is not sent).
        let (line_prefix, line_suffix) =
            if blank_line { ("", "") } else { line_text.split_at(at.min(line_text.len())) };
        let mut prefix = lines[row.saturating_sub(N_PREFIX)..row].join("\n");
        prefix.push('\n');
        let below: Vec<&str> = lines[(row + 1).min(lines.len())..(row + 1 + N_SUFFIX).min(lines.len())].to_vec();
        let suffix = format!("{line_suffix}\n{}\n", below.join("\n"));
        let indent = if blank_line { 0 } else { line_text.len() - line_text.trim_start().len() };
        let middle = line_prefix;
        let before = format!("{prefix}{middle}");
        if let Some(content) = self.cached(&before, &suffix) {
            self.cache_hits += 1;
            return Ok(Answer::Got(shown(&content, line_text, line_prefix, line_suffix, &below)));
        }
        let body = json!({
            "input_prefix": prefix,
            "input_suffix": suffix,
            "input_extra": [],
            "prompt": middle,
            "n_predict": N_PREDICT,
            "stop": [],
            "n_indent": indent,
            "top_k": 40,
            "top_p": 0.90,
            "stream": false,
            "samplers": ["top_k", "top_p", "infill"],
            "cache_prompt": true,
            "t_max_prompt_ms": T_MAX_PROMPT_MS,
            "t_max_predict_ms": FIRST_REQUEST_MAX_PREDICT_MS,
        });
        match self.infill(&body)? {
            Ok(content) => {
                self.cache.insert((before, suffix), content.clone());
                Ok(Answer::Got(shown(&content, line_text, line_prefix, line_suffix, &below)))
            }
            Err(why) => Ok(Answer::CrashOrTimeout(why)),
        }
    }

    fn close(&mut self, uri: &str) -> Result<()> {
        self.documents.remove(uri);
        Ok(())
    }
}
