//! Privacy by construction: only the server builds a `RemoteClient`, and only when a remote URL is configured.
//! Nothing in the engine constructs one by itself, and only the remote module speaks HTTP.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_engine_never_constructs_a_remote_client_by_itself() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(file).unwrap();
        let in_remote = relative.starts_with("remote/");
        let constructs = ["RemoteClient::new", "RemoteClient::build", "RemoteClient {"];
        if !in_remote && constructs.iter().any(|pattern| text.contains(pattern)) {
            offenders.push(format!("{relative} constructs a RemoteClient"));
        }
        if !in_remote && text.contains("reqwest") {
            offenders.push(format!("{relative} uses reqwest; only the remote module speaks HTTP"));
        }
    }
    assert!(files.len() > 5, "the scan found the engine's sources: {files:?}");
    assert!(offenders.is_empty(), "{offenders:#?}");
}

#[test]
fn constructing_a_client_opens_no_connection() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let config = spark_engine::RemoteConfig {
        url: format!("http://{}", listener.local_addr().unwrap()),
        model: String::new(),
        api_key_env: None,
        timeout_ms: 1000,
        chat: false,
        supports_suffix: false,
    };
    let client = spark_engine::RemoteClient::new(config).unwrap();
    let accepted = listener.accept().map(|_| ()).map_err(|error| error.kind());
    assert_eq!(accepted, Err(std::io::ErrorKind::WouldBlock), "nothing connects before warm or complete");
    assert_eq!(client.counters().n_connects, 0);
}
