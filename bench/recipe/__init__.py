"""What to run: a scenario (a plain validated value), the matrix that expands into scenarios, the
registries' rules over them, planning, and the torch-free tables they read (models, data kinds,
engines, precisions, optimizers, the device mesh, nodes)."""
