"""API errors and the handlers that turn every failure into ``{"error": ..., "detail": ...}``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from graymq.nameserver.db import DB_UNAVAILABLE_ERRORS, describe_db_error
from graymq.nameserver.metrics import Metrics

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answer the services raise on purpose: ``error`` says what, ``detail`` carries data."""

    status_code = 400
    error = "bad request"

    def __init__(
        self, error: str | None = None, detail: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(error or self.error)
        self.error = error or self.error
        self.detail = detail
        self.headers = headers


class Unauthorized(ApiError):
    """No valid token: ``error`` is the code ``UNAUTHORIZED``, ``detail`` says what was wrong."""

    status_code = 401
    error = "UNAUTHORIZED"


class Forbidden(ApiError):
    """A valid token without the right: ``error`` is ``FORBIDDEN``, ``detail`` names the missing right."""

    status_code = 403
    error = "FORBIDDEN"


class TooManyFailures(ApiError):
    status_code = 429
    error = "TOO_MANY_FAILED_AUTHENTICATIONS"


class PayloadTooLarge(ApiError):
    status_code = 413
    error = "request body too large"


class NotFound(ApiError):
    status_code = 404
    error = "not found"


class Conflict(ApiError):
    status_code = 409
    error = "conflict"


def error_response(
    status_code: int, error: str, detail: Any = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": error, "detail": jsonable_encoder(detail)}, status_code=status_code, headers=headers
    )


class CallerGone(Exception):
    """The caller hung up while its request waited for its turn (``admission``): nothing was done, and the answer
    (``CALLER_GONE``, as proxies log a request its client closed) reaches nobody."""


CALLER_GONE = 499


def install_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    """JSON bodies for API errors, validation failures, unknown routes and an unreachable database."""

    async def api_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status_code, exc.error, exc.detail, exc.headers)

    async def validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        fields = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return error_response(422, "invalid request", fields)

    async def http_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return error_response(exc.status_code, str(exc.detail).lower(), None, exc.headers)

    async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        metrics.db_error()
        cause = describe_db_error(exc)
        log.warning("database unavailable during %s %s: %s", request.method, request.url.path, cause)
        return error_response(503, "database unavailable", cause, {"Retry-After": "1"})

    async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
        # Starlette logs the traceback and re-raises after this answer is sent.
        return error_response(500, "internal error", type(exc).__name__)

    async def caller_gone(_request: Request, _exc: Exception) -> Response:
        return Response(status_code=CALLER_GONE)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(CallerGone, caller_gone)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    for error_type in DB_UNAVAILABLE_ERRORS:
        app.add_exception_handler(error_type, database_unavailable)
    app.add_exception_handler(Exception, internal_error)
