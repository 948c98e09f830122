"""Shared reply-field types: a confidence written as a percent is read as a fraction."""

import pytest
from pydantic import BaseModel, ValidationError

from debatekit.protocols.cross_critique import Claim
from debatekit.protocols.shared.fields import Probability


class Reply(BaseModel):
    confidence: Probability


@pytest.mark.parametrize("given, read", [(0.85, 0.85), (85, 0.85), (100, 1.0), (1, 1.0), (0, 0.0), ("0.5", 0.5)])
def test_fractions_and_percents(given, read):
    assert Reply(confidence=given).confidence == pytest.approx(read)


@pytest.mark.parametrize("given", [-0.1, 185, "high"])
def test_out_of_range_is_still_an_error(given):
    with pytest.raises(ValidationError):
        Reply(confidence=given)


def test_schema_keeps_standard_bounds_and_a_claim_with_a_percent_parses():
    # the JSON schema the model sees is a plain bounded number
    assert Reply.model_json_schema()["properties"]["confidence"] == {"maximum": 1, "minimum": 0, "title": "Confidence",
                                                                    "type": "number"}
    # what the local model wrote in a cross_critique revision, which failed validation before
    claim = Claim.model_validate_json('{"id": "C1", "statement": "s", "evidence": ["P1"], "confidence": 90, '
                                      '"assumptions": []}')
    assert claim.confidence == 0.9
