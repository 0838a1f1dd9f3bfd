"""The simulated engine's HTTP API (Starlette, the toolkit under SGLang's FastAPI app), with SGLang's routes and
JSON shapes.

Routes (source: sglang ``python/sglang/srt/entrypoints/http_server.py`` and the OpenAI-compatible serving
code): ``/health`` and ``/health_generate`` (503 until warmup is done or while draining; exempt from the API
key), ``/generate``, ``/v1/chat/completions``, ``/server_info`` and ``/get_server_info``, ``/model_info`` and
``/get_model_info``, ``/v1/models``, ``/flush_cache``, ``/abort_request``, ``/metrics`` (with
``--enable-metrics``). A streaming request whose client goes away is aborted 2 s later, as SGLang does. With
``--api-key`` every other route answers 401 ``{"error": "Unauthorized"}`` without ``Authorization: Bearer
<key>``. Every request is written to the log in uvicorn's access-log format. An exception inside a request
(e.g. a ``sampling_params`` key SGLang's ``SamplingParams`` does not take) answers 500 ``Internal Server
Error`` and logs ``ERROR:    Exception in ASGI application`` with the traceback after the access line, as
SGLang 0.5.9 does; the server keeps serving. An unknown route answers FastAPI's 404 ``{"detail": "Not Found"}``
and a known one with the wrong method 405 ``{"detail": "Method Not Allowed"}``. Request/response building lives
in :mod:`mtp_remote.sim.handlers`.

Starlette rather than FastAPI itself: the sim uses none of FastAPI's validation or OpenAPI, and FastAPI's import
(~0.37 s of CPU, its OpenAPI models) was a third of every sim start's; the test suite starts ~300 sims.
"""

from __future__ import annotations

import http
import traceback

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from mtp_remote.sim import chat as chat_api
from mtp_remote.sim import handlers
from mtp_remote.sim.metrics import render_metrics

_KEY_EXEMPT = {"/health", "/health_generate", "/metrics"}


def build_app(srv) -> Starlette:
    """The ASGI app serving ``srv`` (a :class:`mtp_remote.sim.server.SimServer`)."""
    args = srv.args

    async def access_log_and_auth(request: Request, call_next):
        path = request.url.path
        if (args.api_key and path not in _KEY_EXEMPT
                and request.headers.get("authorization", "") != f"Bearer {args.api_key}"):
            _access(srv, request, 401)
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        resp = await call_next(request)
        _access(srv, request, resp.status_code)
        failure = getattr(request.state, "traceback", None)
        if failure:  # as uvicorn: the access line, then the traceback; the server keeps serving
            srv.log.uvicorn("Exception in ASGI application", level="ERROR")
            srv.log.raw(failure.rstrip("\n"))
        return resp

    async def health(request: Request):
        return Response(status_code=200 if srv.ready and not srv.draining else 503)

    async def health_generate(request: Request):
        if not srv.ready or srv.draining:
            return Response(status_code=503)
        ok = await handlers.health_generate(srv)
        return Response(status_code=200 if ok else 503)

    async def _serve(request: Request, once, streamed):
        if srv.draining:
            return JSONResponse({"error": {"message": "The server is shutting down."}}, status_code=503)
        body = await request.json()
        if body.get("stream"):
            return StreamingResponse(streamed(srv, body), media_type="text/event-stream")
        try:
            status, out = await once(srv, body)
        except Exception:  # noqa: BLE001 - SGLang's behaviour: any error inside a request is that request's 500
            request.state.traceback = traceback.format_exc()
            return PlainTextResponse("Internal Server Error", status_code=500)
        return JSONResponse(out, status_code=status)

    async def generate(request: Request):
        return await _serve(request, handlers.generate, handlers.generate_stream)

    async def chat(request: Request):
        return await _serve(request, chat_api.chat, chat_api.chat_stream)

    async def abort_request(request: Request):
        return Response(status_code=handlers.abort_request(srv, await request.json()))

    async def server_info(request: Request):
        return JSONResponse(handlers.server_info(srv))

    async def model_info(request: Request):
        return JSONResponse(handlers.model_info(srv))

    async def models(request: Request):
        return JSONResponse({"object": "list", "data": [{
            "id": args.served_model_name, "object": "model", "created": int(srv.started_at),
            "owned_by": "sglang", "root": args.served_model_name, "parent": None,
            "max_model_len": args.context_length}]})

    async def flush_cache(request: Request):
        ok = srv.engine.flush_cache()
        e = srv.engine  # SGLang 0.5.9's scheduler lines, as measured on the real engine
        srv.log.line("Cache flushed successfully!" if ok else "Cache not flushed because there are pending requests. "
                     f"#queue-req: {len(e.waiting)}, #running-req: {len(e.running)}", 0)
        return PlainTextResponse(
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n", status_code=200 if ok else 400)

    async def metrics(request: Request):
        if not args.enable_metrics:
            raise HTTPException(404)  # the router's own 404 (_fastapi_error), as without the route
        return PlainTextResponse(render_metrics(srv), media_type="text/plain; version=0.0.4")

    routes = [Route("/health", health, methods=["GET", "HEAD"]),
              Route("/health_generate", health_generate, methods=["GET", "HEAD"]),
              Route("/generate", generate, methods=["POST", "PUT"]),
              Route("/v1/chat/completions", chat, methods=["POST"]),
              Route("/abort_request", abort_request, methods=["POST"]),
              *(Route(p, server_info, methods=["GET"]) for p in ("/server_info", "/get_server_info")),
              *(Route(p, model_info, methods=["GET"]) for p in ("/model_info", "/get_model_info")),
              Route("/v1/models", models, methods=["GET"]),
              Route("/flush_cache", flush_cache, methods=["GET", "POST"]),
              Route("/metrics", metrics, methods=["GET"])]
    return Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=access_log_and_auth)],
                     exception_handlers={HTTPException: _fastapi_error})


async def _fastapi_error(request: Request, exc: HTTPException) -> Response:
    """FastAPI's body for the router's own errors (404, 405): ``{"detail": <phrase>}``, as SGLang answers."""
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def _access(srv, request: Request, status: int) -> None:
    client = request.client
    who = f"{client.host}:{client.port}" if client else "-"
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    srv.log.uvicorn(f'{who} - "{request.method} {path} HTTP/{request.scope.get("http_version", "1.1")}" '
                    f"{status} {phrase}")
