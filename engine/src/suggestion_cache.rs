//! Suggestions without a model call: an LRU of recent answers keyed by a hash of the request's context, and
//! typed-ahead reuse — when the user types the characters the shown suggestion starts with, the rest of it is
//! still the answer (as llama.vim, Tabby, Continue and Zed do).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;

use lru::LruCache;

use crate::postprocess::StopMode;
use crate::request::CompletionRequest;

/// How a cached answer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheHit {
    /// The same context was answered before.
    Exact,
    /// The user typed the start of the previous suggestion; this is its remainder.
    TypedAhead,
}

/// The last suggestion answered in a lane, for typed-ahead reuse.
struct Shown {
    header: String,
    prefix: String,
    suffix_line: String,
    text: String,
}

pub struct SuggestionCache {
    exact: LruCache<u64, String>,
    last_by_lane: HashMap<u64, Shown>,
}

const MAX_LANES: usize = 64;

impl SuggestionCache {
    pub fn new(capacity: usize) -> SuggestionCache {
        let capacity = NonZeroUsize::new(capacity.max(1)).expect("capacity is at least one");
        SuggestionCache { exact: LruCache::new(capacity), last_by_lane: HashMap::new() }
    }

    /// A suggestion for `request` that needs no model call, if there is one.
    pub fn lookup(&mut self, request: &CompletionRequest) -> Option<(String, CacheHit)> {
        if let Some(text) = self.exact.get(&key(request)) {
            return Some((text.clone(), CacheHit::Exact));
        }
        let shown = self.last_by_lane.get(&request.lane)?;
        if shown.header != request.header || first_line(&request.suffix) != shown.suffix_line {
            return None;
        }
        let typed = request.prefix.strip_prefix(shown.prefix.as_str())?;
        if typed.is_empty() {
            return None;
        }
        let rest = shown.text.strip_prefix(typed)?;
        // A line suggestion must stay on the line; nothing left means nothing to show.
        if rest.trim().is_empty() || (request.mode == StopMode::Line && rest.contains('\n')) {
            return None;
        }
        Some((rest.to_owned(), CacheHit::TypedAhead))
    }

    /// Records an answer the model gave for `request`, shown to the user: typing along it reuses it.
    pub fn store(&mut self, request: &CompletionRequest, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        self.exact.put(key(request), text.to_owned());
        self.remember_shown(request, text);
    }

    /// Records an answer computed ahead of time (a prefetch): found again only by its exact context, so the
    /// suggestion on screen keeps its typed-ahead reuse.
    pub fn store_prefetched(&mut self, request: &CompletionRequest, text: &str) {
        if !text.trim().is_empty() {
            self.exact.put(key(request), text.to_owned());
        }
    }

    /// Makes `text` the lane's shown suggestion, for typed-ahead reuse.
    pub fn remember_shown(&mut self, request: &CompletionRequest, text: &str) {
        if self.last_by_lane.len() >= MAX_LANES && !self.last_by_lane.contains_key(&request.lane) {
            self.last_by_lane.clear();
        }
        self.last_by_lane.insert(
            request.lane,
            Shown {
                header: request.header.clone(),
                prefix: request.prefix.clone(),
                suffix_line: first_line(&request.suffix).to_owned(),
                text: text.to_owned(),
            },
        );
    }
}

fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or("")
}

fn key(request: &CompletionRequest) -> u64 {
    let mut hasher = DefaultHasher::new();
    request.header.hash(&mut hasher);
    request.prefix.hash(&mut hasher);
    request.suffix.hash(&mut hasher);
    (request.mode == StopMode::Line).hash(&mut hasher);
    request.max_lines.hash(&mut hasher);
    // An answer kept under one confidence threshold is not the answer under another.
    request.min_confidence.to_bits().hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(prefix: &str, suffix: &str) -> CompletionRequest {
        CompletionRequest {
            lane: 7,
            header: "// a.rs\n".into(),
            prefix: prefix.into(),
            suffix: suffix.into(),
            mode: StopMode::Block,
            max_tokens: 32,
            max_lines: 4,
            ..Default::default()
        }
    }

    #[test]
    fn exact_and_typed_ahead_hits() {
        let mut cache = SuggestionCache::new(8);
        cache.store(&request("let x = ", "\n}"), "compute(1);\nlet y = 2;");
        assert_eq!(
            cache.lookup(&request("let x = ", "\n}")),
            Some(("compute(1);\nlet y = 2;".into(), CacheHit::Exact))
        );
        assert_eq!(
            cache.lookup(&request("let x = com", "\n}")),
            Some(("pute(1);\nlet y = 2;".into(), CacheHit::TypedAhead))
        );
        // Typed something else, deleted text, or the rest of the line changed: no hit.
        assert_eq!(cache.lookup(&request("let x = cx", "\n}")), None);
        assert_eq!(cache.lookup(&request("let x =", "\n}")), None);
        assert_eq!(cache.lookup(&request("let x = com", ");\n}")), None);
        // Typing the whole suggestion leaves nothing to show.
        assert_eq!(cache.lookup(&request("let x = compute(1);\nlet y = 2;", "\n}")), None);
    }

    #[test]
    fn a_prefetch_is_found_by_its_context_and_keeps_the_shown_suggestion() {
        let mut cache = SuggestionCache::new(8);
        cache.store(&request("let x = ", "\n}"), "compute(1);");
        cache.store_prefetched(&request("let x = compute(1);", "\n}"), "\nlet y = 2;");
        // Typing along the shown suggestion still works…
        assert_eq!(cache.lookup(&request("let x = comp", "\n}")), Some(("ute(1);".into(), CacheHit::TypedAhead)));
        // …and accepting it finds the prefetched continuation.
        assert_eq!(
            cache.lookup(&request("let x = compute(1);", "\n}")),
            Some(("\nlet y = 2;".into(), CacheHit::Exact))
        );
    }
}
