"""The parent side of `gpubench run`, in pipeline order:

request.py   what the user asked for, and the checks that need no file or child (exit 2)
probe.py     what torch sees, asked of a child so the parent never creates a CUDA context
plan.py      the request resolved to scenarios, device, model and result directory
outdir.py    the result directory: never another run's, locked while the run writes it
envinfo.py   the machine and software, for env.json
childenv.py  the environment every child starts with
launcher.py  how workers start: a fork server (default) or a fresh interpreter each
proc.py      the one helper that starts a child process: argument list, timeout, process group
reaper.py    what every child runs under: its whole tree ends with it, and when gpubench dies
runner.py    each scenario x repeat in its own worker; a failing worker becomes a row
required.py  --require: the scenarios whose skip fails the run (exit 5)
progress.py  the progress lines on stderr
session.py   all of it end to end (`gpubench run`, `gpubench env`)
"""
