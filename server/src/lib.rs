//! Spark's LSP server: document store, position encodings, context gathering, handlers and the CLI.

pub mod actions;
pub mod cli;
pub mod config;
pub mod context;
pub mod document;
pub mod edit_check;
pub mod exec_check;
pub mod framing;
pub mod lsp;
pub mod mcp;
pub mod position;
pub mod ring;
pub mod route;
pub mod suggest;
pub mod tasks;
pub mod tiers;
pub mod verify;
