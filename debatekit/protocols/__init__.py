"""The built-in protocols, one module or folder each, loaded by name (`registry.BUILTIN`).

`shared/` holds what two or more protocols use (answer formats, extraction, fields, topologies);
`nodes` runs any registered protocol as one node of a workflow graph.
"""
