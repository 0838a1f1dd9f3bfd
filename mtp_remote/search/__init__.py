"""The searches built on the experiment: ``mitigate`` (candidates ranked by speed) and ``bisect`` (the minimal
trigger)."""
