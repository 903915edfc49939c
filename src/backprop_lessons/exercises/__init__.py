"""Self-checks of the exercises: functions that take the answer as an argument."""
