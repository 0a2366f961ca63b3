//! Spark's LSP server: conversion between LSP and the `spark-ide` core, dispatch, framing, and the CLI.

pub mod actions;
pub mod cli;
pub mod framing;
pub mod lsp;
