"""Memory, explained: what each scenario should hold on the GPU, from arithmetic alone (no torch).

config.py   the model's dimensions and its exact parameter tensors (BERT for sequence classification)
terms.py    bytes per term: weights, gradients, optimizer states and temporaries, activations, ...
phases.py   the terms combined into the forward / backward / optimizer-step peaks of one scenario
measured.py the measured counterparts from a results row, and a calibration from a previous run
render.py   the `gpubench predict` table and JSON
The facade the runner and the CLI call is bench/memory_model.py; the README ("Memory, explained") cites the sources.
"""
