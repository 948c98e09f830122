"""The built-in protocols, one module or folder each, loaded by name (`registry.BUILTIN`); a folder
may hold its variants (`judged_debate/` also registers `blind_judge` and `consultancy`, which share its judge).

`shared/` holds what two or more protocols use (answer formats, extraction, fields, topologies);
`nodes` runs any registered protocol as one node of a workflow graph.
"""
