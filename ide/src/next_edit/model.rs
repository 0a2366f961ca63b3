//! The model's next edits: the lines after the user's edit, rewritten by the model given that edit, and the
//! changed lines taken as predictions. Only a change that carries the user's own change on is kept: it must put
//! in a name the user's edit put in, or take out one it took out. Off by default (`nextEdit.model`): the
//! evaluation decides (docs/eval.md).

use std::ops::Range;

use spark_grammars::Lang;

use super::predict::{Predicted, Source};
use crate::edit_history::Edit;
use crate::route::TaskPrompt;
use crate::tasks::{fence_tag, language_name};

/// Lines after the edit's own line that the model may rewrite.
pub const WINDOW_LINES_AFTER: usize = 6;
/// A rewrite that changes more lines than this is not a follow-on edit but a different program.
const MAX_CHANGED_LINES: usize = 3;

/// The byte range of the lines the model rewrites: the edit's line and the ones after it (without the last
/// line break).
pub fn window(text: &str, edit: &Edit) -> Range<usize> {
    let start = text[..edit.start].rfind('\n').map_or(0, |at| at + 1);
    let mut end = edit.end();
    for _ in 0..=WINDOW_LINES_AFTER {
        match text[end..].find('\n') {
            Some(at) if end + at + 1 < text.len() => end = end + at + 1,
            _ => {
                end = text.len();
                break;
            }
        }
    }
    let end = if end < text.len() || text.ends_with('\n') { end.saturating_sub(1).max(start) } else { end };
    start..end
}

/// The whole lines an edit touches, before and after it.
fn edited_lines(text: &str, edit: &Edit) -> (String, String) {
    let start = text[..edit.start].rfind('\n').map_or(0, |at| at + 1);
    let end = text[edit.end()..].find('\n').map_or(text.len(), |at| edit.end() + at);
    let (head, tail) = (&text[start..edit.start], &text[edit.end()..end]);
    (format!("{head}{}{tail}", edit.old), format!("{head}{}{tail}", edit.new))
}

pub fn prompt(lang: Lang, text: &str, edit: &Edit, window: Range<usize>) -> TaskPrompt {
    let language = language_name(lang);
    let tag = fence_tag(lang);
    let (before, after) = edited_lines(text, edit);
    let diff: String =
        before.lines().map(|line| format!("-{line}\n")).chain(after.lines().map(|line| format!("+{line}\n"))).collect();
    let code = &text[window];
    TaskPrompt {
        system: format!(
            "You carry a programmer's edit through {language} code. Given the edit they just made and the code \
             that follows it, rewrite that code making only the changes the edit calls for (the other uses of a \
             renamed name, the calls of a changed function, the lines like the edited one). Copy every other line \
             exactly. If nothing follows from the edit, repeat the code unchanged. Answer with the code only."
        ),
        instruction: format!(
            "The edit:\n```diff\n{diff}```\n\nThe code, edit included:\n```{tag}\n{code}\n```\n\nRewrite the code."
        ),
        few_shot: format!(
            "// An edit, then the code after it rewritten with the changes that follow from the edit.\n\n\
             // Edit:\n-    let width = 3;\n+    let w = 3;\n// Code:\n    let w = 3;\n    area(width, width)\n\
             // Rewritten:\n    let w = 3;\n    area(w, w)\n\n\
             // Edit:\n{diff}// Code:\n{code}\n// Rewritten:\n"
        ),
        few_shot_stops: vec!["\n\n".to_owned(), "\n// ".to_owned()],
        chat_prefill: format!("```{tag}\n"),
        chat_stops: vec!["```".to_owned()],
    }
}

fn word_set(text: &str) -> Vec<&str> {
    let mut words: Vec<&str> =
        text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).filter(|word| !word.is_empty()).collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// The names the user's edit put in and took out.
fn edit_words(edit: &Edit) -> (Vec<&str>, Vec<&str>) {
    let (old, new) = (word_set(&edit.old), word_set(&edit.new));
    let added = new.iter().filter(|word| !old.contains(word)).copied().collect();
    let removed = old.iter().filter(|word| !new.contains(word)).copied().collect();
    (added, removed)
}

/// The model's rewrite of `window` as predictions: each changed line narrowed to what changed in it, kept only
/// when it puts in a name the user put in or takes out one the user took out. A rewrite that changes more than a
/// few lines, or adds or drops lines, gives nothing.
pub fn predictions(text: &str, window: Range<usize>, rewritten: &str, edit: &Edit) -> Vec<Predicted> {
    let old_lines: Vec<&str> = text[window.clone()].split('\n').collect();
    let new_lines: Vec<&str> = rewritten.trim_end_matches('\n').split('\n').collect();
    if old_lines.len() > 64 || new_lines.len() > 64 {
        return Vec::new();
    }
    let pairs = changed_lines(&old_lines, &new_lines);
    if pairs.is_empty() || pairs.len() > MAX_CHANGED_LINES {
        tracing::debug!(
            old_lines = old_lines.len(),
            new_lines = new_lines.len(),
            changed = pairs.len(),
            "next edit: the model's rewrite gives nothing (unchanged, lines added or dropped, or too many changed)"
        );
        return Vec::new();
    }
    let (added, removed) = edit_words(edit);
    let mut line_starts = Vec::with_capacity(old_lines.len());
    let mut at = window.start;
    for line in &old_lines {
        line_starts.push(at);
        at += line.len() + 1;
    }
    let label_of = |change: &str| format!("model: `{}`", change.trim());
    let mut predicted = Vec::new();
    for (old_index, new_line) in pairs {
        let start = line_starts[old_index];
        let (old_line, new_words) = (word_set(old_lines[old_index]), word_set(new_line));
        let carries = new_words.iter().any(|word| added.contains(word) && !old_line.contains(word))
            || old_line.iter().any(|word| removed.contains(word) && !new_words.contains(word));
        let (range, insert) = crate::tasks::narrow_rewrite(text, start..start + old_lines[old_index].len(), new_line);
        let (range, insert) = whole_words(text, range, &insert);
        if !carries {
            tracing::debug!(line = old_index, "next edit: a line the model changed does not carry the user's names");
        }
        if carries {
            predicted.push(Predicted {
                start: range.start,
                end: range.end,
                label: label_of(&insert),
                new_text: insert,
                source: Source::Model,
            });
        }
    }
    predicted
}

/// A replacement widened to whole words on both sides (the same text added to what it removes and inserts), so
/// that a rename reads `width` → `w`, not `idth` → ``.
fn whole_words(text: &str, range: Range<usize>, insert: &str) -> (Range<usize>, String) {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let head = text[..range.start].chars().rev().take_while(|&c| is_word(c)).map(char::len_utf8).sum::<usize>();
    let tail = text[range.end..].chars().take_while(|&c| is_word(c)).map(char::len_utf8).sum::<usize>();
    let (start, end) = (range.start - head, range.end + tail);
    (start..end, format!("{}{insert}{}", &text[start..range.start], &text[range.end..end]))
}

/// The lines of `old` replaced one for one in `new` (index in `old`, new text); a rewrite that adds or drops
/// lines gives nothing (a small model that does so has mostly lost its place).
fn changed_lines<'n>(old: &[&str], new: &[&'n str]) -> Vec<(usize, &'n str)> {
    if old.len() != new.len() {
        return Vec::new();
    }
    old.iter()
        .zip(new)
        .enumerate()
        .filter(|(_, (a, b))| a.trim_end() != b.trim_end())
        .map(|(index, (_, b))| (index, *b))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn edit(text: &str, old: &str, new: &str) -> (String, Edit) {
        let start = text.find(old).unwrap();
        let after = format!("{}{new}{}", &text[..start], &text[start + old.len()..]);
        (after, Edit { start, old: old.into(), new: new.into(), at: Instant::now() })
    }

    #[test]
    fn the_window_is_the_edited_line_and_the_lines_after_it() {
        let text = (0..12).map(|i| format!("line {i}\n")).collect::<String>();
        let (text, edit) = edit(&text, "line 2", "line two");
        assert_eq!(&text[window(&text, &edit)], "line two\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8");
        let short = "a\nb";
        let (short, edit) = super::tests::edit(short, "a", "x");
        assert_eq!(&short[window(&short, &edit)], "x\nb");
    }

    #[test]
    fn only_changes_that_carry_the_users_names_on_are_kept() {
        let before = "fn f(width: u32) -> u32 {\n    let a = width * 2;\n    let b = 7;\n    a + width\n}\n";
        let (text, edit) = edit(before, "width: u32", "w: u32");
        let window = window(&text, &edit);
        let rewritten = "fn f(w: u32) -> u32 {\n    let a = w * 2;\n    let b = 8;\n    a + w\n}".to_owned();
        let found = predictions(&text, window, &rewritten, &edit);
        let mut applied = text.clone();
        for predicted in found.iter().rev() {
            applied.replace_range(predicted.start..predicted.end, &predicted.new_text);
        }
        // `b = 8` has nothing to do with the rename: not kept.
        assert_eq!(applied, "fn f(w: u32) -> u32 {\n    let a = w * 2;\n    let b = 7;\n    a + w\n}\n");
        assert!(found.iter().all(|predicted| predicted.source == Source::Model));
    }

    #[test]
    fn a_rewrite_that_loses_its_place_gives_nothing() {
        let (text, edit) = edit("let x = 1;\nuse_x(x);\nmore(x);\n", "x = 1", "y = 1");
        let window = window(&text, &edit);
        assert!(predictions(&text, window.clone(), "let y = 1;\nuse_x(y);", &edit).is_empty());
        assert!(predictions(&text, window, "let y = 1;\nuse_x(x);\nmore(x);", &edit).is_empty());
    }
}
