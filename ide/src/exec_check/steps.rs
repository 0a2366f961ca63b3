//! Pure builders of the commands an execution check runs in the scratch copy: `cargo check`, `cargo test`,
//! `tsc --noEmit`, and the TypeScript test runners.

use std::path::{Path, PathBuf};

use super::project::Project;

/// A command to run in the scratch copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Relative to the scratch copy.
    pub dir: PathBuf,
    /// What the user is told ran, e.g. "cargo check".
    pub label: &'static str,
}

/// `cargo check` (with the test code when `tests`) of the project's package.
pub fn cargo_check_step(project: &Project, tests: bool) -> Step {
    let mut args = vec!["check".to_owned(), "--message-format=json".to_owned(), "--quiet".to_owned()];
    if let Some(package) = &project.package {
        args.extend(["-p".to_owned(), package.clone()]);
    }
    if tests {
        args.push("--tests".to_owned());
    }
    Step { program: "cargo".into(), args, dir: project.crate_dir.clone(), label: "cargo check" }
}

/// `cargo test` of the one generated test, by its exact name.
pub fn cargo_test_step(project: &Project, filter: &str) -> Step {
    let mut args = vec!["test".to_owned(), "--message-format=json".to_owned(), "--quiet".to_owned()];
    if let Some(package) = &project.package {
        args.extend(["-p".to_owned(), package.clone()]);
    }
    let file_in_crate = project.file.strip_prefix(&project.crate_dir).unwrap_or(&project.file);
    let is_bin = file_in_crate == Path::new("src/main.rs");
    args.push(if is_bin { "--bins" } else { "--lib" }.to_owned());
    args.extend(["--".to_owned(), "--exact".to_owned(), filter.to_owned()]);
    Step { program: "cargo".into(), args, dir: project.crate_dir.clone(), label: "cargo test" }
}

/// `tsc --noEmit`: on the project (`-p tsconfig.json`) when it has one, else on the edited file alone (`file`,
/// relative to the project root: a generated test file, not the source it tests, which it imports; bundler
/// resolution, which takes relative imports with or without an extension, as the resident checker); incremental,
/// with its build info kept beside the scratch copy so that a second check re-checks only what changed.
pub fn tsc_step(tsc: PathBuf, has_tsconfig: bool, file: &Path, build_info: &Path) -> Step {
    let mut args = vec!["--noEmit".to_owned(), "--pretty".to_owned(), "false".to_owned(), "--incremental".to_owned()];
    args.extend(["--tsBuildInfoFile".to_owned(), build_info.to_string_lossy().into_owned()]);
    if has_tsconfig {
        args.extend(["-p".to_owned(), "tsconfig.json".to_owned()]);
    } else {
        args.extend(
            [
                "--strict",
                "--skipLibCheck",
                "--target",
                "es2022",
                "--module",
                "esnext",
                "--moduleResolution",
                "bundler",
                "--allowImportingTsExtensions",
            ]
            .map(str::to_owned),
        );
        args.push(file.to_string_lossy().into_owned());
    }
    Step { program: tsc, args, dir: PathBuf::new(), label: "tsc --noEmit" }
}

/// The test runner of a TypeScript package, from its package.json.
pub fn js_test_step(project: &Project, test_file: &Path, node_major: Option<u32>) -> Result<Step, String> {
    let bin = |name: &str| project.node_modules.as_ref().map(|dir| dir.join(".bin").join(name)).filter(|p| p.exists());
    let file = test_file.to_string_lossy().into_owned();
    match crate::kinds::ts_framework(Some(&project.root.join(&project.file))) {
        crate::kinds::TsFramework::Vitest => {
            let vitest = bin("vitest").ok_or("vitest is not installed in node_modules")?;
            Ok(Step { program: vitest, args: vec!["run".into(), file], dir: PathBuf::new(), label: "vitest run" })
        }
        crate::kinds::TsFramework::Jest => {
            let jest = bin("jest").ok_or("jest is not installed in node_modules")?;
            Ok(Step { program: jest, args: vec!["--runTestsByPath".into(), file], dir: PathBuf::new(), label: "jest" })
        }
        crate::kinds::TsFramework::NodeTest => {
            // Node runs TypeScript itself from 22.6 on (type stripping); before that it needs a loader.
            if node_major.is_some_and(|major| major >= 23) {
                Ok(Step {
                    program: "node".into(),
                    args: vec!["--test".into(), file],
                    dir: PathBuf::new(),
                    label: "node --test",
                })
            } else if node_major.is_some_and(|major| major >= 22) {
                let args = vec!["--experimental-strip-types".into(), "--test".into(), file];
                Ok(Step { program: "node".into(), args, dir: PathBuf::new(), label: "node --test" })
            } else {
                Err("node:test on TypeScript needs Node 22.6 or later".to_owned())
            }
        }
    }
}

/// node:test on a Node that cannot run TypeScript: the project's `tsc` compiles it (CommonJS packages only) into
/// `out_dir` (inside the copy, where `node_modules` resolves; tsc leaves its outDir out of the program), then node runs the JavaScript of the test file. Returns both steps.
pub fn node_test_via_tsc(
    project: &Project,
    tsc: PathBuf,
    test_file: &Path,
    out_dir: &Path,
) -> Result<[Step; 2], String> {
    let package = std::fs::read_to_string(project.root.join("package.json")).unwrap_or_default();
    let package: serde_json::Value = serde_json::from_str(&package).unwrap_or_default();
    if package["type"] == "module" {
        return Err("node:test on an ES-module TypeScript package needs Node 22.6 or later".to_owned());
    }
    let out = out_dir.to_string_lossy().into_owned();
    let mut args: Vec<String> = if project.root.join("tsconfig.json").is_file() {
        ["-p", "tsconfig.json", "--noEmit", "false", "--incremental", "false", "--composite", "false"]
            .map(str::to_owned)
            .to_vec()
    } else {
        let mut args: Vec<String> =
            ["--target", "es2022", "--module", "commonjs", "--esModuleInterop", "--skipLibCheck"]
                .map(str::to_owned)
                .to_vec();
        args.push(test_file.to_string_lossy().into_owned());
        args
    };
    args.extend(["--outDir".to_owned(), out, "--rootDir".to_owned(), ".".to_owned()]);
    args.extend(["--declaration", "false", "--sourceMap", "false", "--pretty", "false"].map(str::to_owned));
    let emit = Step { program: tsc, args, dir: PathBuf::new(), label: "tsc" };
    let javascript = out_dir.join(test_file).with_extension("js");
    let run = Step {
        program: "node".into(),
        args: vec!["--test".into(), javascript.to_string_lossy().into_owned()],
        dir: PathBuf::new(),
        label: "node --test",
    };
    Ok([emit, run])
}

pub(super) fn js_label(framework: crate::kinds::TsFramework) -> &'static str {
    match framework {
        crate::kinds::TsFramework::Vitest => "vitest run",
        crate::kinds::TsFramework::Jest => "jest",
        crate::kinds::TsFramework::NodeTest => "node --test",
    }
}

/// `cargo test --no-run` of the project's package: builds the test binary of the file's target; its path is in
/// the JSON output ([`test_executable`]).
pub fn cargo_build_tests_step(project: &Project) -> Step {
    let mut step = cargo_test_step(project, "");
    let separator = step.args.iter().position(|arg| arg == "--").unwrap_or(step.args.len());
    step.args.truncate(separator);
    step.args.push("--no-run".to_owned());
    step.label = "cargo test --no-run";
    step
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec_check::{package_name, ProjectKind};
    #[test]
    fn manifests_and_commands() {
        let manifest = "[package]\nname = \"tiny-crate\"\nversion = \"0.1.0\"\n\n[dependencies]\nname = 1\n";
        assert_eq!(package_name(manifest).as_deref(), Some("tiny-crate"));
        assert_eq!(package_name("[workspace]\nmembers = []\n"), None);
        let project = Project {
            kind: ProjectKind::Cargo,
            root: "/w".into(),
            file: "crates/a/src/lib.rs".into(),
            package: Some("a".into()),
            crate_dir: "crates/a".into(),
            node_modules: None,
        };
        let check = cargo_check_step(&project, false);
        assert_eq!(check.args.join(" "), "check --message-format=json --quiet -p a");
        assert_eq!(check.dir, PathBuf::from("crates/a"));
        assert_eq!(cargo_check_step(&project, true).args.last().map(String::as_str), Some("--tests"));
        let test = cargo_test_step(&project, "tests::f_works");
        assert_eq!(test.args.join(" "), "test --message-format=json --quiet -p a --lib -- --exact tests::f_works");
        let info = Path::new("/c/tsc.tsbuildinfo");
        let source = Path::new("src/m.ts");
        assert_eq!(
            tsc_step("tsc".into(), true, source, info).args.join(" "),
            "--noEmit --pretty false --incremental --tsBuildInfoFile /c/tsc.tsbuildinfo -p tsconfig.json"
        );
        assert!(tsc_step("tsc".into(), false, source, info).args.last().is_some_and(|arg| arg == "src/m.ts"));
        // Without a tsconfig a generated test file is what tsc checks (it imports the source).
        let test_file = Path::new("src/m.test.ts");
        assert!(tsc_step("tsc".into(), false, test_file, info).args.last().is_some_and(|arg| arg == "src/m.test.ts"));
    }
}
