"""The answer vocabulary is declared once (issue 49, item 1): what the serializers, the
OpenAPI schema, the MCP tool, the request parser and the retrieval depths accept is read from
its `Literal`s here, never from a second list."""

import subprocess
import sys
import tomllib
from typing import get_args

import pytest

from answers import serializers
from answers.pipeline.request import ALLOWED_FIELDS, answer_request_parse
from answers.pipeline.texts import explanation
from answers.pipeline.tools import DEPTH
from answers.pipeline.vocabulary import (
    AnswerStatus,
    CitationKind,
    EvidenceRule,
    EvidenceStatus,
    Mode,
    PolicyRecord,
    RefusalReason,
    ReleaseKind,
    SearchOrigin,
    ToolAnswerMode,
    ToolName,
)
from core.errors import UnprocessableError
from mcp_server.tools import ANSWER, Caller, ToolFailure, answer_run
from tests.services import ROOT
from tests.test_openapi import schema

# Each choice field of the answer API and the `Literal` it speaks.
FIELDS = [
    (serializers.AnswerInput, "mode", Mode),
    (serializers.AnswerOutput, "mode", Mode),
    (serializers.AuditOutput, "mode", Mode),
    (serializers.EvidencePolicyInput, "mode", EvidenceRule),
    (serializers.PolicyOutput, "mode", EvidenceRule),
    (serializers.EvidenceOutput, "status", EvidenceStatus),
    (serializers.EvidenceOutput, "answer_status", AnswerStatus),
    (serializers.ReleaseOutput, "kind", ReleaseKind),
    (serializers.CitationOutput, "kind", CitationKind),
    (serializers.PlannedSearchOutput, "origin", SearchOrigin),
]


@pytest.mark.parametrize(("serializer", "name", "literal"), FIELDS)
def test_each_choice_field_accepts_exactly_its_literal_in_order(serializer, name, literal):
    field = serializer().fields[name]
    assert list(field.choices) == list(get_args(literal))


@pytest.mark.parametrize("name", ["allowed_tools", "required_tools"])
def test_the_policy_input_names_exactly_the_vocabulary_tools(name):
    field = serializers.EvidencePolicyInput().fields[name]
    assert list(field.child.choices) == list(get_args(ToolName))


def test_the_documented_request_names_exactly_the_fields_the_parser_accepts():
    assert set(serializers.AnswerInput().fields) == ALLOWED_FIELDS
    assert set(serializers.EvidencePolicyInput().fields) == set(PolicyRecord.__required_keys__)


@pytest.mark.django_db
def test_the_openapi_enums_are_the_vocabulary_literals(member):
    enums = schema(member)["components"]["schemas"]
    assert enums["AnswerModeEnum"]["enum"] == list(get_args(Mode))
    assert enums["PolicyModeEnum"]["enum"] == list(get_args(EvidenceRule))
    assert enums["ToolNameEnum"]["enum"] == list(get_args(ToolName))


def test_the_mcp_answer_tool_offers_exactly_the_tool_answer_modes():
    assert ANSWER.input_schema["properties"]["mode"]["enum"] == list(get_args(ToolAnswerMode))
    assert set(get_args(ToolAnswerMode)) <= set(get_args(Mode))


@pytest.mark.parametrize("mode", sorted(set(get_args(Mode)) - set(get_args(ToolAnswerMode))))
def test_the_mcp_answer_tool_refuses_every_other_mode(mode):
    with pytest.raises(ToolFailure) as failure:
        answer_run(Caller(user=None), {"query": "Who owns service reviews?", "mode": mode})
    assert failure.value.code == "invalid_arguments"
    assert set(failure.value.fields) == {"mode"}


@pytest.mark.parametrize("reason", get_args(RefusalReason))
def test_every_refusal_reason_has_its_fixed_text(reason):
    assert explanation(reason, "en", documents=1)


def test_every_mode_has_a_retrieval_depth():
    assert set(DEPTH) == set(get_args(Mode))


@pytest.mark.parametrize("mode", get_args(Mode))
def test_the_request_parser_accepts_every_mode(mode):
    assert answer_request_parse({"query": "q", "mode": mode}).mode == mode


@pytest.mark.parametrize("rule", get_args(EvidenceRule))
def test_the_request_parser_accepts_every_evidence_rule(rule):
    policy = {"mode": rule, "required_tools": []}
    request = answer_request_parse({"query": "q", "evidence_policy": policy})
    assert request.policy.rule == rule
    assert request.policy.as_dict()["mode"] == rule


def test_the_request_parser_refuses_a_mode_outside_the_vocabulary_naming_them_all():
    with pytest.raises(UnprocessableError) as refused:
        answer_request_parse({"query": "q", "mode": "thorough"})
    assert refused.value.fields == {"mode": f"One of {', '.join(get_args(Mode))}."}


def test_the_vocabulary_imports_no_other_pipeline_module():
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, answers.pipeline.vocabulary; "
            "print(sorted(m for m in sys.modules if m.startswith('answers.pipeline.')))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "['answers.pipeline.vocabulary']"


def test_every_pipeline_module_has_its_floor_in_the_layers_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"].startswith("The answer path in layers")
    ]
    named = {m.strip() for layer in contract["layers"] for m in layer.split("|")}
    pipeline = ROOT / "answers" / "pipeline"
    modules = {
        f"answers.pipeline.{path.stem}"
        for path in pipeline.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    assert named == modules
