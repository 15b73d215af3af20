"""`gpubench verify`: the documents' claims as data, judged by measurement on this machine.

claims.py      the one reader and validator of claim files (claims/*.toml)
verdict.py     the verdict rules: pure arithmetic on figures (holds, does not hold, inconclusive)
plan.py        the scenarios the claims need, one matrix, deduplicated; what is not comparable here
arithmetic.py  bytes per parameter, optimizer memory (the memory model) and C = 6PD (the FLOP count)
judge.py       one claim's record from the run's rows or from arithmetic
session.py     end to end: read, run through bench.api.run, judge, write DIR/verify.json
render.py      the table, markdown, JSON, CSV; the verdicts that changed between two verify runs
"""
