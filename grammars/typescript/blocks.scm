; Brace-delimited bodies.
(statement_block) @block
(class_body) @block
(interface_body) @block
(object_type) @block
(enum_body) @block
(switch_body) @block
(object) @block
(object_pattern) @block
(named_imports) @block
(export_clause) @block
