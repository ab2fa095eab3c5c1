"""How the cross-encoder reads a candidate: the one text format training, evaluation and
the running judge share. Standard library only, so the training tools (tools/judge, in
their own venv) import it as the app does."""


def judge_segment(sentence: str, context: str = "", before: str = "") -> str:
    """The second segment the cross-encoder reads: the candidate sentence first, then where
    it stands (title › headings) and the sentence before it, each after a [SEP].

    Training, evaluation and the running judge all build it here. Truncation (longest
    first) cuts this segment from its end: the sentence before goes first, the candidate
    sentence last.
    """
    return " [SEP] ".join([sentence.strip(), context.strip(), before.strip()])
