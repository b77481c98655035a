; A call and its parts. The scan runs this on the statement around each candidate name, never on a whole file.
(call
  function: [(identifier) (attribute)] @callee
  arguments: (argument_list) @arguments) @call
