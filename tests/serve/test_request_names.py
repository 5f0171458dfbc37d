"""How an attached dashboard names requests: its own (r1), the hosting dashboard's (host-r1),
everyone else's (as the engine knows them); and back, for aborts."""

from enginetui.core.engine.events import RequestEnd
from enginetui.serve.request_names import RequestNames
from tests.dashboard.builders import event, progress


def test_ids_map_both_ways_without_collisions():
    names = RequestNames("ab12")
    pairs = {
        "r1": "cmpl-ab12-r1",
        "host-r1": "r1",
        "cmpl-x9": "cmpl-x9",
        "chatcmpl-x9": "chatcmpl-x9",
        "cmpl-cd34-r1": "cmpl-cd34-r1",
        "host-rx": "host-rx",
    }
    for local, engine in pairs.items():
        assert names.engine(local) == engine
        assert names.local(engine) == local
    assert names.header("r1") == "ab12-r1"


def test_an_event_shows_every_id_under_its_local_name():
    names = RequestNames("ab12")
    raw = event(
        3,
        running=[progress("cmpl-ab12-r1", 4, 5), progress("r1", 4, 5)],
        scheduled={"r1": 1},
        new_tokens={"cmpl-ab12-r1": [7]},
        finished=[RequestEnd("chatcmpl-q", "stop", "r1", 3)],
    )
    shown = names.local_event(raw)
    assert [p.req_id for p in shown.running] == ["r1", "host-r1"]
    assert shown.scheduled == {"host-r1": 1} and shown.new_token_ids == {"r1": [7]}
    assert shown.finished == [RequestEnd("chatcmpl-q", "stop", "r1", 3)]  # only ids are renamed, not details
