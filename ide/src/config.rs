//! Settings, from `initializationOptions` and `workspace/didChangeConfiguration`. Both accept the settings
//! object itself or one nested under `spark`. Unknown keys are ignored; a value of the wrong type is reported
//! and the defaults are kept.

use std::path::PathBuf;

use serde::Deserialize;
use spark_engine::{EngineConfig, KvKeys, ModelSource};

use crate::kinds::TaskKind;

/// A task's route, as the configuration names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    Local,
    Remote,
    /// Remote first; the local model on any remote error or timeout.
    RemoteThenLocal,
    /// Both at once; the first usable answer wins and the other is cancelled.
    Race,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Settings {
    pub model: ModelSettings,
    pub inline: InlineSettings,
    /// The optional remote endpoint; off unless `remote.url` is set.
    pub remote: RemoteSettings,
    pub context: ContextSettings,
    /// Execution checks (`cargo check`, `tsc --noEmit`, generated tests) in scratch copies; off by default.
    pub verify: crate::exec_check::VerifySettings,
    /// Which model tiers the code-action tasks may use.
    pub tasks: TaskSettings,
    /// Next-edit suggestions: the edits that follow from the user's last one.
    pub next_edit: NextEditSettings,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NextEditSettings {
    /// Predict next edits (answer `spark/nextEdit`, list "Spark next edit" code actions); default on.
    pub enabled: bool,
    /// Send `spark/nextEditChanged` when the user pauses: for clients that show a hint (Spark's VS Code and
    /// Neovim clients ask for it); off by default, as other clients would not know the method.
    pub notify: bool,
    /// The pause after the last change of a document before the notification, in milliseconds.
    pub pause_ms: u64,
    /// When the rules predict nothing, ask the model to rewrite the lines after the edit (along the ghost-text
    /// route). Off by default: chosen by the evaluation (docs/eval.md).
    pub model: bool,
    /// How long the model may take for that, in milliseconds.
    pub deadline_ms: u64,
    /// Offer predictions only once the compiler accepts them (`cargo check` / `tsc --noEmit` in the scratch copy;
    /// `verify.compile` must be on too). Off by default: predictions follow every edit, and a build per edit is
    /// not what the user asked for, unlike a chosen action.
    pub compile: bool,
}

impl Default for NextEditSettings {
    fn default() -> Self {
        NextEditSettings {
            enabled: true,
            notify: false,
            pause_ms: 300,
            model: false,
            deadline_ms: 2000,
            compile: false,
        }
    }
}

/// What a prompt may be made of, besides the current file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContextSettings {
    /// Bytes of chunks from other recently opened or edited files at the front of ghost-text prompts; 0: none.
    /// Unset: the model's default ([`PromptWindow::for_model`]).
    pub other_files_bytes: Option<usize>,
    /// Glob patterns of files whose text never reaches a model (no ghost text, no tasks, not used as context),
    /// besides the built-in secret-looking names (.env, *.pem, id_rsa, …).
    pub ignore: IgnoreList,
}

/// Compiled glob patterns, matched against a document's path (`*` also matches `/`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(try_from = "Vec<String>")]
pub struct IgnoreList {
    patterns: Vec<String>,
    set: std::sync::Arc<globset::GlobSet>,
}

impl PartialEq for IgnoreList {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for IgnoreList {}

impl TryFrom<Vec<String>> for IgnoreList {
    type Error = String;

    fn try_from(patterns: Vec<String>) -> Result<Self, String> {
        let mut builder = globset::GlobSetBuilder::new();
        for pattern in &patterns {
            builder.add(globset::Glob::new(pattern).map_err(|error| format!("context.ignore: {error}"))?);
        }
        let set = builder.build().map_err(|error| format!("context.ignore: {error}"))?;
        Ok(IgnoreList { patterns, set: std::sync::Arc::new(set) })
    }
}

impl IgnoreList {
    pub fn matches(&self, path: &str) -> bool {
        !self.patterns.is_empty() && self.set.is_match(path)
    }
}

/// An OpenAI-compatible endpoint (a hosted service, vLLM, llama.cpp's server) for the heavier tasks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RemoteSettings {
    pub url: String,
    pub model: String,
    /// The environment variable that holds the API key; the key itself is never a setting.
    pub api_key_env: Option<String>,
    pub timeout_ms: u64,
    /// Use `/v1/chat/completions` (instruction models) instead of `/v1/completions`.
    pub chat: bool,
    /// The server does fill-in with a `suffix` field (as llama.cpp's server's /infill-style models do).
    pub supports_suffix: bool,
    /// Routes of the code-action tasks: "local", "remote", "remote-then-local" (default), "race".
    pub fix: Route,
    pub tests: Route,
    pub regex: Route,
}

impl Default for RemoteSettings {
    fn default() -> Self {
        RemoteSettings {
            url: String::new(),
            model: String::new(),
            api_key_env: None,
            timeout_ms: 10_000,
            chat: false,
            supports_suffix: false,
            fix: Route::RemoteThenLocal,
            tests: Route::RemoteThenLocal,
            regex: Route::RemoteThenLocal,
        }
    }
}

impl RemoteSettings {
    pub fn configured(&self) -> bool {
        !self.url.trim().is_empty()
    }

    pub fn client_config(&self) -> spark_engine::RemoteConfig {
        spark_engine::RemoteConfig {
            url: self.url.trim().to_owned(),
            model: self.model.clone(),
            api_key_env: self.api_key_env.clone().filter(|name| !name.is_empty()),
            timeout_ms: self.timeout_ms.max(1),
            chat: self.chat,
            supports_suffix: self.supports_suffix,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct ModelSettings {
    /// A GGUF file; overrides `SPARK_MODEL` and the default model.
    pub path: Option<PathBuf>,
    /// Threads for llama.cpp; physical cores by default.
    pub threads: Option<usize>,
    /// Context window in tokens.
    pub context_size: Option<u32>,
    /// The most memory the model may take, in MiB: weights, KV cache and compute buffer, estimated from the GGUF
    /// header before loading. Default: the memory available when it loads; 0 turns the check off.
    pub max_memory_mb: Option<u64>,
    /// KV-cache prefix reuse and the suggestion cache (default on); off, every prompt is evaluated cold (the
    /// benchmark's baseline).
    pub reuse: Option<bool>,
    /// KV slots: sequences kept in the model's context, one per recently used document and one for tasks.
    /// Default: derived from the memory limit (at most 4); 1 gives the single-sequence engine.
    pub kv_slots: Option<u32>,
    /// Prompt-lookup speculative decoding for greedy requests (default off: on a near tie its output can differ
    /// from plain greedy decoding, because llama.cpp rounds a batch differently from a single token).
    pub speculative: Option<bool>,
    /// How the KV cache stores keys: `f16` (default) or `q8_0` (a quarter less KV memory).
    pub kv_cache_keys: Option<String>,
}

/// The default of `inline.minConfidence`, chosen by the evaluation's sweep (docs/eval.md): at 0.25 the default
/// model showed something wrong on 20% (Rust) and 5% (TypeScript) of keystrokes instead of 49% and 31%, and kept
/// 21 of its 23 right first lines.
pub const DEFAULT_MIN_CONFIDENCE: f32 = 0.25;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InlineSettings {
    pub enabled: bool,
    /// At the deadline a ghost-text request returns what it has (complete lines for a block).
    pub deadline_ms: u64,
    pub max_tokens: usize,
    pub max_lines: usize,
    /// "local" (default), "remote", "remote-then-local" or "race": ghost text leaves the machine only when this
    /// says so (the editors' "Super Fast Mode" sets "remote").
    pub route: Route,
    /// Language ids with ghost text; empty means all.
    pub languages: Vec<String>,
    /// After a suggestion is shown, compute the one for the state where it is accepted (in the background:
    /// it runs only while the model is idle, and any keystroke cancels it).
    pub prefetch: bool,
    /// The least probability the model must give a suggestion's first line for it to be shown (0 shows every
    /// suggestion that passes the checks). Unset: the model's default ([`PromptWindow::for_model`]), chosen by
    /// the evaluation (docs/eval.md, "Results").
    pub min_confidence: Option<f32>,
    /// Lines of the document before the cursor's line in a ghost-text prompt (at most 64 bytes a line), and
    /// lines after it. Fewer lines: a cold prompt (a file just opened, a jump) is ready sooner; more: more context.
    /// Unset: the model's default ([`PromptWindow::for_model`]).
    pub prefix_lines: Option<usize>,
    pub suffix_lines: Option<usize>,
    /// Token healing: a prompt that ends inside a word is cut back to the word's start and the model must spell
    /// the cut text again, so that it continues from its own tokens (docs/eval.md, "One line mid-line, token healing").
    pub token_healing: bool,
    /// Tell the client when a suggestion the deadline cut is ready (`spark/inlineCompletionReady`): the request was
    /// answered empty, the suggestion finished in the background, and asking again at the same place is answered
    /// from the cache. Editors only ask for ghost text when the user types, so without it a user who paused sees
    /// nothing. Off unless the client says it handles the notification (Spark's VS Code and Neovim plugins do).
    pub notify_ready: bool,
}

/// The ghost-text prompt window a model gets unless the settings say otherwise: lines before and after the
/// cursor's line, and bytes of other files' chunks. Chosen by the evaluation (docs/eval.md, "Prompt window by model"):
/// every span there starts on a cold prompt, and a model that costs more per prompt token is ready later. On 2
/// cores Qwen2.5-Coder 0.5B evaluates ~180 prompt tokens a second against Gemma 3 270M's ~475; with 8 lines before,
/// 2 after and no other files it had 22% / 10% of Rust / TypeScript keystrokes right (typed through) against 17% /
/// 1% with 32 / 8 lines and 1 kB of other files, while Gemma 3 270M did best with the wider window (7% / 6%
/// against 4% / 7% with the narrow one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PromptWindow {
    pub prefix_lines: usize,
    pub suffix_lines: usize,
    pub other_files_bytes: usize,
    /// `inline.minConfidence`: for Gemma 3 270M the lowest threshold that kept shown-wrong keystrokes at most 25%
    /// in both languages (0.25); for Qwen2.5-Coder 0.5B, with one-line answers mid-line and token healing, the one
    /// with the most right lines a second among those within that bound: 0.25 (12 / 2 lines: 7.3 / 5.7 right
    /// lines/s, 13% / 4% shown wrong; 0.2: 6.9 / 5.2 and 17% / 5%; docs/eval.md, "One line mid-line, token healing").
    pub min_confidence: f32,
}

impl PromptWindow {
    /// The window for a model of up to [`NARROW_WINDOW_ABOVE_PARAMS`] parameters (the default model's).
    pub const WIDE: PromptWindow = PromptWindow {
        prefix_lines: 32,
        suffix_lines: 8,
        other_files_bytes: 1024,
        min_confidence: DEFAULT_MIN_CONFIDENCE,
    };
    /// The window for bigger models: 12 lines before, 2 after (in two runs 41–42% / 37–43% of Rust / TypeScript
    /// keystrokes right against 33–35% / 37% with 8 / 2, and 35% / 31% with 16 / 4, whose cold prompts cost more).
    pub const NARROW: PromptWindow =
        PromptWindow { prefix_lines: 12, suffix_lines: 2, other_files_bytes: 0, min_confidence: 0.25 };

    /// The default window for a model of `n_params` parameters (`None`: no model loaded yet, the wide one).
    pub fn for_model(n_params: Option<u64>) -> PromptWindow {
        match n_params {
            Some(n_params) if n_params > NARROW_WINDOW_ABOVE_PARAMS => PromptWindow::NARROW,
            _ => PromptWindow::WIDE,
        }
    }
}

/// Models with more parameters than this get the narrow prompt window (Gemma 3 270M has 268 M, Qwen2.5-Coder 0.5B
/// 494 M).
pub const NARROW_WINDOW_ABOVE_PARAMS: u64 = 400_000_000;

impl Default for InlineSettings {
    fn default() -> Self {
        InlineSettings {
            enabled: true,
            deadline_ms: 225,
            max_tokens: 48,
            max_lines: 8,
            route: Route::Local,
            languages: Vec::new(),
            prefetch: true,
            min_confidence: None,
            prefix_lines: None,
            suffix_lines: None,
            token_healing: true,
            notify_ready: false,
        }
    }
}

impl InlineSettings {
    /// Fills the window settings left unset with `window`'s.
    pub fn with_window(mut self, window: PromptWindow) -> InlineSettings {
        self.prefix_lines.get_or_insert(window.prefix_lines);
        self.suffix_lines.get_or_insert(window.suffix_lines);
        self.min_confidence.get_or_insert(window.min_confidence);
        self
    }

    /// `min_confidence`, the wide window's where unset.
    pub fn min_confidence(&self) -> f32 {
        self.min_confidence.unwrap_or(PromptWindow::WIDE.min_confidence)
    }

    /// Lines before and after the cursor's line (the wide window's where unset).
    pub fn window_lines(&self) -> (usize, usize) {
        (
            self.prefix_lines.unwrap_or(PromptWindow::WIDE.prefix_lines),
            self.suffix_lines.unwrap_or(PromptWindow::WIDE.suffix_lines),
        )
    }
}

impl Settings {
    /// These settings with the ghost-text window the settings leave unset taken from the model's default
    /// ([`PromptWindow::for_model`]; `n_params` of the local model, `None` while none is loaded).
    pub fn for_model(mut self, n_params: Option<u64>) -> Settings {
        let window = PromptWindow::for_model(n_params);
        self.inline = self.inline.with_window(window);
        self.context.other_files_bytes.get_or_insert(window.other_files_bytes);
        self
    }

    /// Reads settings from a JSON value; the error names the setting at fault.
    pub fn from_json(value: &serde_json::Value) -> Result<Settings, String> {
        let value = value.get("spark").unwrap_or(value);
        if value.is_null() {
            return Ok(Settings::default());
        }
        let settings: Settings =
            serde_json::from_value(value.clone()).map_err(|error| format!("invalid Spark settings: {error}"))?;
        if let Some(keys) = settings.model.kv_cache_keys.as_deref() {
            if KvKeys::parse(keys).is_none() {
                return Err(format!(
                    "invalid Spark settings: model.kvCacheKeys must be \"q8_0\" or \"f16\", got {keys:?}"
                ));
            }
        }
        if let Some(min_confidence) = settings.inline.min_confidence.filter(|value| !(0.0..=1.0).contains(value)) {
            return Err(format!(
                "invalid Spark settings: inline.minConfidence must be between 0 and 1, got {min_confidence}"
            ));
        }
        Ok(settings)
    }

    /// The engine configuration these settings ask for.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            n_ctx: self.model.context_size.unwrap_or(4096).clamp(512, 131_072),
            max_memory_mb: self.model.max_memory_mb,
            reuse: self.model.reuse.unwrap_or(true),
            kv_slots: self.model.kv_slots.filter(|slots| *slots > 0),
            speculative: self.model.speculative.unwrap_or(false),
            kv_keys: self.model.kv_cache_keys.as_deref().and_then(KvKeys::parse).unwrap_or_default(),
            ..EngineConfig::new(
                resolve_model(self.model.path.as_deref()),
                self.model.threads.filter(|threads| *threads > 0).unwrap_or_else(spark_engine::default_threads),
            )
        }
    }

    /// Whether the text of the document at `uri` must never reach a model: a secret-looking file or one the
    /// ignore list names.
    pub fn is_excluded(&self, uri: &str) -> bool {
        if crate::privacy::is_secret_path(uri) {
            return true;
        }
        let path = uri.split(['?', '#']).next().unwrap_or(uri);
        let path = path.strip_prefix("file://").unwrap_or(path);
        self.context.ignore.matches(path)
    }

    pub fn inline_enabled_for(&self, language_id: &str) -> bool {
        self.inline.enabled
            && (self.inline.languages.is_empty() || self.inline.languages.iter().any(|id| id == language_id))
    }
}

/// The model file: the setting, else `SPARK_MODEL`, else the default model path (used even when missing, so
/// that the error names the path the install step writes to).
/// The engine's configuration for a model setting (a name, a path, or the default) and a thread count (`None`
/// or 0: the physical cores), for the front ends that take them as options (the CLI, MCP).
pub fn engine_config(model: Option<&std::path::Path>, threads: Option<usize>) -> EngineConfig {
    EngineConfig::new(
        resolve_model(model),
        threads.filter(|threads| *threads > 0).unwrap_or_else(spark_engine::default_threads),
    )
}

pub fn resolve_model(setting: Option<&std::path::Path>) -> ModelSource {
    if let Some(path) = setting.filter(|path| !path.as_os_str().is_empty()) {
        return ModelSource::Path(known_or_path(path));
    }
    if let Some(path) = std::env::var_os("SPARK_MODEL").filter(|value| !value.is_empty()) {
        return ModelSource::Path(known_or_path(std::path::Path::new(&path)));
    }
    match spark_engine::default_model_path() {
        Some(path) => ModelSource::Path(path),
        None => ModelSource::None,
    }
}

/// A model name the install script knows ("qwen2.5-coder-0.5b") names its file in the model folder; anything
/// else is a path.
fn known_or_path(path: &std::path::Path) -> PathBuf {
    path.to_str().and_then(spark_engine::known_model_path).unwrap_or_else(|| expand_home(path))
}

fn expand_home(path: &std::path::Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_owned(),
    }
}

/// Which tiers a task may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TierPolicy {
    /// The fast model only.
    Fast,
    /// The fast model, then the strong one when nothing verified.
    FastThenStrong,
    /// The strong model only (the fast one when there is no strong model).
    Strong,
}

/// `tasks.*` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct TaskSettings {
    /// The strong tier's model: a name from `scripts/install-model.sh --list`, or a GGUF path; `"auto"` (the
    /// default) takes the largest installed Qwen2.5-Coder that is not the fast model; `""` or `"none"`: no strong
    /// tier.
    pub strong_model: String,
    pub fix: TierPolicy,
    pub tests: TierPolicy,
    pub regex: TierPolicy,
    /// The strong tier's own time budget for one task (its first load not counted).
    pub strong_budget_ms: u64,
    /// The strong model is unloaded after this many seconds without a task.
    pub strong_idle_secs: u64,
    /// Spark fix's region prompt (docs/fix.md): the model first rewrites only the diagnosed lines, as the middle of
    /// a fill-in-the-middle prompt on the document. Off by default: the evaluation's side-by-side run (docs/fix.md)
    /// found it no better and the compiler's own fixes slower beside it on 2 cores; off, the model writes the
    /// diagnosed line and the whole node.
    pub fix_region: bool,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            strong_model: "auto".to_owned(),
            fix: TierPolicy::FastThenStrong,
            tests: TierPolicy::FastThenStrong,
            regex: TierPolicy::FastThenStrong,
            strong_budget_ms: 20_000,
            strong_idle_secs: 300,
            fix_region: false,
        }
    }
}

impl TaskSettings {
    pub fn policy(&self, kind: TaskKind) -> TierPolicy {
        match kind {
            TaskKind::Fix => self.fix,
            TaskKind::Tests => self.tests,
            TaskKind::Regex => self.regex,
        }
    }

    /// The strong model's file, when there is one and it is not `fast_model`.
    pub fn strong_model_path(&self, fast_model: Option<&std::path::Path>) -> Option<PathBuf> {
        let setting = self.strong_model.trim();
        let path = match setting {
            "" | "none" | "off" => return None,
            "auto" => {
                // Largest first: the strong tier is there to know more than the fast one.
                ["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]
                    .into_iter()
                    .filter_map(spark_engine::known_model_path)
                    .find(|path| path.is_file() && Some(path.as_path()) != fast_model)?
            }
            name => spark_engine::known_model_path(name).unwrap_or_else(|| PathBuf::from(name)),
        };
        let same = fast_model.is_some_and(|fast| {
            let canonical = |path: &std::path::Path| std::fs::canonicalize(path).ok();
            fast == path.as_path() || canonical(fast).is_some_and(|fast| Some(fast) == canonical(&path))
        });
        (!same).then_some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_flat_partial_and_wrong_settings() {
        let error = Settings::from_json(&json!({"inline": {"minConfidence": 1.5}})).unwrap_err();
        assert!(error.contains("inline.minConfidence"), "{error}");
        let confident = Settings::from_json(&json!({"inline": {"minConfidence": 0.25}})).unwrap();
        assert_eq!(confident.inline.min_confidence, Some(0.25));
        let nested = Settings::from_json(&json!({"spark": {"inline": {"deadlineMs": 250}}})).unwrap();
        assert_eq!(nested.inline.deadline_ms, 250);
        assert!(nested.inline.enabled);
        let flat =
            Settings::from_json(&json!({"model": {"path": "/m.gguf", "threads": 3, "maxMemoryMb": 900}, "other": 1}))
                .unwrap();
        assert_eq!(flat.engine_config().max_memory_mb, Some(900));
        assert_eq!(flat.model.path, Some(PathBuf::from("/m.gguf")));
        assert_eq!(flat.engine_config().threads, 3);
        assert_eq!(flat.engine_config().model, ModelSource::Path("/m.gguf".into()));
        let next = Settings::from_json(&json!({"nextEdit": {"notify": true}})).unwrap().next_edit;
        assert_eq!(next, NextEditSettings { notify: true, ..NextEditSettings::default() });
        assert!(next.enabled);
        let wrong = Settings::from_json(&json!({"inline": {"maxTokens": "many"}})).unwrap_err();
        assert!(wrong.contains("invalid type"), "{wrong}");
        assert_eq!(Settings::from_json(&serde_json::Value::Null).unwrap(), Settings::default());
        // KV keys: f16 unless asked otherwise; a value llama.cpp is not given is an error naming the setting.
        assert_eq!(Settings::default().engine_config().kv_keys, KvKeys::F16);
        let q8 = Settings::from_json(&json!({"model": {"kvCacheKeys": "q8_0"}})).unwrap();
        assert_eq!(q8.engine_config().kv_keys, KvKeys::Q8_0);
        let error = Settings::from_json(&json!({"model": {"kvCacheKeys": "q4"}})).unwrap_err();
        assert!(error.contains("model.kvCacheKeys") && error.contains("\"q4\""), "{error}");
    }

    #[test]
    fn the_prompt_window_follows_the_model_unless_set() {
        // Gemma 3 270M (268 M parameters) and no model yet: the wide window; Qwen2.5-Coder 0.5B: the narrow one.
        let gemma = Settings::default().for_model(Some(268_098_176));
        assert_eq!((gemma.inline.window_lines(), gemma.context.other_files_bytes), ((32, 8), Some(1024)));
        assert_eq!(Settings::default().for_model(None).inline.window_lines(), (32, 8));
        let qwen = Settings::default().for_model(Some(494_032_768));
        assert_eq!((qwen.inline.window_lines(), qwen.context.other_files_bytes), ((12, 2), Some(0)));
        assert_eq!((gemma.inline.min_confidence(), qwen.inline.min_confidence()), (0.25, 0.25));
        // What the user set stays, whatever the model.
        let set = Settings::from_json(&json!({"inline": {"prefixLines": 20}, "context": {"otherFilesBytes": 512}}))
            .unwrap()
            .for_model(Some(494_032_768));
        assert_eq!((set.inline.window_lines(), set.context.other_files_bytes), ((20, 2), Some(512)));
        let gate =
            Settings::from_json(&json!({"inline": {"minConfidence": 0.4}})).unwrap().for_model(Some(494_032_768));
        assert_eq!(gate.inline.min_confidence(), 0.4);
    }

    #[test]
    fn remote_is_off_by_default_and_routes_parse() {
        let settings = Settings::default();
        assert!(!settings.remote.configured());
        assert_eq!(settings.inline.route, Route::Local);
        let settings = Settings::from_json(&json!({"inline": {"route": "remote"}, "remote": {"url": "http://127.0.0.1:9", "fix": "race", "apiKeyEnv": "MY_KEY"}})).unwrap();
        assert!(settings.remote.configured());
        assert_eq!(settings.inline.route, Route::Remote);
        assert_eq!(settings.remote.fix, Route::Race);
        assert_eq!(settings.remote.tests, Route::RemoteThenLocal);
        assert_eq!(settings.remote.client_config().api_key_env.as_deref(), Some("MY_KEY"));
        assert!(Settings::from_json(&json!({"inline": {"route": "cloud"}})).is_err());
    }

    #[test]
    fn ignore_list_and_secret_names_exclude_files() {
        let settings =
            Settings::from_json(&json!({"context": {"ignore": ["**/private/**", "*.sql"], "otherFilesBytes": 0}}))
                .unwrap();
        assert_eq!(settings.context.other_files_bytes, Some(0));
        assert!(settings.is_excluded("file:///p/private/notes.rs"));
        assert!(settings.is_excluded("file:///p/db/dump.sql"));
        assert!(settings.is_excluded("file:///p/.env"));
        assert!(!settings.is_excluded("file:///p/src/main.rs"));
        assert!(!Settings::default().is_excluded("file:///p/src/private.rs"));
        let bad = Settings::from_json(&json!({"context": {"ignore": ["a[b"]}})).unwrap_err();
        assert!(bad.contains("context.ignore"), "{bad}");
    }

    #[test]
    fn execution_checks_are_on_unless_turned_off() {
        let settings = Settings::default();
        assert!(settings.verify.compile && settings.verify.run_tests);
        let settings = Settings::from_json(&json!({"verify": {"runTests": false, "timeoutMs": 5000}})).unwrap();
        assert!(settings.verify.compile && !settings.verify.run_tests);
        assert_eq!(settings.verify.timeout_ms, 5000);
        assert_eq!(settings.verify.commands(), ["cargo check", "tsc --noEmit", "node ts-checker"]);
        let off = Settings::from_json(&json!({"verify": {"compile": false, "runTests": false}})).unwrap();
        assert!(!off.verify.any() && off.verify.commands().is_empty());
        assert!(Settings::from_json(&json!({"verify": {"runTests": "yes"}})).is_err());
    }

    #[test]
    fn languages_filter() {
        let settings = Settings::from_json(&json!({"inline": {"languages": ["rust"]}})).unwrap();
        assert!(settings.inline_enabled_for("rust"));
        assert!(!settings.inline_enabled_for("typescript"));
        assert!(Settings::default().inline_enabled_for("anything"));
    }

    #[test]
    fn settings_parse_and_auto_never_picks_the_fast_model() {
        let settings: TaskSettings =
            serde_json::from_value(serde_json::json!({"fix": "fast", "strongModel": "none"})).unwrap();
        assert_eq!(settings.policy(TaskKind::Fix), TierPolicy::Fast);
        assert_eq!(settings.policy(TaskKind::Tests), TierPolicy::FastThenStrong);
        assert!(!settings.fix_region);
        let on: TaskSettings = serde_json::from_value(serde_json::json!({"fixRegion": true})).unwrap();
        assert!(on.fix_region);
        assert_eq!(settings.strong_model_path(None), None);
        let explicit = TaskSettings { strong_model: "/m/big.gguf".into(), ..TaskSettings::default() };
        assert_eq!(explicit.strong_model_path(Some("/m/small.gguf".as_ref())), Some(PathBuf::from("/m/big.gguf")));
        assert_eq!(explicit.strong_model_path(Some("/m/big.gguf".as_ref())), None);
        assert!(serde_json::from_value::<TaskSettings>(serde_json::json!({"regex": "fastest"})).is_err());
    }
}
