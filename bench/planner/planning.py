"""The plan-time checks of every command that reads a matrix (`run`, `fit`, `predict`, `list`): one
function, plan_scenarios, so a scenario one of them refuses, all refuse, with the same line and
exit 2, before any worker starts. It resolves and checks each model (bench/families/resolve.py), checks that
each can be built and trained as its scenario asks (bench/families/plancheck.py: the task, its
class, the config, LoRA's targets), that a command's program exists, and that each data kind
serves its task (bench/planner/datakinds.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import BadInput
from ..families import for_config, read_config, resolve_task
from ..families import origin as model_origin
from ..families.plancheck import check_trainable
from ..families.resolve import check_model, display_name, resolve_model
from ..recipe.scenario import Scenario
from . import datakinds, rules


def plan_scenarios(scenarios: tuple[Scenario, ...], device: str) -> tuple[tuple[Scenario, ...], list[str]]:
    """(the scenarios with their data files made absolute, the models they resolve to on `device`);
    BadInput for the first that cannot run as it says (the registries' rules first: bench/planner/rules.py)."""
    scenarios = rules.check_all(scenarios)
    for sc in scenarios:
        if sc.is_command:
            check_program(sc.command[0], f"{sc.origin or 'the matrix'}: scenario '{sc.name}': command")
    models = resolve_models(scenarios, device)
    for sc in scenarios:
        if not sc.is_command:
            check_trainable(sc, resolve_model(sc.model, device))
    return check_data(scenarios, device), models


def resolve_models(scenarios: tuple[Scenario, ...], device: str) -> list[str]:
    """Each scenario's model resolved for the device and checked (its config names an architecture
    something builds; a checkpoint's weights are safetensors)."""
    models = sorted({resolve_model(s.model, device) for s in scenarios if not s.is_command})
    for resolved in models:
        check_model(resolved)
    return models


def check_program(program: str, where: str) -> None:
    """The command's program exists here (a name on PATH, or a path): else bad input, before any run."""
    if shutil.which(program) is None:
        raise BadInput(
            f"{where}: {program!r} is not a program on PATH nor an executable file", hint="check its spelling"
        )


def check_data(scenarios: tuple[Scenario, ...], device: str) -> tuple[Scenario, ...]:
    """Each scenario's data kind serves its model's task and its files are usable (bench/planner/datakinds.py);
    paths become absolute, so the rows and scenarios.json name the files that ran."""
    out = []
    for sc in scenarios:
        if sc.data == datakinds.DEFAULT or sc.is_command:  # a command reads its own data
            out.append(sc)
            continue
        model = resolve_model(sc.model, device)
        cfg = read_config(model)
        task = resolve_task(sc.task, cfg, for_config(cfg, model_origin(model)), model_origin(model))
        settings = datakinds.DataSettings(tokenizer=sc.tokenizer, column=sc.data_column, held_out=sc.eval_samples > 0)
        try:
            datakinds.check(sc.data, task, cfg, settings, display_name(model))
        except BadInput as exc:
            raise BadInput(f"scenario '{sc.name}': {exc.message}", hint=exc.hint) from None
        tokenizer = str(Path(sc.tokenizer).expanduser().resolve()) if sc.tokenizer else ""
        out.append(sc.replace(data=datakinds.absolute(sc.data), tokenizer=tokenizer))
    return tuple(out)
