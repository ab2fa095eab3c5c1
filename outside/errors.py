class OutsideError(Exception):
    """An outside call that did not give evidence; `code` is a SPEC §5 outcome code, `retryable`
    whether a later try may succeed. The message is for logs of koinon's own making, never
    provider text."""

    def __init__(self, code: str, detail: str = "", *, retryable: bool = False) -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail
        self.retryable = retryable
