//! The guarantee over the whole task corpus, with the real model: no edit Spark offers fails verification.
//! (A success rate is reported by `make eval`, not asserted.)

#[test]
fn every_offered_edit_in_the_corpus_verifies() {
    let results = spark_tests::eval::run_corpus(None);
    println!("{}", spark_tests::eval::table("default model", &results));
    assert!(results.len() >= 10, "the corpus is there");
    for result in &results {
        assert_ne!(
            result.verified,
            Some(false),
            "{}/{} offered an edit that fails verification: {}",
            result.task,
            result.case,
            result.note
        );
    }
    // The missing-semicolon case is repaired from the grammar itself: the verified path is exercised for sure.
    let semicolon = results.iter().find(|result| result.case == "missing_semicolon.rs").unwrap();
    assert_eq!(semicolon.verified, Some(true), "{semicolon:?}");
}
