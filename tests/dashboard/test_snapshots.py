"""SVG snapshots of the dashboard's main states (the FakeEngine scenes of tests/dashboard/scenes.py).

Deterministic: the FakeEngine is stepped by hand on a fake clock, the process panel shows a
fixed reading. After an intended change of the screen: `pytest tests/dashboard --snapshot-update`.
"""

import pytest

from tests.dashboard.scenes import SCENES, SIZE, make_app


@pytest.mark.parametrize("scene", SCENES, ids=lambda scene: scene.name)
def test_scene(snap_compare, scene):
    assert snap_compare(make_app(scene.engine()), terminal_size=SIZE, run_before=scene.play)


def test_pool_pressure_at_the_smallest_supported_size(snap_compare):
    scene = next(s for s in SCENES if s.name == "pool-pressure")
    assert snap_compare(make_app(scene.engine()), terminal_size=(100, 30), run_before=scene.play)
