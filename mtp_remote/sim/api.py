"""The simulated engine's HTTP API (FastAPI), with SGLang's routes and JSON shapes.

Routes (source: sglang ``python/sglang/srt/entrypoints/http_server.py`` and the OpenAI-compatible serving
code): ``/health`` and ``/health_generate`` (503 until warmup is done or while draining; exempt from the API
key), ``/generate``, ``/v1/chat/completions``, ``/server_info`` and ``/get_server_info``, ``/model_info`` and
``/get_model_info``, ``/v1/models``, ``/flush_cache``, ``/abort_request``, ``/metrics`` (with
``--enable-metrics``). A streaming request whose client goes away is aborted 2 s later, as SGLang does. With
``--api-key`` every other route answers 401 ``{"error": "Unauthorized"}`` without ``Authorization: Bearer
<key>``. Every request is written to the log in uvicorn's access-log format. An exception inside a request
(e.g. a ``sampling_params`` key SGLang's ``SamplingParams`` does not take) answers 500 ``Internal Server
Error`` and logs ``ERROR:    Exception in ASGI application`` with the traceback after the access line, as
SGLang 0.5.9 does; the server keeps serving. Request/response building lives
in :mod:`mtp_remote.sim.handlers`.
"""

from __future__ import annotations

import http
import traceback

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from mtp_remote.sim import chat as chat_api
from mtp_remote.sim import handlers
from mtp_remote.sim.metrics import render_metrics

_KEY_EXEMPT = {"/health", "/health_generate", "/metrics"}


def build_app(srv) -> FastAPI:
    """The FastAPI app serving ``srv`` (a :class:`mtp_remote.sim.server.SimServer`)."""
    app = FastAPI()
    args = srv.args

    @app.middleware("http")
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

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health():
        return Response(status_code=200 if srv.ready and not srv.draining else 503)

    @app.api_route("/health_generate", methods=["GET", "HEAD"])
    async def health_generate():
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

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(request: Request):
        return await _serve(request, handlers.generate, handlers.generate_stream)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await _serve(request, chat_api.chat, chat_api.chat_stream)

    @app.post("/abort_request")
    async def abort_request(request: Request):
        return Response(status_code=handlers.abort_request(srv, await request.json()))

    @app.get("/server_info")
    @app.get("/get_server_info")
    async def server_info():
        return JSONResponse(handlers.server_info(srv))

    @app.get("/model_info")
    @app.get("/get_model_info")
    async def model_info():
        return JSONResponse(handlers.model_info(srv))

    @app.get("/v1/models")
    async def models():
        return JSONResponse({"object": "list", "data": [{
            "id": args.served_model_name, "object": "model", "created": int(srv.started_at),
            "owned_by": "sglang", "root": args.served_model_name, "parent": None,
            "max_model_len": args.context_length}]})

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache():
        ok = srv.engine.flush_cache()
        e = srv.engine  # SGLang 0.5.9's scheduler lines, as measured on the real engine
        srv.log.line("Cache flushed successfully!" if ok else "Cache not flushed because there are pending requests. "
                     f"#queue-req: {len(e.waiting)}, #running-req: {len(e.running)}", 0)
        return PlainTextResponse(
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n", status_code=200 if ok else 400)

    @app.get("/metrics")
    async def metrics():
        if not args.enable_metrics:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return PlainTextResponse(render_metrics(srv), media_type="text/plain; version=0.0.4")

    return app


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
