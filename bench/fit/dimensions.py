"""What one scenario's capacity search varies, and where the memory model says to start.

A probe is the scenario at one value of the searched dimension (batch_size or seq_len), made short:
`warmup_steps` untimed steps, then a window of `steps` timed ones, the samples set to exactly that;
it is named NAME.bB (NAME.sS for seq_len) so each probe is its own results row. The prediction is
the largest value whose predicted torch-allocated peak fits the allocator's cap (bench/predict:
monotone in batch and sequence, so a bisection over the predictions finds it)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BadInput, GpubenchError
from ..families import family_of, read_config
from ..memory.terms import MB
from ..planner import rules
from ..recipe.scenario import MAX_NAME_BYTES, WHOLE_RANGES, Scenario

DIMENSIONS = ("batch_size", "seq_len")
PREFIX = {"batch_size": "b", "seq_len": "s"}
MAX_SAMPLES = WHOLE_RANGES["samples"][1]


@dataclass(frozen=True)
class ProbeShape:
    dimension: str  # batch_size or seq_len
    warmup_steps: int
    steps: int  # timed optimizer steps per probe
    memory_cap_mb: float | None  # the allocator's cap (GPU) or the stand-in's (CPU); None: the GPU as it is

    def scenario(self, sc: Scenario, value: int) -> Scenario:
        """`sc` at `value`, as a short probe (validated: a bad value is BadInput)."""
        batch = value if self.dimension == "batch_size" else sc.batch_size
        steps = self.warmup_steps + self.steps
        return rules.check(  # a value the registries refuse (cp over seq_len) is BadInput too
            sc.replace(
                name=probe_name(sc.name, self.dimension, value),
                **{self.dimension: value},
                samples=batch * sc.grad_accum_steps * steps,
                warmup_steps=self.warmup_steps,
                window=self.steps,
                profile_steps=0,
                profile_memory=False,
                memory_cap_mb=self.memory_cap_mb,
            )
        )


def probe_name(name: str, dimension: str, value: int) -> str:
    return f"{name}.{PREFIX[dimension]}{value}"


def value_range(sc: Scenario, model: str, shape: ProbeShape, most: int | None) -> tuple[int, int]:
    """The values a search may probe: from 1 to the dimension's largest (the scenario's limit, the
    samples a probe can hold, a model's position embeddings for seq_len, --max)."""
    low, high = WHOLE_RANGES[shape.dimension]
    if shape.dimension == "batch_size":
        high = min(high, MAX_SAMPLES // (sc.grad_accum_steps * (shape.warmup_steps + shape.steps)))
    else:
        if family_of(model).vision:
            raise BadInput(f"scenario '{sc.name}': --dimension seq_len, but {model} is a vision model (no sequence)")
        positions = read_config(model).get("max_position_embeddings")
        if isinstance(positions, int) and positions > 0:
            high = min(high, positions)
    if most is not None:
        high = min(high, most)
    if len(probe_name(sc.name, shape.dimension, high).encode("utf-8")) > MAX_NAME_BYTES:
        raise BadInput(
            f"scenario '{sc.name}': its name leaves no room for a probe's suffix (.{PREFIX[shape.dimension]}N)"
        )
    if high < low:
        raise BadInput(f"scenario '{sc.name}': no {shape.dimension} from {low} to {high} to search")
    shape.scenario(sc, low), shape.scenario(sc, high)  # each end builds, or BadInput now
    return max(low, 1), high


@dataclass(frozen=True)
class Prediction:
    largest: int | None  # the largest value predicted to fit; 0: not even the smallest; None: no prediction
    peak_mb: float | None  # the predicted allocated peak there
    note: str  # why there is no prediction, or what it rests on


def predict_largest(sc: Scenario, model: str, shape: ProbeShape, cap_mb: float, low: int, high: int) -> Prediction:
    """The largest value in [low, high] whose predicted peak (torch-allocated, MB) is at most `cap_mb`."""
    from ..predict.predictions import prediction_of

    def peak(value: int) -> float | None:
        p = prediction_of(shape.scenario(sc, value), model)
        return p.peak / MB if p.activations_predicted else None

    try:
        first = peak(low)
    except GpubenchError as exc:
        return Prediction(None, None, f"not predicted: {exc}")
    if first is None:
        return Prediction(None, None, "not predicted: the memory model has no activations for this model")
    if first > cap_mb:
        return Prediction(0, first, f"even {shape.dimension} {low} is predicted to need {first:,.0f} MB")
    top = peak(high)
    if top is not None and top <= cap_mb:
        return Prediction(high, top, f"the largest {shape.dimension} searched ({high}) is predicted to fit")
    fits, over = low, high  # peak(fits) <= cap < peak(over)
    while over - fits > 1:
        mid = (fits + over) // 2
        mid_peak = peak(mid)
        if mid_peak is not None and mid_peak <= cap_mb:
            fits = mid
        else:
            over = mid
    return Prediction(fits, peak(fits), "the memory model (docs/memory.md)")
