; Whole functions with a body and their names. For a function assigned to a
; const, let or var, @function is the whole declaration statement.
(function_declaration
  name: (identifier) @name) @function

(generator_function_declaration
  name: (identifier) @name) @function

(method_definition
  name: (_) @name) @function

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @function

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @function

; Class fields holding a function: `onClick = () => {}`.
(public_field_definition
  name: (_) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @function
