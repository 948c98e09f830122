"""The one way to reach a model.

- `gateway`: every model call (retries, repair rounds, the response cache, fault kinds); the only
  module that imports litellm, through `providers`. `completion`: what a call came to (`Completion`)
  and how its replies' usage adds up. `reading`: how a reply is read (response format, parse,
  finished or not, the text kept) and the repair prompts. `serving`: the model check before a run
  (`check_model`) and what serves a model's calls (its endpoint, options, local file).
- `model`: a model string resolved once into a `Model` (name and kind), and the `Caller` a call is
  made for; `kinds`: what differs between `local/`, `scripted/` and provider model strings.
- `local/`: the embedded llama.cpp model (`local.engine`), the one engine a machine shares
  (`local.shared`, served by `local.daemon`), its slots, prefix reuse, thread budget and speculation.
- `repetition`: the loop detector that stops a reply repeating itself; `watch`: a call's timeout,
  held off while it waits in a queue that moves.
- `scripted`: test doubles that answer as a function of the request; `recorded`: a gateway
  that answers from a finished run's call events (`debatekit rescore`).
- `cache`, `credentials`, `errors`, `budget`: the response cache, key masking, model errors and
  provider fault classes, reply-token budgets from schema bounds.
"""

from debatekit._base.lazy import exports

__all__ = ["Caller", "Completion", "Gateway", "LocalModelError", "Model", "ModelError", "ModelSetupError",
           "ResponseCache", "check_model", "default_model", "policy", "resolve"]
__getattr__, __dir__ = exports(__name__, {
    "Completion": "completion", "Gateway": "gateway", "ModelError": "errors", "ModelSetupError": "errors",
    "check_model": "serving", "default_model": "kinds", "policy": "kinds", "LocalModelError": "errors",
    "ResponseCache": "cache", "Caller": "model", "Model": "model", "resolve": "model"})
