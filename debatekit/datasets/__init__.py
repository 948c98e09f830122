"""Items to debate: loading and validating datasets, the shipped public benchmarks, and
comparing answers.

- `loading`: `Item`, `load`, `resolve`, `catalog` (the shipped datasets and `DEBATEKIT_DATASETS`).
- `public`: converters from the raw public benchmark files (GSM8K, StrategyQA, CommonsenseQA).
- `voting`: answer equality, majority vote and agreement, as the engine and protocols score them.
"""

from debatekit._base.lazy import exports

__all__ = ["DatasetError", "Item", "agreement_rate", "answers_equal", "arithmetic", "available", "catalog",
           "datasets_dir", "load", "locate", "majority", "normalize", "resolve", "write_jsonl"]
__getattr__, __dir__ = exports(__name__, {
    **dict.fromkeys(("DatasetError", "Item", "arithmetic", "available", "catalog", "datasets_dir", "load",
                     "locate", "resolve", "write_jsonl"), "loading"),
    **dict.fromkeys(("agreement_rate", "answers_equal", "majority", "normalize"), "voting")})
