//! `make eval`: every task on every case of `tests/eval/` with the default model (and with `SPARK_EVAL_MODEL`
//! when it names another GGUF), as a table; also written to target/bench/eval.md.

use std::path::PathBuf;

fn main() {
    let mut report = spark_tests::eval::table("default model", &spark_tests::eval::run_corpus(None));
    if let Some(model) = std::env::var_os("SPARK_EVAL_MODEL").filter(|value| !value.is_empty()) {
        let model = PathBuf::from(model);
        let label = format!("SPARK_EVAL_MODEL={}", model.display());
        report.push('\n');
        report.push_str(&spark_tests::eval::table(&label, &spark_tests::eval::run_corpus(Some(&model))));
    }
    println!("{report}");
    let out = spark_tests::workspace_root().join("target/bench");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(out.join("eval.md"), &report);
}
