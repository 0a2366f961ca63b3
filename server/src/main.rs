//! The `spark-lsp` binary: LSP over stdio by default, plus `complete` and `doctor` for people and scripts.

use std::process::ExitCode;

use clap::Parser;
use spark_ide::tasks::TaskKind;
use spark_lsp::cli::{self, Cli, Command};

fn main() -> ExitCode {
    // A regex worker (a child of this binary, killed at its time limit): see `edit_check::use_regex_worker`.
    if std::env::args_os().nth(1).is_some_and(|arg| arg == spark_ide::verify::REGEX_WORKER_ARG) {
        return spark_ide::verify::regex_worker_main();
    }
    prefer_bounded_openmp_spinning();
    if let Ok(exe) = std::env::current_exe() {
        spark_ide::verify::use_regex_worker(exe);
    }
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("spark-lsp: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command.unwrap_or(Command::Serve) {
            Command::Serve => cli::serve_stdio().await,
            Command::Complete(args) => cli::complete(args).await,
            Command::Doctor(args) => cli::doctor(args).await,
            Command::Fix(args) => cli::task(TaskKind::Fix, args).await,
            Command::Tests(args) => cli::task(TaskKind::Tests, args).await,
            Command::Regex(args) => cli::task(TaskKind::Regex, args).await,
            Command::Mcp(args) => spark_lsp::mcp::serve(args).await,
        }
    });
    // The framing guard keeps a read of stdin in flight on a blocking thread; after `exit` nothing waits for it
    // (the client may keep stdin open).
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("spark-lsp: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// llama.cpp's OpenMP workers wait at a barrier between every operation of every token. Spinning forever
/// (`OMP_WAIT_POLICY=active`) collapses next to rust-analyzer or a build; sleeping at once (`passive`) halves
/// generation speed (measured with `spark-bench --busy-core`: passive 24 tok/s, active 41, idle). A bounded spin
/// (`GOMP_SPINCOUNT=20000`, tens of microseconds, then sleep) catches the barriers within a token and sleeps
/// between tokens and requests: 41 tok/s idle, and the most suggestions of the three with one core busy.
/// libgomp reads these variables when the process loads, so the server re-executes itself once with the spin
/// count set, unless the user set either variable.
fn prefer_bounded_openmp_spinning() {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        if std::env::var_os("OMP_WAIT_POLICY").is_some() || std::env::var_os("GOMP_SPINCOUNT").is_some() {
            return;
        }
        let Ok(exe) = std::env::current_exe() else { return };
        let error =
            std::process::Command::new(exe).args(std::env::args_os().skip(1)).env("GOMP_SPINCOUNT", "20000").exec();
        // exec only returns on failure: go on with the default policy.
        eprintln!("spark-lsp: could not re-execute with GOMP_SPINCOUNT=20000 ({error}); continuing");
    }
}

/// Logs go to stderr (stdout carries LSP), filtered by `SPARK_LOG` (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SPARK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,llama_cpp_2=warn,llama-cpp-2=warn,rmcp=warn"));
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(false).with_env_filter(filter).init();
}
