"""One lock for first use of diffusers' lazily loaded names.

diffusers exposes its classes through a lazy module: the first `from diffusers import X` imports the
submodule behind X. Two threads doing that at once can make one of them fail with "ImportError:
cannot import name X" (two concurrent first uploads, or an upload while the first render loads the
pipeline). Every import of a diffusers name on a path that worker threads run sits under this lock.
"""

from __future__ import annotations

import threading

DIFFUSERS_IMPORT = threading.RLock()
