; Bindings of a name: `x = v`, `x: T = v`, `x[k] = v` (a key added to a dict), and `x.update(k=v)`.
(assignment left: (identifier) @name right: (_) @value) @assignment
(assignment left: (subscript value: (identifier) @name subscript: (_) @key) right: (_) @value) @item
(assignment left: (attribute object: (identifier) @object attribute: (identifier) @name) right: (_) @value) @attribute
