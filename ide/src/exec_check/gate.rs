//! `Gate`: one task's execution checks, asked once per candidate; the original text's errors are computed once
//! per task and a candidate is judged against them.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::parse::*;
use super::project::*;
use super::scratch::{Scratch, ScratchSession};
use super::settings::VerifySettings;
use super::steps::*;
use super::ts_service::{self, ServiceError};
use super::{last_line, Checked, Unchecked};
use crate::kinds::{FileChange, TaskKind};

/// One task's execution checks: built once per task, asked once per candidate that passed `edit_check`.
pub struct Gate<'a> {
    settings: VerifySettings,
    kind: TaskKind,
    path: Option<&'a Path>,
    original: &'a str,
    target_message: Option<&'a str>,
    /// The original text does not parse (a syntax error): a candidate may leave no error in the edited file.
    broken: bool,
    /// The original text's errors and the compiler's whole output for it (where the fix path reads the
    /// compiler's own suggestions), computed at most once per task: when a candidate has errors, or when asked.
    baseline: tokio::sync::OnceCell<Result<(Vec<CompilerError>, String), String>>,
    /// The same under the resident TypeScript service (whose errors cover the file and its importers, not the
    /// whole program: a candidate is judged against a baseline of its own kind).
    resident_baseline: tokio::sync::OnceCell<(Vec<CompilerError>, String)>,
    /// What ran for the candidate that passed, for the outcome's title.
    passed: Mutex<Vec<String>>,
}

impl<'a> Gate<'a> {
    pub fn new(
        settings: VerifySettings,
        kind: TaskKind,
        path: Option<&'a Path>,
        original: &'a str,
        target_message: Option<&'a str>,
    ) -> Gate<'a> {
        Gate {
            settings,
            kind,
            path,
            original,
            target_message,
            broken: false,
            baseline: tokio::sync::OnceCell::new(),
            resident_baseline: tokio::sync::OnceCell::new(),
            passed: Mutex::new(Vec::new()),
        }
    }

    /// Says whether the original text does not parse: then the compiler's errors for it are its recovery's, and
    /// a candidate is refused for any error in the edited file, not only on the edited lines (a `;` put after
    /// `let Self { mask }` "fixed" a stray `let`: the function then returned `()`, and rustc had said so of
    /// the original too).
    pub fn original_broken(mut self, broken: bool) -> Self {
        self.broken = broken;
        self
    }

    fn edited(&self, path: &Path, change: &FileChange) -> EditedLines {
        EditedLines { whole_file: self.broken, ..EditedLines::of(path, change) }
    }

    fn compile_on(&self) -> bool {
        self.settings.compile
    }

    fn tests_on(&self) -> bool {
        self.settings.run_tests && self.kind == TaskKind::Tests
    }

    /// Runs the checks the settings turn on for one candidate. `Err` is the refusal to record; a project that
    /// cannot be checked (no manifest, no compiler) lets the candidate through, logged, with nothing claimed.
    pub async fn check(&self, change: &FileChange, cancel: &CancellationToken) -> Result<(), String> {
        self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
        if !self.compile_on() && !self.tests_on() {
            return Ok(());
        }
        let Some(path) = self.path else {
            tracing::info!("execution check skipped: the document has no file path");
            return Ok(());
        };
        let Some(project) = find_project(path) else {
            tracing::info!(path = %path.display(), "execution check skipped: no Cargo.toml, tsconfig.json or package.json above the file");
            return Ok(());
        };
        match self.check_in(&project, change, cancel).await {
            Ok(ran) => {
                *self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = ran;
                Ok(())
            }
            Err(Checked::Refused(reason)) => Err(reason),
            Err(Checked::Unchecked(why)) => {
                tracing::warn!(?why, "execution check skipped");
                Ok(())
            }
        }
    }

    /// Whether candidates are type-checked: `verify.compile` on and a crate or package around the document (its
    /// toolchain may still turn out to be missing: then a candidate passes unchecked, see [`Gate::ran_any`]).
    pub fn compiles(&self) -> bool {
        self.compile_on() && self.path.is_some_and(|path| find_project(path).is_some())
    }

    /// Whether a command ran for the last candidate that passed (false: it passed unchecked, no project or tool).
    pub fn ran_any(&self) -> bool {
        !self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_empty()
    }

    /// What the last accepted candidate passed, e.g. " (cargo check passed, 812 ms)", or "".
    pub fn summary(&self) -> String {
        let passed = self.passed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if passed.is_empty() {
            String::new()
        } else {
            format!(" ({})", passed.join(", "))
        }
    }

    async fn check_in(
        &self,
        project: &Project,
        change: &FileChange,
        cancel: &CancellationToken,
    ) -> Result<Vec<String>, Checked> {
        let scratch = Scratch::lock(project).await?;
        let edited_path = match &change.path {
            None => project.file.clone(),
            Some(other) => other.strip_prefix(&project.root).map(Path::to_owned).map_err(|_| {
                Checked::Unchecked(Unchecked::Tool(format!("{} is outside the project", other.display())))
            })?,
        };
        let new_text = change.new_text();
        let mut ran = Vec::new();
        match project.kind {
            ProjectKind::Cargo => {
                let filter = if self.tests_on() {
                    let file_in_crate = project.file.strip_prefix(&project.crate_dir).unwrap_or(&project.file);
                    let before = change.old_text.get(..change.replace.start).unwrap_or("");
                    Some(rust_test_filter(file_in_crate, before, &change.insert).ok_or_else(|| {
                        Checked::Unchecked(Unchecked::Tool("no test name in the generated code".to_owned()))
                    })?)
                } else {
                    None
                };
                // `cargo test` compiles the tests itself: a separate `cargo check` would only repeat that work.
                if self.compile_on() && filter.is_none() {
                    let step = cargo_check_step(project, self.kind == TaskKind::Tests);
                    let candidate = scratch.run_with(&edited_path, &new_text, &step, self.settings, cancel).await?;
                    let errors = parse_cargo_json(&candidate.stdout);
                    let edited = self.edited(&edited_path, change);
                    self.judge_errors(&scratch, &edited, &step, &errors, parse_cargo_json, cancel).await?;
                    // A failure without a compiler error is the toolchain's or the environment's (no toolchain
                    // for this HOME, an offline registry), not the candidate's: nothing is claimed either way.
                    if errors.is_empty() && candidate.status != Some(0) {
                        let why = format!("cargo check failed: {}", last_line(&candidate.stderr));
                        return Err(Checked::Unchecked(Unchecked::Tool(why)));
                    }
                    ran.push(format!("cargo check passed, {} ms", candidate.ms));
                }
                if let Some(filter) = filter {
                    let step = cargo_test_step(project, &filter);
                    let outcome = scratch.run_with(&edited_path, &new_text, &step, self.settings, cancel).await?;
                    let errors = parse_cargo_json(&outcome.stdout);
                    if let Some(error) = errors.first() {
                        return Err(Checked::Refused(format!("cargo test: {error}")));
                    }
                    let counts = parse_libtest(&outcome.stdout);
                    let started = outcome.stdout.lines().any(|line| line.starts_with("running "));
                    if !started && outcome.status != Some(0) {
                        // No compiler error and no test started: the toolchain failed, not the test.
                        let why = format!("cargo test failed: {}", last_line(&outcome.stderr));
                        return Err(Checked::Unchecked(Unchecked::Tool(why)));
                    }
                    if counts.failed > 0 || outcome.status != Some(0) {
                        let panic = outcome.stdout.lines().find(|line| line.contains("panicked at")).map(str::trim);
                        return Err(Checked::Refused(format!(
                            "cargo test: the generated test fails{}",
                            panic.map(|line| format!(": {line}")).unwrap_or_default()
                        )));
                    }
                    if counts.passed == 0 {
                        return Err(Checked::Refused(format!("cargo test: no test named {filter} ran")));
                    }
                    ran.push(format!("cargo test passed, {} ms", outcome.ms));
                }
            }
            ProjectKind::Node => {
                if self.compile_on() {
                    let candidate =
                        Candidate { path: &edited_path, text: &new_text, edited: self.edited(&edited_path, change) };
                    match self.check_resident(&scratch, &candidate, cancel).await {
                        Ok(passed) => ran.push(passed?),
                        Err(why) => {
                            if self.settings.ts_service {
                                tracing::warn!(%why, "the resident TypeScript checker gave no answer: tsc --noEmit instead");
                            }
                            ran.push(self.check_tsc(&scratch, &candidate, cancel).await?);
                        }
                    }
                }
                if self.tests_on() {
                    let framework = crate::kinds::ts_framework(Some(&project.root.join(&project.file)));
                    let outcome = match js_test_step(project, &edited_path, node_major().await) {
                        Ok(step) => scratch.run_with(&edited_path, &new_text, &step, self.settings, cancel).await?,
                        Err(why) => {
                            let tsc = find_tsc(project)
                                .filter(|_| framework == crate::kinds::TsFramework::NodeTest)
                                .ok_or(Checked::Unchecked(Unchecked::Tool(why)))?;
                            // Inside the copy, so that the package's dependencies resolve from the
                            // JavaScript as from the sources (the copy's node_modules links the project's).
                            let out_dir = scratch.copy.join(".spark-js");
                            let _ = std::fs::remove_dir_all(&out_dir);
                            let [emit, run] = node_test_via_tsc(project, tsc, &edited_path, &out_dir)
                                .map_err(|why| Checked::Unchecked(Unchecked::Tool(why)))?;
                            // Type errors still emit JavaScript; whether the test runs is what is asked here.
                            let emitted =
                                scratch.run_with(&edited_path, &new_text, &emit, self.settings, cancel).await?;
                            if !Path::new(&run.args[1]).is_file() {
                                let reason = parse_tsc(&emitted.stdout).first().map(ToString::to_string);
                                return Err(Checked::Refused(format!(
                                    "tsc: the test did not compile{}",
                                    reason.map(|error| format!(": {error}")).unwrap_or_default()
                                )));
                            }
                            let ran = scratch.run(&run, self.settings, cancel).await;
                            let _ = std::fs::remove_dir_all(&out_dir);
                            let mut outcome = ran?;
                            outcome.ms += emitted.ms;
                            outcome
                        }
                    };
                    let label = js_label(framework);
                    let output = format!("{}\n{}", outcome.stdout, outcome.stderr);
                    let counts = parse_js_tests(&output);
                    if outcome.status != Some(0) || counts.failed > 0 {
                        return Err(Checked::Refused(format!("{label}: the generated test fails")));
                    }
                    if counts.passed == 0 {
                        return Err(Checked::Refused(format!("{label}: no test ran")));
                    }
                    ran.push(format!("{label} passed, {} ms", outcome.ms));
                }
            }
        }
        Ok(ran)
    }

    /// `tsc --noEmit` on the scratch copy with the candidate written into it; what passed, or why not.
    async fn check_tsc(
        &self,
        scratch: &Scratch,
        candidate: &Candidate<'_>,
        cancel: &CancellationToken,
    ) -> Result<String, Checked> {
        let Candidate { path: edited_path, text: new_text, ref edited } = *candidate;
        let project = &scratch.project;
        let tsc = find_tsc(project)
            .ok_or_else(|| Checked::Unchecked(Unchecked::Tool("no tsc in node_modules/.bin or on PATH".to_owned())))?;
        let has_tsconfig = project.root.join("tsconfig.json").is_file();
        let build_info = scratch.target.join("tsc.tsbuildinfo");
        let step = tsc_step(tsc, has_tsconfig, edited_path, &build_info);
        let candidate = scratch.run_with(edited_path, new_text, &step, self.settings, cancel).await?;
        let errors = parse_tsc_errors(&candidate.stdout);
        self.judge_errors(scratch, edited, &step, &errors, parse_tsc_errors, cancel).await?;
        // tsc exits non-zero for the errors `parse_tsc_errors` leaves out (a package the checkout has not
        // installed) too: only a failure with no error reported at all is the toolchain's.
        if parse_tsc(&candidate.stdout).is_empty() && candidate.status != Some(0) {
            let why = format!("tsc failed: {}", last_line(&candidate.stderr));
            return Err(Checked::Unchecked(Unchecked::Tool(why)));
        }
        Ok(format!("tsc passed, {} ms", candidate.ms))
    }

    /// The candidate through the project's resident TypeScript service (`ts_service`): its text in memory, the
    /// errors of the file and of its importers judged against the original text's under the same service. The
    /// outer `Err` says why the service gave no answer (the caller runs `tsc` instead); the inner result is the
    /// check's.
    async fn check_resident(
        &self,
        scratch: &Scratch,
        candidate: &Candidate<'_>,
        cancel: &CancellationToken,
    ) -> Result<Result<String, Checked>, ServiceError> {
        let Candidate { path: edited_path, text: new_text, ref edited } = *candidate;
        if !self.settings.ts_service {
            return Err(ServiceError::Unavailable("verify.tsService is off".to_owned()));
        }
        let command = ts_service::service_command(&scratch.project, &scratch.copy)?;
        let limit = self.settings.timeout();
        let candidate = ts_service::check(&scratch.copy, &command, edited_path, Some(new_text), limit, cancel).await;
        let candidate = match candidate {
            Err(ServiceError::Cancelled) => return Ok(Err(Checked::Refused("tsc cancelled".to_owned()))),
            other => other?,
        };
        let errors = parse_tsc_errors(&candidate.output);
        let label = "tsc (resident service)";
        if errors.is_empty() {
            return Ok(Ok(format!("tsc passed (resident service), {} ms", candidate.ms)));
        }
        if let Some(error) = errors.iter().find(|error| edited.contains(error)) {
            return Ok(Err(Checked::Refused(format!("{label}: in the edit: {error}"))));
        }
        let baseline = match self.resident_baseline(scratch, edited_path, cancel).await {
            Ok((errors, _)) => errors,
            Err(ServiceError::Cancelled) => return Ok(Err(Checked::Refused("tsc cancelled".to_owned()))),
            Err(error) => return Err(error),
        };
        Ok(judge(&errors, Some(&baseline), self.target_message, Some(edited))
            .map(|()| format!("tsc passed (resident service), {} ms", candidate.ms))
            .map_err(|reason| Checked::Refused(format!("{label}: {reason}"))))
    }

    /// The original text's errors and output under the resident service, once per task for the task's own file
    /// (a created test file, which had no original, is asked each time).
    async fn resident_baseline(
        &self,
        scratch: &Scratch,
        edited_path: &Path,
        cancel: &CancellationToken,
    ) -> Result<(Vec<CompilerError>, String), ServiceError> {
        if !self.settings.ts_service {
            return Err(ServiceError::Unavailable("verify.tsService is off".to_owned()));
        }
        let command = ts_service::service_command(&scratch.project, &scratch.copy)?;
        let ask = || async {
            // The copy holds the original tree (the service's candidates never touch it).
            let original = (edited_path == scratch.project.file).then_some(self.original);
            let limit = self.settings.timeout();
            let answer = ts_service::check(&scratch.copy, &command, edited_path, original, limit, cancel).await?;
            Ok((parse_tsc_errors(&answer.output), answer.output))
        };
        if edited_path != scratch.project.file {
            return ask().await;
        }
        self.resident_baseline.get_or_try_init(ask).await.cloned()
    }

    /// Refuses a candidate whose errors the original text did not have; the original's errors are computed once
    /// per task, and only when a candidate has any.
    async fn judge_errors(
        &self,
        scratch: &Scratch,
        edited: &EditedLines,
        step: &Step,
        errors: &[CompilerError],
        parse: impl Fn(&str) -> Vec<CompilerError>,
        cancel: &CancellationToken,
    ) -> Result<(), Checked> {
        if errors.is_empty() {
            return Ok(());
        }
        // An error on the edited lines refuses the candidate whatever the original had: no need to compile it.
        if let Some(error) = errors.iter().find(|error| edited.contains(error)) {
            return Err(Checked::Refused(format!("{}: in the edit: {error}", step.label)));
        }
        let baseline = self.baseline(scratch, Path::new(&edited.file), step, parse, cancel).await;
        let baseline = baseline.as_ref().ok().map(|(errors, _)| errors.as_slice());
        judge(errors, baseline, self.target_message, Some(edited))
            .map_err(|reason| Checked::Refused(format!("{}: {reason}", step.label)))
    }

    /// The original text's errors and output under `step`, run once per task.
    async fn baseline(
        &self,
        scratch: &Scratch,
        edited_path: &Path,
        step: &Step,
        parse: impl Fn(&str) -> Vec<CompilerError>,
        cancel: &CancellationToken,
    ) -> &Result<(Vec<CompilerError>, String), String> {
        self.baseline
            .get_or_init(|| async {
                // The original of the edited file (a created test file had none).
                let original = if edited_path == scratch.project.file { Some(self.original) } else { None };
                match scratch.run_original(edited_path, original, step, self.settings, cancel).await {
                    Ok(ran) => Ok((parse(&ran.stdout), ran.stdout)),
                    Err(error) => Err(format!("{error:?}")),
                }
            })
            .await
    }

    /// The compiler's output for the task's document as it is (`cargo check --message-format=json`, or `tsc`),
    /// the same run that candidates' errors are judged against: the fix path reads the compiler's own suggested
    /// edits from it. `None` when `verify.compile` is off or no compiler could run here.
    pub async fn original_output(&self, cancel: &CancellationToken) -> Option<(Project, String)> {
        if !self.compile_on() {
            return None;
        }
        let project = find_project(self.path?)?;
        let scratch = Scratch::lock(&project).await.ok()?;
        let baseline = match project.kind {
            ProjectKind::Cargo => {
                let step = cargo_check_step(&project, self.kind == TaskKind::Tests);
                self.baseline(&scratch, &project.file, &step, parse_cargo_json, cancel).await
            }
            ProjectKind::Node => {
                match self.resident_baseline(&scratch, &project.file, cancel).await {
                    Ok((_, output)) => return Some((project.clone(), output)),
                    Err(why) => {
                        tracing::warn!(%why, "the resident TypeScript checker gave no answer: tsc --noEmit instead")
                    }
                }
                let step = tsc_step(
                    find_tsc(&project)?,
                    project.root.join("tsconfig.json").is_file(),
                    &project.file,
                    &scratch.target.join("tsc.tsbuildinfo"),
                );
                self.baseline(&scratch, &project.file, &step, parse_tsc_errors, cancel).await
            }
        };
        baseline.as_ref().ok().map(|(_, output)| (project.clone(), output.clone()))
    }
}

impl Gate<'_> {
    /// The scratch copy of the document's project, locked, for a task that runs the user's code there. `Err`
    /// says why no code may run: `verify.runTests` off, a document without a file, no project around it.
    pub async fn scratch_session(&self) -> Result<ScratchSession, String> {
        if !self.tests_on() {
            return Err("verify.runTests is off".to_owned());
        }
        let path = self.path.ok_or("the document has no file on disk")?;
        let project = find_project(path).ok_or("no Cargo.toml, tsconfig.json or package.json above the file")?;
        let scratch = Scratch::lock(&project).await.map_err(|error| format!("{error:?}"))?;
        Ok(ScratchSession { scratch })
    }

    /// The time limit of one command under these settings.
    pub fn time_limit(&self) -> Duration {
        self.settings.timeout()
    }
}

/// A candidate as the checks see it: the file it edits (relative to the project), its whole new text and the
/// lines it changed.
struct Candidate<'a> {
    path: &'a Path,
    text: &'a str,
    edited: EditedLines,
}

async fn node_major() -> Option<u32> {
    let output = tokio::process::Command::new("node").arg("--version").output().await.ok()?;
    let version = String::from_utf8_lossy(&output.stdout);
    version.trim().trim_start_matches('v').split('.').next()?.parse().ok()
}
