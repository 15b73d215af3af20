"""The engines' implementations, one module each, named by their rows in bench/recipe/engine_registry.py (the
torch-free registry) and imported only when a worker trains with them; base.py holds what every
engine gets (EngineInputs)."""
