"""Who may change the server: settings, uploads and removals are server-wide, chat is per session.

On a public deploy every visitor shares one repository and one set of settings, so changing either
must be reserved: with `PERSONALQ_ADMIN_TOKEN` set, only a request that gives that token may upload,
remove a checkpoint or save settings; `PERSONALQ_UPLOADS=off` turns uploads off for everyone. Without
either variable the app behaves as a single-user local app. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass

_OFF = {"0", "off", "false", "no", "disabled"}


class AccessDenied(PermissionError):
    """A request this server's access policy refuses; the message is one line for the user."""


@dataclass(frozen=True)
class AccessPolicy:
    admin_token: str | None = None
    uploads_enabled: bool = True

    @classmethod
    def from_env(cls) -> AccessPolicy:
        token = os.environ.get("PERSONALQ_ADMIN_TOKEN", "").strip() or None
        uploads = os.environ.get("PERSONALQ_UPLOADS", "on").strip().lower() not in _OFF
        return cls(admin_token=token, uploads_enabled=uploads)

    @property
    def locked(self) -> bool:
        """Whether server-wide changes need the admin token."""
        return self.admin_token is not None

    def check_admin(self, token: str | None, action: str) -> None:
        if self.admin_token is None:
            return
        if not token or not hmac.compare_digest(str(token).strip().encode(), self.admin_token.encode()):
            raise AccessDenied(f"{action} needs the admin token on this server")

    def check_upload(self, token: str | None) -> None:
        if not self.uploads_enabled:
            raise AccessDenied("uploads are turned off on this server")
        self.check_admin(token, "uploading")
