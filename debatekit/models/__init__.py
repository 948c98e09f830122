"""The one way to reach a model.

- `gateway`: every model call (retries, repair rounds, the response cache, fault kinds); the only
  module that imports litellm, through `providers`.
- `kinds`: what differs between `local/`, `scripted/` and provider model strings.
- `local`, `shared_engine`, `prefix_cache`, `cores`, `repetition`: the embedded llama.cpp model,
  the one engine a machine shares, its slot and thread budget, and the loop detector.
- `scripted`: test doubles that answer as a function of the request; `recorded`: a gateway
  that answers from a finished run's call events (`debatekit rescore`).
- `cache`, `credentials`, `errors`, `budget`: the response cache, key masking, provider error
  classes, reply-token budgets from schema bounds.
"""

from debatekit._base.lazy import exports

__all__ = ["Completion", "Gateway", "LocalModelError", "ModelError", "ModelSetupError", "ResponseCache",
           "check_model", "default_model", "policy"]
__getattr__, __dir__ = exports(__name__, {
    "Completion": "gateway", "Gateway": "gateway", "ModelError": "gateway", "ModelSetupError": "gateway",
    "check_model": "gateway", "default_model": "kinds", "policy": "kinds", "LocalModelError": "errors",
    "ResponseCache": "cache"})
