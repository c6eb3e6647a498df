"""PersonalQ: select, quantize and serve a repository of personalized text-to-image checkpoints.

Importing the package turns off every telemetry channel of the libraries it uses, before any of
them is imported, so that nothing leaves the machine by default.
"""

from personalq.config import disable_telemetry

disable_telemetry()

__version__ = "0.1.0"
