"""A stand-in for ``vllm serve`` on 127.0.0.1: the OpenAI completions API as `vllm bench serve` reads it.

``POST /v1/completions`` with ``stream: true`` answers Server-Sent Events: after ``--ttft-ms`` the first token,
then one token every ``--itl-ms`` (every ``--slow-every``-th request: ``--slow-itl-ms``, so that a
TPOT SLO between the two splits the requests) until ``max_tokens``, then a usage chunk (``prompt_tokens`` counted as the
prompt's words, ``completion_tokens`` = tokens sent) and ``[DONE]``. ``GET /v1/models`` lists ``--model``. No model
runs: the latencies in a result file are this server's sleeps as the machine kept them. Runs in tools/vllmbench's
environment (aiohttp comes with vLLM); ``python tools/vllmbench/fake_server.py --port 8798``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from dataclasses import dataclass

from aiohttp import web


def _chunk(rid: str, model: str, **fields: object) -> bytes:
    body = {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model, **fields}
    return f"data: {json.dumps(body)}\n\n".encode()


@dataclass(frozen=True)
class Pace:
    """What the server sleeps: before the first token, between tokens, and between a slow request's tokens."""

    ttft_s: float
    itl_s: float
    slow_itl_s: float
    slow_every: int  # 0 = no slow requests


def make_app(model: str, pace: Pace) -> web.Application:
    served = itertools.count()

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": model, "object": "model"}]})

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n_out = int(body.get("max_tokens") or 16)
        prompt = body.get("prompt") or ""
        rid = f"cmpl-{id(request):x}"
        n = next(served)
        itl_s = pace.slow_itl_s if pace.slow_every and n % pace.slow_every == pace.slow_every - 1 else pace.itl_s
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await asyncio.sleep(pace.ttft_s)
        for i in range(n_out):
            if i:
                await asyncio.sleep(itl_s)
            done = "length" if i == n_out - 1 else None
            await resp.write(_chunk(rid, model, choices=[{"index": 0, "text": " tok", "finish_reason": done}]))
        usage = {"prompt_tokens": len(str(prompt).split()), "completion_tokens": n_out,
                 "total_tokens": len(str(prompt).split()) + n_out}
        await resp.write(_chunk(rid, model, choices=[], usage=usage))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    return app


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8798)
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--ttft-ms", type=float, default=150.0)
    ap.add_argument("--itl-ms", type=float, default=30.0)
    ap.add_argument("--slow-itl-ms", type=float, default=45.0)
    ap.add_argument("--slow-every", type=int, default=0)
    a = ap.parse_args()
    pace = Pace(a.ttft_ms / 1e3, a.itl_ms / 1e3, a.slow_itl_ms / 1e3, a.slow_every)
    web.run_app(make_app(a.model, pace), host="127.0.0.1", port=a.port, print=None)


if __name__ == "__main__":
    main()
