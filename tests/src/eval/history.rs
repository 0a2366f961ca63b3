//! Next-edit cases from real histories: pairs of consecutive published releases (`tests/eval/history.toml`),
//! fetched like the corpus (`cargo vendor`, `npm pack`) into `target/eval/history/`. Every source file present in
//! both versions is diffed line-wise into hunks; a file changed by [`MIN_HUNKS`]..=[`MAX_HUNKS`] small hunks is a
//! case: the user makes the first hunk, and the others are what a next-edit suggestion should predict. Each of
//! those is refined into atomic edits (a word-level diff), and predictions are scored against them by [`score`]:
//! against the real next version, never by Spark.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use similar::{Algorithm, DiffTag};

use super::corpus::{self, Lang, Split};
use super::{eval_dir, fingerprint, Rng, SEED};

/// Bump when the way cases are drawn changes.
pub const GENERATOR: &str = "next-edit-v1";
pub const MIN_HUNKS: usize = 2;
pub const MAX_HUNKS: usize = 12;
/// A hunk replaces at most this many old lines with at most this many new lines.
pub const MAX_HUNK_LINES: usize = 4;
/// Cases kept per package (drawn with [`SEED`]): a full run stays bounded whatever the histories hold.
pub const CASES_PER_PACKAGE: usize = 12;

/// One pinned pair of releases.
#[derive(Debug, Clone)]
pub struct History {
    pub lang: Lang,
    pub name: String,
    pub old: String,
    pub new: String,
    pub why: String,
    pub split: Split,
}

impl History {
    /// The fetched sources of `version`.
    pub fn dir(&self, version: &str) -> PathBuf {
        let root = eval_dir().join("history");
        match self.lang {
            Lang::Rust => {
                root.join("crates").join(format!("{}-{version}", self.name)).join(format!("{}-{version}", self.name))
            }
            Lang::Ts => root.join("npm").join(format!("{}-{version}", self.slug())),
        }
    }

    /// The name as a path component (`@reduxjs/toolkit` → `reduxjs+toolkit`).
    pub fn slug(&self) -> String {
        self.name.trim_start_matches('@').replace('/', "+")
    }

    pub fn sources(&self, version: &str) -> Vec<String> {
        corpus::source_files(self.lang, &self.dir(version))
    }
}

pub fn manifest_text() -> Result<String> {
    corpus::read_manifest_text("tests/eval/history.toml")
}

/// The pairs of `tests/eval/history.toml`.
pub fn manifest() -> Result<Vec<History>> {
    corpus::manifest_entries("tests/eval/history.toml")?
        .into_iter()
        .map(|(lang, entry)| {
            Ok(History {
                lang,
                name: entry.field("name")?,
                old: entry.field("old")?,
                new: entry.field("new")?,
                why: entry.field("why")?,
                split: Split::parse(&entry.field("split")?)?,
            })
        })
        .collect()
}

/// Fetches what is missing: one scratch cargo project per crate version (`cargo vendor`), `npm pack` per package
/// version.
pub fn fetch(histories: &[History]) -> Result<()> {
    let root = eval_dir().join("history");
    for history in histories {
        for version in [&history.old, &history.new] {
            let dir = history.dir(version);
            match history.lang {
                Lang::Rust if !dir.join("Cargo.toml").exists() => {
                    let project = root.join("fetch").join(format!("{}-{version}", history.name));
                    let out = dir.parent().expect("a vendor directory");
                    corpus::cargo_vendor(&[(&history.name, version)], &project, out)
                        .with_context(|| format!("fetching {} {version}", history.name))?;
                }
                Lang::Ts if !dir.join("package.json").exists() => {
                    corpus::npm_unpack(&history.name, version, &root.join("npm-packs"), &dir)?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Manifest and fetch in one go.
pub fn prepare() -> Result<Vec<History>> {
    let histories = manifest()?;
    fetch(&histories)?;
    Ok(histories)
}

/// A replacement of `start..end` (bytes) by `new_text`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub new_text: String,
}

impl Edit {
    pub fn apply(&self, text: &str) -> String {
        format!("{}{}{}", &text[..self.start], self.new_text, &text[self.end..])
    }
}

/// One hunk of a line diff: old lines `old_lines` (bytes `old_start..old_end` of the old file) became `new_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub old_lines: std::ops::Range<usize>,
    pub new_lines: std::ops::Range<usize>,
    pub old_start: usize,
    pub old_end: usize,
    pub new_text: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NextEditCase {
    pub id: String,
    pub lang: Lang,
    #[serde(default)]
    pub split: Split,
    pub package: String,
    pub old_version: String,
    pub new_version: String,
    pub file: String,
    /// The file at the old version: what the editor opens.
    pub before: String,
    /// The user's edit: the first hunk as one range of `before` (its common prefix and suffix left out).
    pub user_edit: Edit,
    /// The other hunks, each as its atomic edits, with byte ranges in the document after the user's edit.
    pub follow_ups: Vec<Vec<Edit>>,
    /// The first old line (0-based) of each follow-up hunk, for people reading the report.
    pub follow_up_lines: Vec<usize>,
}

impl NextEditCase {
    /// The document after the user's edit: what the follow-ups and predictions are placed in.
    pub fn document(&self) -> String {
        self.user_edit.apply(&self.before)
    }

    /// The end of the user's edit in [`Self::document`]: the cursor when Spark is asked.
    pub fn cursor(&self) -> usize {
        self.user_edit.start + self.user_edit.new_text.len()
    }

    /// Where the case's file lives (the old version, on disk).
    pub fn path(&self, history: &History) -> PathBuf {
        history.dir(&self.old_version).join(&self.file)
    }
}

/// The line diff of `old` and `new` as hunks (runs of changed lines between equal ones), Myers' algorithm.
pub fn hunks(old: &str, new: &str) -> Vec<Hunk> {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let old_starts = starts(&old_lines);
    let ops = similar::capture_diff_slices(Algorithm::Myers, &old_lines, &new_lines);
    let mut ranges: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> = Vec::new();
    let mut open = false;
    for op in ops {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            open = false;
            continue;
        }
        match ranges.last_mut() {
            Some(last) if open => {
                last.0.end = old_range.end;
                last.1.end = new_range.end;
            }
            _ => ranges.push((old_range, new_range)),
        }
        open = true;
    }
    ranges
        .into_iter()
        .map(|(old_range, new_range)| Hunk {
            old_start: old_starts[old_range.start],
            old_end: old_starts[old_range.end],
            new_text: new_lines[new_range.clone()].concat(),
            old_lines: old_range,
            new_lines: new_range,
        })
        .collect()
}

/// Byte offset of each piece, and the total at the end.
fn starts(pieces: &[&str]) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len() + 1);
    let mut at = 0;
    out.push(0);
    for piece in pieces {
        at += piece.len();
        out.push(at);
    }
    out
}

/// Words (letters, digits, `_`), runs of blanks, line ends and single other characters: what the atomic edits and
/// the whitespace normalisation are made of.
pub fn tokens(text: &str) -> Vec<&str> {
    #[derive(PartialEq)]
    enum Class {
        Word,
        Blank,
        Other,
    }
    let class = |ch: char| {
        if ch.is_alphanumeric() || ch == '_' {
            Class::Word
        } else if ch.is_whitespace() && ch != '\n' {
            Class::Blank
        } else {
            Class::Other
        }
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut previous: Option<Class> = None;
    for (idx, ch) in text.char_indices() {
        let current = class(ch);
        let joins = previous.as_ref().is_some_and(|previous| *previous == current && current != Class::Other);
        if !joins && idx > start {
            out.push(&text[start..idx]);
            start = idx;
        }
        previous = Some(current);
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// The atomic edits that turn `old` into `new`: a token-level diff, each run of changed tokens one edit, with
/// byte ranges shifted by `base`.
pub fn atomic_edits(old: &str, new: &str, base: usize) -> Vec<Edit> {
    let old_tokens = tokens(old);
    let new_tokens = tokens(new);
    let old_starts = starts(&old_tokens);
    let ops = similar::capture_diff_slices(Algorithm::Myers, &old_tokens, &new_tokens);
    let mut edits: Vec<Edit> = Vec::new();
    let mut open = false;
    for op in ops {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            open = false;
            continue;
        }
        let inserted = new_tokens[new_range].concat();
        match edits.last_mut() {
            Some(last) if open => {
                last.end = base + old_starts[old_range.end];
                last.new_text.push_str(&inserted);
            }
            _ => edits.push(Edit {
                start: base + old_starts[old_range.start],
                end: base + old_starts[old_range.end],
                new_text: inserted,
            }),
        }
        open = true;
    }
    edits
}

/// `old` → `new` as one range edit of `old` without their common prefix and suffix, shifted by `base`.
pub fn trimmed_edit(old: &str, new: &str, base: usize) -> Edit {
    let prefix = common_prefix(old, new);
    let suffix = common_suffix(&old[prefix..], &new[prefix..]);
    Edit { start: base + prefix, end: base + old.len() - suffix, new_text: new[prefix..new.len() - suffix].to_owned() }
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map(|((idx, _), _)| idx).unwrap_or(a.len().min(b.len()))
}

fn common_suffix(a: &str, b: &str) -> usize {
    a.chars().rev().zip(b.chars().rev()).take_while(|(x, y)| x == y).map(|(x, _)| x.len_utf8()).sum()
}

/// The case `before` → `after` makes, if its change is [`MIN_HUNKS`]..=[`MAX_HUNKS`] hunks of at most
/// [`MAX_HUNK_LINES`] old and new lines each.
pub fn case_for_file(history: &History, file: &str, before: &str, after: &str) -> Option<NextEditCase> {
    let hunks = hunks(before, after);
    let small = |hunk: &Hunk| hunk.old_lines.len() <= MAX_HUNK_LINES && hunk.new_lines.len() <= MAX_HUNK_LINES;
    if !(MIN_HUNKS..=MAX_HUNKS).contains(&hunks.len()) || !hunks.iter().all(small) {
        return None;
    }
    let first = &hunks[0];
    let user_edit = trimmed_edit(&before[first.old_start..first.old_end], &first.new_text, first.old_start);
    // The follow-ups all come after the first hunk: they move by what the user's edit added or removed.
    let shift = |offset: usize| offset + user_edit.new_text.len() - (user_edit.end - user_edit.start);
    let follow_ups: Vec<Vec<Edit>> = hunks[1..]
        .iter()
        .map(|hunk| atomic_edits(&before[hunk.old_start..hunk.old_end], &hunk.new_text, shift(hunk.old_start)))
        .collect();
    let case = NextEditCase {
        id: String::new(),
        lang: history.lang,
        split: history.split,
        package: history.name.clone(),
        old_version: history.old.clone(),
        new_version: history.new.clone(),
        file: file.to_owned(),
        before: before.to_owned(),
        user_edit,
        follow_up_lines: hunks[1..].iter().map(|hunk| hunk.old_lines.start).collect(),
        follow_ups,
    };
    // Every follow-up applied to the document gives the new version, or the case is not what it claims.
    (apply_all(&case.document(), case.follow_ups.iter().flatten()) == after).then_some(case)
}

/// `edits` (non-overlapping, any order) applied to `text`.
pub fn apply_all<'a>(text: &str, edits: impl IntoIterator<Item = &'a Edit>) -> String {
    let mut edits: Vec<&Edit> = edits.into_iter().collect();
    edits.sort_by_key(|edit| std::cmp::Reverse((edit.start, edit.end)));
    let mut out = text.to_owned();
    for edit in edits {
        out.replace_range(edit.start..edit.end, &edit.new_text);
    }
    out
}

/// Every case of every history, [`CASES_PER_PACKAGE`] at most per package, in a fixed order drawn with [`SEED`]
/// (so the first n of a package are a fair slice of it).
pub fn cases(histories: &[History]) -> Result<Vec<NextEditCase>> {
    let mut out = Vec::new();
    for history in histories {
        let new_sources = history.sources(&history.new);
        let mut candidates = Vec::new();
        for file in history.sources(&history.old) {
            if !new_sources.contains(&file) {
                continue;
            }
            let read = |version: &str| std::fs::read(history.dir(version).join(&file));
            let (Ok(before), Ok(after)) = (read(&history.old), read(&history.new)) else { continue };
            let (Ok(before), Ok(after)) = (String::from_utf8(before), String::from_utf8(after)) else { continue };
            if let Some(case) = case_for_file(history, &file, &before, &after) {
                candidates.push(case);
            }
        }
        if candidates.is_empty() {
            bail!(
                "{} {} → {}: no file changed by {MIN_HUNKS}..={MAX_HUNKS} small hunks",
                history.name,
                history.old,
                history.new
            );
        }
        let seed = u64::from_str_radix(&fingerprint(&[&history.name]), 16).unwrap_or(0);
        Rng::new(SEED ^ seed).shuffle(&mut candidates);
        candidates.truncate(CASES_PER_PACKAGE);
        for (idx, case) in candidates.iter_mut().enumerate() {
            case.id = super::cases::with_split(
                history.split,
                format!("next-{}-{}-{idx:02}", history.lang.name(), history.slug()),
            );
        }
        out.extend(candidates);
    }
    Ok(out)
}

/// The first `per_package` cases of each package (all with `None`).
pub fn slice(cases: &[NextEditCase], per_package: Option<usize>) -> Vec<NextEditCase> {
    let mut kept: Vec<NextEditCase> = Vec::new();
    for case in cases {
        let so_far = kept.iter().filter(|other| other.package == case.package).count();
        if per_package.is_none_or(|limit| so_far < limit) {
            kept.push(case.clone());
        }
    }
    kept
}

/// How one predicted edit was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Equals an atomic edit of a follow-up hunk.
    Exact,
    /// Gives the same text as an atomic edit of a follow-up hunk once blanks are ignored (the atomic edit is more
    /// than a change of blanks).
    Normalised,
    /// Part of what an atomic edit does, the same way (`count` → `total` where the author wrote `total, 1`):
    /// right, but its atomic edit is not done.
    Partial,
    /// Anything else: inside the user's own hunk, outside every hunk, a different change, a second prediction of
    /// an atomic edit already predicted, a range outside the document.
    Wrong,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Score {
    /// One per prediction, in order.
    pub verdicts: Vec<Verdict>,
    /// Follow-up hunks whose every atomic edit was predicted correctly.
    pub hunks_predicted: usize,
    /// One per prediction: a wrong one that overlaps or touches an atomic edit of a follow-up (the right place, not
    /// the right text), for reading the report; right ones are `false`.
    pub at_follow_up: Vec<bool>,
    /// One per prediction: a wrong one that does in one edit what two or more atomic edits of one follow-up do
    /// together (the same text, blanks aside). Still wrong by the rule (one prediction, one atomic edit); reported
    /// so that a reader can tell a coarser right edit from a wrong one.
    pub joins_atomic_edits: Vec<bool>,
}

/// Scores `predicted` (edits of `document`, the text after the user's edit) against the case's follow-ups.
pub fn score(document: &str, follow_ups: &[Vec<Edit>], predicted: &[Edit]) -> Score {
    let mut claimed: Vec<Vec<bool>> = follow_ups.iter().map(|hunk| vec![false; hunk.len()]).collect();
    // Atomic edits already credited with a partial prediction (a second one is wrong).
    let mut partly = claimed.clone();
    let mut verdicts = Vec::with_capacity(predicted.len());
    for prediction in predicted {
        let valid = prediction.start <= prediction.end
            && prediction.end <= document.len()
            && document.is_char_boundary(prediction.start)
            && document.is_char_boundary(prediction.end);
        let mut verdict = Verdict::Wrong;
        for pass in [Verdict::Exact, Verdict::Normalised] {
            if !valid || verdict != Verdict::Wrong {
                break;
            }
            'hunks: for (hunk_idx, hunk) in follow_ups.iter().enumerate() {
                for (edit_idx, atomic) in hunk.iter().enumerate() {
                    let matches = match pass {
                        Verdict::Exact => prediction == atomic,
                        _ => same_but_blanks(document, prediction, atomic),
                    };
                    if matches && !claimed[hunk_idx][edit_idx] {
                        claimed[hunk_idx][edit_idx] = true;
                        verdict = pass;
                        break 'hunks;
                    }
                }
            }
        }
        // Several atomic edits of one hunk done at once (claimed, as right as one each), or part of one atomic
        // edit (`count` → `total` where the author wrote `total, 1`): what the author did, on the way there.
        if valid && verdict == Verdict::Wrong {
            for (hunk_idx, hunk) in follow_ups.iter().enumerate() {
                let inside: Vec<usize> = (0..hunk.len())
                    .filter(|&i| prediction.start <= hunk[i].start && hunk[i].end <= prediction.end)
                    .collect();
                if joins(document, hunk, prediction) && inside.iter().all(|&i| !claimed[hunk_idx][i]) {
                    inside.iter().for_each(|&i| claimed[hunk_idx][i] = true);
                    verdict = Verdict::Normalised;
                    break;
                }
                // Part of an atomic edit counts once per atomic edit, and only for a whole-token start of it.
                let part = (0..hunk.len())
                    .find(|&i| part_of(&hunk[i], prediction) && !claimed[hunk_idx][i] && !partly[hunk_idx][i]);
                if let Some(i) = part {
                    partly[hunk_idx][i] = true;
                    verdict = Verdict::Partial;
                    break;
                }
            }
        }
        verdicts.push(verdict);
    }
    let hunks_predicted = claimed.iter().filter(|hunk| !hunk.is_empty() && hunk.iter().all(|done| *done)).count();
    let at_follow_up = predicted
        .iter()
        .zip(&verdicts)
        .map(|(prediction, verdict)| {
            *verdict == Verdict::Wrong
                && follow_ups
                    .iter()
                    .flatten()
                    .any(|atomic| prediction.start <= atomic.end && atomic.start <= prediction.end)
        })
        .collect();
    let joins_atomic_edits = predicted
        .iter()
        .zip(&verdicts)
        .map(|(prediction, verdict)| {
            *verdict == Verdict::Wrong && follow_ups.iter().any(|hunk| joins(document, hunk, prediction))
        })
        .collect();
    Score { verdicts, hunks_predicted, at_follow_up, joins_atomic_edits }
}

/// Whether `prediction` and `atomic` give `document` the same tokens, blanks aside, and `atomic` changes more than
/// blanks. Compared over the span both touch, widened to whole words so that a word split or joined counts.
fn same_but_blanks(document: &str, prediction: &Edit, atomic: &Edit) -> bool {
    let (low, high) = widened(document, prediction.start.min(atomic.start), prediction.end.max(atomic.end));
    let window = |edits: &[&Edit]| significant(&apply_in(document, low, high, edits));
    let wanted = window(&[atomic]);
    wanted != window(&[]) && window(&[prediction]) == wanted
}

/// Whether `prediction` does what two or more atomic edits of `hunk` inside its range do together (blanks aside),
/// touching no other atomic edit of the hunk.
fn joins(document: &str, hunk: &[Edit], prediction: &Edit) -> bool {
    let inside: Vec<&Edit> =
        hunk.iter().filter(|atomic| prediction.start <= atomic.start && atomic.end <= prediction.end).collect();
    let straddles = hunk
        .iter()
        .any(|atomic| !inside.contains(&atomic) && atomic.start < prediction.end && prediction.start < atomic.end);
    if inside.len() < 2 || straddles {
        return false;
    }
    let (low, high) = widened(document, prediction.start, prediction.end);
    significant(&apply_in(document, low, high, &inside)) == significant(&apply_in(document, low, high, &[prediction]))
}

/// Whether `prediction` does part of what `atomic` does: the same text replaced by whole tokens at the start of
/// what the author put there (`count` → `total` where the author wrote `total, 1`; not `t`, a token cut short).
fn part_of(atomic: &Edit, prediction: &Edit) -> bool {
    let (wanted, given) = (tokens(&atomic.new_text), tokens(&prediction.new_text));
    (prediction.start, prediction.end) == (atomic.start, atomic.end)
        && !prediction.new_text.trim().is_empty()
        && given.len() < wanted.len()
        && wanted.starts_with(&given)
}

/// `low..high` widened to whole words.
fn widened(document: &str, mut low: usize, mut high: usize) -> (usize, usize) {
    let word = |ch: char| ch.is_alphanumeric() || ch == '_';
    while let Some(ch) = document[..low].chars().next_back().filter(|ch| word(*ch)) {
        low -= ch.len_utf8();
    }
    while let Some(ch) = document[high..].chars().next().filter(|ch| word(*ch)) {
        high += ch.len_utf8();
    }
    (low, high)
}

/// `document[low..high]` with `edits` (inside that span, non-overlapping) applied.
fn apply_in(document: &str, low: usize, high: usize, edits: &[&Edit]) -> String {
    let shifted: Vec<Edit> = edits
        .iter()
        .map(|edit| Edit { start: edit.start - low, end: edit.end - low, new_text: edit.new_text.clone() })
        .collect();
    apply_all(&document[low..high], &shifted)
}

/// The tokens of `text` without blanks and line ends.
fn significant(text: &str) -> Vec<String> {
    tokens(text).into_iter().filter(|token| !token.trim().is_empty()).map(str::to_owned).collect()
}

/// The cases' file under `target/eval/history/` for people reading a run (rewritten each run).
pub fn write_cases(cases: &[NextEditCase]) -> Result<PathBuf> {
    let path = eval_dir().join("history/cases.json");
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    let json =
        serde_json::json!({"generator": GENERATOR, "manifest": fingerprint(&[&manifest_text()?]), "cases": cases});
    std::fs::write(&path, serde_json::to_string_pretty(&json)?)?;
    Ok(path)
}
