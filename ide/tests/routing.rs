//! `route::Generator` branch by branch: the real engine around a scripted model on the local side, a loopback
//! OpenAI-compatible endpoint on the remote side (answering text, nothing, an error, or late).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spark_engine::{CompletionRequest, Engine, EngineConfig, EngineError, ModelSource, RemoteClient, RemoteConfig};
use spark_ide::config::Route;
use spark_ide::route::{Generator, Served};
use spark_loopback::{serve, Mock, Reply};

/// The loopback endpoint (spark-loopback) and a client of it.
struct Endpoint {
    client: RemoteClient,
    completions: Arc<AtomicUsize>,
}

fn endpoint(reply: Reply, delay: Duration) -> Endpoint {
    let Mock { url, completions } = serve(move |_| reply.clone(), delay);
    let config = RemoteConfig {
        url,
        model: "loopback".into(),
        api_key_env: None,
        timeout_ms: 10_000,
        chat: false,
        supports_suffix: false,
    };
    Endpoint { client: RemoteClient::new(config).unwrap(), completions }
}

fn text(text: &str) -> Reply {
    Reply::Text(text.to_owned())
}

/// A ghost-text request (one line) with its own prefix, so that no answer comes from another test's cache.
fn ghost_text(prefix: &str) -> CompletionRequest {
    CompletionRequest {
        lane: 1,
        prefix: format!("fn main() {{\n    let {prefix} = "),
        suffix: "\n}\n".into(),
        indent: "    ".into(),
        max_tokens: 32,
        deadline: Instant::now() + Duration::from_secs(10),
        ..Default::default()
    }
}

fn local(output: &str) -> Engine {
    Engine::start_scripted(vec![output.to_owned()])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

const QUICK: Duration = Duration::from_millis(0);

#[test]
fn remote_then_local_serves_the_remote_answer() {
    let remote = endpoint(text("remote_value();"), QUICK);
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::RemoteThenLocal);
    let generated = runtime().block_on(generator.generate(ghost_text("a"))).unwrap();
    assert_eq!(generated.served, Served::Remote);
    assert_eq!(generated.completion.text, "remote_value();");
    assert!(generated.remote_error.is_none());
    // Asked again in the same state: answered from the cache, no second round trip.
    let again = runtime().block_on(generator.generate(ghost_text("a"))).unwrap();
    assert_eq!(again.completion.text, "remote_value();");
    assert_eq!(remote.completions.load(Ordering::SeqCst), 1);
}

#[test]
fn remote_then_local_falls_back_when_the_remote_answers_empty() {
    let remote = endpoint(text(""), QUICK);
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::RemoteThenLocal);
    let generated = runtime().block_on(generator.generate(ghost_text("b"))).unwrap();
    assert_eq!(remote.completions.load(Ordering::SeqCst), 1, "the remote was asked first");
    assert_eq!(generated.served, Served::Local);
    assert_eq!(generated.completion.text, "local_value();");
    assert!(generated.remote_error.is_none(), "an empty answer is not a failure");
}

#[test]
fn remote_then_local_falls_back_with_one_error_when_the_remote_fails() {
    let remote = endpoint(Reply::ServerError, QUICK);
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::RemoteThenLocal);
    let generated = runtime().block_on(generator.generate(ghost_text("c"))).unwrap();
    assert_eq!(generated.served, Served::Local);
    assert_eq!(generated.completion.text, "local_value();");
    assert!(generated.remote_error.is_some());
    assert!(generator.take_remote_error().is_some(), "kept for one notice");
    assert!(generator.take_remote_error().is_none(), "taken once");
}

#[test]
fn a_remote_route_that_answers_empty_is_an_empty_answer_not_an_error() {
    let remote = endpoint(text(""), QUICK);
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::Remote);
    let generated = runtime().block_on(generator.generate(ghost_text("d"))).unwrap();
    assert_eq!(generated.served, Served::Remote);
    assert_eq!(generated.completion.text, "", "the local model is not asked on the remote route");
    assert!(generated.remote_error.is_none());
}

#[test]
fn race_takes_the_local_answer_when_the_remote_is_slow() {
    let remote = endpoint(text("remote_value();"), Duration::from_secs(3));
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::Race);
    let generated = runtime().block_on(generator.generate(ghost_text("e"))).unwrap();
    assert_eq!(generated.served, Served::Local);
    assert_eq!(generated.completion.text, "local_value();");
}

#[test]
fn race_takes_the_local_answer_when_the_remote_answers_empty() {
    let remote = endpoint(text(""), QUICK);
    let engine = local("local_value();");
    let generator = Generator::new(&engine, Some(&remote.client), Route::Race);
    let generated = runtime().block_on(generator.generate(ghost_text("f"))).unwrap();
    assert_eq!(generated.completion.text, "local_value();");
    assert_eq!(generated.served, Served::Local);
}

/// The local model failed to load (no model): a race still has the remote, and its answer is served.
#[test]
fn race_serves_the_remote_when_the_local_model_is_unusable() {
    let remote = endpoint(text("remote_value();"), Duration::from_millis(200));
    let config = EngineConfig { n_ctx: 512, ..EngineConfig::new(ModelSource::None, 1) };
    let engine = Engine::start(config);
    let generator = Generator::new(&engine, Some(&remote.client), Route::Race);
    let generated = runtime().block_on(generator.generate(ghost_text("g")));
    let generated = match generated {
        Ok(generated) => generated,
        Err(EngineError::NoModel) => panic!("the remote's answer was dropped because the local model has none"),
        Err(error) => panic!("{error}"),
    };
    assert_eq!(generated.served, Served::Remote);
    assert_eq!(generated.completion.text, "remote_value();");
}
