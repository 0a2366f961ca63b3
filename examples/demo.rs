use std::collections::HashMap;

/// Counts how often each word occurs in `text`, ignoring case.
pub fn word_counts(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace() {
        let word = word.to_lowercase();
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

/// Returns the `n` most frequent words, most frequent first.
pub fn top_words(text: &str, n: usize) -> Vec<(String, usize)> {
    let counts = word_counts(text);
    let mut pairs: Vec<(String, usize)> = counts.into_iter().collect();
    pairs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    
}
