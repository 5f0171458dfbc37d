"""SVG snapshots of the dashboard's main states (the scenes of tests/dashboard/scenes.py, on the
real engine with the scripted model runner), at 120x40 and at each size the layout is designed
for: 80x24, 100x30 and a large 160x48.

Deterministic: the engine is stepped by hand on a pinned clock, the process panel shows a fixed
reading. After an intended change of the screen: `pytest tests/dashboard --snapshot-update`.
"""

import pytest

from tests.dashboard.scenes import SCENES, SIZE, make_app

DESIGNED_SIZES = ((80, 24), (100, 30), (160, 48))  # terminal columns, rows


def picture(snap_compare, scene, size) -> bool:
    """Compare the scene's picture at `size`; its engine is shut down either way."""
    engine = scene.engine()
    try:
        return snap_compare(make_app(engine), terminal_size=size, run_before=scene.play)
    finally:
        engine.shutdown()


@pytest.mark.parametrize("scene", SCENES, ids=lambda scene: scene.name)
def test_scene(snap_compare, scene):
    assert picture(snap_compare, scene, SIZE)


@pytest.mark.parametrize("size", DESIGNED_SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("name", ["pool-pressure", "paused-block-table"])
def test_scene_at_each_designed_size(snap_compare, name, size):
    scene = next(s for s in SCENES if s.name == name)
    assert picture(snap_compare, scene, size)
