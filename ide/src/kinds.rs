//! The plain data every layer of the core names: the kinds of task, a file change, and the test framework of a
//! TypeScript package. Nothing here runs a task; the tasks, the execution checks and the front ends all read it.

use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskKind {
    Fix,
    Tests,
    Regex,
}

impl TaskKind {
    pub fn command(self) -> &'static str {
        match self {
            TaskKind::Fix => "spark.fix",
            TaskKind::Tests => "spark.generateTests",
            TaskKind::Regex => "spark.generateRegex",
        }
    }

    pub fn from_command(command: &str) -> Option<TaskKind> {
        [TaskKind::Fix, TaskKind::Tests, TaskKind::Regex].into_iter().find(|kind| kind.command() == command)
    }

    /// The message when no sample passed verification.
    pub fn nothing_verified(self) -> &'static str {
        match self {
            TaskKind::Fix => "Spark found no verified fix",
            TaskKind::Tests => "Spark found no verified tests",
            TaskKind::Regex => "Spark found no verified regex",
        }
    }
}

/// One file's change: `replace` (bytes of `old_text`) becomes `insert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// `None`: the task's own document.
    pub path: Option<PathBuf>,
    pub create: bool,
    pub old_text: String,
    pub replace: Range<usize>,
    pub insert: String,
}

impl AsRef<FileChange> for FileChange {
    fn as_ref(&self) -> &FileChange {
        self
    }
}

impl FileChange {
    pub fn new_text(&self) -> String {
        format!("{}{}{}", &self.old_text[..self.replace.start], self.insert, &self.old_text[self.replace.end..])
    }

    /// The change as a unified diff of the file `shown` (from `/dev/null` when it creates the file).
    pub fn unified_diff(&self, shown: &str) -> String {
        unified_diff(&self.old_text, &self.new_text(), if self.create { "/dev/null" } else { shown }, shown)
    }
}

/// The test framework a TypeScript project uses, from the nearest package.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsFramework {
    Vitest,
    Jest,
    NodeTest,
}

pub fn ts_framework(file: Option<&Path>) -> TsFramework {
    let mut dir = file.and_then(Path::parent);
    while let Some(current) = dir {
        if let Ok(text) = std::fs::read_to_string(current.join("package.json")) {
            if let Ok(package) = serde_json::from_str::<serde_json::Value>(&text) {
                let has = |name: &str| {
                    ["dependencies", "devDependencies"].iter().any(|section| package[section].get(name).is_some())
                };
                if has("vitest") {
                    return TsFramework::Vitest;
                }
                if has("jest") || has("ts-jest") || has("@jest/globals") {
                    return TsFramework::Jest;
                }
            }
            return TsFramework::NodeTest;
        }
        dir = current.parent();
    }
    TsFramework::NodeTest
}

/// A unified diff of `old` (named `old_name`) to `new` (named `new_name`), line by line.
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new).unified_diff().header(old_name, new_name).to_string()
}
