; Whole functions with a body: free functions, methods and associated functions.
; Signatures without a body (in traits) are not functions here.
(function_item
  name: (identifier) @name) @function
