//! The model's state for the user: `spark/statusChanged` on every change, and work-done progress while the model
//! loads (when the client supports it), an error message when it fails.

use std::sync::Arc;

use serde_json::Value;
use spark_ide::model::{Engine, EngineState};
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::{MessageType, NumberOrString};
use tower_lsp_server::Client;

use crate::status::state_json;

/// `spark/statusChanged`: the model's state, sent whenever it changes.
pub enum StatusChanged {}

impl Notification for StatusChanged {
    type Params = Value;
    const METHOD: &'static str = "spark/statusChanged";
}

/// Watches the engine's state until it is dropped, telling the client of each change.
pub fn watch_status(client: Client, engine: Arc<Engine>, has_progress: bool) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut states = engine.subscribe();
        let mut progress = None;
        let mut progress_serial = 0u32;
        loop {
            let state = states.borrow_and_update().clone();
            client.send_notification::<StatusChanged>(state_json(&state)).await;
            match &state {
                EngineState::Loading { path } => {
                    if has_progress && progress.is_none() {
                        progress_serial += 1;
                        let token = NumberOrString::String(format!("spark/model-load/{progress_serial}"));
                        if client.create_work_done_progress(token.clone()).await.is_ok() {
                            let message = format!("loading {}", path.display());
                            progress = Some(client.progress(token, "Spark").with_message(message).begin().await);
                        }
                    }
                }
                EngineState::Ready(info) => {
                    if let Some(ongoing) = progress.take() {
                        ongoing.finish_with_message(format!("model ready ({} ms)", info.load_ms)).await;
                    }
                }
                EngineState::Failed { error } => {
                    if let Some(ongoing) = progress.take() {
                        ongoing.finish_with_message("model failed to load").await;
                    }
                    client.show_message(MessageType::ERROR, format!("Spark: {error}")).await;
                }
            }
            if states.changed().await.is_err() {
                return;
            }
        }
    })
}
