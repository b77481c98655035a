; The constructs that give a call its context: loops (and the comprehension form), conditions, functions,
; classes and `with` blocks. Matched against the ancestors of a call.
(for_statement left: (_) @loop.target right: (_) @loop.iterable) @loop
(for_in_clause left: (_) @loop.target right: (_) @loop.iterable) @loop
(if_statement condition: (_) @if.condition) @if
(elif_clause condition: (_) @elif.condition) @elif
(function_definition name: (identifier) @function.name parameters: (parameters) @function.parameters) @function
(class_definition name: (identifier) @class.name) @class
(with_statement (with_clause (with_item value: (_) @with.value))) @with
