"""The extractive provider: plans by rule, selects the best covered sentences of the
candidates for each part, judges with the local cross-encoder; it cannot compare or answer
generally."""

import json
import re
from dataclasses import dataclass

from answers.judge.features import JudgeItem
from answers.judge.lexical import TermWeights, content_stems, coverage
from answers.judge.model import JudgeUnavailable, local_judge
from answers.pipeline.answer_type import answer_type_agrees
from answers.pipeline.planner import plan_question
from answers.pipeline.providers.base import Analysis
from answers.pipeline.providers.llm import PROVIDER_UNAVAILABLE, ProviderError
from answers.pipeline.quote_context import context_line, sentence_before
from answers.pipeline.vocabulary import CandidateView, DatasetInfo, Plan, Rejection
from knowledge.sentences import code_names, is_label, is_question, sentence_spans

SELECT_THRESHOLD = 0.3  # IDF-weighted share of a part's stems a sentence must contain
CANDIDATES_PER_SEARCH = 3


def quote_sentences(candidate: CandidateView) -> list[tuple[int, int]]:
    """The candidate's spans that may be quoted on their own, in text order: its structured
    units, and its sentences but labels (headings, titles), questions (an FAQ's question
    answers nothing) and the parts a unit completes."""
    units = [(start, end) for start, end, _, _ in candidate.units]
    sentences = [
        (start, end)
        for start, end in sentence_spans(candidate.text)
        if quotable_alone(candidate, start, candidate.text[start:end])
    ]
    return sorted(units + sentences)


def quotable_alone(candidate: CandidateView, start: int, sentence: str) -> bool:
    """May the sentence at `start` end a quote? Not a part a unit completes, a question or
    a label (heading, title)."""
    return not (
        completed(candidate, start)
        or is_question(sentence)
        or is_label(sentence, headings=candidate.headings, title=candidate.title)
    )


def completed(candidate: CandidateView, own: int) -> bool:
    """Whether the sentence starting at `own` is a part a structured unit completes (a
    lead-in, a description, a value, a row's cell): alone, it is the non-answer the unit
    completes (knowledge.structure)."""
    return any(alone <= own < alone_end for _, _, alone, alone_end in candidate.units)


MERGE_GAIN = 0.15  # the sentence before must add this much of the part's weighted stems
# What a span gains by holding a name the part writes as code ("--pages"), verbatim: more
# than any coverage, since stemming gives the name's words to every span about pages.
NAME_GAIN = 1.5
MERGE_MAX_WORDS = 60  # a quote of two sentences stays short
_CODE = re.compile(r"[{};=<>\[\]]|\(\)|->|^\s*[$#>]")


def is_block(text: str) -> bool:
    """Three or more lines of code, a table or a list of labels: never glued to prose."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3:
        return False
    short = sorted(len(line.strip()) for line in lines)[len(lines) // 2] < 40
    return short or any(_CODE.search(line) for line in lines)


def _gluable(before: str, gap: str, sentence: str, *, label: bool) -> bool:
    """May the span before be quoted together with the sentence? Both short and not a
    block; no blank line between; a label (a name on the line above) only on one line."""
    if "\n\n" in gap.replace("\r", "") or is_block(before) or is_block(sentence):
        return False
    if label and ("\n" in before.strip() or len(before.split()) > 12):
        return False
    return len(before.split()) + len(sentence.split()) <= MERGE_MAX_WORDS


def quote_spans(candidate: CandidateView) -> list[tuple[int, int, int]]:
    """Every span a quote may be: each structured unit of the candidate (start, end, where
    the part it completes starts: knowledge.structure), each quotable sentence (start, end,
    its own start), and each sentence together with the one (or the one-line label) just
    before it (start of that one, end, the sentence's own start). One verbatim span each.
    A sentence that is a unit's lead-in, description, value or row cell is quoted only
    with the rest of its unit: alone it is the non-answer the unit completes. No span ends
    with a question (`is_question`)."""
    text = candidate.text
    spans = sentence_spans(text)
    result = [(start, end, alone) for start, end, alone, _ in candidate.units]
    for number, (start, end) in enumerate(spans):
        sentence = text[start:end]
        if not quotable_alone(candidate, start, sentence):
            continue
        result.append((start, end, start))
        if number:
            before_start, before_end = spans[number - 1]
            before = text[before_start:before_end]
            label = is_label(before, headings=candidate.headings, title=candidate.title)
            if completed(candidate, before_start):
                continue  # a lead-in or description glued to one line is its unit cut short
            if _gluable(before, text[before_end:start], sentence, label=label):
                result.append((before_start, end, start))
    return result


@dataclass(frozen=True)
class SpanChoice:
    """A span a part's quote may be, with its IDF-weighted stem coverage score."""

    coverage: float
    candidate: CandidateView
    start: int
    end: int
    own: int  # where the span's last sentence starts: `start` unless two are glued

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.candidate.fact_id, self.start, self.end)

    def judge_items(self, part_texts: list[str]) -> list[JudgeItem]:
        """What the support judge will read of this span for each text of its part: the same
        items (quote, title › headings, sentence before), so a score is computed once."""
        text = self.candidate.text
        context = context_line(self.candidate.title, self.candidate.headings)
        before = sentence_before(text, self.start)
        quote = text[self.start : self.end]
        return [JudgeItem(part, quote, context, before, text) for part in part_texts]


JUDGED_SPANS = 2  # the spans of a part, best covered first, that the judge chooses among


class ExtractiveProvider:
    """Offline and deterministic. Selection: per part of the question, the sentences of its
    top candidates that cover enough of the part's IDF-weighted stems are ranked by that
    coverage; the judge scores the best few together and the one it scores highest is
    chosen. A part whose best-judged span was rejected gets no second pick: a lower-scored
    span of the same candidates is not tried after it (each extra try was one more chance
    to release an on-topic sentence that does not answer). Judgement: the local judge,
    each (part, span) scored once per provider."""

    name = "extractive"
    model_id = "extractive-v3"
    waits_for_model = False
    can_compare = False
    can_analyse = False
    can_answer_generally = False
    judged_spans = JUDGED_SPANS

    def plan(self, *, question: str, history: list[str], datasets: list[DatasetInfo]) -> Plan:
        return plan_question(question=question, history=history, datasets=datasets)

    def select(
        self,
        *,
        question: str,
        plan: Plan,
        candidates: list[CandidateView],
        attempt: int,
        rejected: tuple[Rejection, ...] = (),
        weights: TermWeights | None = None,
    ) -> str:
        weights = weights or TermWeights.uniform()
        refused = {(r.fact_id, r.start, r.end) for r in rejected}
        valued = {part for c in candidates if c.kind == "value" for part in c.searches}
        chosen: list[dict[str, str | int]] = []
        for index in range(len(plan.searches)):
            if index in valued:
                continue  # a part that a governed value answers needs no quote
            # A part rewritten from the conversation is also read as typed: a sentence is
            # scored by the text it answers best, so a wrong rewrite cannot hide it.
            part_texts = [t for t in plan.part_texts(index) if content_stems(t)]
            spans = part_spans(part_texts, candidates, index, weights)
            pick = self.choose(part_texts, spans, refused, weights)
            if pick is not None:
                item: dict[str, str | int] = {
                    "fact_id": pick.candidate.fact_id,
                    "start": pick.start,
                    "end": pick.end,
                }
                if item not in chosen:
                    chosen.append(item)
        chosen += [{"fact_id": c.fact_id} for c in candidates if c.kind == "value"]
        return json.dumps({"facts": chosen})

    def choose(
        self,
        part_texts: list[str],
        spans: list[SpanChoice],
        refused: set[tuple[str, int | None, int | None]],
        weights: TermWeights,
    ) -> SpanChoice | None:
        """The span the judge scores highest among the best covered few, a span that holds
        the kind of thing the part asks for (answers.pipeline.answer_type) before one that
        does not; None when that one was already rejected. Without a judge, the best
        covered span (the support judgement that follows abstains with
        `judge_unavailable`)."""
        ranked = spans[: self.judged_spans]
        if not ranked:
            return None
        try:
            items = [span.judge_items(part_texts) for span in ranked]
            flat = [item for span_items in items for item in span_items]
            scores = dict(zip(flat, self.judge(items=flat, weights=weights), strict=True))
        except JudgeUnavailable:
            fresh = [span for span in ranked if span.key not in refused]
            return fresh[0] if fresh else None
        typed = [
            any(answer_type_agrees(item.part, item.quote) for item in span_items)
            for span_items in items
        ]
        best = max(
            range(len(ranked)),
            key=lambda n: (typed[n], max(scores[item] for item in items[n]), -n),
        )
        return None if ranked[best].key in refused else ranked[best]

    def judge(self, *, items: list[JudgeItem], weights: TermWeights) -> list[float]:
        """Scores by the local judge; a pair already scored with the same weights (this
        selection's, then its judgement's) is not run again."""
        memo = self.__dict__.get("_judged")
        if memo is None or memo[0] is not weights:
            memo = self.__dict__["_judged"] = (weights, {})
        scores: dict[JudgeItem, float] = memo[1]
        fresh = [item for item in dict.fromkeys(items) if item not in scores]
        if fresh:
            scores.update(zip(fresh, local_judge().score(fresh, weights), strict=True))
        return [scores[item] for item in items]

    def analyse(self, *, question: str, plan: Plan, candidates: list[CandidateView]) -> Analysis:
        """Never asked (`can_compare` is False); fails as an unavailable provider would."""
        raise ProviderError(PROVIDER_UNAVAILABLE)

    def answer_generally(self, *, question: str, language: str) -> str:
        """Never asked (`can_answer_generally` is False)."""
        raise ProviderError(PROVIDER_UNAVAILABLE)


def part_spans(
    part_texts: list[str], candidates: list[CandidateView], index: int, weights: TermWeights
) -> list[SpanChoice]:
    """The spans of a part's top candidates that cover at least SELECT_THRESHOLD of its
    weighted stems, best covered first (a span holding a name the part writes as code
    first of all). A sentence glued to the one before it only when that adds MERGE_GAIN
    of the stems."""
    wanted_texts = [w for w in map(content_stems, part_texts) if w]
    if not wanted_texts:
        return []
    names = {name.casefold() for text in part_texts for name in code_names(text)}
    found = sorted(
        (c for c in candidates if c.kind == "quote" and index in c.searches),
        key=lambda c: -c.score,
    )[:CANDIDATES_PER_SEARCH]
    result: list[SpanChoice] = []
    for candidate in found:
        context = set(content_stems(" ".join([candidate.title, *candidate.headings])))
        singles: dict[int, float] = {}
        for start, end, own in quote_spans(candidate):
            stems = set(content_stems(candidate.text[start:end]))
            # The heading a sentence stands under says what it is about ("Retention" over
            # "Invoices are retained for ten years"); its own words count more.
            in_context = max(coverage(w, stems | context, weights) for w in wanted_texts)
            if start == own:
                singles[own] = in_context
            elif in_context < singles.get(own, 0.0) + MERGE_GAIN:
                continue  # the sentence before adds too little: quote it alone
            score = in_context + 0.5 * max(coverage(w, stems, weights) for w in wanted_texts)
            if names:  # most questions write no name as code: nothing to look for
                quoted = candidate.text[start:end].casefold()
                score += NAME_GAIN * any(name in quoted for name in names)
            if in_context >= SELECT_THRESHOLD:
                result.append(SpanChoice(score, candidate, start, end, own))
    # Stable: among equal scores the earlier candidate (better retrieved) and span first.
    return sorted(result, key=lambda span: -span.coverage)
