//! What the engine knows about a loaded model: identity, size and its fill-in-the-middle template.

use std::path::PathBuf;

/// A model as loaded, for `spark/status`, `spark-lsp doctor` and prompt layout.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub path: PathBuf,
    pub size_bytes: u64,
    pub architecture: String,
    pub name: String,
    pub n_params: u64,
    pub n_vocab: usize,
    pub n_ctx_train: u32,
    pub n_ctx: u32,
    pub threads: usize,
    /// The fill-in template, when the vocabulary has FIM tokens; `None` means prefix-only prompting.
    pub fim: Option<FimTemplate>,
    pub has_chat_template: bool,
    /// For instruction-tuned models (the GGUF carries a chat template): the template rendered around one user
    /// message, so task prompts can be framed as the model was trained. `None` for base models.
    pub chat: Option<ChatFrame>,
    pub load_ms: u64,
    /// What the memory check estimated before loading (`None` for the scripted model).
    pub memory: Option<crate::memory::MemoryEstimate>,
}

/// The text a chat template puts before and after a user message, up to where the assistant's answer begins;
/// and, when the template renders a system message, the text around a system message followed by a user one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatFrame {
    pub before_user: String,
    pub after_user: String,
    /// `(before the system message, between it and the user message)`; the user message is then followed by
    /// `after_user`. `None` when the template has no system turn (the system text then opens the user turn).
    pub system: Option<(String, String)>,
}

impl ChatFrame {
    /// Splits a template rendered around `marker` into the frame; `None` when the marker is not there verbatim.
    pub fn from_rendered(rendered: &str, marker: &str) -> Option<ChatFrame> {
        let at = rendered.find(marker)?;
        Some(ChatFrame {
            before_user: rendered[..at].to_owned(),
            after_user: rendered[at + marker.len()..].to_owned(),
            system: None,
        })
    }

    /// Adds the system turn from a template rendered around a system message `system_marker` followed by a
    /// user message `user_marker`; kept as it is when the markers are not both there, in that order, with the
    /// same text after the user message.
    pub fn with_system(mut self, rendered: &str, system_marker: &str, user_marker: &str) -> ChatFrame {
        let Some(system_at) = rendered.find(system_marker) else { return self };
        let after_system = system_at + system_marker.len();
        let Some(user_at) = rendered[after_system..].find(user_marker).map(|at| after_system + at) else {
            return self;
        };
        if rendered[user_at + user_marker.len()..] != self.after_user {
            return self;
        }
        self.system = Some((rendered[..system_at].to_owned(), rendered[after_system..user_at].to_owned()));
        self
    }

    /// A prompt with `message` as the user's turn, ending where the assistant's answer starts.
    pub fn prompt(&self, message: &str) -> String {
        format!("{}{message}{}", self.before_user, self.after_user)
    }

    /// A prompt with a system message and a user message, ending where the assistant's answer starts.
    pub fn prompt_with_system(&self, system: &str, message: &str) -> String {
        match &self.system {
            Some((before_system, between)) => format!("{before_system}{system}{between}{message}{}", self.after_user),
            None => self.prompt(&format!("{system}\n\n{message}")),
        }
    }
}

/// Model families whose FIM layout and stop tokens differ.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_frame_from_a_rendered_template() {
        let rendered = "<start_of_turn>user\nMARK<end_of_turn>\n<start_of_turn>model\n";
        let frame = ChatFrame::from_rendered(rendered, "MARK").unwrap();
        assert_eq!(frame.prompt("fix it"), "<start_of_turn>user\nfix it<end_of_turn>\n<start_of_turn>model\n");
        assert_eq!(ChatFrame::from_rendered("no marker here", "MARK"), None);
        assert_eq!(frame.prompt_with_system("be brief", "fix it"), frame.prompt("be brief\n\nfix it"));
    }

    #[test]
    fn chat_frame_with_a_system_turn() {
        let user_only = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n";
        let both = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n";
        let frame = ChatFrame::from_rendered(user_only, "U").unwrap().with_system(both, "S", "U");
        expect_test::expect![[r#"
            <|im_start|>system
            Only code.<|im_end|>
            <|im_start|>user
            fix it<|im_end|>
            <|im_start|>assistant
        "#]]
        .assert_eq(&frame.prompt_with_system("Only code.", "fix it"));
        // A template that renders the system text elsewhere than expected keeps the user-only frame.
        let odd = ChatFrame::from_rendered(user_only, "U").unwrap().with_system("U then S", "S", "U");
        assert_eq!(odd.system, None);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FimFamily {
    QwenCoder,
    StarCoder2,
    CodeGemma,
    DeepSeekCoder,
    Codestral,
    CodeLlama,
    /// The vocabulary has FIM tokens but the family is not one we know: prefix-suffix-middle with its tokens.
    Generic,
}

/// How a fill-in prompt is rendered for one model: the marker strings (special tokens, parsed as such) and
/// whether the suffix goes first (suffix-first layouts keep the prefix at the end, so typing invalidates less).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FimTemplate {
    pub family: FimFamily,
    pub prefix_marker: String,
    pub suffix_marker: String,
    pub middle_marker: String,
    pub suffix_first: bool,
    /// Strings that end a fill-in when the model emits them as text.
    pub stop_strings: Vec<String>,
}

impl FimFamily {
    /// Picks the family from the architecture and the text of the vocabulary's FIM prefix token.
    pub fn detect(architecture: &str, prefix_token_text: &str) -> FimFamily {
        let arch = architecture.to_ascii_lowercase();
        match prefix_token_text {
            "<|fim_prefix|>" if arch.starts_with("qwen") => FimFamily::QwenCoder,
            "<|fim_prefix|>" if arch.starts_with("gemma") => FimFamily::CodeGemma,
            "<fim_prefix>" => FimFamily::StarCoder2,
            "<｜fim▁begin｜>" => FimFamily::DeepSeekCoder,
            "[PREFIX]" => FimFamily::Codestral,
            "▁<PRE>" | "<PRE>" => FimFamily::CodeLlama,
            "<|fim_prefix|>" => FimFamily::QwenCoder,
            _ => FimFamily::Generic,
        }
    }

    /// The template of a known family; `Generic` takes the vocabulary's own marker texts.
    pub fn template(self, vocab_markers: Option<(&str, &str, &str)>) -> FimTemplate {
        let owned = |pre: &str, suf: &str, mid: &str, suffix_first: bool, stops: &[&str]| FimTemplate {
            family: self,
            prefix_marker: pre.to_owned(),
            suffix_marker: suf.to_owned(),
            middle_marker: mid.to_owned(),
            suffix_first,
            stop_strings: stops.iter().map(|stop| (*stop).to_owned()).collect(),
        };
        match self {
            FimFamily::QwenCoder => owned(
                "<|fim_prefix|>",
                "<|fim_suffix|>",
                "<|fim_middle|>",
                false,
                &["<|endoftext|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<|im_end|>"],
            ),
            FimFamily::StarCoder2 => owned(
                "<fim_prefix>",
                "<fim_suffix>",
                "<fim_middle>",
                false,
                &["<|endoftext|>", "<fim_pad>", "<file_sep>"],
            ),
            FimFamily::CodeGemma => owned(
                "<|fim_prefix|>",
                "<|fim_suffix|>",
                "<|fim_middle|>",
                false,
                &["<|file_separator|>", "<eos>", "<end_of_turn>"],
            ),
            FimFamily::DeepSeekCoder => owned(
                "<｜fim▁begin｜>",
                "<｜fim▁hole｜>",
                "<｜fim▁end｜>",
                false,
                &["<｜end▁of▁sentence｜>", "<|EOT|>"],
            ),
            FimFamily::Codestral => owned("[PREFIX]", "[SUFFIX]", "[MIDDLE]", true, &["</s>"]),
            FimFamily::CodeLlama => owned("<PRE> ", " <SUF>", " <MID>", false, &["<EOT>", "</s>"]),
            FimFamily::Generic => {
                let (pre, suf, mid) = vocab_markers.unwrap_or(("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"));
                owned(pre, suf, mid, false, &[])
            }
        }
    }
}
