; The arguments of one call: keyword arguments, `**mapping` and `*sequence` splats. Positional arguments are the
; remaining direct children, read in order.
(argument_list (keyword_argument name: (identifier) @keyword value: (_) @value))
(argument_list (dictionary_splat (_) @kwsplat))
(argument_list (list_splat (_) @splat))
