//! Prompt layout, a pure function: stable parts first (header: file name, imports, other files' chunks), the
//! local window last, so that typing invalidates as few cached tokens as possible.

use crate::model_info::FimTemplate;

/// The text around the cursor that a completion prompt is built from.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    /// Context that changes rarely: the file's path comment, its imports, chunks of other files.
    pub header: &'a str,
    /// The document text before the cursor, in a window chosen by the caller.
    pub prefix: &'a str,
    /// The document text after the cursor, in a window chosen by the caller.
    pub suffix: &'a str,
}

/// Renders the prompt. With a FIM template the markers are special tokens (tokenize with special parsing on);
/// without one the model continues the prefix and the suffix is used only to stop and trim.
///
/// Prefix-suffix-middle layouts put the typed part of the cursor's line after the middle marker, as the start of
/// the answer (llama.cpp's `/infill` does the same): everything before it — header, the prefix up to the start of
/// the line, the suffix — stays put while the user types on that line, so each keystroke appends a few tokens
/// to the KV cache instead of invalidating the whole suffix behind the typed text.
pub fn render(fim: Option<&FimTemplate>, input: PromptInput<'_>) -> String {
    let PromptInput { header, prefix, suffix } = input;
    match fim {
        None => format!("{header}{prefix}"),
        Some(template) if template.suffix_first => {
            format!("{}{suffix}{}{header}{prefix}", template.suffix_marker, template.prefix_marker)
        }
        Some(template) => {
            let (stable, typed) = split_at_line_start(prefix);
            format!(
                "{}{header}{stable}{}{suffix}{}{typed}",
                template.prefix_marker, template.suffix_marker, template.middle_marker
            )
        }
    }
}

/// A fix's prompt (Spark fix's region edit): the document laid out as ghost text lays it out for a cursor at the
/// start of the editable region — `header`, then `before` (the window up to the region's first line) — with
/// `note` (the compiler's message and the broken lines, as comments ending in a line break) after it, `after`
/// (the text behind the region) as the suffix, and the region itself as the middle the model writes. Everything
/// up to the note is the prompt ghost text had at that line, so the KV cache of the document's slot serves it;
/// the note, the suffix and the answer are the only new tokens.
pub fn render_fix(fim: &FimTemplate, header: &str, before: &str, note: &str, after: &str) -> String {
    let prefix = format!("{before}{note}");
    render(Some(fim), PromptInput { header, prefix: &prefix, suffix: after })
}

/// The prefix up to and including its last line break, and the text typed on the cursor's line after it.
pub fn split_at_line_start(prefix: &str) -> (&str, &str) {
    let at = prefix.rfind('\n').map_or(0, |newline| newline + 1);
    prefix.split_at(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_info::FimFamily;
    use expect_test::{expect, Expect};

    fn check(family: Option<FimFamily>, expect: Expect) {
        let template = family.map(|family| family.template(None));
        let input = PromptInput { header: "// a.rs\n", prefix: "fn main() {\n    let x", suffix: ";\n}\n" };
        let rendered = render(template.as_ref(), input);
        let stops = template.map(|template| template.stop_strings.join(" ")).unwrap_or_default();
        expect.assert_eq(&format!("{rendered}\n-- stops: {stops}"));
    }

    #[test]
    fn prefix_only_for_models_without_fim() {
        check(
            None,
            expect![[r#"
            // a.rs
            fn main() {
                let x
            -- stops: "#]],
        );
    }

    #[test]
    fn qwen_coder() {
        check(
            Some(FimFamily::QwenCoder),
            expect![[r#"
                <|fim_prefix|>// a.rs
                fn main() {
                <|fim_suffix|>;
                }
                <|fim_middle|>    let x
                -- stops: <|endoftext|> <|fim_pad|> <|repo_name|> <|file_sep|> <|im_end|>"#]],
        );
    }

    #[test]
    fn starcoder2() {
        check(
            Some(FimFamily::StarCoder2),
            expect![[r#"
                <fim_prefix>// a.rs
                fn main() {
                <fim_suffix>;
                }
                <fim_middle>    let x
                -- stops: <|endoftext|> <fim_pad> <file_sep>"#]],
        );
    }

    #[test]
    fn codegemma() {
        check(
            Some(FimFamily::CodeGemma),
            expect![[r#"
                <|fim_prefix|>// a.rs
                fn main() {
                <|fim_suffix|>;
                }
                <|fim_middle|>    let x
                -- stops: <|file_separator|> <eos> <end_of_turn>"#]],
        );
    }

    #[test]
    fn deepseek_coder() {
        check(
            Some(FimFamily::DeepSeekCoder),
            expect![[r#"
                <｜fim▁begin｜>// a.rs
                fn main() {
                <｜fim▁hole｜>;
                }
                <｜fim▁end｜>    let x
                -- stops: <｜end▁of▁sentence｜> <|EOT|>"#]],
        );
    }

    #[test]
    fn codestral_is_suffix_first() {
        check(
            Some(FimFamily::Codestral),
            expect![[r#"
            [SUFFIX];
            }
            [PREFIX]// a.rs
            fn main() {
                let x
            -- stops: </s>"#]],
        );
    }

    #[test]
    fn codellama() {
        check(
            Some(FimFamily::CodeLlama),
            expect![[r#"
                <PRE> // a.rs
                fn main() {
                 <SUF>;
                }
                 <MID>    let x
                -- stops: <EOT> </s>"#]],
        );
    }

    #[test]
    fn typing_on_a_line_only_appends_to_a_fim_prompt() {
        // Each keystroke on the cursor's line must leave the rendered prompt before it untouched, so the KV cache
        // keeps all of it (header, prefix lines, suffix) and only the typed characters are decoded.
        let families = [FimFamily::QwenCoder, FimFamily::StarCoder2, FimFamily::CodeGemma, FimFamily::DeepSeekCoder];
        let line = "    let total = items.len();";
        for family in families {
            let template = family.template(None);
            let mut previous = String::new();
            for typed in 0..=line.len() {
                let prefix = format!("fn main() {{\n{}", &line[..typed]);
                let rendered =
                    render(Some(&template), PromptInput { header: "// a.rs\n", prefix: &prefix, suffix: "\n}\n" });
                assert!(rendered.starts_with(&previous), "{family:?} at {typed}: {rendered:?} after {previous:?}");
                previous = rendered;
            }
        }
    }

    #[test]
    fn a_fix_prompt_keeps_the_ghost_prompt_of_the_region_start_as_its_prefix() {
        let template = FimFamily::QwenCoder.template(None);
        let (header, before) = ("// a.rs\n", "fn main() {\n");
        let ghost = render(Some(&template), PromptInput { header, prefix: before, suffix: "    let x = 1\n}\n" });
        let fix = render_fix(&template, header, before, "    // error: expected `;`\n", "\n}\n");
        let shared = ghost.find(&template.suffix_marker).expect("a suffix marker");
        assert_eq!(ghost[..shared], fix[..shared]);
        expect![[r#"
            <|fim_prefix|>// a.rs
            fn main() {
                // error: expected `;`
            <|fim_suffix|>
            }
            <|fim_middle|>"#]]
        .assert_eq(&fix);
    }

    #[test]
    fn split_at_line_start_keeps_the_line_break_in_the_stable_part() {
        assert_eq!(split_at_line_start("a\n  b"), ("a\n", "  b"));
        assert_eq!(split_at_line_start("a\n"), ("a\n", ""));
        assert_eq!(split_at_line_start("abc"), ("", "abc"));
    }

    #[test]
    fn family_detection() {
        assert_eq!(FimFamily::detect("qwen2", "<|fim_prefix|>"), FimFamily::QwenCoder);
        assert_eq!(FimFamily::detect("gemma", "<|fim_prefix|>"), FimFamily::CodeGemma);
        assert_eq!(FimFamily::detect("starcoder2", "<fim_prefix>"), FimFamily::StarCoder2);
        assert_eq!(FimFamily::detect("llama", "<｜fim▁begin｜>"), FimFamily::DeepSeekCoder);
        assert_eq!(FimFamily::detect("llama", "[PREFIX]"), FimFamily::Codestral);
        assert_eq!(FimFamily::detect("llama", "▁<PRE>"), FimFamily::CodeLlama);
        assert_eq!(FimFamily::detect("llama", "<pre>"), FimFamily::Generic);
    }
}
