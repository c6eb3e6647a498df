"""PersonalQ: select, quantize and serve a repository of personalized text-to-image checkpoints.

Importing the package turns off every telemetry channel of the libraries it uses, before any of
them is imported, so that nothing leaves the machine by default.
"""

import logging

from personalq.config import disable_telemetry
from personalq.lazy import lazy_exports

disable_telemetry()
# bitsandbytes (CUDA Linear layers) warns on every import of diffusers or peft, on CPUs with AVX512-BF16,
# that the optional `kernels` package is absent; that package would fetch a kernel from the Hub at run
# time, which PersonalQ never wants, so the notice only alarms users.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)

__version__ = "0.1.0"

# `PersonalQ` is resolved on first use: the store it opens costs about 1.5 s to import (SQLModel, Chroma),
# which `import personalq` (done by app.py and every CLI command only to turn telemetry off) must not pay.
__getattr__ = lazy_exports(__name__, {"PersonalQ": "personalq.library", "open_repository": "personalq.library"})
__all__ = ["PersonalQ", "open_repository"]
