"""Outside evidence channels (SPEC §5, issue 50): reaching servers koinon does not run.

`addresses` decides which hosts may be reached (the SSRF rules), `fetch` reads one URL within
limits, `errors` is the failure every channel raises. Plain modules, no models: what an outside
call returns becomes evidence only once stored as a snapshot, elsewhere.
"""
