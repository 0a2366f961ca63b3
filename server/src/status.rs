//! `spark/status`, `spark/statusChanged` and `spark/recentCalls` as JSON: the workspace's typed status
//! (`spark_ide::status`) and the engine's state and recent calls, written for the client.

use serde_json::{json, Value};
use spark_ide::model::{EngineState, RecentCall};
use spark_ide::status::Status;

/// The whole status (`spark/status`).
pub fn status_json(status: &Status) -> Value {
    let mut json = state_json(&status.state);
    json["remote"] = match &status.remote {
        None => json!({"configured": false}),
        Some(remote) => {
            // Down from a failure until a request succeeds; `retryInMs` 0: the next request probes it.
            let (health, last_error, retry_in_ms) = match &remote.down {
                None => ("up", Value::Null, Value::Null),
                Some((last_error, wait)) => ("down", json!(last_error), json!(wait.as_millis() as u64)),
            };
            let counters = remote.counters;
            json!({
                "configured": true, "url": remote.url, "model": remote.model,
                "health": health, "lastError": last_error, "retryInMs": retry_in_ms,
                "requests": counters.n_requests, "connections": counters.n_connects, "failures": counters.n_failures,
            })
        }
    };
    let verify = &status.verify;
    json["verify"] = json!({
        "compile": verify.compile, "runTests": verify.run_tests, "timeoutMs": verify.timeout_ms,
        "commands": verify.commands(),
    });
    json["strongTier"] = match &status.strong_tier {
        Some(path) => json!({"loaded": true, "path": path}),
        None => json!({"loaded": false}),
    };
    json["lastLatencyMs"] = match status.last_latency_ms {
        None => Value::Null,
        Some(ms) => json!(ms),
    };
    let totals = status.totals;
    json["counters"] = json!({
        "requests": totals.requests,
        "superseded": totals.superseded,
        "cancelled": totals.cancelled,
        "nPrompt": totals.n_prompt,
        "nReused": totals.n_reused,
        "nDecoded": totals.n_decoded,
        "nGenerated": totals.n_generated,
        "cacheHits": totals.cache_hits,
        "nCopied": totals.n_copied,
        "nCarried": totals.n_carried,
        "nDrafted": totals.n_drafted,
        "nAccepted": totals.n_accepted,
        "last": status.last.map(|stats| json!({
            "nPrompt": stats.n_prompt, "nReused": stats.n_reused, "nDecoded": stats.n_decoded,
            "nGenerated": stats.n_generated, "queueMs": stats.queue_ms, "promptMs": stats.prompt_ms, "totalMs": stats.total_ms,
            "slot": stats.slot, "nCopied": stats.n_copied, "nCarried": stats.n_carried,
            "nDrafted": stats.n_drafted, "nAccepted": stats.n_accepted,
        })),
    });
    json
}

/// The engine's most recent model calls with their counters and timings, oldest first (`spark/recentCalls`).
pub fn recent_calls_json(recent: &[RecentCall]) -> Value {
    Value::Array(
        recent
            .iter()
            .map(|call| {
                let stats = call.stats;
                json!({
                    "stop": format!("{:?}", call.stop), "background": call.background, "producedBytes": call.produced,
                    "nPrompt": stats.n_prompt, "nReused": stats.n_reused, "nDecoded": stats.n_decoded,
                    "nGenerated": stats.n_generated, "queueMs": stats.queue_ms, "promptMs": stats.prompt_ms,
                    "firstTokenMs": stats.first_token_ms, "generateUs": stats.generate_us,
                    "totalMs": stats.total_ms, "slot": stats.slot, "nCopied": stats.n_copied,
                    "nCarried": stats.n_carried, "nDrafted": stats.n_drafted, "nAccepted": stats.n_accepted,
                    "confidence": f64::from(stats.confidence_permille) / 1000.0,
                    "belowConfidence": stats.below_confidence,
                })
            })
            .collect(),
    )
}

/// The model's state as `spark/status` and `spark/statusChanged` report it.
pub fn state_json(state: &EngineState) -> Value {
    match state {
        EngineState::Loading { path } => {
            json!({"state": "loading", "message": format!("loading {}", path.display()), "model": null})
        }
        EngineState::Ready(info) => json!({
            "state": "ready",
            "message": format!("{} ready", info.name),
            "model": {
                "path": info.path, "name": info.name, "arch": info.architecture, "sizeBytes": info.size_bytes,
                "fim": info.fim.as_ref().map(|fim| format!("{:?}", fim.family)), "threads": info.threads,
                "nCtx": info.n_ctx, "loadMs": info.load_ms,
            },
        }),
        EngineState::Failed { error } => {
            json!({"state": "failed", "message": error.to_string(), "model": null})
        }
    }
}
