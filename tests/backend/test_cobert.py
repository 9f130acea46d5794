"""The CoBERT-style selector (server/backend/cobert.py) on the real all-MiniLM-L6-v2: shapes, masking, the
persona path, the untrained score being the bi-encoder's, and the errors of a missing checkpoint. Tests that run
MiniLM are marked slow (seconds on a quiet machine, far more on the shared one)."""
from __future__ import annotations

import pytest
import torch

from empeval.server.backend.checkpoints import MissingCheckpoint
from empeval.server.backend.cobert import CoAttention, CoBERT, CoBERTModel, base_encoder_path, load_sentence_transformer
from empeval.server.backend.registry import KINDS, ConfigError, Registry, SystemSpec, model_class
from empeval.server.backend.resources import BackendResources
from empeval.training.cobert import resolve_encoder

CONTEXTS = ["I lost my job today and I do not know what to do.", "My dog learned to catch a frisbee!",
            "I am so nervous about my exam tomorrow, I studied all week but I still feel unprepared."]
RESPONSES = ["I am so sorry, that must be frightening.", "That is adorable, how long did it take him?",
             "You studied hard, you will do fine.", "Cool."]


@pytest.fixture(scope="module")
def selector():
    torch.manual_seed(0)
    return CoBERT(load_sentence_transformer(base_encoder_path())).eval()


@pytest.fixture(autouse=True)
def fp32(monkeypatch):
    # Exact comparisons need fp32 scoring (bf16 autocast would round differently with other padding).
    monkeypatch.setenv("EMPEVAL_ENCODER_PRECISION", "fp32")


@pytest.mark.slow
def test_in_batch_scores_are_every_context_against_every_response(selector):
    with torch.no_grad():
        scores = selector.in_batch_scores(CONTEXTS, RESPONSES[:3])
    assert scores.shape == (3, 3)
    assert scores.argmax(dim=1).tolist() == [0, 1, 2]  # the base encoder already pairs these


@pytest.mark.slow
def test_the_untrained_selector_scores_as_the_bi_encoders_scaled_cosine(selector):
    embeddings = selector.sentence_model.encode(CONTEXTS + RESPONSES, normalize_embeddings=True,
                                                convert_to_tensor=True)
    cosine = embeddings[:3] @ embeddings[3:].T
    scores = selector.score_candidates(CONTEXTS, [RESPONSES] * 3)
    assert scores.shape == (3, 4)
    assert torch.allclose(scores, 20 * cosine, atol=1e-3)


@pytest.mark.slow
def test_padding_changes_no_score(selector):
    selector.context_mix.data.fill_(0.7)
    try:
        alone = selector.score_candidates(CONTEXTS[:1], [RESPONSES[:2]])
        # The long third context and a long candidate pad the first context's and candidates' tokens.
        padded = selector.score_candidates(CONTEXTS, [RESPONSES[:2], RESPONSES[1:3], RESPONSES[2:]])
        long_candidate = selector.score_candidates(CONTEXTS[:1], [[RESPONSES[0], CONTEXTS[2]]])
    finally:
        selector.context_mix.data.zero_()
    assert torch.allclose(alone, padded[:1], atol=1e-4)
    assert torch.allclose(alone[0, 0], long_candidate[0, 0], atol=1e-4)


def test_co_attention_ignores_what_sits_under_the_mask():
    torch.manual_seed(1)
    block = CoAttention(8, 4)
    x, y = torch.randn(2, 5, 8), torch.randn(1, 3, 6, 8)
    x_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    y_mask = torch.ones(1, 3, 6, dtype=torch.bool)
    y_mask[0, 1, 4:] = False
    before = block(x, x_mask, y, y_mask)
    x2, y2 = x.clone(), y.clone()
    x2[0, 3:] = 100.0
    y2[0, 1, 4:] = -100.0
    assert before.shape == (2, 3)
    assert torch.allclose(before, block(x2, x_mask, y2, y_mask), atol=1e-5)
    x2[0, 0] = 5.0  # a token under the mask's True part does count
    assert not torch.allclose(before, block(x2, x_mask, y2, y_mask), atol=1e-5)


@pytest.mark.slow
def test_the_persona_path_runs_only_for_contexts_with_a_persona(selector):
    calls = []
    hook = selector.persona_response.register_forward_hook(lambda *args: calls.append(1))
    selector.context_mix.data.fill_(0.5)
    selector.persona_mix.data.fill_(2.0)
    try:
        with torch.no_grad():
            plain = selector.in_batch_scores(CONTEXTS, RESPONSES)
            none = selector.in_batch_scores(CONTEXTS, RESPONSES, [None, None, None])
            assert calls == []  # no persona in the batch: the persona block is not run at all
            one = selector.in_batch_scores(CONTEXTS, RESPONSES, [None, "I have two dogs and love animals.", None])
            assert calls == [1]
    finally:
        hook.remove()
        selector.context_mix.data.zero_()
        selector.persona_mix.data.zero_()
    assert torch.equal(plain, none)
    assert torch.allclose(one[[0, 2]], plain[[0, 2]], atol=1e-5)  # rows without a persona are untouched
    assert not torch.allclose(one[1], plain[1], atol=1e-3)  # the row with one changes


@pytest.mark.slow
def test_save_and_load_give_the_same_scores(selector, tmp_path):
    selector.context_mix.data.fill_(0.3)
    try:
        before = selector.score_candidates(CONTEXTS, [RESPONSES] * 3)
        selector.save(tmp_path / "m")
        after = CoBERT.load(tmp_path / "m").score_candidates(CONTEXTS, [RESPONSES] * 3)
    finally:
        selector.context_mix.data.zero_()
    assert torch.allclose(before, after, atol=1e-5)


@pytest.mark.slow
def test_candidate_sets_of_unequal_size_are_refused(selector):
    with pytest.raises(ValueError, match="same number of candidates"):
        selector.score_candidates(CONTEXTS[:2], [RESPONSES[:2], RESPONSES[:3]])


def test_the_cobert_kind_is_registered():
    assert KINDS["cobert"] == "empeval.server.backend.cobert:CoBERTModel"
    assert model_class("cobert") is CoBERTModel


def test_a_missing_cobert_checkpoint_names_the_train_command_and_never_falls_back(tmp_path, sample_engine):
    resources = BackendResources(engine=sample_engine, cache_dir=tmp_path, show_progress=False)
    with pytest.raises(MissingCheckpoint, match="run `empeval train cobert` first"):
        CoBERTModel("cobert", {}, resources)
    with pytest.raises(ConfigError, match="empeval train cobert") as caught:
        Registry([SystemSpec("cobert", "cobert", {})], resources).get("cobert")
    # What `generate --systems all` and `metrics` look for to skip an untrained system.
    assert isinstance(caught.value.__context__, MissingCheckpoint)


@pytest.mark.slow
def test_a_missing_bi_encoder_checkpoint_names_empeval_train_retrieval(tmp_path, sample_engine, selector):
    # A finished CoBERT run, but no fine-tuned bi-encoder to take its candidates from.
    from empeval.server.backend.checkpoints import run_dir, write_manifest

    run = run_dir(tmp_path, "cobert", "0123456789ab")
    selector.save(run / "model")
    write_manifest(run, {"kind": "cobert"})
    resources = BackendResources(engine=sample_engine, cache_dir=tmp_path, show_progress=False)
    with pytest.raises(MissingCheckpoint, match="run `empeval train retrieval` first"):
        CoBERTModel("cobert", {}, resources)
    with pytest.raises(MissingCheckpoint, match="empeval train retrieval"):
        resolve_encoder(tmp_path, None)
    path, encoder_id = resolve_encoder(tmp_path, "base")  # only when asked for explicitly
    assert path == base_encoder_path() and encoder_id.startswith("all-MiniLM-L6-v2@")
