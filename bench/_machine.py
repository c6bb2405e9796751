"""The facts printed next to every benchmark table."""

from __future__ import annotations

import os
import platform
import sys


def machine_facts() -> dict[str, object]:
    import tensordict
    import torch

    import tdview

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "tensordict": tensordict.__version__,
        "tdview": tdview.__version__,
        "platform": platform.platform(),
    }
