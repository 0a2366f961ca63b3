//! What the client supports (read from `initialize`) and what Spark offers in return: the position encoding,
//! work-done progress, code-action resolve, and the server's capabilities.

use spark_ide::position::PositionEncoding;
use tower_lsp_server::ls_types::*;

use crate::actions;

/// What the client said it supports.
pub struct ClientSupport {
    pub encoding: PositionEncoding,
    pub has_progress: bool,
    /// Code actions resolved lazily (`codeAction/resolve` fills in the edit).
    pub resolve_supported: bool,
}

pub fn client_support(params: &InitializeParams) -> ClientSupport {
    let offered: Vec<String> = params
        .capabilities
        .general
        .as_ref()
        .and_then(|general| general.position_encodings.as_ref())
        .map(|kinds| kinds.iter().map(|kind| kind.as_str().to_owned()).collect())
        .unwrap_or_default();
    let encoding = PositionEncoding::negotiate(&offered);
    let has_progress =
        params.capabilities.window.as_ref().and_then(|window| window.work_done_progress).unwrap_or(false);
    let resolve_supported = params
        .capabilities
        .text_document
        .as_ref()
        .and_then(|text_document| text_document.code_action.as_ref())
        .and_then(|code_action| code_action.resolve_support.as_ref())
        .is_some_and(|support| support.properties.iter().any(|property| property == "edit"));
    ClientSupport { encoding, has_progress, resolve_supported }
}

/// The answer to `initialize`: Spark's capabilities in the agreed position encoding.
pub fn initialize_result(encoding: PositionEncoding) -> InitializeResult {
    InitializeResult {
        capabilities: ServerCapabilities {
            position_encoding: Some(PositionEncodingKind::from(encoding.as_lsp_str().to_owned())),
            text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                ..Default::default()
            })),
            completion_provider: Some(CompletionOptions { resolve_provider: Some(false), ..Default::default() }),
            inline_completion_provider: Some(OneOf::Left(true)),
            code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
                code_action_kinds: Some(vec![CodeActionKind::QUICKFIX, CodeActionKind::REFACTOR_REWRITE]),
                resolve_provider: Some(true),
                ..Default::default()
            })),
            execute_command_provider: Some(ExecuteCommandOptions {
                commands: actions::COMMANDS.iter().map(|command| (*command).to_owned()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        },
        server_info: Some(ServerInfo { name: "spark-lsp".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
        offset_encoding: None,
    }
}
