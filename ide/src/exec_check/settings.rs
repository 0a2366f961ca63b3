//! The execution checks' settings (`verify.*`): which checks run and their time limit.

use std::time::Duration;

use serde::Deserialize;

/// Which execution checks run, and for how long each may take. On by default in the editor (they run only when
/// the user chooses an action, in a scratch copy, never on a keystroke); the CLI and MCP tools run them when
/// asked (`--run`, `run: true`). Without them the evaluation found every test Gemma 3 270M wrote wrong (0 of 42
/// right; 12 offered), and the static checks cannot see a fix's type error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VerifySettings {
    /// Type-check the edited file in a scratch copy of its crate or package before offering an edit.
    pub compile: bool,
    /// Run generated tests in the scratch copy; offered only when they pass.
    pub run_tests: bool,
    /// Time limit of one check (one command), in milliseconds.
    pub timeout_ms: u64,
    /// Type-check TypeScript candidates in the project's resident language service (`ts_service`, tens of
    /// milliseconds warm) rather than one `tsc --noEmit` run each (seconds); `tsc` stays the fallback.
    pub ts_service: bool,
}

impl Default for VerifySettings {
    fn default() -> Self {
        VerifySettings::all()
    }
}

impl VerifySettings {
    /// Both checks on: the editor's default, and what the CLI's `--run` asks.
    pub fn all() -> VerifySettings {
        VerifySettings { compile: true, run_tests: true, timeout_ms: 60_000, ts_service: true }
    }

    /// No command runs: the CLI and MCP tools without `--run`, and library callers that did not ask.
    pub fn off() -> VerifySettings {
        VerifySettings { compile: false, run_tests: false, ..VerifySettings::all() }
    }

    pub fn any(&self) -> bool {
        self.compile || self.run_tests
    }

    /// The commands these settings let Spark run, for `spark/status`.
    pub fn commands(&self) -> Vec<&'static str> {
        let mut commands = Vec::new();
        if self.compile {
            // The resident TypeScript checker (`ts_service`) is node running the TypeScript compiler's language service.
            commands.extend(["cargo check", "tsc --noEmit", "node ts-checker"]);
        }
        if self.run_tests {
            commands.extend(["cargo test", "vitest run", "jest", "node --test"]);
        }
        commands
    }

    pub(super) fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::exec_check::root_hash;
    #[test]
    fn status_lists_the_commands() {
        assert!(VerifySettings::off().commands().is_empty());
        assert!(VerifySettings::all().commands().contains(&"cargo test"));
        assert_ne!(root_hash(Path::new("/a")), root_hash(Path::new("/b")));
    }
}
