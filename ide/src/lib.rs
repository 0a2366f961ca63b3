//! Spark's core without LSP: the documents and their syntax trees, the context of a prompt, the tasks (fix,
//! tests, regex), verification, the tiers and routes to a model, and the ghost-text policy of a [`Workspace`].
//! The LSP server, the CLI and the MCP server are front ends over it; nothing here knows JSON-RPC. They start
//! the model through [`model`] and name the grammars' [`Lang`] from here: `ide` is their one way to the engine
//! and the grammars.

pub mod background;
pub mod config;
pub mod context;
pub mod document;
pub mod edit_history;
pub mod exec_check;
pub mod kinds;
pub mod model;
pub mod next_edit;
pub mod offers;
pub mod parse;
pub mod position;
pub mod privacy;
pub mod ring;
pub mod route;
pub mod runner;
pub mod status;
pub mod suggest;
pub mod tasks;
pub mod tiers;
pub mod verify;
pub mod workspace;
pub use background::SuggestionReady;
/// The languages Spark knows, as the front ends name them (a file's language from its path).
pub use spark_grammars::Lang;
pub use workspace::{Notice, NoticeLevel, Suggestion, TaskRequest, TaskResult, Workspace};
