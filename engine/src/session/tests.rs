//! The session's tests, against the scripted fake model (`fake.rs`).

use std::time::{Duration, Instant};

use super::cost::{ChunkCost, MIN_PROMPT_CHUNK};
use super::draft::{DraftPolicy, DRAFT_RETRY_AFTER, MAX_DRAFT, MIN_DRAFT};
use super::fake::*;
use super::healing::{heal_span, VocabIndex};
use super::*;

fn request(prefix: &str, suffix: &str, mode: StopMode) -> CompletionRequest {
    CompletionRequest {
        lane: 1,
        prefix: prefix.to_owned(),
        suffix: suffix.to_owned(),
        mode,
        max_tokens: 64,
        max_lines: 8,
        deadline: Instant::now() + Duration::from_secs(10),
        heal: true,
        ..Default::default()
    }
}

#[test]
fn free_mode_stops_only_at_stop_strings() {
    let mut session = Session::new(FakeModel::new("a\n\n    b();\nEND more"), None);
    let mut req = request("prompt", "", StopMode::Free);
    req.raw_prompt = true;
    req.stop_strings = vec!["END".into()];
    let completion = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(completion.text, "a\n\n    b();\n");
    assert_eq!(completion.stop, StopReason::StopRule);
}

#[test]
fn line_mode_completes_to_end_of_line_and_trims_suffix() {
    let mut session = Session::new(FakeModel::new("x + 1);\nnext line"), None);
    let completion = session.complete(&request("let y = f(", ");", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(completion.text, "x + 1");
    assert_eq!(completion.stop, StopReason::StopRule);
}

#[test]
fn chunk_cost_has_a_fixed_part_and_sizes_chunks_to_the_budget() {
    let mut cost = ChunkCost::default();
    assert_eq!(cost.fits(Duration::from_millis(200)), None, "nothing measured yet");
    // One size only: all of it per token (137 ms / 16 tokens), so a 180 ms budget fits 21.
    cost.record(16, Duration::from_millis(137));
    assert_eq!(cost.fits(Duration::from_millis(180)), Some(21));
    // Qwen2.5-Coder 0.5B's measured chunks: ~60 ms fixed and ~5 ms a token, so 180 ms fit ~24 tokens where the
    // per-token rate of a 16-token chunk alone said 21, and 400 ms fit ~70 (not 47).
    cost.record(32, Duration::from_millis(211));
    cost.record(64, Duration::from_millis(370));
    let (fixed, per_token) = cost.fit().unwrap();
    assert!((40_000.0..80_000.0).contains(&fixed) && (4_000.0..6_000.0).contains(&per_token), "{fixed} {per_token}");
    assert!((60..=80).contains(&cost.fits(Duration::from_millis(400)).unwrap()));
    // Not trusted beyond twice the biggest chunk measured, nor below the fixed part.
    assert_eq!(cost.fits(Duration::from_secs(10)), Some(128));
    assert_eq!(cost.fits(Duration::from_millis(10)), Some(0));
}

#[test]
fn a_stale_cost_estimate_does_not_stall_prompt_evaluation() {
    // One slow chunk (the first after loading pays for buffer set-up) made the estimate say that nothing fits
    // before any deadline: no keystroke evaluated a token again and the estimate was never corrected.
    let mut session = Session::new(FakeModel::new(" = 1;"), None);
    session.prompt_cost.record(16, Duration::from_millis(800));
    let mut req = request(&"let a = 1;\n".repeat(40), "", StopMode::Line);
    req.deadline = Instant::now() + Duration::from_millis(225);
    let first = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(first.stop, StopReason::Deadline);
    assert!(first.stats.n_decoded >= MIN_PROMPT_CHUNK, "no progress: {:?}", first.stats);
    let (fixed, per_token) = session.prompt_cost.fit().unwrap();
    assert!(fixed + 16.0 * per_token < 800_000.0, "the estimate is measured again");
    // Each following keystroke goes on from there until the prompt is in and an answer comes.
    let answered = (0..20).find_map(|_| {
        req.deadline = Instant::now() + Duration::from_millis(225);
        let answer = session.complete(&req, Instant::now()).unwrap();
        (answer.stop != StopReason::Deadline).then_some(answer)
    });
    assert_eq!(answered.expect("the prompt is evaluated in the end").text, " = 1;");
}

#[test]
fn a_first_line_the_model_rates_unlikely_is_not_shown() {
    // " = 1;" then the line's end: six sampled tokens at 0.8 each, 0.8^6 = 0.262 for the line.
    let mut model = FakeModel::new(" = 1;\n    next();");
    model.token_probability = Some(0.8);
    let mut session = Session::new(model, None);
    let mut req = request("fn main() {\n    let x", "\n}", StopMode::Line);
    req.min_confidence = 0.3;
    let below = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(below.text, "");
    assert!(below.stats.below_confidence);
    assert_eq!(below.stats.confidence_permille, 262);

    req.min_confidence = 0.25;
    let above = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(above.text, " = 1;");
    assert!(!above.stats.below_confidence);
    assert_eq!(above.stats.confidence_permille, 262, "only the first line is rated");
}

#[test]
fn a_block_keeps_the_lines_whose_running_probability_stays_above_the_threshold() {
    // One token per character at 0.95: after "a();\n" 0.774, after "    b();\n" 0.488, after "    c();" and
    // the end of generation 0.307.
    let mut model = FakeModel::new("a();\n    b();\n    c();");
    model.token_probability = Some(0.95);
    let mut session = Session::new(model, None);
    let mut req = request("fn f() {\n    ", "\n}", StopMode::Block);
    req.indent = "    ".into();
    req.min_confidence = 0.4;
    let answer = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(answer.text, "a();\n    b();");
    assert_eq!(answer.stats.confidence_permille, 774);
    assert!(!answer.stats.below_confidence);
}

#[test]
fn a_backend_without_probabilities_gates_nothing() {
    let mut session = Session::new(FakeModel::new(" = 1;\n"), None);
    let mut req = request("fn main() {\n    let x", "\n}", StopMode::Line);
    req.min_confidence = 0.99;
    let answer = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(answer.text, " = 1;");
    assert_eq!(answer.stats.confidence_permille, 1000);
}

#[test]
fn second_keystroke_reuses_the_cached_prefix() {
    let mut session = Session::new(FakeModel::new("abc"), None);
    let first = session.complete(&request("fn main() {\n    let", "", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(first.stats.n_reused, 0);
    assert_eq!(first.stats.n_decoded, first.stats.n_prompt);
    let second = session.complete(&request("fn main() {\n    let x", "", StopMode::Line), Instant::now()).unwrap();
    // Everything up to the old prompt's end is reused; only " x" is new.
    assert_eq!(second.stats.n_reused, first.stats.n_prompt);
    assert_eq!(second.stats.n_decoded, 2);
}

#[test]
fn typed_ahead_characters_that_match_generated_tokens_are_reused() {
    let mut session = Session::new(FakeModel::new("abc"), None);
    let first = session.complete(&request("let x = ", "", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(first.text, "abc");
    // The user typed "ab": the generated tokens stay in the cache, and the answer is the rest of them.
    let second = session.complete(&request("let x = ab", "", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(second.stats.n_reused, first.stats.n_prompt + 3);
    assert_eq!((second.stats.n_carried, second.stats.n_decoded, second.text.as_str()), (3, 0, "c"));
}

#[test]
fn identical_prompt_evaluates_nothing_again() {
    let mut session = Session::new(FakeModel::new("abc"), None);
    let req = request("let x = ", "", StopMode::Line);
    session.complete(&req, Instant::now()).unwrap();
    let again = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(again.stats.n_decoded, 0);
    assert_eq!(again.text, "abc");
}

#[test]
fn cancelled_request_returns_empty_and_keeps_the_cache_consistent() {
    let mut session = Session::new(FakeModel::new("abc"), None);
    let req = request("let x = ", "", StopMode::Line);
    req.cancel.cancel();
    let completion = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(completion.stop, StopReason::Cancelled);
    assert!(completion.text.is_empty());
    assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
}

#[test]
fn deadline_in_block_mode_keeps_complete_lines() {
    let mut model = FakeModel::new("a();\nb();\nc(");
    model.eog_after = false;
    let mut session = Session::new(model, None);
    let mut req = request("fn f() {\n", "\n}", StopMode::Block);
    req.max_tokens = 12;
    let completion = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(completion.stop, StopReason::MaxTokens);
    assert_eq!(completion.text, "a();\nb();");
}

#[test]
fn a_first_line_cut_by_the_deadline_is_not_shown() {
    let mut model = FakeModel::new("value.to_string();\nnext();");
    model.token_time = Duration::from_millis(15);
    let mut session = Session::new(model, None);
    let mut line = request("fn f() {\n    let s = ", "\n}", StopMode::Line);
    line.deadline = Instant::now() + Duration::from_millis(60);
    let cut = session.complete(&line, Instant::now()).unwrap();
    assert_eq!(cut.stop, StopReason::Deadline);
    assert!(cut.stats.n_generated > 0 && cut.stats.n_generated < 18, "{:?}", cut.stats);
    assert_eq!(cut.text, "", "a stub of the line is not shown");

    // Given the time, the whole line is the answer.
    line.deadline = Instant::now() + Duration::from_secs(5);
    let whole = session.complete(&line, Instant::now()).unwrap();
    assert_eq!(whole.text, "value.to_string();");
}

#[test]
fn typing_along_a_line_the_deadline_cut_continues_its_generation() {
    let line = "value.to_string();";
    let mut model = FakeModel::new(&format!("{line}\nnext();"));
    model.token_time = Duration::from_millis(15);
    let mut session = Session::new(model, None);
    let mut req = request("fn f() {\n    let s = ", "\n}", StopMode::Line);
    req.deadline = Instant::now() + Duration::from_millis(60);
    let cut = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(cut.stop, StopReason::Deadline);
    let n_cut = cut.stats.n_generated;
    assert!(n_cut > 2 && n_cut < line.len(), "{:?}", cut.stats);

    // The user types the first two generated characters: the rest of the line comes from where the cut
    // generation stopped, not from the start again.
    let mut typed = request("fn f() {\n    let s = va", "\n}", StopMode::Line);
    typed.deadline = Instant::now() + Duration::from_secs(5);
    let rest = session.complete(&typed, Instant::now()).unwrap();
    assert_eq!(rest.text, "lue.to_string();");
    assert_eq!(rest.stats.n_carried, n_cut);
    assert_eq!(rest.stats.n_generated, line.len() - n_cut, "{:?}", rest.stats);
    assert_eq!(rest.stats.n_decoded, 0, "the logits after the carried tokens are still there: {:?}", rest.stats);
    assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());

    // Typing along the finished line continues it too; typing something else does not.
    let along = session.complete(&request("fn f() {\n    let s = value.to", "\n}", StopMode::Line), Instant::now());
    assert_eq!(along.unwrap().text, "_string();");
    let other = session.complete(&request("fn f() {\n    let s = vax", "\n}", StopMode::Line), Instant::now());
    let other = other.unwrap();
    assert_eq!(other.stats.n_carried, 0);
    assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
}

#[test]
fn token_healing_takes_back_the_word_at_the_prompt_end_and_shows_only_what_follows_it() {
    // A vocabulary of characters: `wit` (three tokens of one word) is taken back and spelled again, then the
    // model goes on; the answer is what follows the typed text.
    let mut model = FakeModel::new("witch (type) {\nnext");
    model.heals = true;
    let mut session = Session::new(model, None);
    let first = session.complete(&request("  swit", "", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(first.text, "ch (type) {");
    assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
    assert_eq!(session.cached_tokens().len(), "  s".len() + 1 + "witch (type) {".len(), "BOS, the prompt less `wit`");

    // Typing along: the generation is continued past the healed bytes.
    let along = session.complete(&request("  switc", "", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(along.text, "h (type) {");
    assert!(along.stats.n_carried > 0 && along.stats.n_decoded == 0, "{:?}", along.stats);

    // Typing something else: a fresh prompt, healed again, the cache still what the model holds.
    let other = session.complete(&request("  swix", "", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(other.stats.n_carried, 0);
    assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
}

#[test]
fn heal_span_takes_the_last_token_and_the_rest_of_its_word() {
    let pieces = |list: &[&str]| list.iter().map(|piece| piece.as_bytes().to_vec()).collect::<Vec<_>>();
    let cases: &[(&[&str], &str, usize, &str)] = &[
        (&["  ", "sw", "it"], "  swit", 2, "swit"),
        (&["foo", "("], "foo(", 1, "("),
        (&["x", ".", "len"], "x.len", 1, "len"),
        (&["   ", " "], "    ", 1, " "),
        (&["let", " x"], "let x", 1, " x"),
        // The tokens do not spell the typed text (the prompt's end is elsewhere): nothing is healed.
        (&["ab"], "b", 0, ""),
        (&["q"], "abc", 0, ""),
    ];
    for (list, typed, n, healed) in cases {
        let got = heal_span(&pieces(list), typed.as_bytes());
        assert_eq!(got, (*n, healed.as_bytes().to_vec()), "{list:?} typed {typed:?}");
    }
}

#[test]
fn the_vocabulary_index_finds_tokens_consistent_with_healed_bytes() {
    let vocab = ["i", "it", "itch", "item", "x", "iterate", "t", ""];
    let index =
        VocabIndex::from_pieces(vocab.iter().enumerate().map(|(id, piece)| (piece.as_bytes().to_vec(), id as Token)));
    let mut got = index.consistent_with(b"it");
    got.sort_unstable();
    // `it`, `itch`, `item`, `iterate` start with it; `i` is a shorter start (a `t` follows).
    assert_eq!(got, vec![0, 1, 2, 3, 5]);
    assert_eq!(index.consistent_with(b"zz"), Vec::<Token>::new());
}

#[test]
fn a_generation_step_that_would_end_past_the_deadline_is_not_started() {
    let line = "value.to_string();";
    let mut model = FakeModel::new(&format!("{line}\n"));
    model.token_time = Duration::from_millis(30);
    let mut session = Session::new(model, None);
    // A first answer measures what a step costs (at least the 30 ms each evaluation sleeps).
    let warm = session.complete(&request("fn f() {\n    let s = ", "\n}", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(warm.text, line);
    let mut req = request("fn f() {\n    let t = ", "\n}", StopMode::Line);
    req.deadline = Instant::now() + Duration::from_millis(100);
    let cut = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(cut.stop, StopReason::Deadline);
    // Without the rule a fourth step would start at ~90 ms and end at ~120 ms.
    assert!(cut.stats.n_generated <= 3, "{:?}", cut.stats);
    // The token sampled but not evaluated is sampled again by a request typing along.
    let along = session.complete(&request("fn f() {\n    let t = v", "\n}", StopMode::Line), Instant::now()).unwrap();
    assert_eq!(along.text, "alue.to_string();");
    assert_eq!(along.stats.n_decoded, 0);
}

#[test]
fn carried_text_past_a_line_break_ends_a_line_answer() {
    let mut model = FakeModel::new("a();\nb();\nc();");
    model.eog_after = false;
    let mut session = Session::new(model, None);
    let mut block = request("fn f() {\n    ", "\n}", StopMode::Block);
    block.max_tokens = 7;
    let first = session.complete(&block, Instant::now()).unwrap();
    assert_eq!((first.stop, first.text.as_str()), (StopReason::MaxTokens, "a();"));
    let line = session.complete(&request("fn f() {\n    a", "\n}", StopMode::Line), Instant::now()).unwrap();
    assert_eq!((line.stop, line.text.as_str()), (StopReason::StopRule, "();"));
    assert_eq!((line.stats.n_carried, line.stats.n_generated), (7, 0));
}

#[test]
fn sampled_and_task_requests_do_not_continue() {
    let mut session = Session::new(FakeModel::new("abc"), None);
    session.complete(&request("let x = ", "", StopMode::Line), Instant::now()).unwrap();
    let mut sampled = request("let x = a", "", StopMode::Line);
    sampled.sampling.temperature = 0.7;
    assert_eq!(session.complete(&sampled, Instant::now()).unwrap().stats.n_carried, 0);
    session.complete(&request("let x = ", "", StopMode::Line), Instant::now()).unwrap();
    let mut task = request("let x = a", "", StopMode::Free);
    task.raw_prompt = true;
    assert_eq!(session.complete(&task, Instant::now()).unwrap().stats.n_carried, 0);
}

#[test]
fn warm_up_generates_nothing() {
    let mut session = Session::new(FakeModel::new("abc"), None);
    let mut req = request("let x = ", "", StopMode::Line);
    req.max_tokens = 0;
    let completion = session.complete(&req, Instant::now()).unwrap();
    assert_eq!(completion.stop, StopReason::WarmedUp);
    assert_eq!(completion.stats.n_generated, 0);
    assert_eq!(session.cached_tokens().len(), completion.stats.n_prompt);
}

#[test]
fn overlong_prompt_drops_oldest_prefix_in_steps() {
    let mut model = FakeModel::new("z");
    model.n_ctx = 600;
    let mut session = Session::new(model, None);
    let long = "a".repeat(1000);
    let completion = session.complete(&request(&long, "", StopMode::Line), Instant::now()).unwrap();
    assert!(completion.stats.n_prompt <= 600 - 64 - 8);
    assert_eq!(completion.text, "z");
}

#[test]
fn a_failed_truncation_leaves_the_record_equal_to_the_emptied_cache() {
    let mut session = Session::new(FakeModel::new("abc"), None);
    session.complete(&request("let x = 1;", "", StopMode::Line), Instant::now()).unwrap();
    session.model.fail_truncate = true;
    let second = session.complete(&request("let y = 2;", "", StopMode::Line), Instant::now());
    assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
    // The request still gets its answer, from a cold prompt.
    let second = second.unwrap();
    assert_eq!((second.text.as_str(), second.stats.n_reused), ("abc", 0));
}

fn task(prompt: &str) -> CompletionRequest {
    let mut req = request(prompt, "", StopMode::Free);
    req.raw_prompt = true;
    req.lane = u64::MAX;
    req
}

#[test]
fn switching_back_to_a_recent_document_finds_its_prompt_cached() {
    let mut session = Session::new(FakeModel::with_slots("abc", 3), None);
    let mut a = request("fn alpha() {\n    let", "", StopMode::Line);
    a.lane = 1;
    let mut b = request("struct Beta {\n    field", "", StopMode::Line);
    b.lane = 2;
    session.complete(&a, Instant::now()).unwrap();
    session.complete(&b, Instant::now()).unwrap();
    // A task runs in its own slot: neither document loses its prompt.
    session.complete(&task("Fix this code"), Instant::now()).unwrap();
    let back = session.complete(&a, Instant::now()).unwrap();
    assert_eq!((back.stats.n_decoded, back.stats.slot), (1, 0));
    let back = session.complete(&b, Instant::now()).unwrap();
    assert_eq!((back.stats.n_decoded, back.stats.slot), (1, 1));
    // A third document takes the least recently used document slot.
    let mut c = request("impl Gamma", "", StopMode::Line);
    c.lane = 3;
    assert_eq!(session.complete(&c, Instant::now()).unwrap().stats.slot, 0);
    for (seq, tokens) in session.slot_tokens().into_iter().enumerate() {
        assert_eq!(tokens, session.model.caches[seq].as_slice());
    }
}

#[test]
fn a_new_document_starts_from_the_slot_sharing_its_header() {
    let header = "// other file\nfn shared_helper(x: i32) -> i32 { x * 2 }\n".repeat(3);
    let mut session = Session::new(FakeModel::with_slots("z", 3), None);
    let mut a = request(&format!("{header}fn a() {{"), "", StopMode::Line);
    a.lane = 1;
    session.complete(&a, Instant::now()).unwrap();
    let mut b = request(&format!("{header}fn b() {{"), "", StopMode::Line);
    b.lane = 2;
    let second = session.complete(&b, Instant::now()).unwrap();
    assert_eq!(second.stats.slot, 1);
    assert!(second.stats.n_copied >= header.len(), "{:?}", second.stats);
    assert_eq!(second.stats.n_decoded, "b() {".len(), "only what differs from the other slot is evaluated");
    assert_eq!(session.slot_tokens()[1], session.model.caches[1].as_slice());
}

/// A deterministic "model" whose greedy choice depends on the last three tokens: repetitive enough that
/// prompt lookup drafts are often right, and often wrong.
fn rule(tokens: &[Token]) -> Token {
    let tail = &tokens[tokens.len().saturating_sub(3)..];
    let hash = tail.iter().fold(7u32, |acc, token| acc.wrapping_mul(31).wrapping_add(*token as u32));
    if hash % 29 == 0 {
        EOG
    } else {
        ['a', 'b', 'c', 'd'][(hash / 7 % 4) as usize] as Token
    }
}

#[test]
fn speculative_decoding_drafts_and_keeps_what_the_model_confirms() {
    let model = || {
        let mut model = FakeModel::new("");
        model.rule = Some(rule);
        model
    };
    let mut plain = Session::new(model(), None);
    plain.speculative = false;
    let mut fast = Session::new(model(), None);
    fast.speculative = true;
    let mut req = task("abcdabcdabcadbcabdcab");
    req.max_tokens = 40;
    let slow = plain.complete(&req, Instant::now()).unwrap();
    let quick = fast.complete(&req, Instant::now()).unwrap();
    assert_eq!((quick.text.as_str(), quick.stop), (slow.text.as_str(), slow.stop));
    assert!(quick.stats.n_drafted > 0 && quick.stats.n_accepted > 0, "{:?}", quick.stats);
    assert_eq!(fast.cached_tokens(), plain.cached_tokens());
    assert_eq!(fast.cached_tokens(), fast.model.caches[0].as_slice());
}

#[test]
fn drafting_stops_while_it_costs_more_per_token_and_is_tried_again() {
    let mut policy = DraftPolicy::new();
    assert!(policy.should_draft(), "nothing measured yet: try");
    policy.record_plain(Duration::from_millis(10));
    // A draft of 8 with 1 accepted: 40 ms for 2 tokens is 20 ms a token, twice plain decoding.
    policy.record_draft(Duration::from_millis(40), 8, 1);
    let chances: Vec<bool> = (0..DRAFT_RETRY_AFTER).map(|_| policy.should_draft()).collect();
    assert_eq!(chances.iter().filter(|draft| **draft).count(), 1, "one retry in {DRAFT_RETRY_AFTER} chances");
    assert!(chances.last().copied().unwrap_or(false), "the retry comes after the chances passed up");
    // Drafts that are cheaper per token than plain decoding are used every time.
    for _ in 0..8 {
        policy.record_draft(Duration::from_millis(30), 8, 8);
    }
    assert!((0..4).all(|_| policy.should_draft()));
}

#[test]
fn a_draft_grows_while_accepted_whole_and_shrinks_when_mostly_rejected() {
    let mut policy = DraftPolicy::new();
    assert_eq!(policy.len, MAX_DRAFT / 2);
    policy.record_draft(Duration::from_millis(1), policy.len, policy.len);
    assert_eq!(policy.len, MAX_DRAFT);
    policy.record_draft(Duration::from_millis(1), MAX_DRAFT, MAX_DRAFT);
    assert_eq!(policy.len, MAX_DRAFT, "capped");
    policy.record_draft(Duration::from_millis(1), MAX_DRAFT, 10);
    assert_eq!(policy.len, MAX_DRAFT, "more than half accepted: kept");
    for _ in 0..8 {
        policy.record_draft(Duration::from_millis(1), policy.len, 0);
    }
    assert_eq!(policy.len, MIN_DRAFT, "floored");
}

#[test]
fn prompt_lookup_drafts_what_followed_the_last_ngram() {
    let history: Vec<Token> = "let total = a + b;\nlet".chars().map(|ch| ch as Token).collect();
    let draft: String =
        draft_tokens(&history, ' ' as Token, 6).into_iter().map(|t| char::from_u32(t as u32).unwrap()).collect();
    assert_eq!(draft, "total ");
    assert!(draft_tokens(&history, 'Q' as Token, 6).is_empty());
    assert!(draft_tokens(&history, ' ' as Token, 0).is_empty());
}

#[derive(Debug, Clone)]
enum Op {
    Ghost { lane: u64, prefix: String, max_tokens: usize },
    Task { prompt: String },
    FailTruncate,
    FailCopy,
    FailDecode,
    Reset,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0u64..5, "[abc\n]{0,40}", 0usize..12).prop_map(|(lane, prefix, max_tokens)| Op::Ghost { lane, prefix, max_tokens }),
        2 => "[abcd ]{1,30}".prop_map(|prompt| Op::Task { prompt }),
        1 => Just(Op::FailTruncate),
        1 => Just(Op::FailCopy),
        1 => Just(Op::FailDecode),
        1 => Just(Op::Reset),
    ]
}

proptest::proptest! {
    #[test]
    fn every_slot_records_exactly_what_its_sequence_holds(
        ops in proptest::collection::vec(op(), 1..40),
        n_seq in 1usize..5,
        speculative: bool,
    ) {
        let mut model = FakeModel::with_slots("", n_seq);
        model.rule = Some(rule);
        model.n_ctx = 64;
        model.unsure_every = 3;
        let mut session = Session::new(model, None);
        session.speculative = speculative;
        // A shared header makes copies between slots worth it.
        let header = "shared header line\n".repeat(2);
        for op in ops {
            match op {
                Op::Ghost { lane, prefix, max_tokens } => {
                    let mut req = request(&format!("{header}{prefix}"), "", StopMode::Block);
                    req.lane = lane;
                    req.max_tokens = max_tokens;
                    let _ = session.complete(&req, Instant::now());
                }
                Op::Task { prompt } => {
                    let mut req = task(&prompt);
                    req.max_tokens = 10;
                    let _ = session.complete(&req, Instant::now());
                }
                Op::FailTruncate => session.model.fail_truncate = true,
                Op::FailCopy => session.model.fail_copy = true,
                Op::FailDecode => session.model.fail_decode = true,
                Op::Reset => session.reset(),
            }
            for (seq, tokens) in session.slot_tokens().into_iter().enumerate() {
                proptest::prop_assert_eq!(tokens, session.model.caches[seq].as_slice(), "slot {}", seq);
            }
        }
    }

    #[test]
    fn speculative_output_equals_greedy_token_for_token(
        prompts in proptest::collection::vec("[abcd]{0,30}", 1..6),
        max_tokens in 1usize..40,
        unsure_every in 0usize..4,
    ) {
        let model = || {
            let mut model = FakeModel::with_slots("", 2);
            model.rule = Some(rule);
            model.unsure_every = unsure_every;
            model
        };
        let mut plain = Session::new(model(), None);
        plain.speculative = false;
        let mut fast = Session::new(model(), None);
        fast.speculative = true;
        for prompt in prompts {
            let mut req = task(&prompt);
            req.max_tokens = max_tokens;
            let slow = plain.complete(&req, Instant::now()).unwrap();
            let quick = fast.complete(&req, Instant::now()).unwrap();
            proptest::prop_assert_eq!(&quick.text, &slow.text);
            proptest::prop_assert_eq!(quick.stop, slow.stop);
            proptest::prop_assert_eq!(quick.stats.n_generated, slow.stats.n_generated);
            proptest::prop_assert_eq!(fast.slot_tokens(), plain.slot_tokens());
        }
    }
}

proptest::proptest! {
    #[test]
    fn cache_mirrors_the_model_after_any_sequence_of_prompts(prompts in proptest::collection::vec("[ab\n]{0,12}", 1..8)) {
        let mut session = Session::new(FakeModel::new("ab"), None);
        for prefix in prompts {
            let completion = session.complete(&request(&prefix, "", StopMode::Line), Instant::now()).unwrap();
            proptest::prop_assert_eq!(session.cached_tokens(), session.model.caches[0].as_slice());
            proptest::prop_assert_eq!(completion.stats.n_reused + completion.stats.n_decoded, completion.stats.n_prompt);
        }
    }
}
