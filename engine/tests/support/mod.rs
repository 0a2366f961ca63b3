//! Helpers shared by the remote backend's integration tests (and, by path, by the tests crate's remote-bench).

pub mod llama_server;
