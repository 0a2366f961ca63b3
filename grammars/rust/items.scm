; Nodes a rewrite may replace. The engine takes the smallest @item that encloses
; the cursor, so statements sit next to the items that contain them.
; Attributes and doc comments are siblings of the item in this grammar, so they
; are not part of the captured range.

; Statements.
(let_declaration) @item
(expression_statement) @item
(return_expression) @item
(match_arm) @item
(macro_invocation) @item

; The tail expression of a block is a statement too, even without a semicolon.
(block (_expression) @item .)

; Fields and variants.
(field_declaration) @item
(enum_variant) @item

; Items.
(function_item) @item
(function_signature_item) @item
(impl_item) @item
(struct_item) @item
(union_item) @item
(enum_item) @item
(trait_item) @item
(mod_item) @item
(foreign_mod_item) @item
(type_item) @item
(associated_type) @item
(const_item) @item
(static_item) @item
(macro_definition) @item
(use_declaration) @item
(extern_crate_declaration) @item
