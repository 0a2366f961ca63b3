//! The panic guard: one tower service in front of every LSP handler.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tower_lsp_server::jsonrpc::{Error as JsonRpcError, ErrorCode, Id, Request, Response};
use tower_lsp_server::ExitedError;

/// The one wrapper every request and notification goes through: a panic in a handler is logged and answered
/// with an internal error (a notification's is only logged), and the server reads the next message. Without it
/// the panic unwinds through tower-lsp's loop and the server stops answering.
#[derive(Debug, Clone)]
pub struct CatchPanic<S>(pub S);

impl<S> tower_service::Service<Request> for CatchPanic<S>
where
    S: tower_service::Service<Request, Response = Option<Response>, Error = ExitedError>,
    S::Future: Send + 'static,
{
    type Response = Option<Response>;
    type Error = ExitedError;
    type Future = futures::future::BoxFuture<'static, std::result::Result<Option<Response>, ExitedError>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::result::Result<(), ExitedError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let id = request.id().cloned();
        let method = request.method().to_owned();
        let inner = &mut self.0;
        let future = match std::panic::catch_unwind(AssertUnwindSafe(|| inner.call(request))) {
            Ok(future) => future,
            Err(payload) => return Box::pin(futures::future::ready(Ok(answer_panic(id, &method, payload.as_ref())))),
        };
        Box::pin(async move {
            match AssertUnwindSafe(future).catch_unwind().await {
                Ok(result) => result,
                Err(payload) => Ok(answer_panic(id, &method, payload.as_ref())),
            }
        })
    }
}

/// The error response to a handler's panic (none for a notification), after logging it.
fn answer_panic(id: Option<Id>, method: &str, payload: &(dyn std::any::Any + Send)) -> Option<Response> {
    let reason = payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned());
    tracing::error!(method, %reason, "panic in a handler; answered with an internal error");
    let error = JsonRpcError {
        code: ErrorCode::InternalError,
        message: format!("Spark: internal error in {method} (see the server log)").into(),
        data: None,
    };
    id.map(|id| Response::from_error(id, error))
}
