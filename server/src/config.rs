//! Settings, from `initializationOptions` and `workspace/didChangeConfiguration`. Both accept the settings
//! object itself or one nested under `spark`. Unknown keys are ignored; a value of the wrong type is reported
//! and the defaults are kept.

use std::path::PathBuf;

use serde::Deserialize;
use spark_engine::{EngineConfig, ModelSource};

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct Settings {
    pub model: ModelSettings,
    pub inline: InlineSettings,
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
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InlineSettings {
    pub enabled: bool,
    /// At the deadline a ghost-text request returns what it has (complete lines for a block).
    pub deadline_ms: u64,
    pub max_tokens: usize,
    pub max_lines: usize,
    /// "local" (default) or "remote": ghost text leaves the machine only when this says so.
    pub route: String,
    /// Language ids with ghost text; empty means all.
    pub languages: Vec<String>,
}

impl Default for InlineSettings {
    fn default() -> Self {
        InlineSettings {
            enabled: true,
            deadline_ms: 1000,
            max_tokens: 48,
            max_lines: 8,
            route: "local".to_owned(),
            languages: Vec::new(),
        }
    }
}

impl Settings {
    /// Reads settings from a JSON value; the error names the setting at fault.
    pub fn from_json(value: &serde_json::Value) -> Result<Settings, String> {
        let value = value.get("spark").unwrap_or(value);
        if value.is_null() {
            return Ok(Settings::default());
        }
        serde_json::from_value(value.clone()).map_err(|error| format!("invalid Spark settings: {error}"))
    }

    /// The engine configuration these settings ask for.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            model: resolve_model(self.model.path.as_deref()),
            threads: self.model.threads.filter(|threads| *threads > 0).unwrap_or_else(spark_engine::default_threads),
            n_ctx: self.model.context_size.unwrap_or(4096).clamp(512, 131_072),
        }
    }

    pub fn inline_enabled_for(&self, language_id: &str) -> bool {
        self.inline.enabled
            && (self.inline.languages.is_empty() || self.inline.languages.iter().any(|id| id == language_id))
    }
}

/// The model file: the setting, else `SPARK_MODEL`, else the default model path (used even when missing, so
/// that the error names the path the install step writes to).
pub fn resolve_model(setting: Option<&std::path::Path>) -> ModelSource {
    if let Some(path) = setting.filter(|path| !path.as_os_str().is_empty()) {
        return ModelSource::Path(expand_home(path));
    }
    if let Some(path) = std::env::var_os("SPARK_MODEL").filter(|value| !value.is_empty()) {
        return ModelSource::Path(expand_home(std::path::Path::new(&path)));
    }
    match spark_engine::default_model_path() {
        Some(path) => ModelSource::Path(path),
        None => ModelSource::None,
    }
}

fn expand_home(path: &std::path::Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_flat_partial_and_wrong_settings() {
        let nested = Settings::from_json(&json!({"spark": {"inline": {"deadlineMs": 250}}})).unwrap();
        assert_eq!(nested.inline.deadline_ms, 250);
        assert!(nested.inline.enabled);
        let flat = Settings::from_json(&json!({"model": {"path": "/m.gguf", "threads": 3}, "other": 1})).unwrap();
        assert_eq!(flat.model.path, Some(PathBuf::from("/m.gguf")));
        assert_eq!(flat.engine_config().threads, 3);
        assert_eq!(flat.engine_config().model, ModelSource::Path("/m.gguf".into()));
        let wrong = Settings::from_json(&json!({"inline": {"maxTokens": "many"}})).unwrap_err();
        assert!(wrong.contains("invalid type"), "{wrong}");
        assert_eq!(Settings::from_json(&serde_json::Value::Null).unwrap(), Settings::default());
    }

    #[test]
    fn languages_filter() {
        let settings = Settings::from_json(&json!({"inline": {"languages": ["rust"]}})).unwrap();
        assert!(settings.inline_enabled_for("rust"));
        assert!(!settings.inline_enabled_for("typescript"));
        assert!(Settings::default().inline_enabled_for("anything"));
    }
}
