"""OpenAI-shaped errors: `{"error": {"message", "type", "param", "code"}}` with the right status.

One exception type (`APIError`) carries an error out of any route; the handlers registered by
`install_error_handlers` turn it, FastAPI's validation and HTTP errors, and anything unexpected
into that body, so no route answers an error in another shape. Statuses and `type` words follow
vLLM 0.32 (`vllm/entrypoints/serve/exception_handling`), except that a body that is not JSON
at all is a 422 (vLLM answers 400 for it too).
"""

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response

from enginetui.core.entrypoints.openai.protocol import ErrorInfo, ErrorResponse

log = logging.getLogger("enginetui.server")

MAX_REPORTED_ERRORS = 10  # validation errors listed in one message


class ClientDisconnected(Exception):
    """The HTTP client went away before the answer was complete (its requests are aborted)."""


class APIError(Exception):
    """An error answer: raise it from a route (or a helper it calls)."""

    def __init__(
        self,
        message: str,
        status: HTTPStatus = HTTPStatus.BAD_REQUEST,
        err_type: str = "BadRequestError",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message  # what is wrong, in words
        self.status = status  # HTTP status of the answer
        self.err_type = err_type  # the error's `type` word
        self.param = param  # the request field to blame, if any

    def body(self) -> ErrorResponse:
        return error_body(self.message, self.status, self.err_type, self.param)


def error_body(message: str, status: HTTPStatus, err_type: str, param: str | None = None) -> ErrorResponse:
    return ErrorResponse(error=ErrorInfo(message=message, type=err_type, param=param, code=int(status)))


def error_response(error: APIError) -> JSONResponse:
    return JSONResponse(error.body().model_dump(), status_code=int(error.status))


def bad_request(message: str, param: str | None = None) -> APIError:
    return APIError(message, HTTPStatus.BAD_REQUEST, "BadRequestError", param)


def model_not_found(asked: str, served: str) -> APIError:
    """vLLM's words for an unknown `model`."""
    return APIError(
        f"The model `{asked}` does not exist. Valid aliases: {served}.", HTTPStatus.NOT_FOUND, "NotFoundError", "model"
    )


def unauthorized() -> APIError:
    return APIError(
        "Unauthorized: a valid API key is required (header `Authorization: Bearer KEY`).",
        HTTPStatus.UNAUTHORIZED,
        "AuthenticationError",
    )


def internal_error(message: str) -> APIError:
    return APIError(message, HTTPStatus.INTERNAL_SERVER_ERROR, "InternalServerError")


def install_error_handlers(app: FastAPI) -> None:
    app.exception_handler(ClientDisconnected)(_client_disconnected)
    app.exception_handler(APIError)(_api_error)
    app.exception_handler(RequestValidationError)(_validation_error)
    app.exception_handler(HTTPException)(_http_error)
    app.exception_handler(ValueError)(_invalid_value)
    app.exception_handler(Exception)(_unexpected)


async def _client_disconnected(_: Request, exc: ClientDisconnected) -> Response:
    """Nobody is left to answer: the access log says so in its one line (access_log.py)."""
    return Response(status_code=499)


async def _api_error(_: Request, exc: APIError) -> JSONResponse:
    return error_response(exc)


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    """A body that is not JSON: 422; JSON whose fields have the wrong type or are missing: 400."""
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        where = next(e for e in errors if e.get("type") == "json_invalid")
        detail = where.get("ctx", {}).get("error", "")
        message = f"The request body is not valid JSON: {detail}".rstrip(": ")
        return error_response(APIError(message, HTTPStatus.UNPROCESSABLE_ENTITY, "UnprocessableEntityError"))
    label = "error" if len(errors) == 1 else "errors"
    lines = [f"  {_field(e.get('loc', ()))}: {e.get('msg', '')}" for e in errors[:MAX_REPORTED_ERRORS]]
    if len(errors) > MAX_REPORTED_ERRORS:
        lines.append(f"  ...and {len(errors) - MAX_REPORTED_ERRORS} more {label}")
    message = f"{len(errors)} validation {label}:\n" + "\n".join(lines)
    param = _field(errors[0].get("loc", ())) if errors else None
    return error_response(APIError(message, HTTPStatus.BAD_REQUEST, "Bad Request", param))


async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
    status = HTTPStatus(exc.status_code)
    return JSONResponse(
        error_body(str(exc.detail), status, status.phrase).model_dump(),
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


async def _invalid_value(_: Request, exc: ValueError) -> JSONResponse:
    """SamplingParams and the engine's own checks raise ValueError for bad input: a 400 (as vLLM)."""
    return error_response(bad_request(str(exc)))


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error in a route")
    return error_response(internal_error(f"{type(exc).__name__}: {exc}"))


def _field(loc) -> str:
    """A validation error's location as the request field path: ("body", "prompt", "list[int]", 0) ->
    "prompt.0" (pydantic's union-branch and wrapper markers are not fields)."""
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    fields = [p for p in parts if "[" not in p and p not in _PYDANTIC_MARKERS]
    return ".".join(fields) or "body"


_PYDANTIC_MARKERS = frozenset(
    {
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "none",
        "union",
        "tagged-union",
        "nullable",
        "function-after",
        "function-before",
        "function-wrap",
        "json-or-python",
    }
)
