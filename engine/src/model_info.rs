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

/// The text a chat template puts before and after a user message, up to where the assistant's answer begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatFrame {
    pub before_user: String,
    pub after_user: String,
}

impl ChatFrame {
    /// Splits a template rendered around `marker` into the frame; `None` when the marker is not there verbatim.
    pub fn from_rendered(rendered: &str, marker: &str) -> Option<ChatFrame> {
        let at = rendered.find(marker)?;
        Some(ChatFrame { before_user: rendered[..at].to_owned(), after_user: rendered[at + marker.len()..].to_owned() })
    }

    /// A prompt with `message` as the user's turn, ending where the assistant's answer starts.
    pub fn prompt(&self, message: &str) -> String {
        format!("{}{message}{}", self.before_user, self.after_user)
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
