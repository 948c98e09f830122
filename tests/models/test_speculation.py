import pytest

from debatekit.models.local import speculation
from debatekit.models.errors import LocalModelError
from debatekit.models.local.speculation import Speculation, parse


@pytest.mark.parametrize("text, kind, draft", [("off", "off", None), ("NGRAM_SIMPLE", "ngram_simple", None),
                                               ("ngram_mod", "ngram_mod", None),
                                               ("draft:qwen2.5-coder-0.5b-instruct", "draft", "qwen2.5-coder-0.5b-instruct"),
                                               ("draft:/m/Small.gguf", "draft", "/m/Small.gguf")])
def test_settings_are_read(text, kind, draft):
    assert parse(text) == Speculation(kind, draft)


@pytest.mark.parametrize("text", ["on", "ngram", "draft:", "1"])
def test_a_setting_not_known_is_one_line_naming_the_values(text, monkeypatch):
    monkeypatch.setenv("DEBATEKIT_LOCAL_SPECULATION", text)
    with pytest.raises(LocalModelError, match="must be off, ngram_simple"):
        speculation.speculation()


def test_it_is_off_unless_asked_for(monkeypatch):
    monkeypatch.delenv("DEBATEKIT_LOCAL_SPECULATION", raising=False)
    assert speculation.speculation() == Speculation()
    monkeypatch.setenv("DEBATEKIT_LOCAL_SPECULATION", "ngram_simple")
    assert speculation.speculation() == Speculation("ngram_simple")


def test_the_choice_reaches_the_engine_parameters():
    xllamacpp = pytest.importorskip("xllamacpp")
    params = xllamacpp.CommonParams()
    parse("off").apply(params)
    assert params.speculative.types == [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NONE]
    parse("ngram_simple").apply(params)
    assert params.speculative.types == [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE]
    params.cpuparams.n_threads = 2
    parse("draft:small").apply(params, "/m/small.gguf")
    assert params.speculative.types == [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
    assert params.speculative.draft.mparams.path == "/m/small.gguf"


def test_the_engine_takes_eight_slots_where_their_kv_cache_fits_a_quarter_of_the_memory(monkeypatch):
    from debatekit.models.local import settings

    monkeypatch.delenv("DEBATEKIT_LOCAL_SLOTS", raising=False)
    monkeypatch.delenv("DEBATEKIT_LOCAL_CTX", raising=False)
    bound = 8 * 8192 * settings.KV_BYTES_PER_TOKEN  # 2 GiB
    monkeypatch.setattr(settings, "mem_available", lambda: 4 * bound)
    assert settings.slots() == 8
    monkeypatch.setattr(settings, "mem_available", lambda: 4 * bound - 1)
    assert settings.slots() == 4
    monkeypatch.setattr(settings, "mem_available", lambda: None)
    assert settings.slots() == 4
    monkeypatch.setenv("DEBATEKIT_LOCAL_SLOTS", "32")
    assert settings.slots() == 32
