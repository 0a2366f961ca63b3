; import statements, `import x = require("y")` included.
(import_statement) @import

; CommonJS: const x = require("y"); let and var too.
((lexical_declaration
   (variable_declarator
     value: (call_expression
       function: (identifier) @_require))) @import
 (#eq? @_require "require"))

((variable_declaration
   (variable_declarator
     value: (call_expression
       function: (identifier) @_require))) @import
 (#eq? @_require "require"))
