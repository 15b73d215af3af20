"""`python -m bench.worker SPEC.json RESULT.json` trains one scenario; `--probe OUT.json` describes torch.

The child's only output to the parent is the JSON file it writes atomically at the end; stdout
and stderr are logs. A worker that dies without writing it is reported by the parent as crashed.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

from ..fsio import atomic_write_json, read_json


def classify(exc: BaseException) -> dict[str, Any]:
    """A failure as a result: out-of-memory apart from other errors."""
    import torch

    text = f"{type(exc).__name__}: {exc}".strip()
    first_line = text.splitlines()[0] if text else type(exc).__name__
    oom = isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text.lower()
    return {"status": "oom" if oom else "error", "reason": first_line[:500], "figures": {}}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"] and len(argv) == 2:
        from .probe import probe

        atomic_write_json(Path(argv[1]), probe())
        return 0
    if len(argv) != 2:
        print("usage: python -m bench.worker SPEC.json RESULT.json | --probe OUT.json", file=sys.stderr)
        return 2
    spec_path, result_path = Path(argv[0]), Path(argv[1])
    spec = read_json(spec_path)
    from .run import Skip, memory_figures, run

    try:
        result = run(spec, scratch=result_path.parent / "scratch")
    except Skip as exc:
        result = {"status": "skipped", "reason": str(exc), "figures": {}}
    except Exception as exc:  # recorded as a row; the parent's run goes on
        traceback.print_exc()
        result = classify(exc)
        try:
            import torch

            result["figures"] = memory_figures(torch.device(spec["device"]))
        except Exception:
            pass
    atomic_write_json(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
