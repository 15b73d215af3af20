"""The hook's state in a process that gpubench launched: the step clock of the built-in worker
(bench/worker/clock.py) over a foreign loop, its samples and tokens per step, and the result file.

Torch is imported here, only when the hook is on (DIR_VAR set)."""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from ..fsio import atomic_write_json
from ..measure.probes import make_probes
from ..worker.clock import StepClock
from ..worker.tracking import LossTracker, memory_figures
from ..worker.window import WindowRule
from .protocol import (
    DEVICE_VAR,
    DIR_VAR,
    LAUNCHED_VAR,
    NESTED,
    NEVER_CALLED,
    TIMEOUT_VAR,
    WARMUP_VAR,
    WINDOW_VAR,
    env_rank,
    rank_file,
    window_setting,
)

NO_END = 1 << 62  # a foreign loop's length is unknown: the window rule or the loop's end closes the window


def _count(value: Any) -> Any:
    """A count as given: a number, or a tensor (tokens_from_labels) added up on its device."""
    return value.detach() if isinstance(value, torch.Tensor) else value


class Session:
    def __init__(self, environ: dict[str, str]) -> None:
        self.dir = Path(environ[DIR_VAR])
        self.rank, self.world = env_rank(environ)
        self.warmup = int(environ.get(WARMUP_VAR, "0"))
        self.window = window_setting(environ.get(WINDOW_VAR, "epoch"))
        self.want_cuda = environ.get(DEVICE_VAR, "cpu") != "cpu"
        self.launched_at = float(environ.get(LAUNCHED_VAR, time.time()))
        self.timeout_s = float(environ.get(TIMEOUT_VAR, "1800"))
        self.clock: StepClock | None = None
        self.device = torch.device("cpu")
        self.samples: Any = 0  # over the window's steps
        self.tokens: Any = 0
        self.tokens_given = False
        self.losses = LossTracker()
        self.losses_given = False
        self.settings: dict[str, Any] = {}  # what the script reported (bench.hook.settings)
        self.open = False  # between begin() and end()
        self.closed = False
        self.failure = ""  # why the row is an error whatever the figures: a nested step, the script's exception

    def _start(self) -> StepClock:
        """At the first step: the device the loop trains on, and with several ranks the barrier
        (and auto's agreement) of the process group the script made."""
        if self.want_cuda and torch.cuda.is_available() and torch.cuda.is_initialized():
            self.device = torch.device("cuda", torch.cuda.current_device())
        barrier = agree = None
        if self.world > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            from ..worker import dist

            barrier = dist.barrier
            if self.window == "auto":
                agree = dist.window_agreement(dist.collective_timeout_s(self.timeout_s))
        atomic_write_json(rank_file(self.dir, self.rank), {"status": "running", "pid": os.getpid()})
        clock = StepClock(
            self.device,
            warmup_steps=self.warmup,
            total_steps=NO_END,
            samples_per_step=0,  # counted per step here
            tokens_per_sample=0,
            probes=make_probes(str(self.device)),
            barrier=barrier,
            window=WindowRule(self.window),
            agree=agree,
        )
        clock.train_begin()
        return clock

    def begin(self) -> None:
        if self.open and not self.failure:
            self.failure = NESTED
        if self.clock is None:
            self.clock = self._start()
        self.open = True

    def abandon(self) -> None:
        """The open step raised: it is not counted."""
        self.open = False

    def fail(self, reason: str) -> None:
        """The process ends with this error: write it as this rank's result now."""
        self.failure = self.failure or reason
        self.close()

    def end(self, samples: Any, tokens: Any = None, loss: Any = None) -> bool:
        """One optimizer step ended; True once the window has closed (the loop may stop)."""
        if self.clock is None:
            self.begin()
        clock = self.clock
        assert clock is not None
        self.open = False
        if loss is not None:
            self.losses.track(loss if isinstance(loss, torch.Tensor) else torch.tensor(float(loss)))
            self.losses_given = True
        timed = clock.window_stop is None and clock.steps_seen + 1 > self.warmup
        if timed:
            self.samples = self.samples + _count(samples)
            if tokens is not None:
                self.tokens = self.tokens + _count(tokens)
                self.tokens_given = True
        return clock.step_end()

    @property
    def done(self) -> bool:
        return self.clock is not None and self.clock.done

    def close(self) -> None:
        """Write this process's result (once): the worker's shape, so the parent builds its row alike."""
        if self.closed:
            return
        self.closed = True
        try:
            failed: dict[str, Any] = {"status": "error", "reason": self.failure, "figures": {}}
            result = failed if self.failure else self._result()
        except Exception as exc:  # the hook must never turn a finished script into a crash
            traceback.print_exc()
            result = {"status": "error", "reason": f"gpubench's hook failed: {type(exc).__name__}: {exc}"[:500]}
        result.update({"rank": self.rank, "world_size": self.world, "pid": os.getpid(), "settings": self.settings})
        atomic_write_json(rank_file(self.dir, self.rank), result)

    def _result(self) -> dict[str, Any]:
        clock = self.clock
        if clock is None:
            return {"status": "error", "reason": NEVER_CALLED, "figures": {}}
        clock.end_at_last_step()
        if clock.end_step is None:
            why = (
                f"the loop ran {clock.steps_seen} optimizer steps, not more than warmup_steps = {self.warmup}: "
                "no step was timed; run more steps or lower warmup_steps"
            )
            return {"status": "error", "reason": why, "figures": memory_figures(self.device)}
        figures = clock.summary()
        samples = float(self.samples)
        window_s = figures["window_s"]
        figures["window_samples"] = int(samples) if samples.is_integer() else samples
        figures["samples_per_s"] = samples / window_s if window_s > 0 else None
        figures["tokens_per_s"] = float(self.tokens) / window_s if self.tokens_given and window_s > 0 else None
        figures["startup_s"] = (clock.wall_begin or time.time()) - self.launched_at
        figures.update(memory_figures(self.device))
        figures["host"] = os.uname().nodename  # kept per rank in rank_figures (bench/worker/ranks.py)
        if self.losses_given:
            figures.update(self.losses.result())
        status, reason = "ok", ""
        if self.losses_given and not figures["loss_finite"]:
            status, reason = (
                "diverged",
                f"{figures['nonfinite_losses']} non-finite losses; final loss {figures['final_loss']}",
            )
        return {"status": status, "reason": reason, "figures": figures}
