; Brace-delimited bodies.
(block) @block
(declaration_list) @block
(field_declaration_list) @block
(enum_variant_list) @block
(match_block) @block
(field_initializer_list) @block
(use_list) @block

; Macro bodies are token trees; only the brace-delimited ones are blocks.
((token_tree) @block
 (#match? @block "^\\{"))
