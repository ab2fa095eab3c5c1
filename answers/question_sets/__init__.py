"""A space's own question sets (issue 47, item 6): a curator's questions with the text that
answers each (or none), run through the real answer pipeline as a reader of the space would
ask them, with the figures and the precision/coverage curve they give, and the space's
operating point a curator may move along that curve (never below the policy's floor).

`parsing` reads an uploaded CSV or JSONL file (or the browser form's rows); `services`
changes state (create, run, set the point); `selectors` read, for the space's curators
only; `figures` are pure functions over stored results.
"""
