"""debatekit: run, trace and plot multi-agent LLM debate protocols."""

__version__ = "0.1.0"
