; A module is a test module when one of the attributes right before it is
; #[cfg(test)]; other attributes and comments may sit in between.
((attribute_item
   (attribute
     (identifier) @_cfg
     arguments: (token_tree (identifier) @_test)))
 .
 [(attribute_item) (line_comment) (block_comment)]*
 .
 (mod_item) @test_module
 (#eq? @_cfg "cfg")
 (#eq? @_test "test"))

; Or when its body starts with #![cfg(test)].
((mod_item
   body: (declaration_list
     .
     (inner_attribute_item
       (attribute
         (identifier) @_cfg
         arguments: (token_tree (identifier) @_test))))) @test_module
 (#eq? @_cfg "cfg")
 (#eq? @_test "test"))

; A test is a function with #[test] or a path ending in `test`
; (#[tokio::test], #[async_std::test], #[sqlx::test]).
((attribute_item
   (attribute
     [(identifier) @_attr
      (scoped_identifier name: (identifier) @_attr)]))
 .
 [(attribute_item) (line_comment) (block_comment)]*
 .
 (function_item) @test
 (#eq? @_attr "test"))
