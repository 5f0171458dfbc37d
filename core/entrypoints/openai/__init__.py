"""The OpenAI-compatible HTTP server (`enginetui serve`), shaped like vLLM's `vllm serve`.

api_server.py builds the FastAPI app around one AsyncLLM; the protocol modules hold the request
and response bodies, the serving modules turn requests into engine calls and engine outputs
into responses (streamed as server-sent events or whole), live.py is the dashboards' side door
(step events over a WebSocket, the control ops of core/engine/control.py, abort), control_gate.py
says who may change the engine and for how long, access_log.py writes one line per request.
"""
