"""The optimizers a scenario can name, as data (torch-free; read by bench/recipe/scenario.py and the
engine registry, bench/recipe/engine_registry.py)."""

from __future__ import annotations

# our name -> the HF Trainer's `optim` string; None: gpubench builds the optimizer itself and hands
# it to the Trainer through `optimizers=` (bench/worker/optimizers.py make_optimizer)
OPTIMIZERS: dict[str, str | None] = {
    "adamw": "adamw_torch",  # torch's default implementation (foreach on CUDA)
    "adamw_fused": "adamw_torch_fused",
    "adamw_foreach": None,  # torch.optim.AdamW(foreach=True), said explicitly
    "adafactor": "adafactor",
    "adamw_8bit": "adamw_bnb_8bit",
    "paged_adamw_8bit": "paged_adamw_8bit",  # bitsandbytes' paged 8-bit AdamW (states in unified memory)
    "adam8bit_manual": None,  # the guide's manual recipe: bnb.optim.Adam8bit with its decay groups
    "sgd": "sgd",
}

# the optimizers bitsandbytes implements: a scenario naming one imports it (bench/worker/skips.py,
# bench/recipe/scenario.py cuda_at_import)
BITSANDBYTES_OPTIMIZERS = ("adamw_8bit", "paged_adamw_8bit", "adam8bit_manual")
