; `with` blocks whose context manager is a call (`with torch.device("meta"):`, `with enable_wrap(...):`,
; `with init_empty_weights():`), and the assignments of call results directly in a block's body.
(with_statement
  (with_clause (with_item value: (call function: (_) @manager arguments: (_) @arguments)))
  body: (block) @body) @with

(block
  (expression_statement
    (assignment left: (_) @target right: (call) @value)))
