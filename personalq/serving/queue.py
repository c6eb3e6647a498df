"""A bounded request queue: fair round-robin across clients, progress, cancellation, per-request errors.

Fairness matters more than FIFO here: one user queueing fifty images must not starve another's one.
Requests are grouped by `GenerationRequest.client` and served one per client in turn.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Self

from personalq.serving.requests import (
    GenerationRequest,
    GenerationResult,
    ProgressCallback,
    RequestCancelled,
    ServingError,
)


class QueueFull(ServingError):
    """The queue already holds its maximum of pending requests."""


class RequestHandle:
    """The caller's view of one submitted request."""

    def __init__(self, request: GenerationRequest, progress: ProgressCallback | None):
        self.request = request
        self.progress = progress
        self.status = "queued"  # queued -> running -> done | failed | cancelled
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._result: GenerationResult | None = None
        self._error: BaseException | None = None

    def cancel(self) -> None:
        """Cancel: a queued request never runs, a running one stops at its next denoising step."""
        self._cancel.set()

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> GenerationResult:
        """The result, or the request's own error (ServingError, RequestCancelled) raised here."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"request not finished after {timeout} s (status: {self.status})")
        if self._error is not None:
            raise self._error
        return self._result

    def _finish(self, result: GenerationResult | None, error: BaseException | None) -> None:
        self._result, self._error = result, error
        self.status = "done" if error is None else "cancelled" if isinstance(error, RequestCancelled) else "failed"
        self._done.set()


class RequestQueue:
    """Runs submitted requests on `workers` threads through one manager.

    The manager serves one request at a time (it owns one pipeline), so one worker per manager
    is the default; extra workers only help when requests spend time outside the manager.
    """

    def __init__(self, manager, workers: int = 1, max_pending: int = 64):
        if workers < 1 or max_pending < 1:
            raise ValueError("workers and max_pending must be at least 1")
        self.manager = manager
        self.max_pending = max_pending
        self._by_client: OrderedDict[str | None, deque[RequestHandle]] = OrderedDict()
        self._pending = 0
        self._closed = False
        self._ready = threading.Condition()
        self._threads = [threading.Thread(target=self._work, name=f"personalq-serve-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, request: GenerationRequest, progress: ProgressCallback | None = None) -> RequestHandle:
        with self._ready:
            if self._closed:
                raise ServingError("the queue is closed")
            if self._pending >= self.max_pending:
                raise QueueFull(f"the queue is full ({self.max_pending} requests pending); try again shortly")
            handle = RequestHandle(request, progress)
            self._by_client.setdefault(request.client, deque()).append(handle)
            self._pending += 1
            self._ready.notify()
            return handle

    def pending(self) -> int:
        with self._ready:
            return self._pending

    def close(self, wait: bool = True) -> None:
        """Stop taking requests; workers finish what is queued, then exit."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        if wait:
            for thread in self._threads:
                thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _next(self) -> RequestHandle | None:
        """The head of the client first in rotation; that client then goes to the back."""
        with self._ready:
            while self._pending == 0:
                if self._closed:
                    return None
                self._ready.wait()
            client, handles = next(iter(self._by_client.items()))
            handle = handles.popleft()
            del self._by_client[client]
            if handles:
                self._by_client[client] = handles
            self._pending -= 1
            return handle

    def _work(self) -> None:
        while (handle := self._next()) is not None:
            if handle.cancelled():
                handle._finish(None, RequestCancelled("cancelled while queued"))
                continue
            handle.status = "running"
            try:
                result = self.manager.generate(handle.request, progress=handle.progress, cancel=handle._cancel)
            except ServingError as error:
                handle._finish(None, error)
            except Exception as error:  # noqa: BLE001 (the worker must survive anything one request does)
                handle._finish(None, ServingError(f"{type(error).__name__}: {error}"))
            else:
                handle._finish(result, None)
