"""The custom callback event that carries a selection's report."""

from __future__ import annotations

EVENT_NAME = "thresholded_selection"
"""The name of the custom callback event that carries a selection's report
(``Report.to_event_data``): one per retriever call, one per compressor call."""
