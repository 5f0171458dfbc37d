"""`enginetui attach --vllm URL`: the dashboard on a real vLLM server.

It folds what vLLM publishes, its Prometheus text on `/metrics` (`prometheus`) and, with
`--kv-events-config`, its KV cache events over ZMQ (`kv_events`, `subscriber`, `prefix_tree`), with
the requests its proxy passes on (`proxy`, `requests`), into one state (`state`, fed by `server` and
`feed`), rebuilds vLLM's queues and scheduler from them (`reconstruct`, `sched_rebuild`), records and
replays it (`recording`, `replay`, `perfetto`), and shows it (`app`, `panels`, `requests_panel`,
`tree_panel`; several replicas: `fleet`, `fleet_app`). `cli` holds the flags; `burst` and `prompts`
the workload sent to a live vLLM.
"""
