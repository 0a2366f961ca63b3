//! Regex verification: a pattern compiles in the user's dialect (the `regex` crate for Rust, ECMAScript through
//! `regress` for TypeScript), matches its examples, and generalises: it is not its examples spelled out, and it
//! treats the probes Spark writes from the examples (near misses, variants) as a pattern of the described kind
//! would. ECMAScript matching runs in a worker process killed at its time limit, since `regress` backtracks.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::edit::{first_line, Rejection};

/// How long one candidate regex may take to match all its examples. ECMAScript patterns run on `regress`, a
/// backtracking engine: a model-written `(a+)+$` against `aaa…ab` would never finish.
pub const REGEX_MATCH_LIMIT: Duration = Duration::from_millis(500);
/// The argument that makes the `spark-lsp` binary a regex worker (see [`regex_worker_main`]).
pub const REGEX_WORKER_ARG: &str = "__regex-worker";

/// The regex dialect a pattern is checked in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegexFlavor {
    /// The `regex` crate's syntax, for Rust.
    Rust,
    /// ECMAScript, for TypeScript and JavaScript (checked with the `regress` engine).
    EcmaScript,
}

/// The pattern compiles in its flavor, matches every positive example whole and no negative one, and does so
/// within [`REGEX_MATCH_LIMIT`].
pub fn check_regex(
    flavor: RegexFlavor,
    pattern: &str,
    positives: &[String],
    negatives: &[String],
) -> Result<(), Rejection> {
    if pattern.trim().is_empty() {
        return Err(Rejection::Empty);
    }
    let whole = format!("^(?:{pattern})$");
    let examples: Vec<String> = positives.iter().chain(negatives).cloned().collect();
    let matched = match flavor {
        RegexFlavor::Rust => {
            regex::Regex::new(pattern).map_err(|error| Rejection::RegexInvalid(first_line(&error.to_string())))?;
            let compiled =
                regex::Regex::new(&whole).map_err(|error| Rejection::RegexInvalid(first_line(&error.to_string())))?;
            // The `regex` crate matches in time linear in the input: no limit needed.
            examples.iter().map(|example| compiled.is_match(example)).collect()
        }
        RegexFlavor::EcmaScript => {
            regress::Regex::new(pattern).map_err(|error| Rejection::RegexInvalid(error.to_string()))?;
            regress::Regex::new(&whole).map_err(|error| Rejection::RegexInvalid(error.to_string()))?;
            ecmascript_matches_bounded(&whole, &examples)?
        }
    };
    let (positive_matched, negative_matched) = matched.split_at(positives.len());
    if let Some((missed, _)) = positives.iter().zip(positive_matched).find(|(_, matched)| !**matched) {
        return Err(Rejection::RegexMissesExample(missed.clone()));
    }
    if let Some((hit, _)) = negatives.iter().zip(negative_matched).find(|(_, matched)| **matched) {
        return Err(Rejection::RegexMatchesCounterexample(hit.clone()));
    }
    Ok(())
}

static REGEX_WORKER: OnceLock<PathBuf> = OnceLock::new();

/// Makes ECMAScript matching run in a child process (`exe __regex-worker`) that is killed at the time limit: a
/// backtracking match cannot be stopped from inside. The `spark-lsp` binary registers itself at start; without
/// a worker (unit tests of this crate) the match runs on a thread that is abandoned at the limit.
pub fn use_regex_worker(exe: PathBuf) {
    let _ = REGEX_WORKER.set(exe);
}

/// Whether `pattern` (already anchored) matches each example, or `RegexTooSlow` past the limit.
fn ecmascript_matches_bounded(pattern: &str, examples: &[String]) -> Result<Vec<bool>, Rejection> {
    if let Some(exe) = REGEX_WORKER.get() {
        match matches_in_worker(exe, pattern, examples) {
            Ok(matched) => return matched,
            Err(error) => tracing::warn!(%error, "regex worker failed; matching on a thread"),
        }
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    let (pattern, examples) = (pattern.to_owned(), examples.to_vec());
    std::thread::Builder::new()
        .name("spark-regex".into())
        .spawn(move || {
            let _ = sender.send(ecmascript_matches(&pattern, &examples));
        })
        .map_err(|_| Rejection::RegexTooSlow)?;
    match receiver.recv_timeout(REGEX_MATCH_LIMIT) {
        Ok(matched) => matched.ok_or_else(|| Rejection::RegexInvalid("does not compile".into())),
        Err(_) => {
            tracing::warn!("regex match past its time limit; its thread is abandoned");
            Err(Rejection::RegexTooSlow)
        }
    }
}

fn ecmascript_matches(pattern: &str, examples: &[String]) -> Option<Vec<bool>> {
    let compiled = regress::Regex::new(pattern).ok()?;
    Some(examples.iter().map(|example| compiled.find(example).is_some()).collect())
}

/// Runs the match in a worker process, killed at the limit. `Err` when the worker could not run at all.
fn matches_in_worker(
    exe: &std::path::Path,
    pattern: &str,
    examples: &[String],
) -> std::io::Result<Result<Vec<bool>, Rejection>> {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let mut child = Command::new(exe)
        .arg(REGEX_WORKER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let input = serde_json::json!({"pattern": pattern, "examples": examples}).to_string();
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    let deadline = Instant::now() + REGEX_MATCH_LIMIT;
    loop {
        if let Some(status) = child.try_wait()? {
            let mut output = String::new();
            if let Some(mut stdout) = child.stdout.take() {
                stdout.read_to_string(&mut output)?;
            }
            let matched: Option<Vec<bool>> = serde_json::from_str(&output).ok();
            return match matched {
                Some(matched) if status.success() && matched.len() == examples.len() => Ok(Ok(matched)),
                _ => Err(std::io::Error::other(format!("regex worker: {status}, output {output:?}"))),
            };
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Err(Rejection::RegexTooSlow));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The worker's side: reads `{"pattern", "examples"}` from stdin, prints whether each example matches (a JSON
/// array of booleans). The exit code is non-zero on bad input.
pub fn regex_worker_main() -> std::process::ExitCode {
    use std::io::Read;
    let mut input = String::new();
    if std::io::stdin().read_to_string(&mut input).is_err() {
        return std::process::ExitCode::FAILURE;
    }
    let Ok(request) = serde_json::from_str::<serde_json::Value>(&input) else {
        return std::process::ExitCode::FAILURE;
    };
    let pattern = request["pattern"].as_str().unwrap_or_default();
    let examples: Vec<String> = request["examples"]
        .as_array()
        .map(|examples| examples.iter().filter_map(|example| example.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    match ecmascript_matches(pattern, &examples) {
        Some(matched) => {
            println!("{}", serde_json::Value::from(matched));
            std::process::ExitCode::SUCCESS
        }
        None => std::process::ExitCode::FAILURE,
    }
}

/// Whether `pattern`, used as the offered code uses it (`Regex::is_match`, `RegExp.test`: a search, not a whole
/// match), finds a match in each input; `RegexInvalid` when it does not compile, `RegexTooSlow` past the limit.
pub fn regex_matches(flavor: RegexFlavor, pattern: &str, inputs: &[String]) -> Result<Vec<bool>, Rejection> {
    match flavor {
        RegexFlavor::Rust => {
            let compiled =
                regex::Regex::new(pattern).map_err(|error| Rejection::RegexInvalid(first_line(&error.to_string())))?;
            Ok(inputs.iter().map(|input| compiled.is_match(input)).collect())
        }
        RegexFlavor::EcmaScript => {
            regress::Regex::new(pattern).map_err(|error| Rejection::RegexInvalid(error.to_string()))?;
            ecmascript_matches_bounded(pattern, inputs)
        }
    }
}

/// A string Spark writes from the examples to see whether a pattern generalises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub text: String,
    pub kind: ProbeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// An example with a digit changed for another digit: a pattern of the described kind usually matches it,
    /// but not always (a range, an even number), so it ranks candidates; a pattern that matches none of them is
    /// its examples spelled out, and is refused.
    DigitVariant,
    /// An example with a letter changed for another of the same case: ranks only (a file extension or a keyword
    /// is a letter change away from a wrong one).
    LetterVariant,
    /// An example with a character of a kind that no example has and the description never names put in or
    /// swapped in, surrounded by a space, or the empty string: certainly outside the described language, a
    /// candidate that matches it is refused.
    CertainMiss,
    /// An example with one character removed or repeated, or a separator swapped for another: usually outside
    /// the language, but not always (`42` is an integer and so is `4`), so it only ranks.
    LikelyMiss,
}

/// The kinds of character the probes reason about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CharKind {
    Digit,
    Lower,
    Upper,
    Space,
}

impl CharKind {
    fn of(ch: char) -> Option<CharKind> {
        match ch {
            '0'..='9' => Some(CharKind::Digit),
            'a'..='z' => Some(CharKind::Lower),
            'A'..='Z' => Some(CharKind::Upper),
            ' ' => Some(CharKind::Space),
            _ => None,
        }
    }

    /// The character a probe puts in for this kind: one that is no hex digit and no common abbreviation.
    fn sample(self) -> char {
        match self {
            CharKind::Digit => '7',
            CharKind::Lower => 'q',
            CharKind::Upper => 'Q',
            CharKind::Space => ' ',
        }
    }

    /// Words of a description that admit characters of this kind although no example shows one.
    fn named_by(self) -> &'static [&'static str] {
        match self {
            CharKind::Digit => &[
                "digit",
                "number",
                "numer",
                "numeric",
                "alphanumeric",
                "0-9",
                "\\d",
                "hex",
                "any",
                "character",
                "string",
                "text",
                "non-",
                "other",
                "name",
                "identifier",
                "word",
            ],
            CharKind::Lower => &["letter", "lowercase", "lower"],
            CharKind::Upper => &["letter", "uppercase", "upper", "capital"],
            CharKind::Space => &[
                "space",
                "blank",
                "whitespace",
                "text",
                "sentence",
                "words",
                "phrase",
                "title",
                "heading",
                "any",
                "character",
                "string",
                "non-",
                "other",
            ],
        }
    }
}

/// Words of a description that admit letters of either case (besides each case's own words).
const LETTER_WORDS: &[&str] = &[
    "alpha",
    "case",
    "hex",
    "word",
    "name",
    "identifier",
    "text",
    "character",
    "string",
    "any",
    "non-",
    "other",
    "a-z",
    "domain",
    "label",
    "path",
    "url",
];

fn admits(description: &str, kind: CharKind) -> bool {
    let letter = matches!(kind, CharKind::Lower | CharKind::Upper);
    kind.named_by().iter().chain(if letter { LETTER_WORDS } else { &[] }).any(|word| description.contains(word))
}

/// The description names the examples themselves (`AM or PM`, `true or false`): a pattern that lists them is
/// what was asked for.
fn names_every_example(description: &str, positives: &[String]) -> bool {
    let description = description.to_lowercase();
    !positives.is_empty() && positives.iter().all(|example| description.contains(&example.to_lowercase()))
}

/// The probes Spark writes from the examples: variants that a pattern of the kind described should match and
/// near misses that it should not (see [`ProbeKind`] for which are certain). Pure, deterministic, and never one
/// of the given examples.
pub fn probes(description: &str, positives: &[String], negatives: &[String]) -> Vec<Probe> {
    let description = description.to_lowercase();
    let kinds_shown: Vec<CharKind> =
        positives.iter().flat_map(|example| example.chars()).filter_map(CharKind::of).collect();
    let absent: Vec<CharKind> = [CharKind::Digit, CharKind::Lower, CharKind::Upper, CharKind::Space]
        .into_iter()
        .filter(|kind| !kinds_shown.contains(kind) && !admits(&description, *kind))
        .collect();
    let separators_shown: Vec<char> =
        positives.iter().flat_map(|example| example.chars()).filter(|ch| !ch.is_alphanumeric()).collect();
    let mut out: Vec<Probe> = Vec::new();
    let mut push = |text: String, kind: ProbeKind| {
        if !positives.contains(&text) && !negatives.contains(&text) && !out.iter().any(|probe| probe.text == text) {
            out.push(Probe { text, kind });
        }
    };
    let without_empty = description.replace("non-empty", "");
    if !positives.iter().any(String::is_empty) && !without_empty.contains("empty") {
        push(String::new(), ProbeKind::CertainMiss);
    }
    for example in positives {
        let chars: Vec<char> = example.chars().collect();
        if chars.is_empty() {
            continue;
        }
        let with = |at: usize, remove: usize, insert: &str| -> String {
            let mut text: String = chars[..at].iter().collect();
            text.push_str(insert);
            text.extend(&chars[(at + remove).min(chars.len())..]);
            text
        };
        let middle = chars.len() / 2;
        for kind in &absent {
            let sample = kind.sample().to_string();
            if *kind == CharKind::Space {
                push(format!(" {example}"), ProbeKind::CertainMiss);
                push(format!("{example} "), ProbeKind::CertainMiss);
            }
            push(with(middle, 0, &sample), ProbeKind::CertainMiss);
            push(with(chars.len() - 1, 1, &sample), ProbeKind::CertainMiss);
            push(with(0, 1, &sample), ProbeKind::CertainMiss);
        }
        for at in [0, middle, chars.len() - 1] {
            push(with(at, 1, ""), ProbeKind::LikelyMiss);
            push(with(at, 0, &chars[at].to_string()), ProbeKind::LikelyMiss);
        }
        if let Some(at) = chars.iter().position(|ch| !ch.is_alphanumeric()) {
            let other = ['-', '.', '/', ':', '_', ',']
                .into_iter()
                .find(|sep| !separators_shown.contains(sep) && !description.contains(*sep));
            if let Some(other) = other {
                push(with(at, 1, &other.to_string()), ProbeKind::LikelyMiss);
            }
        }
        let mut digits = 0;
        let mut letters = 0;
        for (at, ch) in chars.iter().enumerate() {
            let run_start = at == 0 || !chars[at - 1].is_ascii_digit();
            let run_longer = chars.get(at + 1).is_some_and(char::is_ascii_digit);
            let replaced = match ch {
                // Down keeps a number under its upper bound; never a new leading zero.
                '1' if run_start && run_longer => Some('2'),
                '1'..='9' => char::from_u32(*ch as u32 - 1),
                '0' => Some('1'),
                // A hex letter stays a hex letter, any other stays outside a-f.
                'b'..='f' | 'B'..='F' | 'h'..='z' | 'H'..='Z' => char::from_u32(*ch as u32 - 1).filter(|new| {
                    let hex = |ch: char| ch.is_ascii_hexdigit();
                    hex(*new) == hex(*ch)
                }),
                'a' | 'A' | 'g' | 'G' => char::from_u32(*ch as u32 + 1),
                _ => None,
            };
            let Some(replaced) = replaced else { continue };
            if ch.is_ascii_digit() && digits < 8 {
                digits += 1;
                push(with(at, 1, &replaced.to_string()), ProbeKind::DigitVariant);
            } else if ch.is_ascii_alphabetic() && letters < 4 {
                letters += 1;
                push(with(at, 1, &replaced.to_string()), ProbeKind::LetterVariant);
            }
        }
    }
    out
}

/// How a candidate that passed the generalisation checks treats the probes: what ranks it among others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generalisation {
    /// Variants it matches, of how many.
    pub variants_matched: usize,
    pub variants: usize,
    /// Likely misses it refuses, of how many.
    pub misses_refused: usize,
    pub misses: usize,
    /// Whether it matches each probe, in order: two candidates with the same signature agree on every probe.
    pub signature: Vec<bool>,
}

/// Checks that `pattern` (which already matches its examples) generalises: it does not spell out a positive
/// example (literally, or as an alternation whose whole language is the examples), it matches some variant of
/// its examples where they have digits, and it refuses every certain near miss.
pub fn check_generalises(
    flavor: RegexFlavor,
    pattern: &str,
    description: &str,
    positives: &[String],
    probes: &[Probe],
) -> Result<Generalisation, Rejection> {
    let listed = names_every_example(description, positives);
    if !listed {
        let lower = description.to_lowercase();
        let unescaped = unescape(pattern);
        for example in positives {
            if example.chars().count() >= 3
                && !lower.contains(&example.to_lowercase())
                && (pattern.contains(example.as_str()) || unescaped.contains(example.as_str()))
            {
                return Err(Rejection::RegexSpellsOutExample(example.clone()));
            }
        }
        if let Some(language) = finite_language(pattern) {
            if language.iter().all(|string| positives.contains(string)) {
                return Err(Rejection::RegexOnlyItsExamples);
            }
        }
    }
    let texts: Vec<String> = probes.iter().map(|probe| probe.text.clone()).collect();
    let signature = regex_matches(flavor, pattern, &texts)?;
    let mut result =
        Generalisation { variants_matched: 0, variants: 0, misses_refused: 0, misses: 0, signature: signature.clone() };
    let (mut digit_variants, mut digit_variants_matched) = (0, 0);
    for (probe, matched) in probes.iter().zip(&signature) {
        match probe.kind {
            ProbeKind::CertainMiss if *matched => return Err(Rejection::RegexMatchesProbe(probe.text.clone())),
            ProbeKind::CertainMiss => {}
            ProbeKind::LikelyMiss => {
                result.misses += 1;
                result.misses_refused += usize::from(!matched);
            }
            ProbeKind::DigitVariant | ProbeKind::LetterVariant => {
                result.variants += 1;
                result.variants_matched += usize::from(*matched);
                if probe.kind == ProbeKind::DigitVariant {
                    digit_variants += 1;
                    digit_variants_matched += usize::from(*matched);
                }
            }
        }
    }
    if !listed && digit_variants > 0 && digit_variants_matched == 0 {
        return Err(Rejection::RegexOnlyItsExamples);
    }
    Ok(result)
}

/// The pattern with the backslash of every escaped punctuation character removed (`1\.2` reads `1.2`).
fn unescape(pattern: &str) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\\' {
            if let Some(next) = chars.peek().filter(|next| !next.is_alphanumeric()) {
                out.push(*next);
                chars.next();
                continue;
            }
        }
        out.push(ch);
    }
    out
}

/// Every string the pattern matches whole, when that is a small finite set read off its syntax (anchors are
/// zero-width); `None` for an infinite or large language, or a pattern the `regex` crate's parser does not read
/// (an ECMAScript-only construct: then only the literal check and the variants judge it).
fn finite_language(pattern: &str) -> Option<Vec<String>> {
    use regex_syntax::hir::literal::Extractor;
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let mut extractor = Extractor::new();
    extractor.limit_total(64).limit_class(4).limit_repeat(4);
    let seq = extractor.extract(&hir);
    if !seq.is_finite() || !seq.is_exact() {
        return None;
    }
    seq.literals()?.iter().map(|literal| String::from_utf8(literal.as_bytes().to_vec()).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row of a test table.
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, Result<(), Rejection>);

    #[test]
    fn regex_table() {
        let owned = |items: &[&str]| items.iter().map(|item| (*item).to_owned()).collect::<Vec<_>>();
        let positives = owned(&["2024-01-31", "1999-12-01"]);
        let negatives = owned(&["2024-1-31", "x2024-01-31"]);
        for flavor in [RegexFlavor::Rust, RegexFlavor::EcmaScript] {
            assert_eq!(check_regex(flavor, r"\d{4}-\d{2}-\d{2}", &positives, &negatives), Ok(()));
            assert_eq!(
                check_regex(flavor, r"\d{4}-\d{1,2}-\d{2}", &positives, &negatives),
                Err(Rejection::RegexMatchesCounterexample("2024-1-31".into()))
            );
            assert_eq!(
                check_regex(flavor, r"\d{4}", &positives, &negatives),
                Err(Rejection::RegexMissesExample("2024-01-31".into()))
            );
            assert!(matches!(check_regex(flavor, r"(\d{4}", &positives, &negatives), Err(Rejection::RegexInvalid(_))));
        }
        // Look-behind is ECMAScript, not the regex crate.
        assert!(check_regex(RegexFlavor::EcmaScript, r"(?<=a)b", &[], &[]).is_ok());
        assert!(matches!(check_regex(RegexFlavor::Rust, r"(?<=a)b", &[], &[]), Err(Rejection::RegexInvalid(_))));
    }

    /// `(a+)+$` backtracks exponentially on `aaa…ab` in an ECMAScript (backtracking) engine: the check is refused
    /// at its time limit instead of holding the task (here on the thread fallback; the binary uses a worker
    /// process, tested end to end in tests/e2e/handlers.rs).
    #[test]
    fn a_catastrophic_ecmascript_pattern_is_refused_at_the_time_limit() {
        let negatives = vec![format!("{}b", "a".repeat(30))];
        let positives = vec!["aaa".to_owned()];
        assert_eq!(
            check_regex(RegexFlavor::EcmaScript, "(a+)+$", &positives, &negatives),
            Err(Rejection::RegexTooSlow)
        );
        // The same pattern in Rust's dialect is matched in linear time: a verdict, not a time-out.
        assert_eq!(
            check_regex(RegexFlavor::Rust, "(a+)+$", &positives, &negatives),
            Ok(()),
            "no negative matches: the pattern is anchored and the counterexample ends in b"
        );
    }

    fn owned(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    /// (description, examples, pattern, verdict): a pattern that already matches its examples either generalises
    /// or is refused for spelling them out, for matching nothing like them, or for a near miss.
    #[test]
    fn generalisation_table() {
        let date: &[&str] = &["2031-05-17", "1987-11-02"];
        let cases: [Case; 9] = [
            ("a calendar date", date, r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", Ok(())),
            (
                "a calendar date",
                date,
                r"^2031-05-17$|^1987-11-02$",
                Err(Rejection::RegexSpellsOutExample("2031-05-17".into())),
            ),
            (
                "a version",
                &["3.4.5", "11.0.2"],
                r"^(3\.4\.5|11\.0\.2)$",
                Err(Rejection::RegexSpellsOutExample("3.4.5".into())),
            ),
            ("a two-digit code", &["41", "07"], r"^(41|07)$", Err(Rejection::RegexOnlyItsExamples)),
            ("a count", &["12", "30"], r"^(12|30|99)$", Err(Rejection::RegexOnlyItsExamples)),
            ("a meridiem, AM or PM", &["AM", "PM"], r"^(AM|PM)$", Ok(())),
            ("a calendar date", date, r"^.*$", Err(Rejection::RegexMatchesProbe(String::new()))),
            ("a calendar date", date, r"^[0-9a-z-]+$", Err(Rejection::RegexMatchesProbe("2031-q05-17".into()))),
            // Letters are named: a letter among the digits is no certain miss.
            ("a code of digits and letters", date, r"^[0-9a-z-]+$", Ok(())),
        ];
        for flavor in [RegexFlavor::Rust, RegexFlavor::EcmaScript] {
            for (description, examples, pattern, expected) in &cases {
                let positives = owned(examples);
                let probes = probes(description, &positives, &[]);
                let got = check_generalises(flavor, pattern, description, &positives, &probes).map(|_| ());
                assert_eq!(&got, expected, "{flavor:?} {description}: /{pattern}/");
            }
        }
    }

    #[test]
    fn probes_are_never_examples_and_rank_the_tighter_pattern() {
        let positives = owned(&["2031-05-17", "1987-11-02"]);
        let negatives = owned(&["2031-5-17"]);
        let probes = probes("a calendar date", &positives, &negatives);
        assert!(probes.iter().all(|probe| !positives.contains(&probe.text) && !negatives.contains(&probe.text)));
        for kind in [ProbeKind::CertainMiss, ProbeKind::LikelyMiss, ProbeKind::DigitVariant] {
            assert!(probes.iter().any(|probe| probe.kind == kind), "{kind:?}: {probes:?}");
        }
        let judge = |pattern: &str| {
            check_generalises(RegexFlavor::Rust, pattern, "a calendar date", &positives, &probes).unwrap()
        };
        let (tight, loose) = (judge(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"), judge(r"^[0-9]+-[0-9]+-[0-9]+$"));
        assert_eq!((tight.variants_matched, loose.variants_matched), (tight.variants, loose.variants));
        assert!(tight.misses_refused > loose.misses_refused, "{tight:?} {loose:?}");
    }
}
