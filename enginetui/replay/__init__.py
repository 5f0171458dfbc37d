"""`enginetui replay FILE`: a recording played back in the dashboard, step by step."""
