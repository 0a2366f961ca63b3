; Nodes a rewrite may replace. The engine takes the smallest @item that encloses
; the cursor, so statements sit next to the declarations that contain them.
; These patterns are shared by the TypeScript and TSX grammars.

; Statements.
(lexical_declaration) @item
(variable_declaration) @item
(expression_statement) @item
(return_statement) @item
(throw_statement) @item
(if_statement) @item
(for_statement) @item
(for_in_statement) @item
(while_statement) @item
(do_statement) @item
(try_statement) @item
(switch_statement) @item
(switch_case) @item
(switch_default) @item
(break_statement) @item
(continue_statement) @item
(labeled_statement) @item

; Fields, members and properties.
(public_field_definition) @item
(property_signature) @item
(method_signature) @item
(abstract_method_signature) @item
(index_signature) @item
(pair) @item

; Declarations.
(function_declaration) @item
(generator_function_declaration) @item
(function_signature) @item
(method_definition) @item
(class_declaration) @item
(abstract_class_declaration) @item
(interface_declaration) @item
(type_alias_declaration) @item
(enum_declaration) @item
(internal_module) @item
(module) @item
(ambient_declaration) @item
(export_statement) @item
(import_statement) @item
