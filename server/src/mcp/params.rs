//! The tools' parameters and the JSON schemas MCP clients see, one documented field each. The options the task
//! tools share ([`TaskCallOptions`]) and the regex examples ([`Examples`]) are declared once and flattened into
//! each tool's parameters; [`Strict`] refuses a field the schema does not name (serde's `deny_unknown_fields`
//! does not work with `flatten`), so a misspelt argument is an error, not ignored.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// Parameters `T` that refuse unknown fields: the object's keys are checked against the properties of `T`'s
/// schema (flattened fields included) before `T` is read from it. Its schema is `T`'s, closed
/// (`additionalProperties: false`), so that clients are told as well.
#[derive(Debug)]
pub struct Strict<T>(pub T);

impl<'de, T: DeserializeOwned + JsonSchema> Deserialize<'de> for Strict<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Strict<T>, D::Error> {
        let fields = Map::<String, Value>::deserialize(deserializer)?;
        let schema = schemars::schema_for!(T);
        let known: Vec<&str> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if let Some(unknown) = fields.keys().find(|key| !known.contains(&key.as_str())) {
            let expected: Vec<String> = known.iter().map(|name| format!("`{name}`")).collect();
            return Err(D::Error::custom(format!(
                "unknown field `{unknown}`, expected one of {}",
                expected.join(", ")
            )));
        }
        T::deserialize(Value::Object(fields)).map(Strict).map_err(D::Error::custom)
    }
}

impl<T: JsonSchema> JsonSchema for Strict<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = T::json_schema(generator);
        schema.insert("additionalProperties".to_owned(), Value::Bool(false));
        schema
    }
}

/// The options of the task tools (`fix`, `generate_tests`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskCallOptions {
    /// Also check candidates in a scratch copy of the crate or package (the execution tier): `fix` type-checks
    /// them with the compiler; `generate_tests` runs the generated tests and offers them only when they pass.
    #[serde(default)]
    pub run: bool,
    /// Apply the verified edit to the files (only on a server started with --allow-write).
    #[serde(default)]
    pub write: bool,
    /// Give up after this many milliseconds, waiting in the queue included (default 120000).
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompleteParams {
    /// The file, relative to the workspace root (its extension picks the language).
    pub file: String,
    /// 1-based line of the cursor (with `column`); or use `marker` in `text`.
    pub line: Option<u32>,
    /// 1-based column, counted in characters.
    pub column: Option<u32>,
    /// The file's text to complete in, instead of the file on disk (the file need not exist then).
    pub text: Option<String>,
    /// A marker in `text` that stands for the cursor (removed before completing); default `$0`.
    pub marker: Option<String>,
    /// The most lines of suggestion (default 8).
    pub max_lines: Option<u32>,
    /// Give up after this many milliseconds, waiting in the queue included (default 120000).
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FixParams {
    /// The file, relative to the workspace root.
    pub file: String,
    /// 1-based line of the error (the start of the range).
    pub line: u32,
    /// 1-based column of the error, in characters.
    pub column: u32,
    /// End of the diagnostic's range (1-based line); default: the start.
    pub end_line: Option<u32>,
    pub end_column: Option<u32>,
    /// The diagnostic's message as the compiler gave it.
    pub message: Option<String>,
    /// The diagnostic's code, e.g. `E0308`.
    pub code: Option<String>,
    #[serde(flatten)]
    pub options: TaskCallOptions,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TestsParams {
    /// The file, relative to the workspace root.
    pub file: String,
    /// The function to test, by name; or give `line` and `column` inside it.
    pub function: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    #[serde(flatten)]
    pub options: TaskCallOptions,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DialectParam {
    #[default]
    Rust,
    Ecmascript,
}

/// A regex's examples and dialect (`generate_regex`, and `check`'s `regex`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Examples {
    /// Strings the pattern must match whole.
    #[serde(default)]
    pub must_match: Vec<String>,
    /// Strings it must not match.
    #[serde(default)]
    pub must_not_match: Vec<String>,
    /// `rust` (the regex crate) or `ecmascript` (JavaScript/TypeScript); default rust.
    #[serde(default)]
    pub dialect: DialectParam,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RegexParams {
    /// What the pattern matches, in one line.
    pub description: String,
    #[serde(flatten)]
    pub examples: Examples,
    /// Give up after this many milliseconds, waiting in the queue included (default 120000).
    pub deadline_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RegexCheckParams {
    /// The pattern the edit introduces.
    pub pattern: String,
    #[serde(flatten)]
    pub examples: Examples,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CheckParams {
    /// The file, relative to the workspace root.
    pub file: String,
    /// The exact text the edit replaces; it must occur once in the file.
    pub old_text: String,
    /// What it becomes.
    pub new_text: String,
    /// Check a regex the edit introduces against examples.
    pub regex: Option<Strict<RegexCheckParams>>,
    /// Also type-check the edited file in a scratch copy of its crate or package (`cargo check`, `tsc`).
    #[serde(default)]
    pub compile: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read<T: DeserializeOwned + JsonSchema>(arguments: Value) -> Result<T, String> {
        serde_json::from_value::<Strict<T>>(arguments).map(|Strict(params)| params).map_err(|error| error.to_string())
    }

    #[test]
    fn unknown_fields_are_refused_by_name_at_the_top_and_inside_a_flattened_or_nested_struct() {
        let error = read::<FixParams>(json!({"file": "a.rs", "line": 1, "column": 2, "runn": true})).unwrap_err();
        assert!(error.starts_with("unknown field `runn`, expected one of "), "{error}");
        assert!(error.contains("`run`") && error.contains("`deadline_ms`"), "names the flattened fields: {error}");
        let error = read::<CheckParams>(json!({"file": "a", "old": "x", "new_text": "y"})).unwrap_err();
        assert!(error.starts_with("unknown field `old`"), "{error}");
        let nested = json!({"file": "a", "old_text": "x", "new_text": "y", "regex": {"pattern": "a", "must": []}});
        let error = read::<CheckParams>(nested).unwrap_err();
        assert!(error.starts_with("unknown field `must`"), "{error}");
        let error = read::<RegexParams>(json!({"description": "d", "dialect": "rust", "flavor": "pcre"})).unwrap_err();
        assert!(error.starts_with("unknown field `flavor`"), "{error}");
    }

    #[test]
    fn flattened_fields_are_read_with_their_defaults() {
        let fix: FixParams = read(json!({"file": "a.rs", "line": 1, "column": 2, "run": true})).unwrap();
        assert!(fix.options.run && !fix.options.write && fix.options.deadline_ms.is_none());
        let tests: TestsParams = read(json!({"file": "a.rs", "function": "f", "deadline_ms": 5})).unwrap();
        assert_eq!(tests.options.deadline_ms, Some(5));
        let regex: RegexParams =
            read(json!({"description": "d", "must_match": ["a"], "dialect": "ecmascript"})).unwrap();
        assert_eq!(regex.examples.must_match, ["a"]);
        assert!(matches!(regex.examples.dialect, DialectParam::Ecmascript));
        let wrong = read::<FixParams>(json!({"file": "a.rs", "line": "two", "column": 2})).unwrap_err();
        assert!(wrong.contains("invalid type"), "{wrong}");
        let missing = read::<RegexParams>(json!({"must_match": ["a"]})).unwrap_err();
        assert!(missing.contains("missing field `description`"), "{missing}");
    }

    /// The schema a client sees documents every field, the flattened ones included, and is closed.
    #[test]
    fn the_schemas_name_and_document_every_field_and_refuse_others() {
        let schema =
            serde_json::to_value(SchemaGenerator::default().into_root_schema_for::<Strict<FixParams>>()).unwrap();
        assert_eq!(schema["additionalProperties"], false, "{schema}");
        let properties = schema["properties"].as_object().unwrap();
        for field in ["file", "line", "column", "message", "code", "run", "write", "deadline_ms"] {
            assert!(properties.contains_key(field), "{field} missing: {schema}");
        }
        assert!(properties["run"]["description"].as_str().unwrap().contains("execution tier"), "{schema}");
        let required = schema["required"].as_array().unwrap();
        assert!(required.contains(&json!("line")) && !required.contains(&json!("run")), "{schema}");
        let schema =
            serde_json::to_value(SchemaGenerator::default().into_root_schema_for::<Strict<RegexParams>>()).unwrap();
        assert!(schema["properties"]["must_match"]["description"].is_string(), "{schema}");
    }
}
