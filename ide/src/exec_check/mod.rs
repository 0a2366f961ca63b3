//! Execution checks, the verification tier the user turns on (`verify.compile`, `verify.runTests`): a candidate
//! that passed `edit_check` is type-checked (`cargo check`, `tsc --noEmit`) and generated tests are run
//! (`cargo test`, vitest/jest/node:test) in a scratch copy of the file's crate or package, never in the user's tree.
//!
//! The copy lives under the user's cache directory (`$XDG_CACHE_HOME/spark/scratch/<hash of the root>/src`), is
//! made once per root and then only synced (files whose size or mtime changed); between two checks of one root
//! only the edited file differs. Cargo's build artefacts go to a target directory beside the copy that every
//! check of the root shares, so a second check recompiles the edited crate only. One check runs per root at a
//! time (a lock per root in this process, and a lock file beside the copy that other Spark processes on the
//! same root — a second editor, the CLI, the MCP server — wait for); each command has a time limit and its whole process group is killed
//! when the limit or a cancellation comes.
//!
//! The pure parts — finding the root, building commands, parsing `cargo --message-format=json` and `tsc` output,
//! judging a candidate against the errors of the original text — are plain functions, tested as such.

mod gate;
mod parse;
mod project;
mod scratch;
mod settings;
mod steps;
pub mod ts_service;

pub use gate::Gate;
pub use parse::*;
pub use project::*;
pub use scratch::{sync_tree, Capped, ScratchSession, OUTPUT_CAP};
pub use settings::VerifySettings;
pub use steps::*;

/// What a command left behind.
#[derive(Debug)]
pub struct Ran {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub ms: u64,
}

/// Why a check could not be made (as opposed to a candidate that failed it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unchecked {
    NoProject,
    Tool(String),
}

/// Why a check did not pass.
#[derive(Debug)]
enum Checked {
    Refused(String),
    Unchecked(Unchecked),
}

fn last_line(text: &str) -> &str {
    text.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("").trim()
}
