"""`python -m bench` is the `gpubench` command."""

from .cli import main

main()
