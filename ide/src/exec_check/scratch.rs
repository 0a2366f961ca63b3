//! The scratch copies (IO): a root's copy under the cache directory, synced from the source tree and locked per
//! root; commands run in it with a time limit, their process group killed at the limit or a cancellation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::project::{cache_dir, root_hash, Project};
use super::settings::VerifySettings;
use super::steps::Step;
use super::{Checked, Ran, Unchecked};

/// A scratch copy held for a task that runs code of its own there (characterisation tests): the task writes
/// files into the copy and runs commands with a time limit and a cap on their output; the process group is
/// killed at either. The next check of the root syncs the copy back to the user's tree.
pub struct ScratchSession {
    pub(super) scratch: Scratch,
}

/// What a command run by a [`ScratchSession`] left: its output up to the cap, even when it was killed.
#[derive(Debug, Clone, Default)]
pub struct Capped {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub ms: u64,
    /// Killed at the time limit.
    pub timed_out: bool,
    /// Killed for writing more than the cap.
    pub truncated: bool,
}

/// The most a command run by a [`ScratchSession`] may write to each of stdout and stderr.
pub const OUTPUT_CAP: usize = 4 << 20;

impl ScratchSession {
    pub fn project(&self) -> &Project {
        &self.scratch.project
    }

    /// The copy's root directory.
    pub fn copy_dir(&self) -> &Path {
        &self.scratch.copy
    }

    /// The directory beside the copy for build output (cargo's target directory, emitted JavaScript).
    pub fn target_dir(&self) -> &Path {
        &self.scratch.target
    }

    /// Writes `text` at `file` (relative to the project root) in the copy.
    pub fn write(&self, file: &Path, text: &str) -> Result<(), String> {
        let destination = self.scratch.copy.join(file);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(|error| error.to_string())?;
        }
        std::fs::write(&destination, text).map_err(|error| format!("{}: {error}", destination.display()))
    }

    /// Runs `step` in the copy with `env` added; killed (its whole process group) at `limit`, at cancellation, or
    /// when it writes more than [`OUTPUT_CAP`]. What it wrote until then is kept. `Err`: it could not start.
    pub async fn run(
        &self,
        step: &Step,
        env: &[(&str, String)],
        limit: Duration,
        cancel: &CancellationToken,
    ) -> Result<Capped, String> {
        let mut command = tokio::process::Command::new(&step.program);
        command
            .args(&step.args)
            .current_dir(self.scratch.copy.join(&step.dir))
            .env("CARGO_TARGET_DIR", &self.scratch.target)
            .env("CARGO_TERM_COLOR", "never")
            .env("NO_COLOR", "1")
            .env("CI", "1")
            .envs(env.iter().map(|(key, value)| (*key, value.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        std::fs::create_dir_all(&self.scratch.target).map_err(|error| error.to_string())?;
        let started = Instant::now();
        let mut child = command.spawn().map_err(|error| format!("{}: {error}", step.program.display()))?;
        let group = child.id().and_then(|pid| i32::try_from(pid).ok());
        let kill_group = || {
            if let Some(pid) = group {
                // SAFETY: killpg only sends a signal; the group is the one this run started (`process_group(0)`).
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
        };
        let (mut stdout_pipe, mut stderr_pipe) = (child.stdout.take(), child.stderr.take());
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let mut capped = Capped::default();
        {
            let read = async {
                let (out_full, err_full) = tokio::join!(
                    read_capped(stdout_pipe.as_mut(), &mut stdout),
                    read_capped(stderr_pipe.as_mut(), &mut stderr)
                );
                out_full || err_full
            };
            tokio::select! {
                full = read => {
                    if full {
                        kill_group();
                        capped.truncated = true;
                    }
                }
                _ = tokio::time::sleep(limit) => {
                    kill_group();
                    capped.timed_out = true;
                }
                _ = cancel.cancelled() => {
                    kill_group();
                    return Err(format!("{} cancelled", step.label));
                }
            }
        }
        // The pipes are closed or the group killed: waiting is short (a grandchild keeping a pipe open was
        // killed with its group).
        let waited = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        capped.status = match waited {
            Ok(Ok(status)) if !capped.timed_out && !capped.truncated => status.code(),
            _ => None,
        };
        capped.stdout = String::from_utf8_lossy(&stdout).into_owned();
        capped.stderr = String::from_utf8_lossy(&stderr).into_owned();
        capped.ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(command = step.label, status = ?capped.status, ms = capped.ms, timed_out = capped.timed_out, "scratch command ran");
        Ok(capped)
    }
}

/// Reads `pipe` to its end into `out`, at most [`OUTPUT_CAP`] bytes; true when the cap was reached.
async fn read_capped(pipe: Option<&mut (impl tokio::io::AsyncRead + Unpin)>, out: &mut Vec<u8>) -> bool {
    use tokio::io::AsyncReadExt;
    let Some(pipe) = pipe else { return false };
    let mut buffer = [0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => return false,
            Ok(n_read) => {
                let room = OUTPUT_CAP.saturating_sub(out.len());
                out.extend_from_slice(&buffer[..n_read.min(room)]);
                if n_read >= room {
                    return true;
                }
            }
        }
    }
}

/// Directories never copied: build output, VCS data, dependencies (linked instead).
const SKIPPED: &[&str] = &["target", ".git", "node_modules", ".hg", ".svn"];

/// Files the tools write into the copy when the source has none; kept so that they are not made again (cargo
/// would resolve the dependencies anew at every check).
const GENERATED: &[&str] = &["Cargo.lock", "tsconfig.tsbuildinfo"];

/// A root's scratch copy, held under its lock.
pub(super) struct Scratch {
    pub(super) project: Project,
    /// The copy of the root.
    pub(super) copy: PathBuf,
    /// Cargo's target directory, shared by every check of the root.
    pub(super) target: PathBuf,
    _guard: tokio::sync::OwnedMutexGuard<()>,
    /// The lock file, locked: another Spark process (a second editor, the CLI, the MCP server) on the same
    /// root waits for it (the operating system releases it when the file is closed, or the process dies).
    _across_processes: std::fs::File,
}

/// How long a task waits for another Spark process to leave the root's copy before it gives up.
const OTHER_PROCESS_WAIT: Duration = Duration::from_secs(30);

/// Takes the root's lock file (`base/lock`) against other processes, waiting up to `wait`.
fn lock_across_processes(base: &Path, wait: Duration) -> std::io::Result<std::fs::File> {
    std::fs::create_dir_all(base)?;
    let file = std::fs::File::options().create(true).truncate(false).write(true).open(base.join("lock"))?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::other(format!(
                    "another Spark process has held the scratch copy for {} ms",
                    wait.as_millis()
                )));
            }
            Err(std::fs::TryLockError::Error(error)) => return Err(error),
        }
    }
}

fn locks() -> &'static Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    LOCKS.get_or_init(Default::default)
}

impl Scratch {
    /// Takes the root's lock and syncs its copy with the source tree (off the async threads).
    pub(super) async fn lock(project: &Project) -> Result<Scratch, Checked> {
        let base = cache_dir()
            .ok_or_else(|| {
                Checked::Unchecked(Unchecked::Tool("no cache directory (HOME and XDG_CACHE_HOME unset)".into()))
            })?
            .join("scratch")
            .join(root_hash(&project.root));
        let lock = locks()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(project.root.clone())
            .or_default()
            .clone();
        let guard = lock.lock_owned().await;
        let copy = base.join("src");
        let (root, copy_for_sync, node_modules) = (project.root.clone(), copy.clone(), project.node_modules.clone());
        let base_for_lock = base.clone();
        let synced = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let locked = lock_across_processes(&base_for_lock, OTHER_PROCESS_WAIT)?;
            let copied = sync_tree(&root, &copy_for_sync)?;
            if let Some(node_modules) = node_modules {
                let link = copy_for_sync.join("node_modules");
                if std::fs::read_link(&link).ok().as_deref() != Some(node_modules.as_path()) {
                    let _ = std::fs::remove_file(&link);
                    std::os::unix::fs::symlink(&node_modules, &link)?;
                }
            }
            Ok::<_, std::io::Error>((copied, started.elapsed(), locked))
        })
        .await
        .map_err(|error| Checked::Unchecked(Unchecked::Tool(format!("sync: {error}"))))?
        .map_err(|error| Checked::Unchecked(Unchecked::Tool(format!("copying {}: {error}", project.root.display()))))?;
        tracing::debug!(copied = synced.0, ms = synced.1.as_millis() as u64, "scratch copy synced");
        Ok(Scratch {
            project: project.clone(),
            copy,
            target: base.join("target"),
            _guard: guard,
            _across_processes: synced.2,
        })
    }

    /// Writes `text` at `file` in the copy and runs `step`.
    pub(super) async fn run_with(
        &self,
        file: &Path,
        text: &str,
        step: &Step,
        settings: VerifySettings,
        cancel: &CancellationToken,
    ) -> Result<Ran, Checked> {
        let destination = self.copy.join(file);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?;
        }
        std::fs::write(&destination, text).map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?;
        self.run(step, settings, cancel).await
    }

    /// Runs `step` with the original text of `file` (or without the file when it had none).
    pub(super) async fn run_original(
        &self,
        file: &Path,
        original: Option<&str>,
        step: &Step,
        settings: VerifySettings,
        cancel: &CancellationToken,
    ) -> Result<Ran, Checked> {
        match original {
            Some(text) => self.run_with(file, text, step, settings, cancel).await,
            None => {
                let _ = std::fs::remove_file(self.copy.join(file));
                self.run(step, settings, cancel).await
            }
        }
    }

    pub(super) async fn run(
        &self,
        step: &Step,
        settings: VerifySettings,
        cancel: &CancellationToken,
    ) -> Result<Ran, Checked> {
        let mut command = tokio::process::Command::new(&step.program);
        command
            .args(&step.args)
            .current_dir(self.copy.join(&step.dir))
            .env("CARGO_TARGET_DIR", &self.target)
            .env("CARGO_TERM_COLOR", "never")
            .env("NO_COLOR", "1")
            .env("CI", "1")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        std::fs::create_dir_all(&self.target)
            .map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?;
        let started = Instant::now();
        let child = command
            .spawn()
            .map_err(|error| Checked::Unchecked(Unchecked::Tool(format!("{}: {error}", step.program.display()))))?;
        let group = child.id();
        let kill_group = || {
            if let Some(pid) = group.and_then(|pid| i32::try_from(pid).ok()) {
                // SAFETY: killpg only sends a signal; the group is the one this check started (`process_group(0)`).
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
        };
        let output = tokio::select! {
            output = child.wait_with_output() => output.map_err(|error| Checked::Unchecked(Unchecked::Tool(error.to_string())))?,
            _ = tokio::time::sleep(settings.timeout()) => {
                kill_group();
                return Err(Checked::Refused(format!("{} took longer than {} ms", step.label, settings.timeout_ms)));
            }
            _ = cancel.cancelled() => {
                kill_group();
                return Err(Checked::Refused(format!("{} cancelled", step.label)));
            }
        };
        let ran = Ran {
            status: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        tracing::info!(command = step.label, status = ?ran.status, ms = ran.ms, "execution check ran");
        Ok(ran)
    }
}

/// Makes `copy` a copy of `root` (without `SKIPPED`): copies files whose size or mtime differ (keeping the
/// source's mtime, so that cargo's fingerprints see unchanged files as unchanged), removes files the source no
/// longer has. Returns the number of files copied.
pub fn sync_tree(root: &Path, copy: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(copy)?;
    let mut copied = 0;
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        for entry in std::fs::read_dir(root.join(&relative))? {
            let entry = entry?;
            let name = entry.file_name();
            if SKIPPED.iter().any(|skipped| name == *skipped) {
                continue;
            }
            let relative = relative.join(&name);
            let file_type = entry.file_type()?;
            if file_type.is_dir() {
                std::fs::create_dir_all(copy.join(&relative))?;
                seen.insert(relative.clone());
                stack.push(relative);
            } else if file_type.is_file() {
                let source = entry.metadata()?;
                let destination = copy.join(&relative);
                let same = std::fs::metadata(&destination).is_ok_and(|copied| {
                    copied.len() == source.len() && copied.modified().ok() == source.modified().ok()
                });
                if !same {
                    std::fs::copy(entry.path(), &destination)?;
                    if let Ok(modified) = source.modified() {
                        std::fs::File::options().write(true).open(&destination)?.set_modified(modified)?;
                    }
                    copied += 1;
                }
                seen.insert(relative);
            }
        }
    }
    remove_unseen(copy, Path::new(""), &seen)?;
    Ok(copied)
}

fn remove_unseen(copy: &Path, relative: &Path, seen: &std::collections::HashSet<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(copy.join(relative))? {
        let entry = entry?;
        let name = entry.file_name();
        if SKIPPED.iter().chain(GENERATED).any(|skipped| name == *skipped) {
            continue;
        }
        let relative = relative.join(&name);
        if seen.contains(&relative) {
            if entry.file_type()?.is_dir() {
                remove_unseen(copy, &relative, seen)?;
            }
        } else if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_process_waits_for_the_copy_and_then_gives_up() {
        // Two open files of one lock conflict as two processes' would (flock locks an open file description).
        let base = std::env::temp_dir().join(format!("spark-exec-lock-{}", std::process::id()));
        let held = lock_across_processes(&base, Duration::ZERO).unwrap();
        let error = lock_across_processes(&base, Duration::from_millis(120)).unwrap_err();
        assert!(error.to_string().contains("another Spark process has held the scratch copy"), "{error}");
        drop(held);
        assert!(lock_across_processes(&base, Duration::ZERO).is_ok());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn sync_copies_changes_and_removes_what_is_gone() {
        let dir = std::env::temp_dir().join(format!("spark-exec-sync-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (root, copy) = (dir.join("root"), dir.join("copy"));
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
        std::fs::write(root.join("src/old.rs"), "\n").unwrap();
        std::fs::write(root.join("target/debug/big"), "artefact").unwrap();
        assert_eq!(sync_tree(&root, &copy).unwrap(), 2);
        assert!(!copy.join("target").exists());
        // Nothing changed: nothing copied.
        assert_eq!(sync_tree(&root, &copy).unwrap(), 0);
        // An edit in the copy (a candidate) is undone; a file gone from the source goes; Cargo.lock stays.
        std::fs::write(copy.join("src/lib.rs"), "pub fn candidate() {}\n").unwrap();
        std::fs::write(copy.join("Cargo.lock"), "# made by cargo\n").unwrap();
        std::fs::remove_file(root.join("src/old.rs")).unwrap();
        assert_eq!(sync_tree(&root, &copy).unwrap(), 1);
        assert_eq!(std::fs::read_to_string(copy.join("src/lib.rs")).unwrap(), "pub fn a() {}\n");
        assert!(!copy.join("src/old.rs").exists());
        assert!(copy.join("Cargo.lock").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
