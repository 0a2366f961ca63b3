//! Starts llama.cpp's `llama-server` on a free loopback port (for the remote backend's tests and `remote-bench`)
//! and kills its process group on drop. Builds the binary first (scripts/build-llama-server.sh) and installs the
//! default model (scripts/install-model.sh) when either is missing. Standard library only, so the bench binary
//! can include this file too.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `llama-server`; dropped, it is killed (with its process group) and reaped.
pub struct LlamaServer {
    child: Child,
    pub url: String,
    pub log_path: PathBuf,
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("engine/ has a parent").to_path_buf()
}

/// target/llama-server/llama-server, built by the script when it is not there yet.
pub fn ensure_binary() -> Result<PathBuf, String> {
    let root = workspace_root();
    let binary = root.join("target/llama-server/llama-server");
    if binary.is_file() {
        return Ok(binary);
    }
    run_script(&root.join("scripts/build-llama-server.sh"))?;
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!("scripts/build-llama-server.sh succeeded but {} is missing", binary.display()))
    }
}

/// The default model, installed by the script when it is not there yet.
pub fn ensure_model() -> Result<PathBuf, String> {
    let model = spark_engine::default_model_path().ok_or("neither XDG_DATA_HOME nor HOME is set")?;
    if !model.is_file() {
        run_script(&workspace_root().join("scripts/install-model.sh"))?;
    }
    Ok(model)
}

fn run_script(script: &Path) -> Result<(), String> {
    let status = Command::new("bash")
        .arg(script)
        .current_dir(workspace_root())
        .status()
        .map_err(|error| format!("cannot run {}: {error}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", script.display()))
    }
}

impl LlamaServer {
    /// Starts the server with the default model, `-t 2 -c 2048` and one slot, plus `extra_args`, and waits until
    /// `/health` answers 200 (the model is loaded).
    pub fn start(extra_args: &[&str]) -> Result<LlamaServer, String> {
        let binary = ensure_binary()?;
        let model = ensure_model()?;
        let port = free_port()?;
        let log_path = workspace_root().join(format!("target/llama-server/run-{port}.log"));
        let log = File::create(&log_path).map_err(|error| format!("{}: {error}", log_path.display()))?;
        let log_err = log.try_clone().map_err(|error| error.to_string())?;
        let port_text = port.to_string();
        let model_text = model.to_string_lossy().into_owned();
        let mut args = vec!["-m", &model_text, "--host", "127.0.0.1", "--port", &port_text];
        args.extend(["-t", "2", "-c", "2048", "-np", "1"]);
        args.extend(extra_args);
        let child = Command::new(&binary)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0)
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", binary.display()))?;
        let mut server = LlamaServer { child, url: format!("http://127.0.0.1:{port}"), log_path };
        server.wait_healthy(port, Duration::from_secs(300))?;
        Ok(server)
    }

    fn wait_healthy(&mut self, port: u16, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("llama-server exited ({status}) before it was healthy:\n{}", self.log_tail()));
            }
            if health_status(port) == Some(200) {
                return Ok(());
            }
            if started.elapsed() > limit {
                return Err(format!("llama-server was not healthy after {limit:?}:\n{}", self.log_tail()));
            }
            // Polling interval while the model loads, not an assertion.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        // The server runs in its own process group (process_group(0) above): kill the whole group.
        let group = format!("-{}", self.child.id());
        let killed = Command::new("kill").args(["-KILL", "--", &group]).status().is_ok_and(|status| status.success());
        if !killed {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|error| format!("cannot bind a loopback port: {error}"))?;
    listener.local_addr().map(|address| address.port()).map_err(|error| error.to_string())
}

/// `GET /health` over a fresh connection; the status code, or `None` when nothing answers yet.
fn health_status(port: u16) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 16];
    let n_read = stream.read(&mut head).ok()?;
    let head = std::str::from_utf8(&head[..n_read]).ok()?;
    head.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}
