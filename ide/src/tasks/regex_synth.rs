//! Patterns synthesised from the examples, no model: the examples are cut into runs of one kind of character
//! (digits, lowercase, uppercase letters) and separators, aligned, and each run becomes a character class with a
//! repetition (`2024-01-31` and `1999-12-01` give `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`). The examples show a
//! shape, not values: a description that constrains values (a range, "not starting with", an optional part the
//! examples never show) gets no synthesised pattern, and a run length the examples share but the description
//! never states is ambiguous (`42`, `17`: two digits, or a number?), so such a pattern is offered only when a
//! model's candidate agrees with it on every probe. The checks of `verify::regex` judge these as any candidate.

use super::regex_describe::{escape, template_parts};

/// A pattern synthesised from the examples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synthesised {
    pub pattern: String,
    /// Every run's length is stated by the description, or differs between examples (a repetition), or is one
    /// character: the examples and the description decide the pattern alone.
    pub decided: bool,
    /// A run mixes digits and letters where the description does not say so: which kind goes where is a guess
    /// that no example refutes, so even the only reading that survives the checks is not decided.
    pub guesses_kinds: bool,
}

/// The patterns the examples give (none when the description asks for what they cannot show), most specific
/// first; `Err` says why none.
pub fn synthesise(description: &str, positives: &[String]) -> Result<Vec<Synthesised>, String> {
    let lower = description.to_lowercase();
    if positives.is_empty() || positives.iter().any(|example| example.is_empty() || !example.is_ascii()) {
        return Err("no examples to synthesise from".into());
    }
    if let Some(word) = CONSTRAINT_WORDS.iter().find(|word| format!(" {lower} ").contains(*word)) {
        return Err(format!("the description constrains values ({:?}), which examples cannot show", word.trim()));
    }
    // A date or time template (`HH:MM`, `YYYY-MM-DD`) states ranges as surely as `from 0 to 23` does.
    if let Some(template) = description.split_whitespace().find(|word| template_parts(word).is_some()) {
        return Err(format!("the description's template {template:?} constrains values, which examples cannot show"));
    }
    if let Some(symbol) =
        named_symbols(description).into_iter().find(|symbol| !positives.iter().any(|example| example.contains(*symbol)))
    {
        return Err(format!("the description names {symbol:?}, which no example shows"));
    }
    let widen = Widen {
        digits: mentions(&lower, &["digit", "number"]),
        letters: mentions(&lower, &["letter"]) && !mentions(&lower, &["lowercase", "uppercase"]),
        upper: mentions(&lower, &["uppercase"]),
        hex: mentions(&lower, &["hex"]),
        hex_case: if mentions(&lower, &["lowercase"]) {
            Some(false)
        } else if mentions(&lower, &["uppercase"]) {
            Some(true)
        } else {
            None
        },
    };
    let numbers = stated_numbers(&lower);
    let shapes = [Tokenizer::ByKind, Tokenizer::Alphanumeric];
    for tokenizer in shapes {
        // One example's kinds of character are its own, not the language's: the finer cut needs two.
        if tokenizer == Tokenizer::ByKind && positives.len() < 2 {
            continue;
        }
        let tokens: Vec<Vec<Token>> = positives.iter().map(|example| tokenize(example, tokenizer)).collect();
        if let Some(runs) = same_shape(&tokens, tokenizer) {
            // A run of one kind at the same place in every example keeps its kind; a mixed run takes the
            // kinds the description names.
            let widen = if tokenizer == Tokenizer::ByKind { &Widen::NONE } else { &widen };
            return Ok(render(&runs, widen, &numbers, &lower));
        }
    }
    let tokens: Vec<Vec<Token>> = positives.iter().map(|example| tokenize(example, Tokenizer::Alphanumeric)).collect();
    if let Some(pattern) = repeated(&tokens, &widen) {
        return Ok(vec![Synthesised { pattern, decided: true, guesses_kinds: false }]);
    }
    Err("the examples have different shapes".into())
}

/// Words that constrain values or say what is excluded: the examples show none of that.
const CONSTRAINT_WORDS: [&str; 29] = [
    " not ",
    "n't ",
    " without ",
    " except",
    " between ",
    " from ",
    " range",
    " even ",
    " odd ",
    " valid",
    " at least",
    " at most",
    " no more",
    " up to ",
    " non-",
    " only ",
    " unless",
    " leading ",
    " optional",
    " optionally ",
    " either ",
    " inner ",
    " one of ",
    // Dates and times take ranges of values (a month to 12, an hour to 23) that a shape of digits does not.
    " date",
    " time",
    " hour",
    " minute",
    " month",
    " day",
];

/// Symbols the description names, as characters or words: every one must appear in some example, else the
/// description speaks of a part the examples never show.
fn named_symbols(description: &str) -> Vec<char> {
    let lower = description.to_lowercase();
    let mut symbols = Vec::new();
    for (words, symbol) in [
        (&["underscore"][..], '_'),
        (&["hyphen", "dash", "minus"][..], '-'),
        (&["dot", "period"][..], '.'),
        (&["colon"][..], ':'),
        (&["backslash"][..], '\\'),
        (&["slash"][..], '/'),
        (&["space"][..], ' '),
        (&["comma"][..], ','),
        (&["plus"][..], '+'),
        (&["percent"][..], '%'),
    ] {
        if mentions(&lower, words)
            && !(symbol == '/' && lower.contains("backslash") && !lower.replace("backslash", "").contains("slash"))
        {
            symbols.push(symbol);
        }
    }
    for word in description.split_whitespace() {
        // Prose punctuation around a word is not a named symbol.
        let word =
            word.trim_end_matches([',', ';', ':', '.', ')', '\'', '"', '`']).trim_start_matches(['(', '\'', '"', '`']);
        if word.chars().any(|ch| ch.is_alphanumeric()) && word.chars().all(|ch| ch.is_alphanumeric() || ch == '-') {
            // `dot-separated`, `8-4-4-4-12`: a compound word, not a named hyphen.
            continue;
        }
        for ch in word.chars().filter(|ch| !ch.is_alphanumeric()) {
            if !symbols.contains(&ch) {
                symbols.push(ch);
            }
        }
    }
    symbols
}

fn mentions(description: &str, words: &[&str]) -> bool {
    words.iter().any(|word| description.contains(word))
}

/// Numbers the description states: digits, number words, `pair`.
fn stated_numbers(description: &str) -> Vec<usize> {
    const WORDS: [(&str, usize); 14] = [
        ("one", 1),
        ("two", 2),
        ("pair", 2),
        ("three", 3),
        ("four", 4),
        ("five", 5),
        ("six", 6),
        ("seven", 7),
        ("eight", 8),
        ("nine", 9),
        ("ten", 10),
        ("eleven", 11),
        ("twelve", 12),
        ("sixteen", 16),
    ];
    let mut numbers = Vec::new();
    for word in description.split(|ch: char| !ch.is_alphanumeric()) {
        if let Ok(number) = word.parse::<usize>() {
            numbers.push(number);
        }
        let singular = word.strip_suffix('s').unwrap_or(word);
        numbers.extend(WORDS.iter().filter(|(name, _)| *name == singular).map(|(_, number)| *number));
    }
    numbers
}

/// How the description widens a run's class beyond what the examples show.
struct Widen {
    digits: bool,
    letters: bool,
    upper: bool,
    hex: bool,
    /// Hex letters: `Some(true)` uppercase only, `Some(false)` lowercase only, `None` both.
    hex_case: Option<bool>,
}

impl Widen {
    const NONE: Widen = Widen { digits: false, letters: false, upper: false, hex: false, hex_case: None };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tokenizer {
    /// Runs of one kind: digits, lowercase, uppercase.
    ByKind,
    /// Runs of letters and digits together.
    Alphanumeric,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Run(String),
    Separator(char),
}

fn kind(ch: char) -> u8 {
    match ch {
        '0'..='9' => 0,
        'a'..='z' => 1,
        'A'..='Z' => 2,
        _ => 3,
    }
}

fn tokenize(example: &str, tokenizer: Tokenizer) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::new();
    for ch in example.chars() {
        if !ch.is_ascii_alphanumeric() {
            tokens.push(Token::Separator(ch));
            continue;
        }
        match tokens.last_mut() {
            Some(Token::Run(run))
                if tokenizer == Tokenizer::Alphanumeric || run.chars().last().map(kind) == Some(kind(ch)) =>
            {
                run.push(ch)
            }
            _ => tokens.push(Token::Run(ch.to_string())),
        }
    }
    tokens
}

/// The runs at each position when every example has the same shape (the same separators between the same
/// kinds of run): each position's texts across the examples, or the separator.
fn same_shape(tokens: &[Vec<Token>], tokenizer: Tokenizer) -> Option<Vec<Result<Vec<String>, char>>> {
    let first = &tokens[0];
    let mut out = Vec::new();
    for (idx, token) in first.iter().enumerate() {
        match token {
            Token::Separator(ch) => {
                if tokens.iter().any(|other| other.get(idx) != Some(&Token::Separator(*ch))) {
                    return None;
                }
                out.push(Err(*ch));
            }
            Token::Run(run) => {
                // By kind, the same kind of run at the same place; alphanumeric runs take any letters and digits.
                let first_kind = run.chars().next().map(kind);
                let runs: Option<Vec<String>> = tokens
                    .iter()
                    .map(|other| match other.get(idx) {
                        Some(Token::Run(other_run))
                            if tokenizer == Tokenizer::Alphanumeric
                                || other_run.chars().next().map(kind) == first_kind =>
                        {
                            Some(other_run.clone())
                        }
                        _ => None,
                    })
                    .collect();
                out.push(Ok(runs?));
            }
        }
    }
    tokens.iter().all(|other| other.len() == first.len()).then_some(out)
}

/// The class of the characters of `runs`, widened by the description.
fn class(runs: &[&str], widen: &Widen) -> String {
    let chars: Vec<char> = runs.iter().flat_map(|run| run.chars()).collect();
    let has = |kind_id: u8| chars.iter().any(|ch| kind(*ch) == kind_id);
    let (digit, lower, upper) = (has(0), has(1), has(2));
    let letters_hex = chars.iter().filter(|ch| ch.is_ascii_alphabetic()).all(char::is_ascii_hexdigit);
    if widen.hex && letters_hex && (digit || lower || upper) {
        return match widen.hex_case {
            Some(false) => "[0-9a-f]".into(),
            Some(true) => "[0-9A-F]".into(),
            None => "[0-9a-fA-F]".into(),
        };
    }
    let letters = lower || upper;
    let digit = digit || (widen.digits && letters);
    let lower = lower || (widen.letters && letters);
    let upper = upper || (widen.letters && letters) || (widen.upper && letters);
    let mut class = String::new();
    if lower {
        class.push_str("a-z");
    }
    if upper {
        class.push_str("A-Z");
    }
    if digit {
        class.push_str("0-9");
    }
    format!("[{class}]")
}

/// The candidates for one shape: each run's length fixed where the examples agree, and, where the examples
/// cannot decide, the other readings too (`+` for a shared length the description never states; a list of any
/// number of parts for examples that all have the same number of like parts). A reading is decided when every
/// shared length is stated or is one character next to a run of another kind (`K1A`), every run that mixes
/// digits and letters is one the description names so (hex, alphanumeric, letters and digits), and a list's
/// number of parts is stated.
fn render(runs: &[Result<Vec<String>, char>], widen: &Widen, numbers: &[usize], description: &str) -> Vec<Synthesised> {
    let mut fixed = String::from("^");
    let mut open = String::from("^");
    let mut decided = true;
    let mut guesses_kinds = false;
    let mut classes = Vec::new();
    // A run length the description states as a range of characters (`2 to 5 uppercase letters`, `eight groups of
    // 1 to 4 hex digits`) is the repetition of the runs whose lengths all lie in it, whatever lengths the
    // examples show, when those runs are like parts (one class); runs of different classes that all fit leave
    // open which one the range counts.
    let length_range = stated_length_range(description);
    let in_range = |position: &Result<Vec<String>, char>| match (position, length_range) {
        (Ok(texts), Some((low, high))) => {
            let literal =
                texts.iter().all(|text| *text == texts[0]) && standalone(description, &texts[0].to_lowercase());
            !literal && texts.iter().all(|text| (low..=high).contains(&text.len()))
        }
        _ => false,
    };
    let class_at = |idx: usize| match &runs[idx] {
        Ok(texts) => class(&texts.iter().map(String::as_str).collect::<Vec<_>>(), widen),
        Err(_) => String::new(),
    };
    let fitting: Vec<usize> =
        runs.iter().enumerate().filter(|(_, position)| in_range(position)).map(|(idx, _)| idx).collect();
    let like_parts = fitting.iter().all(|idx| class_at(*idx) == class_at(fitting[0]));
    let ranged_runs: Vec<usize> = if like_parts { fitting } else { Vec::new() };
    let mixed_named = widen.hex
        || mentions(description, &["alphanumeric"])
        || (mentions(description, &["letter"]) && mentions(description, &["digit"]));
    for (idx, position) in runs.iter().enumerate() {
        let texts = match position {
            Err(separator) => {
                fixed.push_str(&escape(*separator));
                open.push_str(&escape(*separator));
                continue;
            }
            Ok(texts) => texts,
        };
        // The same text in every example, named on its own in the description (`a v then`, `a 0x prefix`): a
        // literal.
        if texts.iter().all(|text| *text == texts[0]) && standalone(description, &texts[0].to_lowercase()) {
            let literal: String = texts[0].chars().map(escape).collect();
            fixed.push_str(&literal);
            open.push_str(&literal);
            classes.push(literal);
            continue;
        }
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let class = class(&texts, widen);
        let mut kinds: Vec<u8> = texts.iter().flat_map(|text| text.chars()).map(kind).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let mixes_digits_and_letters = kinds.contains(&0) && kinds.len() > 1;
        guesses_kinds |= mixes_digits_and_letters && !mixed_named;
        classes.push(class.clone());
        let lengths: Vec<usize> = texts.iter().map(|text| text.len()).collect();
        let (min, max) = (*lengths.iter().min().unwrap_or(&1), *lengths.iter().max().unwrap_or(&1));
        let is_run = |at: Option<&Result<Vec<String>, char>>| matches!(at, Some(Ok(_)));
        let beside_other_run = is_run(idx.checked_sub(1).and_then(|at| runs.get(at))) || is_run(runs.get(idx + 1));
        if let (Some((low, high)), true) = (length_range, ranged_runs.contains(&idx)) {
            let quantifier = if low == high { format!("{{{low}}}") } else { format!("{{{low},{high}}}") };
            fixed.push_str(&format!("{class}{quantifier}"));
            open.push_str(&format!("{class}{quantifier}"));
        } else if min != max {
            let bounded = stated_range(description).filter(|(low, high)| *low <= min && max <= *high);
            let quantifier = match bounded {
                Some((low, high)) => format!("{{{low},{high}}}"),
                None => "+".to_owned(),
            };
            fixed.push_str(&format!("{class}{quantifier}"));
            open.push_str(&format!("{class}{quantifier}"));
        } else if min == 1 {
            fixed.push_str(&class);
            open.push_str(&format!("{class}+"));
            decided &= beside_other_run || numbers.contains(&1);
        } else {
            fixed.push_str(&format!("{class}{{{min}}}"));
            open.push_str(&format!("{class}+"));
            // An end of a stated range is no stated length.
            let in_stated_range = length_range.is_some_and(|(low, high)| (low..=high).contains(&min));
            decided &= numbers.contains(&min) && !in_stated_range;
        }
    }
    fixed.push('$');
    open.push('$');
    // Like parts joined by one separator, as many in every example: how many is a length like any other.
    let separators: Vec<char> = runs.iter().filter_map(|position| position.as_ref().err().copied()).collect();
    let alternating = runs.iter().enumerate().all(|(idx, position)| position.is_ok() == (idx % 2 == 0));
    let homogeneous = runs.len() >= 3
        && alternating
        && separators.iter().all(|separator| *separator == separators[0])
        && classes.iter().all(|class| *class == classes[0]);
    let mut list = None;
    if homogeneous && !numbers.contains(&classes.len()) {
        let separator = escape(separators[0]);
        let class = &classes[0];
        list = Some(format!("^{class}+({separator}{class}+)*$"));
        decided = false;
    }
    if decided && !guesses_kinds {
        return vec![Synthesised { pattern: fixed, decided: true, guesses_kinds }];
    }
    let mut out = vec![Synthesised { pattern: fixed, decided: false, guesses_kinds }];
    for pattern in [Some(open), list].into_iter().flatten() {
        if !out.iter().any(|one| one.pattern == pattern) {
            out.push(Synthesised { pattern, decided: false, guesses_kinds });
        }
    }
    out
}

/// Whether `token` stands on its own in the description (between non-alphanumeric characters).
fn standalone(description: &str, token: &str) -> bool {
    description.split(|ch: char| !ch.is_alphanumeric()).any(|word| word == token)
}

/// `N to M` in the description, when it states exactly one such range.
fn stated_range(description: &str) -> Option<(usize, usize)> {
    let words: Vec<&str> = description.split_whitespace().collect();
    let ranges: Vec<(usize, usize)> = words
        .windows(3)
        .filter(|window| window[1] == "to")
        .filter_map(|window| Some((window[0].parse().ok()?, window[2].parse().ok()?)))
        .filter(|(low, high)| low <= high)
        .collect();
    (ranges.len() == 1).then(|| ranges[0])
}

/// `N to M` followed by what it counts, when that is characters (`2 to 5 uppercase letters`, `7 to 40
/// hexadecimal characters`) and the description states exactly one such range: a length, not a value.
fn stated_length_range(description: &str) -> Option<(usize, usize)> {
    const COUNTED: [&str; 9] =
        ["letter", "digit", "character", "char", "uppercase", "lowercase", "hex", "hexadecimal", "alphanumeric"];
    let words: Vec<&str> = description.split(|ch: char| ch.is_whitespace() || ch == ',').collect();
    let ranges: Vec<(usize, usize)> = words
        .windows(4)
        .filter(|window| window[1] == "to")
        .filter(|window| COUNTED.iter().any(|counted| window[3].starts_with(counted)))
        .filter_map(|window| Some((window[0].parse().ok()?, window[2].parse().ok()?)))
        .filter(|(low, high)| low <= high && *low > 0)
        .collect();
    (ranges.len() == 1).then(|| ranges[0])
}

/// Examples that are runs joined by one separator, some more than others (`a-b-c`, `my-post`; `/usr/bin`,
/// `/etc`): the run repeated after the separator.
fn repeated(tokens: &[Vec<Token>], widen: &Widen) -> Option<String> {
    let separator = tokens[0].iter().find_map(|token| match token {
        Token::Separator(ch) => Some(*ch),
        Token::Run(_) => None,
    })?;
    let leading = matches!(tokens[0].first(), Some(Token::Separator(_)));
    let mut runs: Vec<&str> = Vec::new();
    let mut counts = Vec::new();
    for example in tokens {
        if matches!(example.first(), Some(Token::Separator(_))) != leading {
            return None;
        }
        let mut expect_run = !leading;
        let mut count = 0;
        for token in example {
            match token {
                Token::Run(run) if expect_run => {
                    runs.push(run);
                    count += 1;
                }
                Token::Separator(ch) if !expect_run && *ch == separator => {}
                _ => return None,
            }
            expect_run = !expect_run;
        }
        if expect_run {
            // Ends with a separator.
            return None;
        }
        counts.push(count);
    }
    if counts.iter().all(|count| *count == counts[0]) {
        // The same number of parts: same_shape() already had its chance at it.
        return None;
    }
    let class = class(&runs, widen);
    let separator = escape(separator);
    Some(if leading { format!("^({separator}{class}+)+$") } else { format!("^{class}+({separator}{class}+)*$") })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row of a test table.
    type Case<'a> = (&'a str, &'a [&'a str], Result<(&'a [&'a str], bool), &'a str>);

    fn owned(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    /// (description, examples, the patterns synthesised and whether they are decided, or the reason for none).
    #[test]
    fn synthesis_table() {
        let cases: [Case; 17] = [
            (
                "a batch code",
                &["2031-05-17", "1987-11-02"],
                Ok((&[r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", r"^[0-9]+-[0-9]+-[0-9]+$", r"^[0-9]+(-[0-9]+)*$"], false)),
            ),
            (
                "a tag: a lowercase v then two dot-separated numbers",
                &["v3.14", "v20.7"],
                Ok((&[r"^v[0-9]+\.[0-9]+$"], true)),
            ),
            // Digits and letters in one run the description does not name as such: which goes where is a guess.
            (
                "a ticket code of ten characters",
                &["7730216649", "881902245K"],
                Ok((&[r"^[A-Z0-9]{10}$", r"^[A-Z0-9]+$"], false)),
            ),
            (
                "a part number: four digits a slash and two digits",
                &["4821/07", "1190/55"],
                Ok((&[r"^[0-9]{4}/[0-9]{2}$"], true)),
            ),
            ("a plate: letter digit letter digit", &["B7K2", "Z1Q9"], Ok((&[r"^[A-Z][0-9][A-Z][0-9]$"], true))),
            ("a build id: ten hex digits", &["00af93bc1e"], Ok((&[r"^[0-9a-fA-F]{10}$"], true))),
            (
                "a dotted name of lowercase words",
                &["alpha.beta", "one.two.three"],
                Ok((&[r"^[a-z]+(\.[a-z]+)*$"], true)),
            ),
            (
                "a tag of letters and digits joined by hyphens",
                &["red-fox", "big-blue-sky"],
                Ok((&[r"^[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*$"], true)),
            ),
            // A stated range of lengths is the run's repetition, even where the examples share one length.
            ("a code of 2 to 5 uppercase letters", &["ABC", "XYZ"], Ok((&[r"^[A-Z]{2,5}$"], true))),
            ("an id: a k then 3 to 6 digits", &["k1234", "k9876"], Ok((&[r"^k[0-9]{3,6}$"], true))),
            // Like parts that all fit the stated range take it, though the examples show one length.
            (
                "a code: three groups of 1 to 4 hex digits joined by colons",
                &["ab12:9:f00d", "1:abcd:77"],
                Ok((&[r"^[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,4}$"], true)),
            ),
            // A set of values is not a kind of string.
            ("a colour: one of RED GREEN or BLUE", &["RED", "BLUE"], Err("constrains values")),
            ("a count from 1 to 9", &["3", "8"], Err("constrains values")),
            ("a score with an optional plus sign", &["12", "40"], Err("constrains values")),
            ("a price with a $ sign", &["12", "40"], Err("no example shows")),
            ("a clock reading in HH:MM form", &["10:15", "07:45"], Err("constrains values")),
            ("a delivery date", &["2031-05-17", "1987-11-02"], Err("constrains values")),
        ];
        for (description, examples, expected) in cases {
            let got = synthesise(description, &owned(examples));
            match expected {
                Ok((patterns, decided)) => {
                    let got = got.unwrap_or_else(|why| panic!("{description}: {why}"));
                    let got_patterns: Vec<&str> = got.iter().map(|one| one.pattern.as_str()).collect();
                    assert_eq!(got_patterns, patterns, "{description}");
                    assert!(got.iter().all(|one| one.decided == decided), "{description}: {got:?}");
                }
                Err(reason) => {
                    let why = got.expect_err(description);
                    assert!(why.contains(reason), "{description}: {why}");
                }
            }
        }
    }
}
