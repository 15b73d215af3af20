"""Reports of one result set.

data.py      the pure part: results and env in, a Report (summary, findings, problems) out
table.py     the terminal summary table that `gpubench run` prints
html.py      report.html, with charts.py's SVG charts (matplotlib, imported only when drawing)
markdown.py  the same report as markdown, for a pull request
records.py   the summary as records: `gpubench report --format json|csv`
"""
