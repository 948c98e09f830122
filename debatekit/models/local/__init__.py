"""The embedded model: llama.cpp through xllamacpp, on the machine's own cores.

- `engine`: the model files (assembled from parts shipped on PyPI), one in-process engine with its
  slots and settings, and the checks a run makes before its first call (`preflight`).
- `shared`: the one engine a machine shares: how a process finds it, asks it and names it.
- `daemon`: that engine, a process serving every other process's calls.
- `prefix_cache`: which slot holds which conversation, and identical prompts read once.
- `cores`: the machine-wide thread budget of engines in separate processes.
- `speculation`: guessing tokens ahead (`DEBATEKIT_LOCAL_SPECULATION`).
"""
