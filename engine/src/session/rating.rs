//! How likely the model rates its answer (`Rating`: the product of its tokens' probabilities, after each line),
//! and the gate that drops or shortens an answer below the request's `min_confidence`.

use crate::request::CompletionStats;

/// A generation's text and how likely the model rates it: the product of its tokens' probabilities, and after
/// each line (the line break's byte in the text, the probability of the text up to and including it).
pub(super) struct Rating {
    sequence_prob: f64,
    line_ends: Vec<(usize, f64)>,
}

impl Rating {
    pub(super) fn new() -> Self {
        Rating { sequence_prob: 1.0, line_ends: Vec::new() }
    }

    /// Takes in one more token of `text` (all of the text so far) with its probability.
    pub(super) fn add(&mut self, text: &str, prob: f64) {
        self.sequence_prob *= prob;
        let rated_up_to = self.line_ends.last().map_or(0, |(at, _)| at + 1);
        for (idx, _) in text[rated_up_to.min(text.len())..].match_indices('\n') {
            let at = rated_up_to + idx;
            // Leading line breaks are not a line of the suggestion.
            if !text[..at].trim().is_empty() {
                self.line_ends.push((at, self.sequence_prob));
            }
        }
    }

    /// The gate: ghost text whose first line the model rates below `min_confidence` is dropped (and counted as
    /// such in `stats`), and of a longer answer only the lines whose running probability stays above it are kept.
    /// Rated on the model's own text, before post-processing changes its lengths.
    pub(super) fn gate(self, text: &mut String, min_confidence: f32, stats: &mut CompletionStats) {
        let Rating { sequence_prob, line_ends } = self;
        let first_line_prob = line_ends.first().map_or(sequence_prob, |(_, prob)| *prob);
        stats.confidence_permille = (first_line_prob * 1000.0).round().clamp(0.0, 1000.0) as u32;
        let min = f64::from(min_confidence);
        if !text.trim().is_empty() && first_line_prob < min {
            tracing::debug!(confidence = first_line_prob, min, "suggestion below confidence");
            stats.below_confidence = true;
            text.clear();
        } else if sequence_prob < min {
            // Later lines are kept while the whole suggestion up to them stays as likely as the threshold asks.
            if let Some((at, _)) = line_ends.iter().take_while(|(_, prob)| *prob >= min).last() {
                text.truncate(*at);
            }
        }
    }
}
