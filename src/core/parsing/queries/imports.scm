; Import statements: every way a name from another module is bound in a file.
; `import a.b` binds `a`; `import a.b as c` binds `c` to `a.b`.
(import_statement
  name: (dotted_name) @module)
(import_statement
  name: (aliased_import
    name: (dotted_name) @module
    alias: (identifier) @alias))

; `from a.b import c` / `from a.b import c as d` / `from . import c` / `from a import *`
(import_from_statement
  module_name: [(dotted_name) (relative_import)] @from
  name: (dotted_name) @name)
(import_from_statement
  module_name: [(dotted_name) (relative_import)] @from
  name: (aliased_import
    name: (dotted_name) @name
    alias: (identifier) @alias))
(import_from_statement
  module_name: [(dotted_name) (relative_import)] @from
  (wildcard_import) @wildcard)
