//! Helpers shared by the remote backend's integration tests (and, by path, by the remote-bench binary).

pub mod llama_server;
