; Line and block comments, JSDoc included; in TSX also `{/* ... */}` inside JSX.
(comment) @comment
