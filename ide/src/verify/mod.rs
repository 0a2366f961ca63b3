//! Verification in one place: every check an edit passes before anyone sees it. `insertion` judges ghost text
//! (inserted at the cursor it adds no syntax error to the lines it touches); `edit` judges task edits (the
//! rewrite parses, stays inside its node, tests have the shape of tests, the edit applies to the version it was
//! made for); `regex` judges patterns (they compile, match their examples and generalise beyond them). Every
//! parse goes through [`crate::parse`], with its one time limit.

pub mod edit;
pub mod generated_tests;
mod insertion;
pub mod regex;

pub use edit::*;
pub use generated_tests::*;
pub use insertion::check_insertion;
pub use regex::*;
