//! The resident TypeScript checker: one long-lived TypeScript language service per scratch copy (a node process
//! running `ide/ts-checker/checker.js`, shipped inside the binary), started on first need, kept warm between
//! candidates and tasks, started again when it died. A candidate's text goes to it in memory and it answers the
//! errors of the file and of the files that import it in `tsc --pretty false`'s format, in tens of milliseconds
//! where `tsc --noEmit` takes seconds (it starts, reads the lib files and checks the whole program every time).
//!
//! A service that cannot start (no node, no `typescript` package beside the project's `tsc`), dies, answers
//! garbage or passes its time limit is killed with its process group; the caller falls back to `tsc` for that
//! check. After [`MAX_FAILURES`] failures in a row the root's service is not tried again in this process.
//!
//! The process talks over pipes served by two threads of its own (a writer and a reader), so it does not belong
//! to any tokio runtime: the CLI, MCP and tests each run their own, and a service outlives them. It exits when
//! its stdin closes, which the kernel does when the server exits, however it exits.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::project::{cache_dir, find_tsc, Project};

/// The checker script, written under the cache directory on first use.
const CHECKER_JS: &str = include_str!("../../ts-checker/checker.js");

/// Failures in a row (start, crash, hang, bad answer) after which a root's service is given up on.
pub const MAX_FAILURES: u32 = 3;

/// The longest a warm service may take for one request (a cold one, which starts and reads the lib files, gets
/// the check's whole time limit).
pub const WARM_LIMIT: Duration = Duration::from_secs(10);

/// How to start a service: the program, its arguments and its working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub dir: PathBuf,
}

/// Why the service gave no answer; the caller falls back to `tsc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceError {
    /// No node or no `typescript` package: the service cannot run here.
    Unavailable(String),
    /// Given up on after [`MAX_FAILURES`] failures in a row.
    GivenUp,
    /// It could not start, died, hung past its limit or answered something unreadable (then it was killed).
    Failed(String),
    Cancelled,
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServiceError::Unavailable(why) => write!(f, "the TypeScript service cannot run here: {why}"),
            ServiceError::GivenUp => write!(f, "the TypeScript service failed {MAX_FAILURES} times in a row"),
            ServiceError::Failed(why) => write!(f, "the TypeScript service failed: {why}"),
            ServiceError::Cancelled => write!(f, "cancelled"),
        }
    }
}

/// One answer: the errors as `tsc --pretty false` prints them, and what it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAnswer {
    pub output: String,
    /// Milliseconds from the request to the answer, as Spark saw them (the service's own start included).
    pub ms: u64,
    /// The service was started for this request.
    pub cold: bool,
}

/// The command that starts the service for `project`, whose scratch copy is `copy`: node, the checker script,
/// the `typescript` package of the project's own `tsc` (else the one on PATH), and the copy.
pub fn service_command(project: &Project, copy: &Path) -> Result<ServiceCommand, ServiceError> {
    let node = find_on_path("node").ok_or_else(|| ServiceError::Unavailable("node is not on PATH".to_owned()))?;
    let tsc = find_tsc(project)
        .ok_or_else(|| ServiceError::Unavailable("no tsc in node_modules/.bin or on PATH".to_owned()))?;
    let typescript = typescript_module(&tsc).ok_or_else(|| {
        ServiceError::Unavailable(format!("no typescript/lib/typescript.js beside {}", tsc.display()))
    })?;
    let script = checker_script().map_err(ServiceError::Unavailable)?;
    let config = if project.root.join("tsconfig.json").is_file() { "tsconfig.json" } else { "" };
    let args = vec![
        script.to_string_lossy().into_owned(),
        typescript.to_string_lossy().into_owned(),
        copy.to_string_lossy().into_owned(),
        config.to_owned(),
    ];
    Ok(ServiceCommand { program: node, args, dir: copy.to_owned() })
}

/// The compiler module of a `tsc` launcher: `node_modules/.bin/tsc` links to `typescript/bin/tsc`, and the
/// module is `typescript/lib/typescript.js`.
pub fn typescript_module(tsc: &Path) -> Option<PathBuf> {
    let launcher = std::fs::canonicalize(tsc).ok()?;
    let module = launcher.parent()?.parent()?.join("lib/typescript.js");
    module.is_file().then_some(module)
}

/// Asks the service of `key` (one per scratch copy) for the errors of `file` (relative to the copy) with `text`
/// in memory (`None`: as on disk). Starts it when none runs; kills it at `limit` (a warm one at
/// [`WARM_LIMIT`] when that is shorter) or when it fails. Requests to one service are served one at a time.
pub async fn check(
    key: &Path,
    command: &ServiceCommand,
    file: &Path,
    text: Option<&str>,
    limit: Duration,
    cancel: &CancellationToken,
) -> Result<ServiceAnswer, ServiceError> {
    let slot =
        slots().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).entry(key.to_owned()).or_default().clone();
    let mut slot = slot.lock().await;
    if slot.failures >= MAX_FAILURES {
        return Err(ServiceError::GivenUp);
    }
    let started = Instant::now();
    let cold = slot.service.is_none();
    if cold {
        match Service::start(command) {
            Ok(service) => slot.service = Some(service),
            Err(why) => {
                slot.failures += 1;
                return Err(ServiceError::Failed(why));
            }
        }
    }
    let service = slot.service.as_mut().expect("a service was started above");
    let limit = if cold { limit } else { limit.min(WARM_LIMIT) };
    let request = serde_json::json!({ "id": service.next_id, "file": file.to_string_lossy(), "text": text });
    let outcome = service.ask(request, limit, cancel).await;
    match outcome {
        Ok(answer) => {
            slot.failures = 0;
            let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            // Where the time went: the program brought up to date, then each checked file's diagnostics.
            let (program_ms, files_ms) = (answer["programMs"].as_u64(), answer["times"].to_string());
            tracing::info!(ms, cold, ?program_ms, files_ms, "TypeScript service answered");
            let output = answer["output"].as_str().unwrap_or_default().to_owned();
            Ok(ServiceAnswer { output, ms, cold })
        }
        // A cancelled request leaves the service working on it; its late answer is skipped by id.
        Err(ServiceError::Cancelled) => Err(ServiceError::Cancelled),
        Err(error) => {
            slot.failures += 1;
            let service = slot.service.take().expect("the service asked above");
            let stderr = service.stderr_tail();
            drop(service);
            let error = match error {
                ServiceError::Failed(why) if !stderr.is_empty() => ServiceError::Failed(format!("{why}: {stderr}")),
                other => other,
            };
            tracing::warn!(%error, failures = slot.failures, "TypeScript service killed");
            Err(error)
        }
    }
}

/// Kills every service of this process (and its process group): for a server's shutdown. Their next request
/// would start them again.
pub fn shutdown_all() {
    let slots: Vec<_> = slots().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).values().cloned().collect();
    for slot in slots {
        if let Ok(mut slot) = slot.try_lock() {
            slot.service = None;
        } else {
            tracing::debug!("a TypeScript service is busy at shutdown; it exits when its stdin closes");
        }
    }
}

#[derive(Default)]
struct Slot {
    service: Option<Service>,
    failures: u32,
}

fn slots() -> &'static Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<Slot>>>> {
    static SLOTS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<Slot>>>>> = OnceLock::new();
    SLOTS.get_or_init(Default::default)
}

/// A running service: its process, the writer thread's queue and the reader thread's lines.
struct Service {
    child: std::process::Child,
    requests: std::sync::mpsc::Sender<String>,
    answers: tokio::sync::mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

/// The most of the service's stderr kept for a message.
const STDERR_KEPT: usize = 2048;

impl Service {
    fn start(command: &ServiceCommand) -> Result<Service, String> {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new(&command.program)
            .args(&command.args)
            .current_dir(&command.dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|error| format!("{}: {error}", command.program.display()))?;
        let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(mut stdin), Some(stdout), Some(stderr)) = (stdin, stdout, stderr) else {
            return Err("the service's pipes were not opened".to_owned());
        };
        let (requests, queue) = std::sync::mpsc::channel::<String>();
        let (lines, answers) = tokio::sync::mpsc::unbounded_channel();
        let kept = Arc::new(Mutex::new(String::new()));
        let spawned = std::thread::Builder::new().name("spark-ts-writer".into()).spawn(move || {
            for line in queue {
                if stdin.write_all(line.as_bytes()).and_then(|()| stdin.flush()).is_err() {
                    break;
                }
            }
        });
        let spawned = spawned.and_then(|_| {
            std::thread::Builder::new().name("spark-ts-reader".into()).spawn(move || {
                for line in std::io::BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if lines.send(line).is_err() {
                        break;
                    }
                }
            })
        });
        let spawned = spawned.and_then(|_| {
            let kept = kept.clone();
            std::thread::Builder::new().name("spark-ts-stderr".into()).spawn(move || {
                for line in std::io::BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let mut kept = kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    kept.push_str(&line);
                    kept.push('\n');
                    if kept.len() > STDERR_KEPT {
                        let cut = kept.len() - STDERR_KEPT;
                        let cut = (cut..kept.len()).find(|idx| kept.is_char_boundary(*idx)).unwrap_or(kept.len());
                        kept.drain(..cut);
                    }
                }
            })
        });
        let service = Service { child, requests, answers, stderr: kept, next_id: 1 };
        if let Err(error) = spawned {
            return Err(format!("threads for the service: {error}"));
        }
        tracing::info!(program = %command.program.display(), dir = %command.dir.display(), "TypeScript service started");
        Ok(service)
    }

    /// Sends one request and waits for the answer with its id (the service's greeting and late answers of
    /// cancelled requests are skipped).
    async fn ask(
        &mut self,
        request: serde_json::Value,
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, ServiceError> {
        let id = self.next_id;
        self.next_id += 1;
        if self.requests.send(format!("{request}\n")).is_err() {
            return Err(ServiceError::Failed("its stdin is closed".to_owned()));
        }
        let wait = async {
            loop {
                let Some(line) = self.answers.recv().await else {
                    return Err(ServiceError::Failed("it exited".to_owned()));
                };
                let Ok(answer) = serde_json::from_str::<serde_json::Value>(&line) else {
                    return Err(ServiceError::Failed(format!("an answer that is not JSON: {}", shorten(&line))));
                };
                if answer["id"].as_u64() != Some(id) {
                    continue;
                }
                if let Some(error) = answer["error"].as_str() {
                    return Err(ServiceError::Failed(shorten(error).to_owned()));
                }
                if !answer["output"].is_string() {
                    return Err(ServiceError::Failed("an answer without output".to_owned()));
                }
                return Ok(answer);
            }
        };
        tokio::select! {
            answer = wait => answer,
            _ = tokio::time::sleep(limit) => {
                Err(ServiceError::Failed(format!("no answer within {} ms", limit.as_millis())))
            }
            _ = cancel.cancelled() => Err(ServiceError::Cancelled),
        }
    }

    fn stderr_tail(&self) -> String {
        let kept = self.stderr.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("").trim().to_owned()
    }
}

impl Drop for Service {
    /// Kills the service's process group and reaps it (SIGKILL is not ignored: the wait is short).
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: killpg only sends a signal; the group is the one this service started (`process_group(0)`).
            unsafe {
                libc::killpg(pid, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
    }
}

fn shorten(text: &str) -> &str {
    let end = (0..=text.len().min(300)).rev().find(|idx| text.is_char_boundary(*idx)).unwrap_or(0);
    &text[..end]
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join(name)).find(|path| path.is_file())
}

/// Writes the checker script under the cache directory once (named by its content's hash, so a new version of
/// Spark never runs an old script).
fn checker_script() -> Result<PathBuf, String> {
    let dir = cache_dir().ok_or("no cache directory (HOME and XDG_CACHE_HOME unset)")?.join("ts-checker");
    let path = dir.join(format!("checker-{}.js", super::project::root_hash(Path::new(CHECKER_JS))));
    if std::fs::read_to_string(&path).is_ok_and(|text| text == CHECKER_JS) {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    // Written beside and renamed, so a concurrent start never reads half a script.
    let partial = dir.join(format!("checker-{}.partial", std::process::id()));
    std::fs::write(&partial, CHECKER_JS).map_err(|error| format!("{}: {error}", partial.display()))?;
    std::fs::rename(&partial, &path).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> ServiceCommand {
        ServiceCommand { program: "sh".into(), args: vec!["-c".into(), script.into()], dir: std::env::temp_dir() }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    fn key(name: &str) -> PathBuf {
        PathBuf::from(format!("/spark-test-service/{name}-{}", std::process::id()))
    }

    /// A fake service that answers every request with its id and a fixed error line.
    const ECHO: &str = r#"while read -r line; do id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/'); printf '{"id":%s,"output":"src/a.ts(1,1): error TS2304: Cannot find name '"'"'x'"'"'.\\n"}\n' "$id"; done"#;

    #[test]
    fn answers_come_back_by_id_and_the_service_stays_warm() {
        let runtime = runtime();
        let cancel = CancellationToken::new();
        let key = key("echo");
        let command = shell(ECHO);
        let first = runtime.block_on(check(&key, &command, Path::new("src/a.ts"), Some("x"), WARM_LIMIT, &cancel));
        let first = first.unwrap();
        assert!(first.cold);
        assert!(first.output.contains("TS2304"), "{first:?}");
        let second = runtime.block_on(check(&key, &command, Path::new("src/a.ts"), None, WARM_LIMIT, &cancel));
        assert!(!second.unwrap().cold);
    }

    #[test]
    fn a_hung_service_is_killed_at_its_limit_and_started_again() {
        let runtime = runtime();
        let cancel = CancellationToken::new();
        let key = key("hang");
        let limit = Duration::from_millis(300);
        let started = Instant::now();
        let hung = runtime.block_on(check(&key, &shell("sleep 60"), Path::new("a.ts"), None, limit, &cancel));
        assert!(matches!(&hung, Err(ServiceError::Failed(why)) if why.contains("no answer")), "{hung:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // The next request starts a new one, which answers.
        let again = runtime.block_on(check(&key, &shell(ECHO), Path::new("a.ts"), None, WARM_LIMIT, &cancel));
        assert!(again.unwrap().cold);
    }

    #[test]
    fn a_crash_is_reported_with_its_stderr_and_the_service_is_given_up_on_after_repeated_failures() {
        let runtime = runtime();
        let cancel = CancellationToken::new();
        let key = key("crash");
        let crash = shell("read -r line; echo 'TypeError: boom' >&2; exit 3");
        for _ in 0..MAX_FAILURES {
            let died = runtime.block_on(check(&key, &crash, Path::new("a.ts"), None, WARM_LIMIT, &cancel));
            assert!(matches!(&died, Err(ServiceError::Failed(why)) if why.contains("exited")), "{died:?}");
        }
        let given_up = runtime.block_on(check(&key, &shell(ECHO), Path::new("a.ts"), None, WARM_LIMIT, &cancel));
        assert_eq!(given_up, Err(ServiceError::GivenUp));
    }

    #[test]
    fn garbage_is_a_failure_and_a_missing_program_too() {
        let runtime = runtime();
        let cancel = CancellationToken::new();
        let garbage = shell("read -r line; echo 'not json'; sleep 60");
        let answer = runtime.block_on(check(&key("garbage"), &garbage, Path::new("a.ts"), None, WARM_LIMIT, &cancel));
        assert!(matches!(&answer, Err(ServiceError::Failed(why)) if why.contains("not JSON")), "{answer:?}");
        let missing = ServiceCommand { program: "/no/such/node".into(), args: vec![], dir: std::env::temp_dir() };
        let answer = runtime.block_on(check(&key("missing"), &missing, Path::new("a.ts"), None, WARM_LIMIT, &cancel));
        assert!(matches!(&answer, Err(ServiceError::Failed(why)) if why.contains("/no/such/node")), "{answer:?}");
    }

    #[test]
    fn the_compiler_module_is_found_beside_its_launcher() {
        let dir = std::env::temp_dir().join(format!("spark-ts-module-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("node_modules/typescript/bin")).unwrap();
        std::fs::create_dir_all(dir.join("node_modules/typescript/lib")).unwrap();
        std::fs::create_dir_all(dir.join("node_modules/.bin")).unwrap();
        std::fs::write(dir.join("node_modules/typescript/bin/tsc"), "").unwrap();
        std::fs::write(dir.join("node_modules/typescript/lib/typescript.js"), "").unwrap();
        std::os::unix::fs::symlink("../typescript/bin/tsc", dir.join("node_modules/.bin/tsc")).unwrap();
        let module = typescript_module(&dir.join("node_modules/.bin/tsc")).unwrap();
        assert!(module.ends_with("typescript/lib/typescript.js"), "{module:?}");
        assert_eq!(typescript_module(&dir.join("nothing")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
