"""A small labelled set for memory relevance (issue 26): (a part of a question, a memory
entry's text, whether the entry is about that part). Written by hand from the demo corpus,
the test corpora and the cases users reported; `bench/memory_relevance.py` measures the
threshold on it and `tests/memory/test_memory_scope.py` checks the shipped one.

"About" means: the entry's words would help find the answer to that part (the same
subject and property), not merely share a word with it.
"""

from answers.judge.lexical import TermWeights, content_stems

PAIRS: tuple[tuple[str, str, bool], ...] = (
    # Corrections and facts about the same subject and property.
    (
        "How long are invoices retained?",
        "Invoices are retained as the accounting policy says, not the handbook.",
        True,
    ),
    ("How long are invoices retained?", "Invoices are retained for ten years.", True),
    (
        "What is our retention period for invoices?",
        "The invoice retention period is in the new accounting policy.",
        True,
    ),
    ("Who owns service reviews?", "The platform operations team owns service reviews.", True),
    (
        "Who approves service reviews?",
        "Service reviews are approved by the chief technology officer.",
        True,
    ),
    (
        "When are production databases backed up?",
        "Production databases are backed up every night at 02:00 UTC.",
        True,
    ),
    (
        "What currency is the invoice dataset in?",
        "All amounts in the invoice dataset are stated in euros (EUR), net of VAT.",
        True,
    ),
    ("Which currency are invoice amounts in?", "Invoice amounts are stated in euros.", True),
    (
        "When does the ferry pier close?",
        "The old ferry pier closes two hours before low tide.",
        True,
    ),
    (
        "Is the parser thread safe?",
        "The parser is thread safe since version 2; see the threading notes.",
        True,
    ),
    (
        "What is the default timeout of the client?",
        "The client's default timeout is set in the configuration reference.",
        True,
    ),
    (
        "How often are backups tested?",
        "Backups are tested every quarter by restoring one database.",
        True,
    ),
    (
        "What does a service review cover?",
        "Each service review covers availability, incidents and open risks.",
        True,
    ),
    (
        "Where are travel expenses reported?",
        "Travel expenses are reported in the finance portal, not by email.",
        True,
    ),
    ("How much is the travel budget per trip?", "The travel budget is 500 euros per trip.", True),
    # One shared word, another subject: the reported case and its like.
    (
        "Which platform is affected when the library is used from several threads?",
        "The platform operations team owns service reviews.",
        False,
    ),
    ("How long are invoices retained?", "Backups run at night.", False),
    (
        "How long are invoices retained?",
        "The platform operations team owns service reviews.",
        False,
    ),
    ("Who owns service reviews?", "Invoices are retained for ten years.", False),
    ("What is the capital of France?", "The platform operations team owns service reviews.", False),
    ("Who owns the incident process?", "The platform operations team owns service reviews.", False),
    ("When are production databases backed up?", "Invoices are retained for ten years.", False),
    (
        "What is the default timeout of the client?",
        "The server closes idle connections after a timeout.",
        False,
    ),
    ("Is the parser thread safe?", "The platform operations team owns service reviews.", False),
    (
        "How much is the travel budget per trip?",
        "The platform team budget is reviewed every quarter.",
        False,
    ),
    ("What currency is the invoice dataset in?", "Invoices are retained for ten years.", False),
    (
        "Which team reviews security incidents?",
        "Each service review covers availability, incidents and open risks.",
        False,
    ),
    ("When does the ferry pier close?", "The library closes at six on Fridays.", False),
    (
        "How often are backups tested?",
        "Production databases are backed up every night at 02:00 UTC.",
        False,
    ),
    ("What is the retention period of log files?", "Invoices are retained for ten years.", False),
)


def set_weights() -> TermWeights:
    """IDF over the set's own texts, each text one document: what the measurement and the
    test weigh stems with."""
    texts = list(dict.fromkeys(text for pair in PAIRS for text in pair[:2]))
    frequencies: dict[str, int] = {}
    for text in texts:
        for stem in set(content_stems(text)):
            frequencies[stem] = frequencies.get(stem, 0) + 1
    return TermWeights(frequencies, len(texts))
