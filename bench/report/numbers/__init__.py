"""Run records -> a report's numbers: the frame, runs, cells, configs, names, ranks, stats."""
