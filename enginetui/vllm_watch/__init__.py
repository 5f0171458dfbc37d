"""`enginetui attach --vllm URL`: the dashboard on a real vLLM server.

vLLM publishes two streams a dashboard can fold: Prometheus text on `/metrics` (queue lengths,
KV usage, token and preemption counters, latency histograms; polled about once a second) and,
when started with `--kv-events-config`, its KV cache events over ZMQ (one msgpack `KVEventBatch`
per engine step: blocks stored with their hash chain and token ids, blocks removed, all cleared).

- `kv_events`: the wire format of those batches (mirrors vllm/distributed/kv_events.py).
- `prefix_tree`: what vLLM's prefix cache holds, per data-parallel rank, folded from the batches.
- `metrics`: the /metrics text parsed into samples; histogram percentiles.
- `state`: everything the screen shows, folded from samples, batches and streamed completions.
- `subscriber`, `server`, `feed`: the ZMQ subscriber (with replay), the HTTP client, and the two
  feeds of one server folded into its state.
- `requests`, `proxy`: requests as seen on the wire; the proxy that passes every client's request
  to vLLM and lists it (tools/proxy_bench.py measures what it costs under load).
- `reconstruct`: vLLM's queues rebuilt from the requests seen, against its gauges.
- `recording`, `replay`, `perfetto`: `--record FILE`, `enginetui replay FILE`, `enginetui export`.
- `fleet`, `fleet_app`: several replicas, and which prefixes are cached where.
- `app`, `panels`, `requests_panel`, `tree_panel`: the Textual app and its vLLM-specific panels;
  `cli`: the flags of `enginetui attach --vllm` (enginetui/serve/cli.py puts them on attach).
- `burst`, `prompts`: the burst sent through the proxy and its captures' replay; the prompts sent to
  a live vLLM (tools/capture.py records them as test fixtures; enginetui/vllm_launch.py starts vLLM).
"""
