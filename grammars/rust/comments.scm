; Line and block comments, doc comments included.
(line_comment) @comment
(block_comment) @comment
