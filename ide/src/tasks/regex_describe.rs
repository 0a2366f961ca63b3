//! Patterns read from the description alone, no model and no examples: a description that spells out its
//! structure (`four digits not starting with 0 then a space and two uppercase letters`, `an integer with an
//! optional + or - sign`, `four dot-separated numbers from 0 to 255`) is read piece by piece into a pattern.
//! Only a description read to its last word gives one: a word the reader does not know means the structure may
//! hold something it missed, and then nothing is returned. What it gives is a candidate like any other: it must
//! match and refuse the examples (which it never saw) and pass the generalisation checks of `verify::regex`.
//!
//! The reader knows: counts (`three`, `2 to 5`, `1 or more`, `exactly two`, `8-4-4-4-12`), kinds of character
//! (digits, letters in a case, hex/octal/binary digits, underscores, hyphens, dots, spaces…) and lists of them,
//! literal symbols (`@`, `# characters`, `a lowercase v`, `an uppercase X`, `AM or PM`), numbers with a value
//! range (`from 0 to 255`, `a two-digit month 01-12`: the range written out digit by digit), numbers with a sign,
//! prefix or fraction, lists joined by a separator (`dot-separated`, `separated by colons`, `pairs of`),
//! `not starting with`, `optional`, `even`/`odd` numbers (the last digit), `with at least one …` in a run of
//! characters, `text` (anything on one line), shapes after `written as` (`555-123-4567`: each digit a digit), and
//! the joints `then`, `followed by`, `and`, `,`, `or`.

/// The pattern the description spells out, anchored; `Err` says where the reading stopped when a word is not
/// understood.
pub fn from_description(description: &str) -> Result<String, String> {
    let description = description.trim().trim_end_matches('.').trim();
    // `a name: its structure`: the structure alone. Without a colon, the whole, or what follows `of` or `with`
    // (`a username of 3 to 16 letters`, `an IPv4 address with four dot-separated numbers`).
    let mut bodies: Vec<(&str, bool)> = match description.split_once(": ") {
        Some((_, body)) => vec![(body, false)],
        None => {
            let mut bodies = vec![(description, false)];
            // A template (`MM/DD/YYYY with a month 01-12`) is the structure: what follows `with` only restates it.
            let has_template = description.split_whitespace().any(|word| template_parts(word).is_some());
            for joint in [" of ", " with "].into_iter().filter(|_| !has_template) {
                // The head is a name (`a username`, `an IPv4 address`), not words of the reader's own (`an octal
                // number made of …` is read whole or not at all).
                let Some((head, body)) = description.split_once(joint) else { continue };
                let last = head.split_whitespace().last().unwrap_or_default().to_lowercase();
                let own = ["made", "number", "numbers", "integer", "integers"].contains(&last.as_str())
                    || GRAMMAR_WORDS.contains(&last.as_str())
                    || kind_noun(&last).is_some();
                if !own {
                    bodies.push((body, false));
                }
            }
            bodies
        }
    };
    // `a phone number written as 555-123-4567 or (555) 123-4567`: the shapes after the phrase, each digit a digit.
    for phrase in [" written as ", " formatted as ", " in the form "] {
        if let Some((_, shapes)) = description.split_once(phrase) {
            bodies.push((shapes, true));
        }
    }
    let mut unread = None;
    for (body, shapes) in bodies {
        let words = words(body);
        match (Reader { words: &words, case: None, shapes }).sequence() {
            Ok(pattern) => return Ok(format!("^{pattern}$")),
            Err(at) => {
                // What the user reads: where the first reading (the structure after the colon, or the whole)
                // stopped.
                let shown: Vec<&str> = words.iter().skip(at).take(4).map(String::as_str).collect();
                unread.get_or_insert_with(|| {
                    format!("words the description reader does not know: \"{}\"", shown.join(" "))
                });
            }
        }
    }
    Err(unread.unwrap_or_else(|| "an empty description".to_owned()))
}

/// The description's words, a trailing comma its own word.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for word in text.split_whitespace() {
        match word.strip_suffix(',') {
            Some(stem) if !stem.is_empty() => {
                words.push(stem.to_owned());
                words.push(",".to_owned());
            }
            _ => words.push(word.to_owned()),
        }
    }
    words
}

/// A character as a pattern matches it.
pub(super) fn escape(ch: char) -> String {
    if "\\.+*?()|[]{}^$".contains(ch) {
        format!("\\{ch}")
    } else {
        ch.to_string()
    }
}

/// A set of ASCII characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chars(u128);

impl Chars {
    /// The characters of `text`.
    fn of(text: &str) -> Chars {
        text.chars().fold(Chars(0), |set, ch| set.or(Chars::one(ch)))
    }

    fn range(low: char, high: char) -> Chars {
        Chars((low as u32..=high as u32).fold(0, |bits, code| bits | 1 << code))
    }

    fn one(ch: char) -> Chars {
        Chars::range(ch, ch)
    }

    fn digits() -> Chars {
        Chars::range('0', '9')
    }

    fn letters(case: Option<Case>) -> Chars {
        match case {
            Some(Case::Lower) => Chars::range('a', 'z'),
            Some(Case::Upper) => Chars::range('A', 'Z'),
            None => Chars::range('a', 'z').or(Chars::range('A', 'Z')),
        }
    }

    fn hex(case: Option<Case>) -> Chars {
        let letters = match case {
            Some(Case::Lower) => Chars::range('a', 'f'),
            Some(Case::Upper) => Chars::range('A', 'F'),
            None => Chars::range('a', 'f').or(Chars::range('A', 'F')),
        };
        Chars::digits().or(letters)
    }

    fn or(self, other: Chars) -> Chars {
        Chars(self.0 | other.0)
    }

    fn without(self, other: Chars) -> Chars {
        Chars(self.0 & !other.0)
    }

    fn overlaps(self, other: Chars) -> bool {
        self.0 & other.0 != 0
    }

    fn contains(self, ch: char) -> bool {
        ch.is_ascii() && self.0 & (1 << ch as u32) != 0
    }

    fn members(self) -> impl Iterator<Item = char> {
        (0u8..128).map(char::from).filter(move |ch| self.contains(*ch))
    }

    /// The set as a pattern atom: the character itself when it is one, else a class with runs of three or more
    /// written as ranges (lowercase, uppercase, digits, then the rest).
    fn atom(self) -> String {
        let members: Vec<char> = self.members().collect();
        if let [only] = members.as_slice() {
            return escape(*only);
        }
        let mut class = String::from("[");
        let groups: [fn(&char) -> bool; 4] =
            [char::is_ascii_lowercase, char::is_ascii_uppercase, char::is_ascii_digit, |ch: &char| {
                !ch.is_ascii_alphanumeric()
            }];
        for group in groups {
            let chars: Vec<char> = members.iter().copied().filter(group).collect();
            let mut idx = 0;
            while idx < chars.len() {
                let mut end = idx;
                while end + 1 < chars.len() && chars[end + 1] as u32 == chars[end] as u32 + 1 {
                    end += 1;
                }
                if end - idx >= 2 && chars[idx].is_ascii_alphanumeric() {
                    class.push_str(&format!("{}-{}", chars[idx], chars[end]));
                    idx = end + 1;
                } else {
                    let ch = chars[idx];
                    if "\\]-[^".contains(ch) {
                        class.push('\\');
                    }
                    class.push(ch);
                    idx += 1;
                }
            }
        }
        class.push(']');
        class
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Lower,
    Upper,
}

/// How many times a piece repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Count {
    Exactly(usize),
    Between(usize, usize),
    AtLeast(usize),
    /// One of two exact counts (`3 or 6`).
    Either(usize, usize),
    /// A plural with no count (`letters`): one or more, or any number right after one character of a like kind
    /// (`a letter then letters or digits`, as the lexical rules of programming languages read).
    Plural,
}

impl Count {
    fn quantifier(self, after_like_character: bool) -> String {
        match self {
            Count::Exactly(1) => String::new(),
            Count::Exactly(n) => format!("{{{n}}}"),
            Count::Between(low, high) => format!("{{{low},{high}}}"),
            Count::AtLeast(0) => "*".into(),
            Count::AtLeast(1) => "+".into(),
            Count::AtLeast(n) => format!("{{{n},}}"),
            Count::Either(..) => String::new(),
            Count::Plural if after_like_character => "*".into(),
            Count::Plural => "+".into(),
        }
    }

    /// `atom` repeated so many times (`atom` is one unit: a character, a class or a group).
    fn repeat(self, atom: &str, after_like_character: bool) -> String {
        match self {
            Count::Either(one, other) => format!("(?:{atom}{{{one}}}|{atom}{{{other}}})"),
            count => format!("{atom}{}", count.quantifier(after_like_character)),
        }
    }

    /// The count of the characters after the first, which has a set of its own.
    fn after_first(self) -> Option<Count> {
        Some(match self {
            Count::Exactly(n) if n >= 1 => Count::Exactly(n - 1),
            Count::Between(low, high) if low >= 1 => Count::Between(low - 1, high - 1),
            Count::AtLeast(n) if n >= 1 => Count::AtLeast(n - 1),
            Count::Plural => Count::AtLeast(0),
            _ => return None,
        })
    }
}

/// One piece of the structure.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Characters of one set, repeated; `first` is the first character's own set (`not starting with a digit`).
    Chars { chars: Chars, count: Count, first: Option<Chars>, optional: bool },
    /// Any other pattern, a unit that can take a quantifier.
    Pattern { pattern: String, optional: bool },
}

impl Piece {
    fn pattern(pattern: String) -> Piece {
        Piece::Pattern { pattern, optional: false }
    }

    fn optional(self) -> Piece {
        match self {
            Piece::Chars { chars, count, first, .. } => Piece::Chars { chars, count, first, optional: true },
            Piece::Pattern { pattern, .. } => Piece::Pattern { pattern, optional: true },
        }
    }

    /// One character of a set, once: what an `or` of single characters merges into one class.
    fn single(&self) -> Option<Chars> {
        match self {
            Piece::Chars { chars, count: Count::Exactly(1), first: None, optional: false } => Some(*chars),
            _ => None,
        }
    }

    /// The piece as a pattern, given the piece before it.
    fn render(&self, previous: Option<&Piece>) -> String {
        let after_like_character = match (self, previous.and_then(Piece::single)) {
            (Piece::Chars { chars, .. }, Some(before)) => chars.overlaps(before),
            _ => false,
        };
        let (text, optional) = match self {
            Piece::Chars { chars, count, first, optional } => {
                let text = match (count, first.zip(count.after_first())) {
                    (_, Some((first, rest))) => format!("{}{}", first.atom(), rest.repeat(&chars.atom(), false)),
                    (_, None) => count.repeat(&chars.atom(), after_like_character),
                };
                (text, *optional)
            }
            Piece::Pattern { pattern, optional } => (pattern.clone(), *optional),
        };
        if !optional {
            text
        } else if is_atom(&text) {
            format!("{text}?")
        } else {
            format!("(?:{text})?")
        }
    }
}

/// Pieces one after another, each rendered knowing the one before it.
fn render_all(pieces: &[Piece]) -> String {
    let mut out = String::new();
    for (idx, piece) in pieces.iter().enumerate() {
        out.push_str(&piece.render(idx.checked_sub(1).map(|before| &pieces[before])));
    }
    out
}

/// Whether `pattern` is one unit a quantifier applies to whole: a character, an escape, a class or a group.
fn is_atom(pattern: &str) -> bool {
    let chars: Vec<char> = pattern.chars().collect();
    match chars.as_slice() {
        [_] => true,
        ['\\', _] => true,
        ['[', .., ']'] => pattern[1..pattern.len() - 1].find(']').is_none_or(|idx| pattern.as_bytes()[idx] == b'\\'),
        ['(', .., ')'] => group_closes_at_end(pattern),
        _ => false,
    }
}

/// Whether the `(` that opens `pattern` is closed by its last character.
fn group_closes_at_end(pattern: &str) -> bool {
    let mut depth = 0usize;
    let mut escaped = false;
    let mut in_class = false;
    for (idx, ch) in pattern.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match ch {
            '\\' => escaped = true,
            '[' => in_class = true,
            ']' => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => {
                depth -= 1;
                if depth == 0 {
                    return idx == pattern.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

/// `(?:a|b)` of the alternatives, or the one.
fn group_of(alternatives: &[String]) -> String {
    match alternatives {
        [only] => only.clone(),
        _ => format!("(?:{})", alternatives.join("|")),
    }
}

/// The reader over a description's words.
struct Reader<'a> {
    words: &'a [String],
    /// The letter case said last (`uppercase letter digit letter`: the second letter is uppercase too).
    case: Option<Case>,
    /// Whether a word of digits and symbols is a shape (`555-123-4567`: three digits, a hyphen, …), after
    /// `written as`.
    shapes: bool,
}

const ARTICLES: [&str; 3] = ["a", "an", "one"];

/// Words that join pieces or belong to the reader's own phrases: never a literal.
const GRAMMAR_WORDS: [&str; 24] = [
    "a",
    "an",
    "the",
    "then",
    "and",
    "or",
    "followed",
    "by",
    "with",
    "of",
    "to",
    "from",
    "between",
    "not",
    "starting",
    "ending",
    "optional",
    "optionally",
    "more",
    "exactly",
    "least",
    "at",
    "separated",
    "joined",
];

fn number(word: &str) -> Option<usize> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    if !word.is_empty() && word.len() <= 4 && word.bytes().all(|byte| byte.is_ascii_digit()) {
        return word.parse().ok();
    }
    WORDS.iter().position(|name| *name == word.to_lowercase())
}

/// The symbol a word names, singular or plural (`hyphen`, `dots`).
fn symbol_named(word: &str) -> Option<char> {
    let word = word.to_lowercase();
    let singular = word.strip_suffix("es").filter(|stem| stem.ends_with("sh")).or_else(|| word.strip_suffix('s'));
    let singular = singular.unwrap_or(&word);
    Some(match singular {
        "space" => ' ',
        "hyphen" | "dash" => '-',
        "dot" | "period" => '.',
        "colon" => ':',
        "semicolon" => ';',
        "comma" => ',',
        "underscore" => '_',
        "slash" => '/',
        "backslash" => '\\',
        _ => return None,
    })
}

/// Whether a word is made of symbols only (`@`, `#`, `$`, `%`): a literal.
fn is_symbols(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|ch| ch.is_ascii_punctuation())
}

fn plural(word: &str) -> bool {
    word.ends_with('s')
}

impl Reader<'_> {
    fn word(&self, at: usize) -> Option<&str> {
        self.words.get(at).map(String::as_str)
    }

    fn lower(&self, at: usize) -> Option<String> {
        self.word(at).map(str::to_lowercase)
    }

    fn is(&self, at: usize, word: &str) -> bool {
        self.lower(at).as_deref() == Some(word)
    }

    fn is_article(&self, at: usize) -> bool {
        self.lower(at).is_some_and(|word| ARTICLES.contains(&word.as_str()))
    }

    /// The joint at `at` (`then`, `followed by`, `and then`, `and`, `,`) and its length in words.
    fn joint(&self, at: usize) -> Option<usize> {
        if self.is(at, "and") && self.is(at + 1, "then") || self.is(at, "followed") && self.is(at + 1, "by") {
            return Some(2);
        }
        (self.is(at, "then") || self.is(at, "and") || self.is(at, ",")).then_some(1)
    }

    /// Pieces joined by joints, or side by side (`three digits a hyphen two digits`), to the last word.
    /// `Err` holds the index of the first word no piece could read.
    ///
    /// `optionally` after a joint (`then optionally a dot and two digits`, `optionally followed by a hyphen and
    /// four digits`) makes every piece up to the next `then`, `followed by` or `,` one optional group.
    fn sequence(&mut self) -> Result<String, usize> {
        let mut pieces: Vec<Piece> = Vec::new();
        // The optional group being read, if any.
        let mut group: Option<Vec<Piece>> = None;
        let close = |pieces: &mut Vec<Piece>, group: &mut Option<Vec<Piece>>| {
            if let Some(grouped) = group.take() {
                pieces.push(Piece::pattern(render_all(&grouped)).optional());
            }
        };
        let mut at = 0;
        while at < self.words.len() {
            if !pieces.is_empty() || group.as_ref().is_some_and(|grouped| !grouped.is_empty()) {
                let opens = if self.is(at, "optionally") && self.is(at + 1, "followed") && self.is(at + 2, "by") {
                    Some(3)
                } else {
                    None
                };
                if let Some(length) = opens {
                    close(&mut pieces, &mut group);
                    group = Some(Vec::new());
                    at += length;
                    continue;
                }
                // `a lowercase letter first then …`: the order said twice.
                if self.is(at, "first") && pieces.len() == 1 && group.is_none() {
                    at += 1;
                    continue;
                }
                if let Some(length) = self.joint(at) {
                    if !self.is(at, "and") || self.is(at + 1, "then") {
                        close(&mut pieces, &mut group);
                    }
                    at += length;
                    if self.is(at, "optionally") {
                        close(&mut pieces, &mut group);
                        group = Some(Vec::new());
                        at += 1;
                    }
                    continue;
                }
            }
            let (piece, used) = self.alternatives(at).ok_or(at)?;
            match group.as_mut() {
                Some(grouped) => grouped.push(piece),
                None => pieces.push(piece),
            }
            at += used;
        }
        if group.as_ref().is_some_and(Vec::is_empty) {
            return Err(self.words.len());
        }
        close(&mut pieces, &mut group);
        if pieces.is_empty() {
            return Err(0);
        }
        Ok(render_all(&pieces))
    }

    /// A piece, or pieces joined by `or` (single characters merge into one class), or a list of literal words
    /// with `or` before the last (`px em rem or %`, `AM or PM`).
    fn alternatives(&mut self, at: usize) -> Option<(Piece, usize)> {
        if let Some(found) = self.literal_words(at) {
            return Some(found);
        }
        let (first, mut used) = self.piece(at)?;
        let mut options = vec![first];
        while self.is(at + used, "or") {
            let Some((next, length)) = self.piece(at + used + 1) else { break };
            options.push(next);
            used += 1 + length;
        }
        if options.len() == 1 {
            return options.pop().map(|only| (only, used));
        }
        if let Some(chars) = options.iter().map(Piece::single).collect::<Option<Vec<Chars>>>() {
            let chars = chars.into_iter().fold(Chars(0), Chars::or);
            return Some((Piece::Chars { chars, count: Count::Exactly(1), first: None, optional: false }, used));
        }
        let patterns: Vec<String> = options.iter().map(|option| option.render(None)).collect();
        Some((Piece::pattern(group_of(&patterns)), used))
    }

    /// `w1 w2 … or wn` of literal words (not the reader's own words, not numbers, kinds or symbol names), ending
    /// the piece.
    fn literal_words(&self, at: usize) -> Option<(Piece, usize)> {
        let literal = |word: &str| {
            let lower = word.to_lowercase();
            !GRAMMAR_WORDS.contains(&lower.as_str())
                && number(word).is_none()
                && symbol_named(word).is_none()
                && kind_noun(&lower).is_none()
                && word.chars().count() <= 8
                && word.chars().all(|ch| ch.is_ascii_graphic())
        };
        let mut used = 0;
        let mut options = Vec::new();
        while self.word(at + used).is_some_and(literal) {
            options.push(self.word(at + used)?.to_owned());
            used += 1;
            if self.is(at + used, "or") && self.word(at + used + 1).is_some_and(literal) {
                options.push(self.word(at + used + 1)?.to_owned());
                used += 2;
                break;
            }
        }
        let ends = at + used == self.words.len() || self.joint(at + used).is_some();
        if options.len() < 2 || !self.is(at + used - 2, "or") || !ends {
            return None;
        }
        let escaped: Vec<String> = options.iter().map(|option| option.chars().map(escape).collect()).collect();
        if options.iter().all(|option| option.chars().count() == 1) {
            let chars = Chars::of(&options.concat());
            return Some((Piece::Chars { chars, count: Count::Exactly(1), first: None, optional: false }, used));
        }
        Some((Piece::pattern(group_of(&escaped)), used))
    }

    /// One piece, `optional` before it and `not starting with …` after it.
    fn piece(&mut self, at: usize) -> Option<(Piece, usize)> {
        let mut start = at;
        let mut optional = false;
        if self.is(start, "optional") || self.is(start, "optionally") {
            (optional, start) = (true, start + 1);
        } else if self.is_article(start) && self.is(start + 1, "optional") {
            (optional, start) = (true, start + 2);
        }
        let (mut piece, used) = self
            .template(start)
            .or_else(|| self.number_range(start))
            .or_else(|| self.separated(start))
            .or_else(|| self.number_with(start))
            .or_else(|| self.counted_kinds(start))
            .or_else(|| self.symbols(start))
            .or_else(|| self.literal_character(start))
            .or_else(|| self.capitals(start))
            .or_else(|| self.without_spaces(start))
            .or_else(|| self.text(start))
            .or_else(|| self.shape(start))?;
        let mut end = start + used;
        if self.is(end, "not") && self.is(end + 1, "starting") && self.is(end + 2, "with") {
            let (excluded, length) = self.first_character(end + 3)?;
            match &mut piece {
                Piece::Chars { chars, first, count, .. }
                    if first.is_none() && chars.overlaps(excluded) && count.after_first().is_some() =>
                {
                    *first = Some(chars.without(excluded));
                }
                _ => return None,
            }
            end += 3 + length;
        }
        // `letters or digits with at least one uppercase letter`: the run holds one of those somewhere (the set
        // takes them in, as a case said before would have left them out).
        if (self.is(end, "with") || self.is(end, "containing")) && self.is(end + 1, "at") && self.is(end + 2, "least") {
            let (required, length) = self.at_least_one(end + 3)?;
            match piece {
                Piece::Chars { chars, count: Count::Plural | Count::AtLeast(0 | 1), first: None, optional: false } => {
                    let run = chars.or(required).atom();
                    piece = Piece::pattern(format!("{run}*{}{run}*", required.atom()));
                }
                _ => return None,
            }
            end += 3 + length;
        }
        if optional {
            piece = piece.optional();
        }
        Some((piece, end - at))
    }

    /// `one uppercase letter`, `one digit` after `at least`: the set, and the words read. The case said before
    /// is kept for what follows.
    fn at_least_one(&mut self, at: usize) -> Option<(Chars, usize)> {
        if !self.is(at, "one") {
            return None;
        }
        let said = self.case;
        let found = self.kinds(at + 1).filter(|(_, _, is_plural)| !is_plural);
        self.case = said;
        found.map(|(chars, used, _)| (chars, 1 + used))
    }

    /// What `starting with` names: `a digit`, `an underscore`, `0`.
    fn first_character(&mut self, at: usize) -> Option<(Chars, usize)> {
        let start = at + usize::from(self.is_article(at));
        let word = self.word(start)?;
        if word.chars().count() == 1 && !word.chars().all(char::is_alphabetic) {
            return Some((Chars::one(word.chars().next()?), start + 1 - at));
        }
        let (chars, used, _) = self.kinds(start)?;
        Some((chars, start + used - at))
    }

    /// A count: a number, `N to M`, `N or more`, `at least N`, `exactly N`, or an article (one); `N more`.
    fn count(&self, at: usize) -> Option<(Count, usize)> {
        if self.is(at, "exactly") {
            let (count, used) = self.count(at + 1)?;
            return matches!(count, Count::Exactly(_)).then_some((count, used + 1));
        }
        if self.is(at, "at") && self.is(at + 1, "least") {
            return Some((Count::AtLeast(number(self.word(at + 2)?)?), 3));
        }
        if self.is_article(at) && self.word(at + 1).is_none_or(|word| number(word).is_none()) {
            return Some((Count::Exactly(1), 1));
        }
        if let Some((low, high)) = self.word(at)?.split_once('-') {
            // `3-16 letters`.
            let (low, high) = (number(low)?, number(high)?);
            return (low <= high && high > 0).then_some((Count::Between(low, high), 1));
        }
        let low = number(self.word(at)?)?;
        if self.is(at + 1, "to") {
            let high = number(self.word(at + 2)?)?;
            return (low <= high && high > 0).then_some((Count::Between(low, high), 3));
        }
        if self.is(at + 1, "or") && self.is(at + 2, "more") {
            return Some((Count::AtLeast(low), 3));
        }
        if self.is(at + 1, "or") {
            // `3 or 6 hex digits`.
            if let Some(high) = self.word(at + 2).and_then(number).filter(|high| *high > low && low > 0) {
                return Some((Count::Either(low, high), 3));
            }
        }
        let more = usize::from(self.is(at + 1, "more"));
        (low > 0).then_some((Count::Exactly(low), 1 + more))
    }

    /// Kinds of character, listed (`letters digits underscores or hyphens`, `lowercase letters or digits`, `hex
    /// digits`): their union, the words read, and whether the last noun is plural.
    fn kinds(&mut self, at: usize) -> Option<(Chars, usize, bool)> {
        let mut chars = Chars(0);
        let mut used = 0;
        let mut is_plural;
        let mut said_case = self.case;
        loop {
            let mut adjective_case = None;
            let mut base: Option<&str> = None;
            let mut length = 0;
            while let Some(said) = self.lower(at + used + length).as_deref().and_then(adjective) {
                match said {
                    Adjective::Case(case) => adjective_case = Some(case),
                    Adjective::Base(named) => base = Some(named),
                }
                length += 1;
            }
            let noun = self.lower(at + used + length)?;
            if adjective_case.is_some() {
                said_case = adjective_case;
            }
            let case = adjective_case.or(said_case);
            let kind = match (kind_noun(&noun)?, base) {
                (Kind::Digit, None | Some("decimal")) => Chars::digits(),
                (Kind::Digit | Kind::Character, Some("hex")) => Chars::hex(case),
                (Kind::Digit, Some("octal")) => Chars::range('0', '7'),
                (Kind::Digit, Some("binary")) => Chars::range('0', '1'),
                (Kind::Character, Some("alphanumeric")) => Chars::letters(case).or(Chars::digits()),
                (Kind::Letter, None) => Chars::letters(case),
                (Kind::Symbol(symbol), None) if adjective_case.is_none() => Chars::one(symbol),
                _ => return None,
            };
            chars = chars.or(kind);
            is_plural = plural(&noun);
            used += length + 1;
            // `,`, `or`, `and` or nothing before the next kind; a joint word that is not followed by one ends the
            // list.
            let joint = usize::from(self.is(at + used, ",") || self.is(at + used, "or") || self.is(at + used, "and"));
            let next = at + used + joint;
            let starts_kind = {
                let mut probe = next;
                while self.lower(probe).as_deref().and_then(adjective).is_some() {
                    probe += 1;
                }
                self.lower(probe).is_some_and(|word| kind_noun(&word).is_some())
            };
            // Singular kinds side by side are a sequence (`letter digit letter`), plural ones a list (`letters
            // digits or underscores`).
            if !starts_kind || (joint == 0 && !is_plural) {
                break;
            }
            used += joint;
        }
        self.case = said_case;
        Some((chars, used, is_plural))
    }

    /// A count and kinds of character (`three digits`, `2 to 5 uppercase letters`, `a letter`, `digits`).
    fn counted_kinds(&mut self, at: usize) -> Option<(Piece, usize)> {
        // `an identifier of letters digits and underscores`, `a non-empty string of hex digits`: a name, then
        // what it is made of.
        let named = self.name_of(at);
        if named > 0 {
            let (chars, used, is_plural) = self.kinds(at + named)?;
            let count = if is_plural { Count::Plural } else { Count::Exactly(1) };
            let (piece, length) = self.of_length(at + named + used, chars, count)?;
            return Some((piece, named + used + length));
        }
        let (count, counted) = match self.count(at) {
            Some(found) => found,
            None => (Count::Plural, 0),
        };
        let (chars, used, is_plural) = self.kinds(at + counted)?;
        let count = match count {
            // `a letters`, `three digit` are no English the reader understands.
            Count::Exactly(1) if counted > 0 && is_plural => return None,
            Count::Plural if !is_plural => Count::Exactly(1),
            count => count,
        };
        let (piece, length) = self.of_length(at + counted + used, chars, count)?;
        // `letters only`, `digits only`: what was said already.
        let only = usize::from(self.is(at + counted + used + length, "only"));
        Some((piece, counted + used + length + only))
    }

    /// Characters of a set with a length said after them (`of even length`, `of length 8`, `of length 2 to 4`)
    /// when the count before them said none; the words read.
    fn of_length(&self, at: usize, chars: Chars, count: Count) -> Option<(Piece, usize)> {
        let plain = Piece::Chars { chars, count, first: None, optional: false };
        if !self.is(at, "of") {
            return Some((plain, 0));
        }
        if count != Count::Plural {
            return None;
        }
        if self.is(at + 1, "even") && self.is(at + 2, "length") {
            return Some((Piece::pattern(format!("(?:{}{{2}})+", chars.atom())), 3));
        }
        if self.is(at + 1, "length") {
            let (count, used) = self.count(at + 2).filter(|(count, _)| !matches!(count, Count::Plural))?;
            return Some((Piece::Chars { chars, count, first: None, optional: false }, 2 + used));
        }
        None
    }

    /// Single characters listed (`0 and 1`, `a b or c`), then optionally the kind they are (`digits`): the set.
    fn listed_characters(&self, at: usize) -> Option<(Chars, usize)> {
        let mut used = 0;
        let mut chars = Chars(0);
        let mut listed = 0;
        loop {
            let word = self.word(at + used)?;
            let mut letters = word.chars();
            let (Some(ch), None) = (letters.next(), letters.next()) else { return None };
            if !ch.is_ascii_alphanumeric() {
                return None;
            }
            chars = chars.or(Chars::one(ch));
            listed += 1;
            used += 1;
            if self.is(at + used, "and") || self.is(at + used, "or") || self.is(at + used, ",") {
                used += 1;
                continue;
            }
            // Side by side: `0 1 or 2`.
            if self.word(at + used).is_some_and(|next| next.chars().count() == 1) {
                continue;
            }
            break;
        }
        if listed < 2 {
            return None;
        }
        let kind = self.lower(at + used).and_then(|word| kind_noun(&word));
        let fits = match kind {
            Some(Kind::Digit) => chars.members().all(|ch| ch.is_ascii_digit()),
            Some(Kind::Letter) => chars.members().all(|ch| ch.is_ascii_alphabetic()),
            Some(Kind::Character) => true,
            _ => false,
        };
        if fits {
            used += 1;
        }
        Some((chars, used))
    }

    /// The words of `a NAME of` (`an identifier of`, `a non-empty string of`) before what the thing is made of;
    /// 0 where there are none.
    fn name_of(&self, at: usize) -> usize {
        let mut used = usize::from(self.is_article(at));
        if used == 0 {
            return 0;
        }
        used += usize::from(self.is(at + used, "non-empty"));
        let is_name = self.lower(at + used).is_some_and(|word| {
            word.chars().all(|ch| ch.is_ascii_alphabetic())
                && !GRAMMAR_WORDS.contains(&word.as_str())
                && kind_noun(&word).is_none()
                && number(&word).is_none()
        });
        if is_name && self.is(at + used + 1, "of") {
            used + 2
        } else {
            0
        }
    }

    /// Anything but whitespace: `a value without spaces`, `a token with no whitespace`.
    fn without_spaces(&self, at: usize) -> Option<(Piece, usize)> {
        let used = usize::from(self.is_article(at));
        let word = self.lower(at + used)?;
        if !word.chars().all(|ch| ch.is_ascii_alphabetic()) || GRAMMAR_WORDS.contains(&word.as_str()) {
            return None;
        }
        let length = if self.is(at + used + 1, "without") {
            1
        } else if self.is(at + used + 1, "with") && self.is(at + used + 2, "no") {
            2
        } else {
            return None;
        };
        let spaces = self.lower(at + used + 1 + length)?;
        matches!(spaces.as_str(), "spaces" | "whitespace")
            .then(|| (Piece::pattern(r"\S+".to_owned()), used + 2 + length))
    }

    /// Words of digits and symbols side by side, where shapes are read (`(555) 123-4567`): each run of digits
    /// that many digits, each symbol itself, the words joined by a space.
    fn shape(&self, at: usize) -> Option<(Piece, usize)> {
        if !self.shapes {
            return None;
        }
        let is_shape = |word: &str| {
            word.chars().all(|ch| ch.is_ascii_graphic() && !ch.is_ascii_alphabetic())
                && word.chars().any(|ch| ch.is_ascii_digit())
        };
        let mut parts = Vec::new();
        while let Some(word) = self.word(at + parts.len()).filter(|word| is_shape(word)) {
            let mut part = String::new();
            let mut digits = 0;
            for ch in word.chars().chain(std::iter::once(' ')) {
                if ch.is_ascii_digit() {
                    digits += 1;
                    continue;
                }
                if digits > 0 {
                    part.push_str(&Count::Exactly(digits).repeat(&Chars::digits().atom(), false));
                }
                digits = 0;
                if ch != ' ' {
                    part.push_str(&escape(ch));
                }
            }
            parts.push(part);
        }
        (!parts.is_empty()).then(|| (Piece::pattern(parts.join(" ")), parts.len()))
    }

    /// `text`, `any text`, `some text`: one or more characters of any kind on one line (a heading's title, a
    /// comment after its marker).
    fn text(&self, at: usize) -> Option<(Piece, usize)> {
        let used = usize::from(self.is(at, "any") || self.is(at, "some"));
        self.is(at + used, "text").then(|| (Piece::pattern(".+".to_owned()), used + 1))
    }

    /// Symbols written as such, with an optional count and noun: `@`, `$`, `1 to 6 # characters`, `+ or - sign`.
    fn symbols(&self, at: usize) -> Option<(Piece, usize)> {
        let (count, counted) = match self.count(at) {
            Some((count, used)) if !self.is_article(at) => (count, used),
            _ => (Count::Exactly(1), usize::from(self.is_article(at))),
        };
        let mut used = counted;
        let mut chars = Chars(0);
        let mut text = String::new();
        loop {
            let word = self.word(at + used)?;
            let literal = if is_symbols(word) { word.to_owned() } else { quoted(word)? };
            used += 1;
            if literal.chars().count() == 1 {
                chars = chars.or(Chars::one(literal.chars().next()?));
            } else if text.is_empty() && chars == Chars(0) {
                text = literal;
            } else {
                return None;
            }
            if !(self.is(at + used, "or")
                && self.word(at + used + 1).is_some_and(|next| is_symbols(next) || quoted(next).is_some()))
            {
                break;
            }
            used += 1;
        }
        if matches!(
            self.lower(at + used).as_deref(),
            Some("sign" | "signs" | "character" | "characters" | "symbol" | "symbols")
        ) {
            used += 1;
        }
        if !text.is_empty() {
            let literal: String = text.chars().map(escape).collect();
            let pattern =
                if count == Count::Exactly(1) { literal } else { count.repeat(&format!("(?:{literal})"), false) };
            return Some((Piece::pattern(pattern), used));
        }
        let count = if count == Count::Plural { Count::AtLeast(1) } else { count };
        Some((Piece::Chars { chars, count, first: None, optional: false }, used))
    }

    /// One letter or digit named as itself: `a lowercase v`, `an uppercase X`, `a 4`.
    fn literal_character(&self, at: usize) -> Option<(Piece, usize)> {
        let mut used = usize::from(self.is_article(at));
        let case = match self.lower(at + used).as_deref() {
            Some("lowercase") => Some(Case::Lower),
            Some("uppercase" | "capital") => Some(Case::Upper),
            _ => None,
        };
        used += usize::from(case.is_some());
        let word = self.word(at + used)?;
        let mut chars = word.chars();
        let (Some(ch), None) = (chars.next(), chars.next()) else { return None };
        let ch = match case {
            Some(Case::Lower) if ch.is_ascii_lowercase() => ch,
            Some(Case::Upper) if ch.is_ascii_uppercase() => ch,
            None if ch.is_ascii_digit() && used > 0 => ch,
            // A lone letter or digit (`x then 2 to 5 digits`, `followed by h`): itself.
            None if used == 0 && ch.is_ascii_alphanumeric() => ch,
            _ => return None,
        };
        Some((Piece::Chars { chars: Chars::one(ch), count: Count::Exactly(1), first: None, optional: false }, used + 1))
    }

    /// A word in capitals, perhaps with symbols (`INV-`, `ID`, `SKU_`): itself.
    fn capitals(&self, at: usize) -> Option<(Piece, usize)> {
        let word = self.word(at)?;
        let fits = word.chars().count() >= 2
            && word.chars().any(|ch| ch.is_ascii_uppercase())
            && word.chars().all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch.is_ascii_punctuation())
            && template_parts(word).is_none();
        fits.then(|| (Piece::pattern(word.chars().map(escape).collect()), 1))
    }

    /// A date or time written as a template of field letters (`HH:MM`, `h:mm`, `MM/DD/YYYY`, `YYYY-MM-DD`), the
    /// letters as date and time formats use them (Unicode LDML, strftime's manuals): `YYYY` a year of four digits,
    /// `MM` a month 01-12 (minutes in a template with an hour), `DD` a day 01-31, `HH` an hour 00-23 (01-12 in a
    /// `12-hour` time), `h` an hour 1-12, `mm` minutes 00-59, `ss` seconds 00-59; one letter is the field without
    /// its leading zero. Name words may come before it (`a 24-hour time HH:MM`); a `with` after it may restate
    /// fields (`with a two-digit month 01-12 and a two-digit day 01-31`), which must agree with the template.
    fn template(&self, at: usize) -> Option<(Piece, usize)> {
        let mut used = usize::from(self.is_article(at));
        let mut twelve_hour = None;
        let mut found = None;
        for offset in 0..5 {
            let word = self.word(at + used + offset)?;
            let lower = word.to_lowercase();
            if let Some(parts) = template_parts(word) {
                found = Some((offset, parts));
                break;
            }
            if GRAMMAR_WORDS.contains(&lower.as_str()) || number(word).is_some() {
                return None;
            }
            match lower.as_str() {
                "12-hour" => twelve_hour = Some(true),
                "24-hour" => twelve_hour = Some(false),
                _ => {}
            }
        }
        let (offset, parts) = found?;
        used += offset + 1;
        let has_hour = parts.iter().any(|part| matches!(part, Ok((letter, _)) if letter.eq_ignore_ascii_case(&'h')));
        let mut fields: Vec<Field> = Vec::new();
        let mut pattern = String::new();
        for part in &parts {
            let (letter, length) = match part {
                Err(separator) => {
                    pattern.push_str(&escape(*separator));
                    continue;
                }
                Ok(field) => *field,
            };
            let padded = (length == 2).then_some(2);
            let (name, low, high) = match letter {
                'Y' | 'y' if length == 4 || length == 2 => {
                    pattern.push_str(&format!("[0-9]{{{length}}}"));
                    fields.push(Field {
                        name: "year",
                        low: 0,
                        high: 10u64.pow(length as u32) - 1,
                        width: Some(length),
                    });
                    continue;
                }
                'M' | 'm' if has_hour => ("minute", 0, 59),
                'M' | 'm' => ("month", 1, 12),
                'D' | 'd' => ("day", 1, 31),
                'H' if twelve_hour == Some(true) => ("hour", 1, 12),
                'H' => ("hour", 0, 23),
                'h' if twelve_hour == Some(false) => ("hour", 0, 23),
                'h' => ("hour", 1, 12),
                's' | 'S' => ("second", 0, 59),
                _ => return None,
            };
            if length > 2 {
                return None;
            }
            pattern.push_str(&number_range(low, high, padded)?);
            fields.push(Field { name, low, high, width: padded });
        }
        if self.is(at + used, "with") {
            used += 1 + self.restated_fields(at + used + 1, &fields)?;
        }
        Some((Piece::pattern(pattern), used))
    }

    /// `a two-digit month 01-12 and a two-digit day 01-31`: fields restated, each as the template has it; the
    /// words read.
    fn restated_fields(&self, at: usize, fields: &[Field]) -> Option<usize> {
        let mut used = 0;
        loop {
            used += usize::from(self.is_article(at + used));
            let width = self.digit_width(at + used)?;
            used += usize::from(width.is_some());
            let name = self.lower(at + used)?;
            let field = fields.iter().find(|field| name.trim_end_matches('s') == field.name)?;
            used += 1;
            let (low, high, length) = self.range_words(at + used)?;
            used += length;
            let padded = padded_width(low).or(width);
            let agrees = low.parse::<u64>().ok()? == field.low
                && high.parse::<u64>().ok()? == field.high
                && padded.is_none_or(|padded| field.width == Some(padded));
            if !agrees {
                return None;
            }
            if self.is(at + used, "and") || self.is(at + used, ",") {
                used += 1;
                continue;
            }
            return (at + used == self.words.len() || self.joint(at + used).is_some()).then_some(used);
        }
    }

    /// `from A to B`, `between A and B` or `A-B`: the bounds as written and the words read.
    fn range_words(&self, at: usize) -> Option<(&str, &str, usize)> {
        if (self.is(at, "from") && self.is(at + 2, "to")) || (self.is(at, "between") && self.is(at + 2, "and")) {
            return Some((self.word(at + 1)?, self.word(at + 3)?, 4));
        }
        let (low, high) = self.word(at)?.split_once('-')?;
        Some((low, high, 1))
    }

    /// `two-digit`, `4-digit` at `at`: `Some(Some(width))`; `Some(None)` for any other word; `None` for a
    /// `-digit` word whose count is no number.
    fn digit_width(&self, at: usize) -> Option<Option<usize>> {
        match self.lower(at).as_deref().and_then(|word| word.strip_suffix("-digit")) {
            Some(digits) => Some(Some(number(digits)?)),
            None => Some(None),
        }
    }

    /// A number with a range of values: `a number from 0 to 255`, `a two-digit month 01-12`, `a TCP port number
    /// from 1 to 65535 without leading zeros`, `numbers between 1 and 12`. The range is written out digit by
    /// digit; a width (`two-digit`, or a bound written with a leading zero) pads every value to it.
    fn number_range(&self, at: usize) -> Option<(Piece, usize)> {
        let mut used = usize::from(self.is_article(at));
        let width = self.digit_width(at + used)?;
        used += usize::from(width.is_some());
        let nouns_start = used;
        while self.word(at + used).is_some_and(|word| {
            word.chars().all(|ch| ch.is_ascii_alphabetic()) && !GRAMMAR_WORDS.contains(&word.to_lowercase().as_str())
        }) && used - nouns_start < 4
        {
            used += 1;
        }
        if used == nouns_start {
            return None;
        }
        let Some((low, high, length)) = self.range_words(at + used) else {
            // `a six-digit PIN`: as many digits as said, any value.
            let digits =
                Piece::Chars { chars: Chars::digits(), count: Count::Exactly(width?), first: None, optional: false };
            return Some((digits, used));
        };
        used += length;
        let bound = |text: &str| {
            (!text.is_empty() && text.len() <= 9 && text.bytes().all(|byte| byte.is_ascii_digit()))
                .then(|| text.parse::<u64>().ok())
                .flatten()
        };
        let (low_value, high_value) = (bound(low)?, bound(high)?);
        if low_value > high_value {
            return None;
        }
        let width = width.or(padded_width(low));
        if self.is(at + used, "without") && self.is(at + used + 1, "leading") && self.is(at + used + 2, "zeros") {
            if width.is_some() {
                return None;
            }
            used += 3;
        }
        Some((Piece::pattern(number_range(low_value, high_value, width)?), used))
    }

    /// A number with its sign, prefix or fraction: `an integer with an optional + or - sign`, `a hexadecimal
    /// number with a 0x prefix`, `a number with an optional fraction`, `numbers`.
    fn number_with(&self, at: usize) -> Option<(Piece, usize)> {
        let mut used = usize::from(self.is_article(at));
        // `an even non-negative integer`, `an odd number`: the last digit says the parity; `non-negative` and
        // `unsigned` say what a number without a sign is already.
        let mut last_digit: Option<Chars> = None;
        loop {
            match self.lower(at + used).as_deref() {
                Some("even") if last_digit.is_none() => last_digit = Some(Chars::of("02468")),
                Some("odd") if last_digit.is_none() => last_digit = Some(Chars::of("13579")),
                Some("non-negative" | "nonnegative" | "unsigned") => {}
                _ => break,
            }
            used += 1;
        }
        let digits = match self.lower(at + used).as_deref() {
            Some("hexadecimal" | "hex") if last_digit.is_none() => Some(Chars::hex(None)),
            Some("octal") => Some(Chars::range('0', '7')),
            Some("binary") => Some(Chars::range('0', '1')),
            Some("decimal" | "whole") => Some(Chars::digits()),
            _ => None,
        };
        used += usize::from(digits.is_some());
        let noun = self.lower(at + used)?;
        if !["number", "numbers", "integer", "integers"].contains(&noun.as_str()) {
            return None;
        }
        used += 1;
        let mut digits = digits.unwrap_or_else(Chars::digits);
        // `a binary number made of 0 and 1 digits`: the digits listed, which the kind of number must allow.
        if self.is(at + used, "made") && self.is(at + used + 1, "of") {
            let (listed, length) = self.listed_characters(at + used + 2)?;
            if listed.without(digits) != Chars(0) {
                return None;
            }
            digits = listed;
            used += 2 + length;
        }
        let core = match last_digit {
            // Parity of a decimal number of the digits 0-9 only (not `made of` a few of them).
            Some(last) if digits == Chars::digits() => format!("{}*{}", digits.atom(), last.atom()),
            Some(_) => return None,
            None => format!("{}+", digits.atom()),
        };
        let (mut before, mut after) = (String::new(), String::new());
        if self.is(at + used, "with") {
            used += 1;
            loop {
                let start = at + used;
                let mut part = start + usize::from(self.is_article(start));
                let optional = self.is(part, "optional");
                part += usize::from(optional);
                let wrap = |text: String| if optional { format!("(?:{text})?") } else { text };
                let wrap_atom = |text: String| if optional { format!("{text}?") } else { text };
                let lower = self.lower(part)?;
                let length = if lower == "sign" {
                    before.push_str(&wrap_atom("[+-]".into()));
                    1
                } else if self.is(part + 1, "or") && self.is(part + 3, "sign") {
                    let (first, second) = (self.word(part)?, self.word(part + 2)?);
                    if !(is_symbols(first) && is_symbols(second) && first.len() == 1 && second.len() == 1) {
                        return None;
                    }
                    before.push_str(&wrap_atom(
                        Chars::one(first.chars().next()?).or(Chars::one(second.chars().next()?)).atom(),
                    ));
                    4
                } else if lower == "fraction"
                    || (lower == "fractional" || lower == "decimal") && self.is(part + 1, "part")
                {
                    if last_digit.is_some() {
                        return None;
                    }
                    after.push_str(&wrap(format!("\\.{}+", Chars::digits().atom())));
                    if lower == "fraction" {
                        1
                    } else {
                        2
                    }
                } else if self.is(part + 1, "prefix") {
                    let literal: String = self.word(part)?.chars().map(escape).collect();
                    before.push_str(&wrap(literal));
                    2
                } else {
                    return None;
                };
                used = part - at + length;
                if self.is(at + used, "and") && !self.is(at + used + 1, "then") {
                    used += 1;
                    continue;
                }
                break;
            }
        }
        Some((Piece::pattern(format!("{before}{core}{after}")), used))
    }

    /// Parts joined by a separator: `four dot-separated numbers from 0 to 255`, `three dot-separated numbers`,
    /// `six pairs of hex digits separated by colons`, `8-4-4-4-12 hex digits separated by hyphens`,
    /// `dot-separated labels of …`.
    fn separated(&mut self, at: usize) -> Option<(Piece, usize)> {
        let mut used = 0;
        // How many parts, or each part's own length (`8-4-4-4-12`).
        let mut parts: Option<usize> = None;
        let mut lengths: Option<Vec<usize>> = None;
        if let Some(word) = self.word(at) {
            let split: Option<Vec<usize>> = word.split('-').map(number).collect();
            if let Some(split) = split.filter(|split| split.len() >= 2) {
                lengths = Some(split);
                used = 1;
            } else if let Some(n) = number(word) {
                parts = Some(n);
                used = 1;
            }
        }
        // `pairs of hex digits`, `groups of 1 to 4 hex digits`: each part that many characters of a kind.
        let mut group: Option<Count> = None;
        if self.is(at + used, "pairs") && self.is(at + used + 1, "of") {
            group = Some(Count::Exactly(2));
            used += 2;
        } else if self.is(at + used, "groups") && self.is(at + used + 1, "of") {
            let (count, length) = self.count(at + used + 2).filter(|(count, _)| *count != Count::Exactly(1))?;
            group = Some(count);
            used += 2 + length;
        }
        // `dot-separated X` or `X separated by dots`.
        let mut separator = None;
        if let Some((symbol, "separated")) = self.lower(at + used).as_deref().and_then(|word| word.split_once('-')) {
            separator =
                Some(symbol_named(symbol).or_else(|| (symbol.len() == 1).then(|| symbol.chars().next()).flatten())?);
            used += 1;
        }
        let element_at = at + used;
        let later_separator =
            self.words[element_at.min(self.words.len())..].iter().any(|word| word == "separated" || word == "joined");
        if used == 0 && !later_separator {
            // Nothing of a list read yet, and no `separated by` ahead: not a list (and no reading it again).
            return None;
        }
        let (element, element_used) = if lengths.is_some() || group.is_some() {
            let (chars, length, is_plural) = self.kinds(element_at)?;
            if !is_plural {
                return None;
            }
            (Piece::Chars { chars, count: Count::Plural, first: None, optional: false }, length)
        } else {
            let words: Vec<String> = self.words[element_at..].to_vec();
            // The element is read up to `separated by` or the end of what a piece reads.
            let stop = words.iter().position(|word| word == "separated" || word == "joined").unwrap_or(words.len());
            let mut inner = Reader { words: &words[..stop], case: self.case, shapes: self.shapes };
            let found = inner.piece(0)?;
            self.case = inner.case;
            found
        };
        used += element_used;
        if separator.is_none()
            && (self.is(at + used, "separated") || self.is(at + used, "joined"))
            && self.is(at + used + 1, "by")
        {
            let word = self.word(at + used + 2)?;
            separator = Some(symbol_named(word).or_else(|| is_symbols(word).then(|| word.chars().next()).flatten())?);
            used += 3;
        }
        let separator = escape(separator?);
        let element = match (&lengths, group, &element) {
            (None, Some(count), Piece::Chars { chars, .. }) => vec![count.repeat(&chars.atom(), false)],
            (Some(lengths), _, Piece::Chars { chars, .. }) => {
                let parts: Vec<String> =
                    lengths.iter().map(|length| Count::Exactly(*length).repeat(&chars.atom(), false)).collect();
                return Some((Piece::pattern(parts.join(&separator)), used));
            }
            (None, None, element) => vec![element.render(None)],
            _ => return None,
        };
        // An element is a unit: a number range's alternatives come grouped.
        let element = &element[0];
        let pattern = match parts {
            Some(0) => return None,
            Some(1) => element.clone(),
            Some(n) => format!("{element}(?:{separator}{element}){{{}}}", n - 1),
            None => format!("{element}(?:{separator}{element})*"),
        };
        Some((Piece::pattern(pattern), used))
    }
}

/// A field of a date or time template and the values it takes.
struct Field {
    name: &'static str,
    low: u64,
    high: u64,
    width: Option<usize>,
}

/// A template's runs of one letter (the letter, how many) and its separators, when it has two fields or more
/// and only the letters of dates and times.
pub(super) fn template_parts(word: &str) -> Option<Vec<Result<(char, usize), char>>> {
    let mut parts: Vec<Result<(char, usize), char>> = Vec::new();
    for ch in word.chars() {
        match (parts.last_mut(), ch) {
            (Some(Ok((letter, length))), _) if *letter == ch => *length += 1,
            (_, 'Y' | 'y' | 'M' | 'm' | 'D' | 'd' | 'H' | 'h' | 's' | 'S') => parts.push(Ok((ch, 1))),
            (_, ':' | '/' | '.' | '-') => parts.push(Err(ch)),
            _ => return None,
        }
    }
    let fields = parts.iter().filter(|part| part.is_ok()).count();
    let alternate = parts.iter().enumerate().all(|(idx, part)| part.is_ok() == (idx % 2 == 0));
    (fields >= 2 && alternate && parts.len() % 2 == 1).then_some(parts)
}

/// A word before a kind of character that narrows it.
enum Adjective {
    Case(Case),
    /// `hex`, `octal`, `binary`, `decimal`, `alphanumeric`.
    Base(&'static str),
}

fn adjective(word: &str) -> Option<Adjective> {
    Some(match word {
        "lowercase" | "lower-case" => Adjective::Case(Case::Lower),
        "uppercase" | "upper-case" | "capital" => Adjective::Case(Case::Upper),
        "hex" | "hexadecimal" => Adjective::Base("hex"),
        "octal" => Adjective::Base("octal"),
        "binary" => Adjective::Base("binary"),
        "decimal" => Adjective::Base("decimal"),
        "alphanumeric" => Adjective::Base("alphanumeric"),
        _ => return None,
    })
}

/// The width a bound written with a leading zero states (`01` in `01-12`: two digits).
fn padded_width(bound: &str) -> Option<usize> {
    (bound.len() > 1 && bound.starts_with('0')).then_some(bound.len())
}

/// What a noun names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Digit,
    Letter,
    /// `characters`, only after `hex` or `alphanumeric`.
    Character,
    Symbol(char),
}

fn kind_noun(word: &str) -> Option<Kind> {
    Some(match word {
        "digit" | "digits" => Kind::Digit,
        "letter" | "letters" => Kind::Letter,
        "character" | "characters" | "char" | "chars" => Kind::Character,
        _ => Kind::Symbol(symbol_named(word)?),
    })
}

/// A word quoted with `'`, `"` or `` ` ``: the text inside.
fn quoted(word: &str) -> Option<String> {
    ['\'', '"', '`'].iter().find_map(|quote| {
        let inner = word.strip_prefix(*quote)?.strip_suffix(*quote)?;
        (!inner.is_empty()).then(|| inner.to_owned())
    })
}

/// The integers `low..=high` as a pattern, each written without leading zeros, or with exactly `width` digits.
fn number_range(low: u64, high: u64, width: Option<usize>) -> Option<String> {
    let mut alternatives = Vec::new();
    match width {
        Some(width) => {
            let (low, high) = (format!("{low:0width$}"), format!("{high:0width$}"));
            if high.len() != width {
                return None;
            }
            alternatives.extend(same_length(low.as_bytes(), high.as_bytes()));
        }
        None => {
            let digits = |value: u64| value.to_string().len();
            for length in digits(low)..=digits(high) {
                let smallest = if length == 1 { 0 } else { 10u64.pow(length as u32 - 1) };
                let largest = 10u64.pow(length as u32) - 1;
                let (from, to) = (low.max(smallest).to_string(), high.min(largest).to_string());
                alternatives.extend(same_length(from.as_bytes(), to.as_bytes()));
            }
        }
    }
    Some(group_of(&alternatives))
}

/// The strings of one length from `low` to `high` (digits, same length), as alternatives.
fn same_length(low: &[u8], high: &[u8]) -> Vec<String> {
    let (Some((&low_first, low_rest)), Some((&high_first, high_rest))) = (low.split_first(), high.split_first()) else {
        return vec![String::new()];
    };
    let prefixed = |digit: u8, rest: Vec<String>| -> Vec<String> {
        rest.into_iter().map(|tail| format!("{}{tail}", digit as char)).collect()
    };
    if low_first == high_first {
        return prefixed(low_first, same_length(low_rest, high_rest));
    }
    let rest = low_rest.len();
    let (nines, zeros) = (vec![b'9'; rest], vec![b'0'; rest]);
    let mut out = Vec::new();
    let (mut middle_low, mut middle_high) = (low_first, high_first);
    if low_rest != zeros.as_slice() {
        out.extend(prefixed(low_first, same_length(low_rest, &nines)));
        middle_low += 1;
    }
    let mut tail = Vec::new();
    if high_rest != nines.as_slice() {
        tail = prefixed(high_first, same_length(&zeros, high_rest));
        middle_high -= 1;
    }
    if middle_low <= middle_high {
        let first = if middle_low == middle_high {
            (middle_low as char).to_string()
        } else if middle_high == middle_low + 1 {
            format!("[{}{}]", middle_low as char, middle_high as char)
        } else {
            format!("[{}-{}]", middle_low as char, middle_high as char)
        };
        let any = match rest {
            0 => String::new(),
            1 => "[0-9]".to_owned(),
            n => format!("[0-9]{{{n}}}"),
        };
        out.push(format!("{first}{any}"));
    }
    out.extend(tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (description, the pattern it spells out, or `None` where any word is not understood).
    #[test]
    fn description_table() {
        let cases: &[(&str, Option<&str>)] = &[
            ("a part number: four digits a slash and two digits", Some(r"^[0-9]{4}/[0-9]{2}$")),
            ("a badge: 3 to 6 uppercase letters", Some(r"^[A-Z]{3,6}$")),
            ("a handle of letters digits or hyphens", Some(r"^[a-zA-Z0-9\-]+$")),
            ("a label: a letter then letters digits or underscores", Some(r"^[a-zA-Z][a-zA-Z0-9_]*$")),
            ("a code: lowercase letters and digits not starting with a digit", Some(r"^[a-z][a-z0-9]*$")),
            ("a room: uppercase letter digit letter", Some(r"^[A-Z][0-9][A-Z]$")),
            ("a level: ! then 1 to 3 * characters", Some(r"^!\*{1,3}$")),
            ("a ticket: a lowercase t then five digits", Some(r"^t[0-9]{5}$")),
            ("a serial: a 7 followed by 9 more digits", Some(r"^7[0-9]{9}$")),
            ("a check code: eight digits followed by a digit or an uppercase K", Some(r"^[0-9]{8}[K0-9]$")),
            ("a signed offset: a number with an optional - or + sign", Some(r"^[+\-]?[0-9]+$")),
            ("a hex literal: a hexadecimal number with a 0h prefix", Some(r"^0h[a-fA-F0-9]+$")),
            (
                "a weight: a number with an optional fraction followed by kg lb or g",
                Some(r"^[0-9]+(?:\.[0-9]+)?(?:kg|lb|g)$"),
            ),
            ("a level from 0 to 42", Some(r"^(?:[0-9]|[1-3][0-9]|4[0-2])$")),
            ("a grade: a two-digit grade 01-20 then a dot", Some(r"^(?:0[1-9]|1[0-9]|20)\.$")),
            ("a net id with three dot-separated numbers from 0 to 9", Some(r"^[0-9](?:\.[0-9]){2}$")),
            ("a key: 4-2-6 hex digits separated by colons", Some(r"^[a-fA-F0-9]{4}:[a-fA-F0-9]{2}:[a-fA-F0-9]{6}$")),
            ("a tag: three pairs of digits separated by dashes", Some(r"^[0-9]{2}(?:-[0-9]{2}){2}$")),
            ("a hint: yes or no", Some(r"^(?:yes|no)$")),
            ("a flag: a name of lowercase letters then = then a setting without spaces", Some(r"^[a-z]+=\S+$")),
            ("a word of uppercase letters", Some(r"^[A-Z]+$")),
            ("a colour: # then 3 or 6 hex digits", Some(r"^#(?:[a-fA-F0-9]{3}|[a-fA-F0-9]{6})$")),
            ("an invoice: INV- then 6 digits", Some(r"^INV-[0-9]{6}$")),
            ("an extension: x then 2 to 5 digits", Some(r"^x[0-9]{2,5}$")),
            ("a word: letters only", Some(r"^[a-zA-Z]+$")),
            ("a key: 4 groups of 2 to 3 digits separated by dots", Some(r"^[0-9]{2,3}(?:\.[0-9]{2,3}){3}$")),
            ("a code: 3 or 6 digits not starting with 0", None),
            ("a note: a * then a space then text", Some(r"^\* .+$")),
            ("an even non-negative integer", Some(r"^[0-9]*[02468]$")),
            ("a count: an odd number with an optional sign", Some(r"^[+-]?[0-9]*[13579]$")),
            ("an even hex number", None),
            (
                "a phone number written as 555-123-4567 or (555) 123-4567",
                Some(r"^(?:[0-9]{3}-[0-9]{3}-[0-9]{4}|\([0-9]{3}\) [0-9]{3}-[0-9]{4})$"),
            ),
            ("a part formatted as 12.345", Some(r"^[0-9]{2}\.[0-9]{3}$")),
            // Outside `written as`, a shape is no word the reader knows.
            ("a part: 12.345", None),
            (
                "a name: a lowercase letter first then letters or digits with at least one uppercase letter",
                Some(r"^[a-z][a-zA-Z0-9]*[A-Z][a-zA-Z0-9]*$"),
            ),
            ("a code: digits containing at least one 7", None),
            ("a word: letters with at least one digit then a dot", Some(r"^[a-zA-Z0-9]*[0-9][a-zA-Z0-9]*\.$")),
            ("a key: 8 letters with at least one digit", None),
            ("an even number with a fraction", None),
            ("a comment: // then any text", Some(r"^//.+$")),
            ("a title: text in capitals", None),
            ("a postcode: 5 digits optionally followed by a hyphen and 4 digits", Some(r"^[0-9]{5}(?:-[0-9]{4})?$")),
            ("a price: digits then optionally a dot and two digits then a space", Some(r"^[0-9]+(?:\.[0-9]{2})? $")),
            ("a six-digit PIN", Some(r"^[0-9]{6}$")),
            ("a code: a 4-digit block then a letter", Some(r"^[0-9]{4}[a-zA-Z]$")),
            ("a key: a non-empty string of lowercase letters of even length", Some(r"^(?:[a-z]{2})+$")),
            ("a pin: digits of length 4 to 6", Some(r"^[0-9]{4,6}$")),
            ("a name of 2-8 lowercase letters", Some(r"^[a-z]{2,8}$")),
            ("a number made of 0 1 or 2 digits", Some(r"^[0-2]+$")),
            ("an octal number made of 7 and 8 digits", None),
            ("a stamp HH:MM:SS", Some(r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$")),
            ("a 12-hour clock h:mm followed by a space and AM or PM", Some(r"^(?:[1-9]|1[0-2]):[0-5][0-9] (?:AM|PM)$")),
            (
                "a day YYYY-MM-DD with a two-digit month 01-12",
                Some(r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$"),
            ),
            ("a day YYYY-MM-DD with a month 1-12", Some(r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$")),
            // A restated field that disagrees with the template: nothing.
            ("a day YYYY-MM-DD with a month 01-13", None),
            // Words the reader does not know: nothing.
            ("a weekday from 1 to 7 in words", None),
            ("an odd positive number", None),
            ("a time of day HH:MM in Paris", None),
            ("a code: lowercase letters joined by single hyphens in words", None),
        ];
        for (description, expected) in cases {
            assert_eq!(from_description(description).ok().as_deref(), *expected, "{description}");
        }
    }

    proptest::proptest! {
        /// Any sequence of the reader's own words, numbers and symbols is read without a panic, and what it gives
        /// compiles in both dialects.
        #[test]
        fn any_words_read_safely(picks in proptest::collection::vec(0usize..48, 0..14)) {
            const VOCABULARY: [&str; 48] = [
                "a", "an", "one", "then", "and", "or", "followed", "by", "with", "of", "to", "from", "between", "not",
                "starting", "optional", "optionally", "more", "exactly", "at", "least", "separated", "pairs", "digits",
                "letter", "uppercase", "lowercase", "hex", "number", "integer", "sign", "prefix", "fraction", "0",
                "3", "12", "01-12", "8-4", "two-digit", "dot-separated", "HH:MM", "YYYY-MM-DD", "#", "+", "-", ",",
                "x", "without",
            ];
            let description: Vec<&str> = picks.iter().map(|pick| VOCABULARY[*pick]).collect();
            if let Ok(pattern) = from_description(&description.join(" ")) {
                proptest::prop_assert!(regex::Regex::new(&pattern).is_ok(), "{pattern}");
                proptest::prop_assert!(regress::Regex::new(&pattern).is_ok(), "{pattern}");
            }
        }
    }

    /// Where the reading stopped is what the user is told.
    #[test]
    fn the_first_unknown_words_are_named() {
        let why = from_description("a weekday: three letters in English").unwrap_err();
        assert!(why.contains("\"in English\""), "{why}");
    }

    /// Every integer up to a bound matches the range's pattern exactly when it lies in the range and is written
    /// as the pattern says (without leading zeros, or padded to the width).
    #[test]
    fn number_ranges_are_exact() {
        for (low, high, width) in [
            (0, 255, None),
            (1, 65535, None),
            (0, 100, None),
            (7, 7, None),
            (1, 12, Some(2)),
            (1, 31, Some(2)),
            (0, 59, Some(2)),
            (95, 1203, None),
        ] {
            let pattern = format!("^{}$", number_range(low, high, width).unwrap());
            let compiled = regex::Regex::new(&pattern).unwrap();
            for value in 0..70_000u64 {
                let plain = value.to_string();
                assert_eq!(
                    compiled.is_match(&plain),
                    (low..=high).contains(&value) && width.is_none_or(|width| plain.len() == width),
                    "{pattern} on {plain}"
                );
                if let Some(width) = width {
                    let padded = format!("{value:0width$}");
                    assert_eq!(
                        compiled.is_match(&padded),
                        (low..=high).contains(&value) && padded.len() == width,
                        "{pattern} on {padded}"
                    );
                }
            }
        }
    }
}
