"""What a recipe is: a scenario (a plain validated value) and the torch-free tables it is checked
against without a registry of models (engines, precisions, optimizer names, the device mesh, nodes)."""
