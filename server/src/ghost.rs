//! Ghost text that arrives when the user pauses, over LSP: `spark/inlineCompletionReady` (the server tells the
//! client that a suggestion the deadline cut is ready: ask again at that place) and `spark/didFocus` (the client
//! tells the server which document and cursor the user is looking at, so that its prompt is warmed before the
//! first keystroke). Both are documented in docs/lsp-extensions.md; the policy lives in
//! [`spark_ide::Workspace::suggest`] and [`spark_ide::Workspace::focus`].

use serde::{Deserialize, Serialize};
use spark_ide::position::LspPosition;
use spark_ide::SuggestionReady;
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::*;

/// `spark/inlineCompletionReady`, sent only to clients that set `inline.notifyReady`.
pub enum InlineCompletionReady {}

impl Notification for InlineCompletionReady {
    type Params = ReadyParams;
    const METHOD: &'static str = "spark/inlineCompletionReady";
}

/// Where a suggestion is ready: asking `textDocument/inlineCompletion` (or `textDocument/completion`) there while
/// the document is at `version` is answered from the cache. A client whose document or cursor moved on ignores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyParams {
    pub text_document: VersionedTextDocumentIdentifier,
    pub position: Position,
}

/// The params of `spark/didFocus`: the document the user is looking at and the cursor in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FocusParams {
    pub text_document: TextDocumentIdentifier,
    pub position: Position,
}

/// The notification's params for a suggestion the workspace finished; `None` for a URI that is not one.
pub fn ready_params(ready: &SuggestionReady) -> Option<ReadyParams> {
    let uri = ready.uri.parse::<Uri>().ok()?;
    Some(ReadyParams {
        text_document: VersionedTextDocumentIdentifier::new(uri, ready.version),
        position: Position::new(ready.position.line, ready.position.character),
    })
}

/// The cursor of `spark/didFocus` in the workspace's terms.
pub fn focus_position(params: &FocusParams) -> LspPosition {
    LspPosition { line: params.position.line, character: params.position.character }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_params_name_the_version_and_the_place() {
        let ready = SuggestionReady {
            uri: "file:///tmp/a.rs".into(),
            version: 7,
            position: LspPosition { line: 3, character: 12 },
        };
        let params = serde_json::to_value(ready_params(&ready).unwrap()).unwrap();
        assert_eq!(
            params,
            serde_json::json!({
                "textDocument": {"uri": "file:///tmp/a.rs", "version": 7},
                "position": {"line": 3, "character": 12}
            })
        );
    }

    #[test]
    fn focus_params_read_the_cursor() {
        let params: FocusParams = serde_json::from_value(serde_json::json!({
            "textDocument": {"uri": "file:///tmp/a.ts"},
            "position": {"line": 1, "character": 4}
        }))
        .unwrap();
        assert_eq!(focus_position(&params), LspPosition { line: 1, character: 4 });
    }
}
