"""What serves a model: whether any provider can (checked before a run), and what answers its calls.

`check_model` fails early, with the model named, on a model string no provider can serve.
`served_by` names what answers a model's calls beside what they ask: the endpoint, the options
and a local model's file, the half of a response cache key (`cache.served_key`) that keeps two
servers of one model name from sharing replies.
"""

from __future__ import annotations

import os

from debatekit.models import credentials
from debatekit.models.errors import ModelError, ModelSetupError
from debatekit.models.model import Model
from debatekit.models.providers import litellm_module


def check_model(model: Model) -> None:
    """Fail early, with the model named, on a model string no provider can serve.

    `scripted/NAME` must be registered, `local/NAME` a known model or a .gguf path; any other
    string must name a litellm provider (this imports litellm, which the first call needs anyway).
    """
    kind, name, model = model.kind.name, model.short, model.name
    if kind == "scripted":
        from debatekit.models import scripted  # the test double is loaded only when a scripted model is named

        if not scripted.is_registered(name):
            raise ModelError(f"model {model!r}: no scripted model named {name!r} is registered")
    elif kind == "local":
        from debatekit.models.local import weights as local

        try:
            path = local.model_path(name)
        except local.LocalModelError as exc:
            raise ModelError(f"model {model!r}: {exc}") from exc
        if name not in local.KNOWN and not path.is_file():
            raise ModelSetupError(f"model {model!r}: local model file not found: {path}")
    else:
        try:
            litellm_module().get_llm_provider(model)
        except Exception as exc:  # noqa: BLE001 - litellm raises BadRequestError for an unknown provider
            raise ModelError(f"model {model!r}: litellm knows no provider for it; use a litellm model string "
                             f"such as openai/gpt-4o-mini, ollama/llama3, hosted_vllm/NAME, local/NAME") from exc


def served_by(model: Model, options: dict) -> dict:
    """What answers `model`'s calls: the endpoint, however it was set (the `api_base` of `options`,
    the model's litellm arguments, or the provider's `*_API_BASE` / `*_BASE_URL` environment
    variable), its other options with credentials masked as in traces
    (`credentials.model_options_public`), and for a `local/` model its file's size and
    modification time (a file replaced in place is another model)."""
    found = credentials.model_options_public({model.name: options})[model.name]
    provider = model.provider.upper().replace("-", "_")
    for name in (f"{provider}_API_BASE", f"{provider}_BASE_URL"):
        if "api_base" not in found and os.environ.get(name):
            found["api_base"] = os.environ[name]
    if model.local:
        from debatekit.models.local import weights as local  # only a local model's calls load it

        found["file"] = local.file_identity(model.short)
    return found
