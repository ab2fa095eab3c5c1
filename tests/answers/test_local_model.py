"""The `openai` provider against a real model server (SmolLM2-135M on llama.cpp, started once
per session): the contract holds over real HTTP. The model is tiny, so these tests check
shapes and outcomes, never the wisdom of an answer."""

import json

import pytest

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights
from answers.models import CandidateFact
from answers.pipeline.planner import plan_question
from answers.pipeline.providers.llm import ChatClient
from answers.pipeline.providers.openai import OpenAIProvider
from answers.pipeline.providers.structured import conforms
from answers.pipeline.texts import explanation
from answers.pipeline.validation import SelectionRejected, selection_parse
from answers.pipeline.vocabulary import CandidateView
from knowledge.models import Extraction
from tests.helpers import client_for

QUESTION = "What is the retention period for invoices?"
CANDIDATE = CandidateView(
    "q1",
    "quote",
    "Invoices are retained for ten years. Receipts are kept for two years.",
    "",
    (0,),
    0.5,
    ("Retention",),
    "Accounting policy",
)


def provider(url: str, *, max_tokens: int = 512) -> OpenAIProvider:
    client = ChatClient(base_url=url, model="local", timeout=120.0, retries=1)
    return OpenAIProvider(client=client, max_tokens=max_tokens)


def test_the_local_model_plans_with_the_question_s_words(local_model):
    model = provider(local_model)
    plan = model.plan(question=QUESTION, history=[], datasets=[])
    assert 1 <= len(plan.searches) <= 3 and all(len(s) <= 200 for s in plan.searches)
    assert model.client.usage.calls == 1  # the model answered (no fallback without a call)
    assert model.timings["plan"]


def test_the_local_model_selects_schema_valid_output_or_a_rejection(local_model):
    model = provider(local_model)
    plan = plan_question(question=QUESTION, history=[], datasets=[])
    raw = model.select(question=QUESTION, plan=plan, candidates=[CANDIDATE], attempt=0)
    item = {
        "type": "object",
        "additionalProperties": False,
        "required": ["fact_id", "start", "end"],
        "properties": {
            "fact_id": {"type": "string", "enum": ["q1"]},
            "start": {"type": ["integer", "null"]},
            "end": {"type": ["integer", "null"]},
        },
    }
    schema = {
        "type": "object",
        "required": ["facts"],
        "additionalProperties": False,
        "properties": {"facts": {"type": "array", "items": item, "maxItems": 12}},
    }
    assert conforms(json.loads(raw), schema)
    fact = CandidateFact(fact_id="q1", kind="quote", text=CANDIDATE.text, source={})
    try:
        selected = selection_parse(raw, [fact])
    except SelectionRejected as rejection:  # e.g. an empty selection or a span too long
        assert rejection.issue.startswith("selection_")
    else:
        assert all(s.quote in CANDIDATE.text for s in selected)


def test_the_local_model_judges_every_item(local_model):
    items = [
        JudgeItem(QUESTION, "Invoices are retained for ten years.", "Retention"),
        JudgeItem(QUESTION, "The cafeteria opens at noon.", ""),
    ]
    model = provider(local_model)
    verdicts = model.model_verdicts(items)
    assert verdicts is not None and len(verdicts) == 2 and set(verdicts) <= {0.0, 1.0}
    scores = model.judge(items=items, weights=TermWeights.uniform())
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_a_max_tokens_too_small_cuts_the_json_off_and_rejects_the_selection(local_model):
    plan = plan_question(question=QUESTION, history=[], datasets=[])
    with pytest.raises(SelectionRejected) as rejected:
        provider(local_model, max_tokens=3).select(
            question=QUESTION, plan=plan, candidates=[CANDIDATE], attempt=0
        )
    assert rejected.value.issue == "provider_malformed"


@pytest.mark.django_db
def test_an_answer_from_the_local_model_is_verified_or_a_clean_abstention(
    library, member, local_model, settings
):
    settings.KOINON_MODEL_PROVIDER = "openai"
    settings.KOINON_LLM_BASE_URL = local_model
    settings.KOINON_LLM_MODEL = "local"
    response = client_for(member).post("/v1/answer", {"query": QUESTION}, format="json")
    assert response.status_code == 200
    body = response.json()
    status = body["evidence"]["answer_status"]
    assert status in {"evidence_backed", "partial", "abstained"}
    if status == "abstained":
        assert body["answer"]["citations"] == [] and body["release"]["id"]
        assert body["answer"]["text"] in {
            explanation(name, "en") for name in ("insufficient_evidence", "unsupported")
        }
        return
    assert body["answer"]["citations"]
    for citation in body["answer"]["citations"]:
        if citation["kind"] == "quote":
            texts = Extraction.objects.filter(
                revision_id=citation["revision_id"], role="primary"
            ).values_list("text", flat=True)
            assert any(citation["quote"] in text for text in texts)
