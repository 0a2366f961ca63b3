//! Spark's LSP server: conversion between LSP and the `spark-ide` core, dispatch, framing, the CLI and the MCP
//! server for coding agents.

pub mod actions;
pub mod capabilities;
pub mod cli;
pub mod framing;
pub mod ghost;
pub mod guard;
pub mod lsp;
pub mod mcp;
pub mod next_edit;
pub mod options;
pub mod progress;
pub mod status;
