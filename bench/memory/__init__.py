"""The memory model: each scenario's GPU memory predicted from the model's parameter tensors and the
scenario's settings, by term and phase. Pure arithmetic, no torch: it needs no GPU. `gpubench
predict` and the pred_* columns (bench/predict/) are its users; nothing here imports them.

Family-free:
  tensors.py     a parameter tensor (name, shape), from a family's config or a built model's parameters
  terms.py       bytes per term from a list of tensors: weights, gradients, optimizer states and
                 temporaries (per-tensor rules), autocast copies, workspaces
  sharding.py    the per-GPU terms under DDP, FSDP and DeepSpeed
  prediction.py  what a prediction is (terms, phases, peak) and the notes every family shares
  generic.py     any tensor list's model states, tensor by tensor, and a prediction that says its
                 activations are not predicted (a family with no activation model)
  dispatch.py    which memory model a config takes: the one its family's row names (Family.memory,
                 a prediction.MemoryModel), found by model_type in the registry
A family's own memory model (its dimensions, tensors, saved activations and phases) lives in its
folder under bench/families/ (bench/families/bert/, bench/families/llama/).
docs/memory.md cites the sources.
"""
