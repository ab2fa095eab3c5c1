"""Answer-type agreement (issue 47): a question that asks for a thing of a kind — which
command, file or setting; which port; where; when; how many; who; which values; yes or
no — is answered only by a unit that holds something of that kind, near the words the
question is about. "The service listens on a port chosen at installation." is on topic
for "Which port does the service listen on?" and names no port: it is not support,
whatever the judge scored it.

Ruled, not learned, and deliberately lenient: a detector looks for any token of the kind
that the question does not already contain (a year, a digit, a capitalised name, a
`code_token`, a place after "in"/"at", an "a or b"), so an answer in an unusual form
passes and only a unit with nothing of the kind is stopped. A question whose kind is not
clear from its English form ("What is …", "How do I …") gets no gate (`None`): the judge
alone decides there. The rules read English question forms only; a question in German,
French or Japanese matches none of them and is not gated (nothing here guesses a kind from
a language it cannot read). Nothing here imports Django.
"""

import re
from collections.abc import Callable, Iterator
from typing import Literal

from answers.judge.lexical import AUXILIARIES, content_stems, stem
from knowledge.normalise import normalised_words
from knowledge.sentences import is_question

Kind = Literal[
    "choice", "identifier", "port", "place", "time", "quantity", "agent", "values", "yes_no"
]


def _word_set(words: str) -> frozenset[str]:
    """A set of words written as one string: long word lists stay readable."""
    return frozenset(words.split())


# --- what the question asks for ------------------------------------------------------

# A leading "and"/"so"/"but" or a preposition ("in which year", "since when") does not
# change what is asked; anything longer before the question word does ("What happens
# when …" asks what happens).
_LEAD = r"^\s*(?:(?:and|so|but|then|also)\s+)?(?:(?:in|on|at|since|until|till|from|by|for|to)\s+)?"
_IDENTIFIER_NOUNS = (
    r"commands?|functions?(?!\s+of\b)|options?|flags?|switch(?:es)?|arguments?|parameters?|"
    r"variables?|settings?|files?|file\s?names?|paths?|director(?:y|ies)|folders?|tools?|"
    r"utilit(?:y|ies)|executables?|scripts?|endpoints?|plugins?|plug-ins?|buttons?|menus?"
)
_VALUE_NOUNS = r"values?|choices|modes|levels|states|formats"
_TIME_NOUNS = r"year|date|day|month|time|century|decade|era|season|hour|weekday|period of time"
_PLACE_NOUNS = (
    r"country|city|state|town|village|place|location|region|continent|county|province|"
    r"street|address|building|site|website|web\s?site|url|e-?mail(?: address)?|room|island"
)
_AGENT_NOUNS = (
    r"person|people|company|companies|organi[sz]ations?|body|bodies|agency|agencies|"
    r"department|committee|team|authority|individual|firm|manufacturer|vendor"
)
_QUANTITY = re.compile(
    _LEAD + r"how\s+(?:many|much|long|old|far|often|big|large|high|tall|fast|heavy|deep|wide)\b"
    r"|" + _LEAD + r"(?:what|which)\s+(?:is\s+the\s+)?(?:percentage|percent|number|amount|"
    r"proportion|share|fraction|size|population|price|cost)\b",
    re.I,
)
_TIME = re.compile(
    _LEAD + r"when\b|" + _LEAD + r"(?:what|which)\s+(?:" + _TIME_NOUNS + r")s?\b"
    r"|" + _LEAD + r"(?:what|which)\s+is\s+the\s+(?:date|year|deadline)\b",
    re.I,
)
_PLACE = re.compile(
    _LEAD + r"where\b|" + _LEAD + r"(?:what|which)\s+(?:" + _PLACE_NOUNS + r")\b"
    r"|" + _LEAD + r"(?:what|which)\s+is\s+the\s+(?:\w+\s+)?(?:address|url|website|e-?mail)\b",
    re.I,
)
_AGENT = re.compile(
    _LEAD + r"(?:who|whom|whose)\b|" + _LEAD + r"(?:what|which)\s+(?:" + _AGENT_NOUNS + r")\b",
    re.I,
)
_PORT = re.compile(_LEAD + r"(?:what|which)\s+(?:\w+\s+){0,3}?ports?\b", re.I)
_VALUES = re.compile(
    _LEAD + r"(?:what|which)\s+(?:\w+\s+){0,2}?(?:" + _VALUE_NOUNS + r")\b"
    r"|" + _LEAD + r"(?:what|which)\s+options\b"
    r"|\bwhat\s+can\s+(?:\w+\s+){1,4}(?:be\s+set\s+to|take)\b",
    re.I,
)
_IDENTIFIER = re.compile(
    _LEAD + r"(?:what|which)\s+(?:(?!is\b|are\b|does\b|do\b|did\b|was\b)\w+[\s-]+){0,3}?"
    r"(?:" + _IDENTIFIER_NOUNS + r")\b"
    r"|" + _LEAD + r"(?:what|which)\s+is\s+the\s+(?:name\s+of\s+the\s+)?(?:\w+\s+){0,2}?"
    r"(?:" + _IDENTIFIER_NOUNS + r")\b"
    r"|" + _LEAD + r"what\s+(?:do|should|must|can)\s+(?:i|we|you)\s+(?:run|type|enter)\b",
    re.I,
)
_YES_NO = re.compile(r"^\s*(?:" + AUXILIARIES + r")\b", re.I)
# A question that names its alternatives after a comma: "Which band has more members,
# Kitchens of Distinction or Royal Blood?", "Who was born first, Ada or Grace?". Each
# alternative at most eight words (a longer clause is not a name).
_CHOICE = re.compile(
    r",\s*(?:(?:either|the)\s+)?(?P<first>[^,;?]+?)\s*,?\s+or\s+(?:(?:the)\s+)?"
    r"(?P<second>[^,;?]+?)\s*[?.!]*\s*$",
    re.I,
)
CHOICE_WORDS = 8
_CHOICE_OPENS = re.compile(_LEAD + r"(?:who|whom|whose|what|which|where|when)\b", re.I)
_WH_WORD = re.compile(r"\b(?:who|whom|whose|what|when|where|which|why|how)\b", re.I)
_ALTERNATIVE = re.compile(r"\bor\b", re.I)

# Checked in this order, after the alternatives a question names (`alternatives`): "Which
# values can the port take?" asks for values, "What year" for a time before anything else.
_RULES: tuple[tuple[Kind, re.Pattern[str]], ...] = (
    ("quantity", _QUANTITY),
    ("time", _TIME),
    ("place", _PLACE),
    ("agent", _AGENT),
    ("values", _VALUES),
    ("port", _PORT),
    ("identifier", _IDENTIFIER),
)


def alternatives(question: str) -> tuple[str, str] | None:
    """The two alternatives a question names after a comma ("…, A or B?"), each of at most
    CHOICE_WORDS words, or None."""
    found = _CHOICE.search(question)
    if found is None:
        return None
    # "Which band has more members, A or B?" asks which; "How to play, pause or rewind
    # live TV?" and "… as a consequence of its atomic, molecular or aggregate structure?"
    # list things. The question before the alternatives must open with a word that asks
    # which one, and be one clause (no comma of its own).
    before = question[: found.start()]
    if "," in before or not _CHOICE_OPENS.match(before):
        return None
    first, second = found["first"].strip(), found["second"].strip()
    if not first or not second or max(len(first.split()), len(second.split())) > CHOICE_WORDS:
        return None
    return first, second


def question_kind(question: str) -> Kind | None:
    """The kind of thing an English question asks for, or None (no gate) where its form
    does not say it clearly. A question in another language matches no rule: None."""
    text = re.sub(
        r"^\s*(?:please\s+)?(?:tell\s+me|do\s+you\s+know|can\s+you\s+tell\s+me)\s+",
        "",
        question,
        flags=re.I,
    )
    if alternatives(text) is not None:
        return "choice"
    for kind, pattern in _RULES:
        if pattern.search(text):
            return kind
    # "Is the file encrypted?" — but "Is it A or B?" asks which, and "Is it known who …"
    # asks who: neither is a yes/no question for this gate.
    if _YES_NO.match(text) and not _WH_WORD.search(text) and not _ALTERNATIVE.search(text):
        return "yes_no"
    return None


# Words that name the kind asked for rather than what the question is about: "Which port
# does the service listen on?" is about the service listening, not about "port".
_KIND_WORDS = frozenset(
    stem(word)
    for word in _word_set(
        "command function option flag switch argument parameter variable setting file filename "
        "path directory folder tool utility executable script endpoint plugin button menu port "
        "value values choice mode level state format year date day month time century decade "
        "era season hour weekday country city town village place location region continent "
        "county province street address building site website url email room island person "
        "people company organisation organization body agency department committee team "
        "authority individual firm manufacturer vendor percentage percent number amount "
        "proportion share fraction size population price cost long old far often big large "
        "high tall fast heavy deep wide possible available allowed valid default type kind"
    )
)


def focus_terms(question: str) -> frozenset[str]:
    """The stems of what the question is about: its content words, less the words that
    name the kind of thing asked for."""
    return frozenset(s for s in content_stems(question) if s not in _KIND_WORDS)


# --- what a unit holds ------------------------------------------------------------------

_WORD = re.compile(r"[\w'’.-]*\w|[^\s\w]")
_STOP = _word_set(
    "a an the this that these those its it their his her our your my any each every some "
    "one following certain such another other same and or but of to in on at by for with "
    "from as is are was were be been being has have had do does did can could will would "
    "should may must not no"
)
# A unit that names the kind without giving it: "a port chosen at installation", "the
# following address", "a time set by the administrator".
_PLACEHOLDERS = _word_set(
    "location place address site directory folder path area position spot destination "
    "time moment date point port value values setting option number amount "
    "installation install setup startup boot login shutdown launch restart reboot runtime "
    "default someone somebody anyone anybody everyone everybody nobody others person people "
    "party parties"
)
_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    r"eighty|ninety|hundreds?|thousands?|millions?|billions?|trillions?|dozens?|half|"
    r"quarter|twice|once|double|triple|single|zero|none|unlimited|no\s+limit|any\s+number"
)
# Digits, not the end of a name ("COVID-19", "BCV-AKS-01").
_DIGITS = re.compile(r"(?<![\w.])(?<!\w-)\d[\d,.:/%-]*\w*")
_PERCENT_AFTER = re.compile(r"\s*(?:%|per\s?cent\b|percentage\s+points?\b)", re.I)
_COUNT = re.compile(r"\bhow\s+many\b", re.I)
_SHARE = re.compile(r"\bpercent|\bper\s?cent\b|\bproportion|\bshare|\bfraction|%", re.I)
_NUMBER = re.compile(r"\b(?:" + _NUMBER_WORDS + r")\b|[%$€£¥]", re.I)
_DURATION = re.compile(
    r"\b(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?|decades?|centur(?:y|ies)|"
    r"daily|weekly|monthly|yearly|annually|hourly|nightly|always|forever|permanently|"
    r"indefinitely|every|until)\b",
    re.I,
)
_MONTHS = (
    r"january|february|march|april|may|june|july|august|september|october|november|december|"
    r"jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_DAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_TIME_TOKENS = re.compile(
    r"\b(?:1\d{3}|20\d{2})s?\b|\b\d{1,2}:\d{2}\b|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)"
    r"|\b\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\b|\b\d+(?:st|nd|rd|th)\b"
    # A year before 1000 after a word that dates: "in 711", "of 976", "since 480".
    r"|\b(?:in|of|since|until|till|by|from|before|after|circa|c\.|around)\s+\d{3}\b(?![.,]\d)"
    r"|\b(?:" + _MONTHS + r"|" + _DAYS + r")\b"
    r"|\b(?:centur(?:y|ies)|decades?|bce?|ad|ce|o'clock|noon|midnight|morning|afternoon|"
    r"evening|night|today|yesterday|tomorrow|daily|weekly|monthly|yearly|annually|hourly|"
    r"nightly|ago|spring|summer|autumn|winter|dynasty|era|reign)\b"
    r"|\b\w+\s+(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b",
    re.I,
)
# An event as the time: "after each upgrade", "when you press the button", "at startup".
_TIME_EVENT = re.compile(
    r"\b(?:after|before|during|until|till|since|upon|following|whenever|when|once|"
    r"as\s+soon\s+as|each\s+time|every\s+time)\s+(?:(?:the|a|an|each|every|its|your)\s+)?"
    r"(\w[\w-]*)"
    r"|\b(?:at|on)\s+(startup|start-up|boot|login|log-in|installation|install|shutdown|"
    r"launch|restart|reboot|logout)\b",
    re.I,
)
_URL = re.compile(
    r"https?://\S+|\bwww\.\S+|\b[\w.+-]+@[\w-]+\.[\w.]+|\b[\w-]+\.(?:com|org|net|io|gov|edu|"
    r"int|eu|de|fr|jp|uk)\b",
    re.I,
)
_STREET = re.compile(
    r"\b\d+\w?\s+(?:[A-Z]\w+\s+){1,3}(?:Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|"
    r"Boulevard|Blvd|Way|Place|Square|Court)\b"
)
_LOCATIVE = re.compile(
    r"\b(?:in|at|on|under|inside|within|near|beside|behind|above|below|from|into|onto|"
    r"outside|across|along|beneath|next\s+to|to)\s+"
    r"(?:(?:the|a|an|your|its|their|this|that|each|every|one|some|any|following|certain)\s+)*"
    r"([\w-]+)",
    re.I,
)
_CODE = re.compile(
    r"`[^`\n]+`"  # `code`
    r"|(?<![\w-])--?[A-Za-z][\w-]*"  # --flag, -f
    r"|(?<![\w/])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)*"  # /a/path
    r"|\b[A-Za-z]:\\\S+"  # C:\path
    r"|\b\w+(?:\.\w+)+\b(?<!\be\.g)(?<!\bi\.e)"  # dotted.name, file.ext
    r"|\b[a-z0-9]+(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b[A-Z]{3,}[0-9]*\b"  # ALL_CAPS, HDMI
    r"|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z]+[A-Z]\w*"  # camelCase, CamelCase
    r"|\b\w+\(\)|\b\w+=\S+"  # call(), key=value
    r"|\w\s*>\s*\w",  # Menu > Item
)
_QUOTED = re.compile(r"\"[^\"\n]{1,60}\"|“[^”\n]{1,60}”|‘[^’\n]{1,60}’|(?<!\w)'[^'\n]{1,40}'(?!\w)")
# A tool or program named after a verb or preposition: "rotated by logrotate", "run cron".
_NAMED_AFTER = re.compile(
    r"\b(?:by|using|via|called|named|run|runs|running|use|uses|invoke|execute|type|enter|"
    r"press|select|choose|tap|click)\s+([\w-]+)",
    re.I,
)
_NAME_WORD = re.compile(r"(?<![\w'’])[^\W\d_][\w'’&.-]*")
_ENUMERATION = re.compile(
    r"\b(?:either|one\s+of|between|from\s+\S+\s+to|true|false|on\s+or\s+off|enabled|disabled)\b"
    r"|\b[\w-]+,\s+[\w-]+(?:,\s+[\w-]+)*,?\s+(?:or|and)\s+[\w-]+"
    r"|\b[\w-]+\s+or\s+[\w-]+"
    r"|\n\s*(?:[-*•]|\d+[.)])\s+\S",
    re.I,
)
_AGENT_NOUNS_IN_UNIT = re.compile(
    r"\b(?:people|persons?|man|men|woman|women|users?|customers?|clients?|administrators?|"
    r"admins?|owners?|teams?|departments?|offices?|committees?|boards?|councils?|governments?|"
    r"authorit(?:y|ies)|agenc(?:y|ies)|managers?|directors?|officers?|staff|employees?|"
    r"members?|groups?|compan(?:y|ies)|organi[sz]ations?|society|societies|kings?|queens?|"
    r"emperors?|popes?|presidents?|ministers?|parliament|congress|courts?|army|police|"
    r"students?|teachers?|scientists?|engineers?|doctors?|physicians?|researchers?|workers?|"
    r"farmers?|residents?|citizens?|soldiers?|priests?|monks?|artists?|writers?|authors?|"
    r"founders?|leaders?|government|family|families|tribes?|[a-z]+ists?|[a-z]+ians?|"
    r"guilds?|units?|divisions?|branch(?:es)?|crews?|desks?|squads?|panels?|partners?|"
    r"suppliers?|contractors?|vendors?|providers?|curators?|editors?|reviewers?|"
    r"maintainers?|operators?|helpdesk|support)\b",
    re.I,
)
# The agent of a passive ("owned by the reliability guild"): the noun phrase after "by".
_PASSIVE_AGENT = re.compile(
    r"\bby\s+(?:(?:the|a|an|its|their|our|your|his|her)\s+)?(?:[\w-]+\s+){0,2}([\w-]+)",
    re.I,
)
# A unit of 40 words or fewer is near its focus words everywhere; in a longer one the
# asked thing must stand within NEAR_WORDS words of one of them.
SHORT_UNIT_WORDS = 40
NEAR_WORDS = 15


def _words_of(text: str) -> set[str]:
    return set(normalised_words(text))


def _new(token: str, asked: set[str]) -> bool:
    """Does the token say something the question does not? ("2019" in "What happened in
    2019?" does not.)"""
    words = normalised_words(token)
    return bool(words) and not all(word in asked or stem(word) in asked for word in words)


def _sentence_start(text: str, index: int) -> bool:
    before = text[:index].rstrip(" \t\"'“‘(")
    return not before or before[-1] in ".!?:\n•*-"


def _capitalised(text: str, asked: set[str]) -> list[re.Match[str]]:
    """Capitalised words the question does not contain; a sentence's first word only when
    it is not a function word ("The", "In")."""
    return [
        m
        for m in _NAME_WORD.finditer(text)
        if m.group()[0].isupper()  # in any alphabet: "Æthelstan", "Élysée"
        and _new(m.group(), asked)
        and not (_sentence_start(text, m.start()) and m.group().casefold() in _STOP)
    ]


def _content(word: str, asked: set[str]) -> bool:
    lowered = word.casefold()
    return lowered not in _STOP and lowered not in _PLACEHOLDERS and _new(word, asked)


def _new_matches(pattern: re.Pattern[str], text: str, asked: set[str]) -> Iterator[int]:
    return (m.start() for m in pattern.finditer(text) if _new(m.group(), asked))


# A unit's first line, when a described line follows it: a definition term or a label
# ("desc : str, optional" above "Prefix for the progress bar."). A unit never crosses a
# heading (knowledge.structure), so a short first line is the name of what it describes.
_TERM_LINE = re.compile(r"\A\s*(?:[-*•]\s+)?([^\n]+?)\s*\n\s*\S")
TERM_WORDS = 6


def _term(text: str, asked: set[str]) -> Iterator[int]:
    found = _TERM_LINE.match(text)
    if found is None:
        return
    words = list(_NAME_WORD.finditer(found[1]))
    if len(words) <= TERM_WORDS and any(_content(m.group(), asked) for m in words):
        yield found.start(1)


def _identifiers(text: str, asked: set[str]) -> Iterator[int]:
    """`code`, --flags, /paths, file.ext, snake_case, CamelCase, quoted words, a
    capitalised name inside a sentence (a menu item), a name after "run"/"by"/"use", the
    term a unit describes (`_term`)."""
    yield from _term(text, asked)
    yield from _new_matches(_CODE, text, asked)
    yield from _new_matches(_QUOTED, text, asked)
    yield from (
        m.start() for m in _capitalised(text, asked) if not _sentence_start(text, m.start())
    )
    yield from (m.start(1) for m in _NAMED_AFTER.finditer(text) if _content(m.group(1), asked))


def _ports(text: str, asked: set[str]) -> Iterator[int]:
    yield from _identifiers(text, asked)
    yield from _new_matches(_DIGITS, text, asked)


def _values(text: str, asked: set[str]) -> Iterator[int]:
    """An enumeration ("a, b or c", "either", "one of", a list), a literal or a number."""
    yield from _ports(text, asked)
    yield from (m.start() for m in _ENUMERATION.finditer(text))


def _quantities(text: str, asked: set[str], *, shares: bool = True) -> Iterator[int]:
    """Digits, number words, amounts; a duration or frequency for "how long/often". Without
    `shares`, no percentage: "54 percent of the people" counts nobody."""
    for pattern in (_DIGITS, _NUMBER, _DURATION):
        for m in pattern.finditer(text):
            if _new(m.group(), asked) and (shares or not _share(text, m)):
                yield m.start()


def _share(text: str, found: re.Match[str]) -> bool:
    token = found.group().rstrip(",.:/-")
    return token.endswith("%") or bool(_PERCENT_AFTER.match(text, found.end()))


def _counts(text: str, asked: set[str]) -> Iterator[int]:
    return _quantities(text, asked, shares=False)


def _times(text: str, asked: set[str]) -> Iterator[int]:
    """Years, dates, times, months, weekdays, "ten days"; an event ("after each upgrade")."""
    yield from _new_matches(_TIME_TOKENS, text, asked)
    for m in _TIME_EVENT.finditer(text):
        if m.group(2) or _content(m.group(1), asked):
            yield m.start()


def _places(text: str, asked: set[str]) -> Iterator[int]:
    """A URL, an e-mail or street address, a proper name, a place after "in"/"on"/"at"."""
    yield from (m.start() for m in _URL.finditer(text))
    yield from (m.start() for m in _STREET.finditer(text))
    yield from (m.start() for m in _capitalised(text, asked))
    yield from (m.start(1) for m in _LOCATIVE.finditer(text) if _content(m.group(1), asked))


def _agents(text: str, asked: set[str]) -> Iterator[int]:
    """A proper name, or a person or body named by its role ("the finance team")."""
    yield from (m.start() for m in _capitalised(text, asked))
    yield from _new_matches(_AGENT_NOUNS_IN_UNIT, text, asked)
    yield from (m.start(1) for m in _PASSIVE_AGENT.finditer(text) if _content(m[1], asked))


_DETECTORS: dict[Kind, Callable[[str, set[str]], Iterator[int]]] = {
    "identifier": _identifiers,
    "port": _ports,
    "values": _values,
    "quantity": _quantities,
    "time": _times,
    "place": _places,
    "agent": _agents,
}


# --- the other end of what is asked ----------------------------------------------------

# Pairs of opposed predicates: a unit that states only the other side ("The season will
# begin on September 5.") is on topic for "When does the season end?" and answers nothing.
# Irregular forms are listed ("began", "begun"); the rest are matched by stem.
_OPPOSED_WORDS = (
    (
        "start starts started begin began begun commence launch open opens opened opening onset "
        "premiere premiered debut debuted",
        "end ends ended finish conclude close closes closed closing expire terminate",
    ),
    ("born birth", "die died dies death dead"),
    ("maximum max highest largest", "minimum min lowest smallest"),
    ("oldest earliest", "youngest latest"),
    ("enable enables enabled", "disable disables disabled"),
    ("install installs installed", "uninstall uninstalls uninstalled"),
    ("upload uploads uploaded", "download downloads downloaded"),
)
_OPPOSED: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(map(stem, _word_set(one))), frozenset(map(stem, _word_set(other))))
    for one, other in _OPPOSED_WORDS
)
# Each stem of a pair's side, to the stems of the other side.
_OPPOSITE: dict[str, frozenset[str]] = {
    word: other
    for one, two in _OPPOSED
    for side, other in ((one, two), (two, one))
    for word in side
}


def _states_predicate(unit: str, focus: frozenset[str], question: str) -> bool:
    """The unit holds the question's last focus word: what "Does the service support
    IPv6?" asks about, "IPv6" ("It is encrypted" states "Is the file encrypted?"; "The
    service supports several protocols" does not state the IPv6 question), or its opposite
    ("It is disabled" answers "Is it enabled?": no). Weak by design: a half-of-the-words
    rule kept a third of RAGBench's utilized sentences."""
    ordered = [s for s in content_stems(question) if s in focus] or sorted(focus)
    if not ordered:
        return True
    held = set(content_stems(unit))
    # Stated by its opposite: "It is disabled by default." answers "Is it enabled?": no.
    return ordered[-1] in held or bool(held & _OPPOSITE.get(ordered[-1], frozenset()))


def _names_an_alternative(unit: str, question: str) -> bool:
    """The unit names one of the question's alternatives: at least half of its words
    (stemmed, function words aside), so that "Royal Blood's" names "Royal Blood" and "Ahmad
    ibn Muhammad al-Nahawandi" names "Ahmad Nahavandi"; a unit about a third band names
    neither "Kitchens of Distinction" nor "Royal Blood"."""
    named = alternatives(question)
    if named is None:
        return True
    held = {stem(word) for word in normalised_words(unit)}
    for alternative in named:
        words = [w for w in normalised_words(alternative) if w not in _STOP] or (
            normalised_words(alternative)
        )
        if words and 2 * sum(stem(word) in held for word in words) >= len(words):
            return True
    return False


def unit_has_kind(unit: str, kind: Kind, focus: frozenset[str], question: str = "") -> bool:
    """Does the unit hold something of the kind asked for, near the focus words (stems)?

    A token the question already contains is not the asked thing ("Microsoft" does not
    answer "Who founded Microsoft?"). A yes/no question is answered by a unit that states
    its predicate, asserted or negated (`_states_predicate`); a question that names its
    alternatives, by a unit that names one of them."""
    if kind == "yes_no":
        return _states_predicate(unit, focus, question)
    if kind == "choice":
        return _names_an_alternative(unit, question)
    asked = _words_of(question) | set(focus)
    words = [(m.start(), m.group()) for m in _WORD.finditer(unit)]
    unit_stems = [stem(w.casefold()) for _, w in words]
    detector = _counts if kind == "quantity" and _counts_only(question) else _DETECTORS[kind]
    offsets = list(detector(unit, asked))
    if not offsets:
        return False
    near = [n for n, s in enumerate(unit_stems) if s in focus]
    if len(words) <= SHORT_UNIT_WORDS or not near:
        return True
    starts = [start for start, _ in words]
    for offset in offsets:
        index = sum(1 for start in starts if start <= offset) - 1
        if any(abs(index - n) <= NEAR_WORDS for n in near):
            return True
    return False


# "End" that names no end: "who does she end up with", "who dies at the end of the film".
_NO_END = re.compile(r"\bend(?:s|ed|ing)?\s+up\b|\b(?:at|by|in|towards?)\s+the\s+end\b", re.I)


def _predicate_stems(text: str) -> set[str]:
    return {stem(word) for word in normalised_words(_NO_END.sub(" ", text))}


def states_the_other_end(question: str, unit: str) -> bool:
    """The question asks about one side of an opposed pair (an end, a death, a maximum)
    and the unit speaks only of the other (a beginning, a birth, a minimum). A unit that
    names both sides ("born in 1820 and died in 1878") may hold the answer: False there."""
    asked, held = _predicate_stems(question), _predicate_stems(unit)
    for first, second in _OPPOSED:
        for side, other in ((first, second), (second, first)):
            if asked & side and not asked & other and held & other and not held & side:
                return True
    return False


def _counts_only(question: str) -> bool:
    """Does the question ask "how many", a count? A percentage ("54 percent of the people
    died") is no count, unless the question itself asks about a share."""
    return bool(_COUNT.search(question)) and not _SHARE.search(question)


def answer_type_agrees(question: str, unit: str) -> bool:
    """True when the question asks for no clear kind, or the unit holds one of its kind.
    A unit that ends by asking a question (an FAQ's heading, "Who is collecting my
    information?") holds nothing of any kind: False, whatever was asked. Nor does a unit
    that states only the other end of what is asked (`states_the_other_end`), unless the
    question asks yes or no, or between alternatives (there the other end may be the
    answer: "Did prices rise?" "They fell.")."""
    if is_question(unit):
        return False
    kind = question_kind(question)
    if kind not in ("yes_no", "choice") and states_the_other_end(question, unit):
        return False
    if kind is None:
        return True
    return unit_has_kind(unit, kind, focus_terms(question), question)
