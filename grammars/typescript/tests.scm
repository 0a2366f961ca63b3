; Jest, Vitest and Mocha style suites and tests. A call only counts when one of
; its arguments is a function, so `test(x)` or `regex.test(s)` do not match.

; describe(...), describe.only(...), describe.skip(...).
((call_expression
   function: [(identifier) @_fn
              (member_expression object: (identifier) @_fn)]
   arguments: (arguments [(arrow_function) (function_expression)])) @test_module
 (#any-of? @_fn "describe" "suite" "fdescribe" "xdescribe"))

; describe.each(table)(name, fn).
((call_expression
   function: (call_expression
     function: (member_expression object: (identifier) @_fn))
   arguments: (arguments [(arrow_function) (function_expression)])) @test_module
 (#any-of? @_fn "describe" "suite"))

; it(...), test(...), it.only(...), test.skip(...), test.concurrent(...).
((call_expression
   function: [(identifier) @_fn
              (member_expression object: (identifier) @_fn)]
   arguments: (arguments [(arrow_function) (function_expression)])) @test
 (#any-of? @_fn "it" "test" "fit" "xit" "xtest"))

; it.each(table)(name, fn), test.each(table)(name, fn).
((call_expression
   function: (call_expression
     function: (member_expression object: (identifier) @_fn))
   arguments: (arguments [(arrow_function) (function_expression)])) @test
 (#any-of? @_fn "it" "test"))
